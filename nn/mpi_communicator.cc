#include "tagflow/nn/mpi_communicator.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "tagflow/engine/engine.h"
#include "tagflow/engine/inline_function.h"
#include "tagflow/ops/priority.h"

#ifdef TAGFLOW_HAVE_MPI
#include <mpi.h>
#endif

namespace tagflow::nn {

#ifdef TAGFLOW_HAVE_MPI

namespace {

using Clock = std::chrono::steady_clock;

/// Polling a collective in flight: a short interval first (a message on the
/// same machine takes microseconds), doubling while nothing arrives, up to a
/// ceiling that bounds the latency it adds without taking a core from the
/// workers. Abandoned collectives are polled at the slow rate.
constexpr auto kFirstPoll = std::chrono::microseconds(5);
constexpr auto kLastPoll = std::chrono::microseconds(500);

std::string mpi_error_text(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    return fmt::format("MPI error {}", code);
  return std::string(text, static_cast<std::size_t>(length));
}

MPI_Datatype mpi_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return MPI_FLOAT;
    case DType::kInt32:
      return MPI_INT32_T;
    case DType::kInt64:
      return MPI_INT64_T;
    case DType::kUInt8:
      return MPI_UINT8_T;
  }
  detail::throw_error("MpiCommunicator: no MPI type for dtype {}", dtype_name(dtype));
}

/// Writes 1 or 0 as one element of `dtype` at `at` (the message's flag).
void store_flag(std::byte* at, DType dtype, bool sound) {
  switch (dtype) {
    case DType::kFloat32: {
      const float v = sound ? 1.f : 0.f;
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kInt32: {
      const std::int32_t v = sound ? 1 : 0;
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kInt64: {
      const std::int64_t v = sound ? 1 : 0;
      std::memcpy(at, &v, sizeof v);
      return;
    }
    case DType::kUInt8:
      *at = std::byte{sound ? std::uint8_t{1} : std::uint8_t{0}};
      return;
  }
}

/// The flag element at `at` read back as an integer (the number of processes
/// whose input was sound, after a sum).
std::int64_t load_flag(const std::byte* at, DType dtype) {
  switch (dtype) {
    case DType::kFloat32: {
      float v;
      std::memcpy(&v, at, sizeof v);
      return static_cast<std::int64_t>(v);
    }
    case DType::kInt32: {
      std::int32_t v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DType::kInt64: {
      std::int64_t v;
      std::memcpy(&v, at, sizeof v);
      return v;
    }
    case DType::kUInt8:
      return static_cast<std::int64_t>(*at);
  }
  return 0;
}

enum class Kind : std::uint8_t { kAllreduce, kBroadcast, kAllgather, kBarrier };

}  // namespace

/// One collective, from its ticket to its end on the communication thread.
struct Request {
  using Finish = detail::InlineFunction<void(Request&, std::exception_ptr), 64>;

  std::uint64_t ticket = 0;
  Kind kind = Kind::kBarrier;
  MPI_Datatype type = MPI_BYTE;
  MPI_Op op = MPI_SUM;
  int count = 0;  ///< elements of `type` in the message, flag included
  int root = 0;
  std::vector<std::byte> message;
  std::vector<std::byte> received;  ///< kAllgather's result
  /// "allreduce of 3 arrays (241,572 bytes)", for errors.
  std::string what;
  /// Called once on the communication thread: with null when MPI finished
  /// the collective, else with the CommunicationError that ended it.
  Finish finish;
  MPI_Request handle = MPI_REQUEST_NULL;
  Clock::time_point issued;
};

struct MpiCommunicator::State {
  MpiOptions options;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  int local_size = 1;
  std::string host;
  bool finalize_mpi = false;  ///< tagflow initialised MPI, so it finalises it

  std::mutex mutex;
  std::condition_variable wake;      ///< the communication thread: work handed over, or stop
  std::condition_variable finished;  ///< the destructor: every ticket issued and done
  std::uint64_t next_ticket = 0;     ///< the next ticket to hand out
  std::uint64_t next_to_issue = 0;
  std::map<std::uint64_t, std::unique_ptr<Request>> handed_over;
  std::size_t in_flight_count = 0;
  bool stopping = false;
  std::atomic<bool> broken{false};
  std::string broken_reason;  ///< set once, before `broken`
  /// Message buffers of finished collectives, for reuse.
  std::vector<std::vector<std::byte>> spare;

  // The communication thread's own.
  std::deque<std::unique_ptr<Request>> in_flight;
  std::vector<std::unique_ptr<Request>> abandoned;
  std::thread thread;

  std::uint64_t reserve() {
    std::lock_guard lock(mutex);
    return next_ticket++;
  }

  std::vector<std::byte> take_buffer(std::size_t bytes) {
    std::vector<std::byte> buffer;
    {
      std::lock_guard lock(mutex);
      const auto fits = std::find_if(spare.begin(), spare.end(),
                                     [&](const auto& b) { return b.capacity() >= bytes; });
      if (fits != spare.end()) {
        buffer = std::move(*fits);
        spare.erase(fits);
      }
    }
    buffer.resize(bytes);
    return buffer;
  }

  void hand_over(std::unique_ptr<Request> request) {
    {
      std::lock_guard lock(mutex);
      handed_over.emplace(request->ticket, std::move(request));
    }
    wake.notify_one();
  }

  void run();
  void issue(std::unique_ptr<Request> request);
  bool poll();
  void break_down(std::string reason);
  void end(Request& request, std::exception_ptr error);
  /// Takes a ticket, hands `request` over and waits for it; `on_success`
  /// reads the result (the blocking helpers).
  void run_blocking(std::unique_ptr<Request> request,
                    detail::InlineFunction<void(Request&)> on_success);
};

void MpiCommunicator::State::break_down(std::string reason) {
  if (broken.load(std::memory_order_acquire)) return;
  spdlog::error("MpiCommunicator (rank {} of {}): {}", rank, size, reason);
  {
    std::lock_guard lock(mutex);
    broken_reason = std::move(reason);
  }
  broken.store(true, std::memory_order_release);
}

void MpiCommunicator::State::end(Request& request, std::exception_ptr error) {
  try {
    request.finish(request, std::move(error));
  } catch (const std::exception& e) {
    spdlog::error("MpiCommunicator: finishing the {} threw (ignored): {}", request.what, e.what());
  }
}

void MpiCommunicator::State::issue(std::unique_ptr<Request> request) {
  if (broken.load(std::memory_order_acquire)) {
    std::string reason;
    {
      std::lock_guard lock(mutex);
      reason = broken_reason;
    }
    end(*request, std::make_exception_ptr(CommunicationError(fmt::format(
                      "{} (rank {} of {}) was not run: the communicator broke down earlier: {}",
                      request->what, rank, size, reason))));
    return;
  }
  int status = MPI_SUCCESS;
  void* data = request->message.data();
  switch (request->kind) {
    case Kind::kAllreduce:
      status = MPI_Iallreduce(MPI_IN_PLACE, data, request->count, request->type, request->op, comm,
                              &request->handle);
      break;
    case Kind::kBroadcast:
      status =
          MPI_Ibcast(data, request->count, request->type, request->root, comm, &request->handle);
      break;
    case Kind::kAllgather:
      status = MPI_Iallgather(data, request->count, request->type, request->received.data(),
                              request->count, request->type, comm, &request->handle);
      break;
    case Kind::kBarrier:
      status = MPI_Ibarrier(comm, &request->handle);
      break;
  }
  if (status != MPI_SUCCESS) {
    const std::string reason =
        fmt::format("starting the {} failed: {}", request->what, mpi_error_text(status));
    break_down(reason);
    end(*request, std::make_exception_ptr(CommunicationError(
                      fmt::format("MpiCommunicator (rank {} of {}): {}", rank, size, reason))));
    return;
  }
  request->issued = Clock::now();
  in_flight.push_back(std::move(request));
}

bool MpiCommunicator::State::poll() {
  bool progressed = false;
  for (auto it = in_flight.begin(); it != in_flight.end();) {
    Request& request = **it;
    int done = 0;
    const int status = MPI_Test(&request.handle, &done, MPI_STATUS_IGNORE);
    if (status != MPI_SUCCESS) {
      break_down(fmt::format("the {} failed: {}", request.what, mpi_error_text(status)));
      break;
    }
    if (done == 0) {
      ++it;
      continue;
    }
    progressed = true;
    end(request, nullptr);
    if (request.message.capacity() > 0) {
      std::lock_guard lock(mutex);
      spare.push_back(std::move(request.message));
    }
    it = in_flight.erase(it);
  }
  if (!broken.load(std::memory_order_acquire) && !in_flight.empty()) {
    const Request& oldest = *in_flight.front();
    const double waited = std::chrono::duration<double>(Clock::now() - oldest.issued).count();
    if (waited > options.timeout_seconds) {
      break_down(fmt::format(
          "the {} did not complete within {} s: a process of the job is gone, stopped or stuck "
          "elsewhere (this is rank {} of {} on {})",
          oldest.what, options.timeout_seconds, rank, size, host));
    }
  }
  if (broken.load(std::memory_order_acquire) && !in_flight.empty()) {
    std::string reason;
    {
      std::lock_guard lock(mutex);
      reason = broken_reason;
    }
    // MPI cannot cancel a collective: its message stays allocated and polled.
    for (std::unique_ptr<Request>& request : in_flight) {
      end(*request, std::make_exception_ptr(CommunicationError(fmt::format(
                        "{} (rank {} of {}) failed: {}", request->what, rank, size, reason))));
      request->finish = nullptr;
      abandoned.push_back(std::move(request));
    }
    in_flight.clear();
    progressed = true;
  }
  std::erase_if(abandoned, [](std::unique_ptr<Request>& request) {
    int done = 0;
    return MPI_Test(&request->handle, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done != 0;
  });
  return progressed;
}

void MpiCommunicator::State::run() {
  std::vector<std::unique_ptr<Request>> ready;
  auto interval = kFirstPoll;
  for (;;) {
    {
      std::unique_lock lock(mutex);
      in_flight_count = in_flight.size();
      const auto next_is_here = [&] {
        return !handed_over.empty() && handed_over.begin()->first == next_to_issue;
      };
      if (in_flight.empty()) {
        finished.notify_all();
        if (stopping && next_to_issue == next_ticket) return;
        if (abandoned.empty()) {
          wake.wait(lock, [&] { return next_is_here() || stopping; });
        } else {
          wake.wait_for(lock, kLastPoll, [&] { return next_is_here() || stopping; });
        }
      } else {
        wake.wait_for(lock, interval, next_is_here);
      }
      while (next_is_here()) {
        ready.push_back(std::move(handed_over.begin()->second));
        handed_over.erase(handed_over.begin());
        ++next_to_issue;
      }
    }
    for (std::unique_ptr<Request>& request : ready) issue(std::move(request));
    const bool issued = !ready.empty();
    ready.clear();
    const bool progressed = poll();
    interval = progressed || issued ? kFirstPoll : std::min(interval * 2, kLastPoll);
  }
}

void MpiCommunicator::State::run_blocking(std::unique_ptr<Request> request,
                                          detail::InlineFunction<void(Request&)> on_success) {
  if (inside_engine_operation()) [[unlikely]] {
    detail::throw_error<WaitInsideOperationError>(
        "MpiCommunicator: the {} was called from inside an engine operation: it would block the "
        "worker that may have to run an earlier collective (deadlock); call it from a host thread",
        request->what);
  }
  std::promise<void> promise;
  std::future<void> result = promise.get_future();
  request->finish = [&promise, &on_success](Request& r, std::exception_ptr error) {
    if (!error) {
      try {
        on_success(r);
      } catch (...) {
        error = std::current_exception();
      }
    }
    if (error) {
      promise.set_exception(std::move(error));
    } else {
      promise.set_value();
    }
  };
  request->ticket = reserve();
  hand_over(std::move(request));
  result.get();
}

// --- start and end -------------------------------------------------------------

namespace {

std::mutex world_mutex;
std::weak_ptr<MpiCommunicator> world_instance;

void check_mpi(int status, const char* call) {
  if (status != MPI_SUCCESS) [[unlikely]] {
    detail::throw_error<CommunicationError>("MpiCommunicator: {} failed: {}", call,
                                            mpi_error_text(status));
  }
}

}  // namespace

bool mpi_available() { return true; }

std::string mpi_library_version() {
  char text[MPI_MAX_LIBRARY_VERSION_STRING];
  int length = 0;
  if (MPI_Get_library_version(text, &length) != MPI_SUCCESS) return "MPI (version unknown)";
  std::string version(text, static_cast<std::size_t>(length));
  version = version.substr(0, version.find_first_of("\n,"));
  return version;
}

std::shared_ptr<MpiCommunicator> MpiCommunicator::world(MpiOptions options) {
  TAGFLOW_CHECK(options.timeout_seconds > 0 && std::isfinite(options.timeout_seconds),
                "MpiCommunicator::world: expected a timeout > 0 seconds, got {}",
                options.timeout_seconds);
  std::lock_guard lock(world_mutex);
  if (std::shared_ptr<MpiCommunicator> existing = world_instance.lock()) return existing;

  int finalized = 0;
  check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
  TAGFLOW_CHECK_AS(CommunicationError, finalized == 0,
                   "MpiCommunicator::world: MPI was finalised in this process already (when the "
                   "last reference to the communicator went), and MPI can be initialised only "
                   "once per process: keep one reference for the whole run");
  auto state = std::make_unique<State>();
  state->options = options;
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  int provided = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    state->finalize_mpi = true;
  } else {
    check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (state->finalize_mpi) MPI_Finalize();
    detail::throw_error<CommunicationError>(
        "MpiCommunicator::world: this MPI library gives thread support level {}; tagflow calls "
        "MPI from its communication thread and needs MPI_THREAD_SERIALIZED ({}) or more",
        provided, MPI_THREAD_SERIALIZED);
  }
  check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &state->comm), "MPI_Comm_dup");
  check_mpi(MPI_Comm_set_errhandler(state->comm, MPI_ERRORS_RETURN), "MPI_Comm_set_errhandler");
  check_mpi(MPI_Comm_rank(state->comm, &state->rank), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(state->comm, &state->size), "MPI_Comm_size");
  MPI_Comm machine = MPI_COMM_NULL;
  check_mpi(
      MPI_Comm_split_type(state->comm, MPI_COMM_TYPE_SHARED, state->rank, MPI_INFO_NULL, &machine),
      "MPI_Comm_split_type");
  check_mpi(MPI_Comm_size(machine, &state->local_size), "MPI_Comm_size");
  MPI_Comm_free(&machine);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  check_mpi(MPI_Get_processor_name(name, &length), "MPI_Get_processor_name");
  state->host.assign(name, static_cast<std::size_t>(length));
  State* s = state.get();
  s->thread = std::thread([s] { s->run(); });
  std::shared_ptr<MpiCommunicator> made(new MpiCommunicator(std::move(state)));
  world_instance = made;
  return made;
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}

MpiCommunicator::~MpiCommunicator() {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.stopping = true;
  }
  s.wake.notify_one();
  s.thread.join();  // returns once every ticket handed out has been issued and has ended
  if (s.broken.load(std::memory_order_acquire)) {
    // Finalising waits for the other processes, which may be gone.
    spdlog::warn(
        "MpiCommunicator (rank {} of {}): MPI is left unfinalised: the communicator broke "
        "down ({})",
        s.rank, s.size, s.broken_reason);
    return;
  }
  MPI_Comm_free(&s.comm);
  if (s.finalize_mpi) MPI_Finalize();
}

int MpiCommunicator::rank() const { return state_->rank; }
int MpiCommunicator::size() const { return state_->size; }
int MpiCommunicator::local_size() const { return state_->local_size; }
const std::string& MpiCommunicator::host() const { return state_->host; }
const MpiOptions& MpiCommunicator::options() const { return state_->options; }
bool MpiCommunicator::broken() const { return state_->broken.load(std::memory_order_acquire); }

void MpiCommunicator::abort(int code) {
  spdlog::error("MpiCommunicator (rank {} of {}): ending the job with code {}", state_->rank,
                state_->size, code);
  MPI_Abort(state_->comm, code);
  std::abort();  // MPI_Abort does not return
}

// --- collectives on arrays ----------------------------------------------------

namespace {

/// The arrays of a collective, checked: defined, in host memory, one dtype,
/// no two sharing memory. Returns their total size in bytes.
std::uint64_t check_arrays(std::span<const NDArray> arrays, const char* who) {
  TAGFLOW_CHECK(!arrays.empty(), "{}: expected at least one array, got none", who);
  std::uint64_t bytes = 0;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    const NDArray& a = arrays[i];
    TAGFLOW_CHECK(a.defined(), "{}: array {} of {} is undefined", who, i, arrays.size());
    TAGFLOW_CHECK(a.context().is_host(),
                  "{}: expected arrays in host memory (cpu(i) or cpu_pinned(i)), got array {} on "
                  "{}; copy it to the host first",
                  who, i, a.context().str());
    TAGFLOW_CHECK(a.dtype() == arrays[0].dtype(),
                  "{}: expected arrays of one dtype, got {} at 0 and {} at {}", who,
                  dtype_name(arrays[0].dtype()), dtype_name(a.dtype()), i);
    for (std::size_t j = 0; j < i; ++j) {
      TAGFLOW_CHECK(arrays[j].var() != a.var(),
                    "{}: arrays {} and {} share memory (views of one array); pass each memory "
                    "once",
                    who, j, i);
    }
    bytes += a.nbytes();
  }
  return bytes;
}

/// The host device whose workers pack and unpack a collective's arrays.
Context packing_device(const NDArray& first) {
  return first.context().is_cpu() ? first.context() : cpu(0);
}

}  // namespace

/// An engine operation's side of a collective: the request waiting for its
/// ticket's turn, packed by the operation, or, when the engine skips the
/// operation (its input carries an error), handed over unsound by the
/// destructor so that this process still takes part (Note [Failures and
/// timeouts]).
struct Collective {
  MpiCommunicator::State* state = nullptr;
  std::unique_ptr<Request> request;
  std::vector<NDArray> arrays;
  DType dtype = DType::kUInt8;
  std::size_t flag_at = 0;  ///< byte offset of the flag element in the message

  Collective() = default;
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  ~Collective() {
    if (!request) return;
    std::fill(request->message.begin(), request->message.end(), std::byte{0});
    store_flag(request->message.data() + flag_at, dtype, false);
    request->finish = [](Request&, std::exception_ptr) {};
    const std::string what = request->what;
    try {
      state->hand_over(std::move(request));
    } catch (const std::exception& e) {
      spdlog::error("MpiCommunicator: could not hand over the skipped {}: {}", what, e.what());
    }
  }

  void pack() {
    std::byte* at = request->message.data();
    for (const NDArray& a : arrays) {
      std::memcpy(at, a.raw_data(), a.nbytes());
      at += a.nbytes();
    }
    store_flag(request->message.data() + flag_at, dtype, true);
  }

  static void unpack(const Request& r, const std::vector<NDArray>& arrays) {
    const std::byte* at = r.message.data();
    for (const NDArray& a : arrays) {
      std::memcpy(a.raw_data(), at, a.nbytes());
      at += a.nbytes();
    }
  }
};

void MpiCommunicator::allreduce(std::span<const NDArray> arrays) {
  const char* who = "MpiCommunicator::allreduce";
  const std::uint64_t bytes = check_arrays(arrays, who);
  const DType dtype = arrays[0].dtype();
  State& s = *state_;
  // MPI libraries disagree on uint8 sums that overflow (Open MPI 4.1's
  // vectorised sum saturates, its scalar one wraps): refused rather than
  // give results that depend on the library and the message size.
  TAGFLOW_CHECK(dtype != DType::kUInt8,
                "{}: expected float32, int32 or int64 arrays, got uint8 (MPI libraries differ on "
                "sums that overflow a byte); convert them with astype(DType::kInt32)",
                who);
  const std::size_t element = dtype_size(dtype);
  const std::uint64_t count = bytes / element + 1;  // and the flag
  TAGFLOW_CHECK(count <= static_cast<std::uint64_t>(INT_MAX),
                "{}: expected at most {} elements in one message (MPI counts are int), got {}", who,
                INT_MAX - 1, count - 1);

  auto c = std::make_unique<Collective>();
  c->state = &s;
  c->dtype = dtype;
  c->flag_at = bytes;
  c->arrays.assign(arrays.begin(), arrays.end());
  c->request = std::make_unique<Request>();
  Request& r = *c->request;
  r.kind = Kind::kAllreduce;
  r.type = mpi_type(dtype);
  r.count = static_cast<int>(count);
  r.message = s.take_buffer(count * element);
  VarList vars;
  for (const NDArray& a : arrays) vars.push_back(a.var());
  r.ticket = s.reserve();
  r.what = fmt::format("allreduce #{} of {} {} array{} ({} bytes)", r.ticket, arrays.size(),
                       dtype_name(dtype), arrays.size() == 1 ? "" : "s", bytes);
  const int size = s.size;
  // Read and written: an input carrying an error skips the operation, and
  // the destructor of Collective takes part in its place.
  Engine::get().push(
      {.name = "mpi_allreduce",
       .ctx = packing_device(arrays[0]),
       .reads = vars,
       .writes = vars,
       .priority = kCommunicationPriority,
       .fn = [c = std::move(c), size](const RunContext&, Completion done) mutable {
         c->pack();
         c->request->finish = [arrays = std::move(c->arrays), dtype = c->dtype,
                               flag_at = c->flag_at, size, done = std::move(done)](
                                  Request& ended, std::exception_ptr error) mutable {
           if (!error) {
             const std::int64_t sound = load_flag(ended.message.data() + flag_at, dtype);
             if (sound == size) {
               Collective::unpack(ended, arrays);
             } else {
               error = std::make_exception_ptr(CommunicationError(fmt::format(
                   "the {}: the inputs of {} of the {} processes carried errors (each process "
                   "reports its own); the sum is incomplete and was not written",
                   ended.what, size - sound, size)));
             }
           }
           error ? done.fail(std::move(error)) : done.done();
         };
         c->state->hand_over(std::move(c->request));
       }});
}

void MpiCommunicator::broadcast(std::span<const NDArray> arrays, int root) {
  const char* who = "MpiCommunicator::broadcast";
  const std::uint64_t bytes = check_arrays(arrays, who);
  State& s = *state_;
  TAGFLOW_CHECK(root >= 0 && root < s.size, "{}: expected a root in [0, {}), got {}", who, s.size,
                root);
  TAGFLOW_CHECK(bytes + 1 <= static_cast<std::uint64_t>(INT_MAX),
                "{}: expected at most {} bytes in one message (MPI counts are int), got {}", who,
                INT_MAX - 1, bytes);
  auto c = std::make_unique<Collective>();
  c->state = &s;
  c->dtype = DType::kUInt8;  // the flag is a byte
  c->flag_at = bytes;
  c->arrays.assign(arrays.begin(), arrays.end());
  c->request = std::make_unique<Request>();
  Request& r = *c->request;
  r.kind = Kind::kBroadcast;
  r.type = MPI_BYTE;
  r.root = root;
  r.count = static_cast<int>(bytes + 1);
  r.message = s.take_buffer(bytes + 1);
  VarList vars;
  for (const NDArray& a : arrays) vars.push_back(a.var());
  r.ticket = s.reserve();
  r.what = fmt::format("broadcast #{} from rank {} of {} array{} ({} bytes)", r.ticket, root,
                       arrays.size(), arrays.size() == 1 ? "" : "s", bytes);
  const bool sending = s.rank == root;
  Operation op{.name = "mpi_broadcast",
               .ctx = packing_device(arrays[0]),
               .priority = kCommunicationPriority,
               .fn = [c = std::move(c), sending, root](const RunContext&, Completion done) mutable {
                 if (sending) c->pack();
                 c->request->finish = [arrays = std::move(c->arrays), sending, root,
                                       flag_at = c->flag_at, done = std::move(done)](
                                          Request& ended, std::exception_ptr error) mutable {
                   if (!error && !sending) {
                     if (load_flag(ended.message.data() + flag_at, DType::kUInt8) == 1) {
                       Collective::unpack(ended, arrays);
                     } else {
                       error = std::make_exception_ptr(CommunicationError(fmt::format(
                           "the {}: the input of rank {} carried an error (it reports it); "
                           "nothing was written",
                           ended.what, root)));
                     }
                   }
                   error ? done.fail(std::move(error)) : done.done();
                 };
                 c->state->hand_over(std::move(c->request));
               }};
  // The root reads (and is skipped when its input carries an error); the
  // others only write: what their arrays held does not matter.
  if (sending) op.reads = vars;
  op.writes = vars;
  Engine::get().push(std::move(op));
}

// --- blocking helpers -----------------------------------------------------------

std::vector<double> MpiCommunicator::sum(std::span<const double> values) {
  TAGFLOW_CHECK(values.size() <= static_cast<std::size_t>(INT_MAX),
                "MpiCommunicator::sum: expected at most {} values, got {}", INT_MAX, values.size());
  auto r = std::make_unique<Request>();
  r->kind = Kind::kAllreduce;
  r->type = MPI_DOUBLE;
  r->count = static_cast<int>(values.size());
  r->message.resize(values.size_bytes());
  std::memcpy(r->message.data(), values.data(), values.size_bytes());
  r->what = fmt::format("sum of {} values", values.size());
  std::vector<double> result(values.size());
  state_->run_blocking(std::move(r), [&result](Request& done) {
    std::memcpy(result.data(), done.message.data(), result.size() * sizeof(double));
  });
  return result;
}

std::vector<std::int64_t> MpiCommunicator::gather(std::int64_t value) {
  auto r = std::make_unique<Request>();
  r->kind = Kind::kAllgather;
  r->type = MPI_INT64_T;
  r->count = 1;
  r->message.resize(sizeof value);
  std::memcpy(r->message.data(), &value, sizeof value);
  r->received.resize(sizeof value * static_cast<std::size_t>(state_->size));
  r->what = "gather of one value per process";
  std::vector<std::int64_t> result(static_cast<std::size_t>(state_->size));
  state_->run_blocking(std::move(r), [&result](Request& done) {
    std::memcpy(result.data(), done.received.data(), done.received.size());
  });
  return result;
}

void MpiCommunicator::broadcast_bytes(std::span<std::byte> bytes, int root) {
  TAGFLOW_CHECK(root >= 0 && root < state_->size,
                "MpiCommunicator::broadcast_bytes: expected a root in [0, {}), got {}",
                state_->size, root);
  TAGFLOW_CHECK(bytes.size() <= static_cast<std::size_t>(INT_MAX),
                "MpiCommunicator::broadcast_bytes: expected at most {} bytes, got {}", INT_MAX,
                bytes.size());
  auto r = std::make_unique<Request>();
  r->kind = Kind::kBroadcast;
  r->type = MPI_BYTE;
  r->root = root;
  r->count = static_cast<int>(bytes.size());
  r->message.assign(bytes.begin(), bytes.end());
  r->what = fmt::format("broadcast of {} bytes from rank {}", bytes.size(), root);
  state_->run_blocking(std::move(r), [bytes](Request& done) {
    std::memcpy(bytes.data(), done.message.data(), bytes.size());
  });
}

void MpiCommunicator::barrier() {
  auto r = std::make_unique<Request>();
  r->kind = Kind::kBarrier;
  r->what = "barrier";
  state_->run_blocking(std::move(r), [](Request&) {});
}

#else  // no MPI in this build

namespace {
[[noreturn]] void no_mpi() {
  detail::throw_error<CommunicationError>(
      "MpiCommunicator: this build of tagflow has no MPI (libopenmpi-dev was not found when it "
      "was configured; scripts/setup.sh installs it)");
}
}  // namespace

struct MpiCommunicator::State {};

bool mpi_available() { return false; }
std::string mpi_library_version() { return "none (built without MPI)"; }
std::shared_ptr<MpiCommunicator> MpiCommunicator::world(MpiOptions) { no_mpi(); }
MpiCommunicator::MpiCommunicator(std::unique_ptr<State> state) : state_(std::move(state)) {}
MpiCommunicator::~MpiCommunicator() = default;
int MpiCommunicator::rank() const { no_mpi(); }
int MpiCommunicator::size() const { no_mpi(); }
int MpiCommunicator::local_size() const { no_mpi(); }
const std::string& MpiCommunicator::host() const { no_mpi(); }
const MpiOptions& MpiCommunicator::options() const { no_mpi(); }
bool MpiCommunicator::broken() const { no_mpi(); }
void MpiCommunicator::abort(int) { no_mpi(); }
void MpiCommunicator::allreduce(std::span<const NDArray>) { no_mpi(); }
void MpiCommunicator::broadcast(std::span<const NDArray>, int) { no_mpi(); }
std::vector<double> MpiCommunicator::sum(std::span<const double>) { no_mpi(); }
std::vector<std::int64_t> MpiCommunicator::gather(std::int64_t) { no_mpi(); }
void MpiCommunicator::broadcast_bytes(std::span<std::byte>, int) { no_mpi(); }
void MpiCommunicator::barrier() { no_mpi(); }

#endif

}  // namespace tagflow::nn
