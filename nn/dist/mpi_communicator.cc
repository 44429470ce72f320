#include "nn/dist/mpi_communicator.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "ops/priority.h"

#ifdef TAGFLOW_HAVE_MPI
#include "nn/dist/detail/mpi_progress.h"
#endif

namespace tagflow::dist {

#ifdef TAGFLOW_HAVE_MPI

using mpi::Kind;
using mpi::load_flag;
using mpi::mpi_error_text;
using mpi::mpi_type;
using mpi::Request;
using mpi::store_flag;

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
  if (state->local_size > 1) {
    // The CPU kernels spread their work over oneTBB's threads (Note [The
    // CPU BLAS] in ops/kernels/gemm_cpu.cc): each process takes its share.
    const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    state->cores.emplace(tbb::global_control::max_allowed_parallelism,
                         static_cast<std::size_t>(std::max(1, cores / state->local_size)));
  }
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
    // Finalising waits for the other processes, which may be gone; and MPI
    // may still write into the messages of abandoned collectives, so they
    // are left allocated.
    spdlog::warn(
        "MpiCommunicator (rank {} of {}): MPI is left unfinalised: the communicator broke "
        "down ({})",
        s.rank, s.size, s.broken_reason);
    for (std::unique_ptr<Request>& request : s.abandoned) (void)request.release();
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
      if (a.nbytes() == 0) continue;  // an empty array may have no memory at all
      std::memcpy(at, a.raw_data(), a.nbytes());
      at += a.nbytes();
    }
    store_flag(request->message.data() + flag_at, dtype, true);
  }

  static void unpack(const Request& r, const std::vector<NDArray>& arrays) {
    const std::byte* at = r.message.data();
    for (const NDArray& a : arrays) {
      if (a.nbytes() == 0) continue;
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
  const std::span<const std::byte> bytes = std::as_bytes(values);
  r->message.assign(bytes.begin(), bytes.end());
  r->what = fmt::format("sum of {} values", values.size());
  std::vector<double> result(values.size());
  state_->run_blocking(std::move(r), [&result](Request& done) {
    std::copy_n(done.message.data(), done.message.size(),
                reinterpret_cast<std::byte*>(result.data()));
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
    std::copy_n(done.received.data(), done.received.size(),
                reinterpret_cast<std::byte*>(result.data()));
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
    std::copy_n(done.message.data(), bytes.size(), bytes.data());
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

}  // namespace tagflow::dist
