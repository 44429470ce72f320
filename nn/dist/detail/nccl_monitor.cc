#include "nn/dist/detail/nccl_monitor.h"

#include <algorithm>
#include <cassert>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/detail/cuda_check.h"
#include "engine/error.h"
#include "nn/dist/communication_error.h"
#include "storage/detail/release_gate.h"

namespace tagflow::dist {

namespace {

using ::tagflow::detail::ReleaseGate;

/// How often the watching thread looks at the collectives in flight: well
/// below any sensible timeout, and rare enough to cost nothing.
constexpr auto kPollInterval = std::chrono::milliseconds(50);
/// How often close() asks whether a finalisation has finished.
constexpr auto kFinalizePollInterval = std::chrono::milliseconds(1);

double seconds(CollectiveWatch::Seconds s) { return s.count(); }

std::string nccl_failure(const char* call, ncclResult_t status) {
  return fmt::format("{} failed: {} (NCCL error {})", call, ncclGetErrorString(status),
                     static_cast<int>(status));
}

/// Creates `event` and records it on `stream`; an empty string, or what
/// failed (the event is then null).
std::string record_event(cudaEvent_t& event, cudaStream_t stream, const char* when) {
  cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
  if (status == cudaSuccess) {
    status = cudaEventRecord(event, stream);
    if (status != cudaSuccess) {
      cudaEventDestroy(event);  // the record's error is the one to report
      event = nullptr;
    }
  } else {
    event = nullptr;
  }
  if (status == cudaSuccess) return {};
  return fmt::format("recording an event {} it failed: {}", when,
                     ::tagflow::detail::cuda_status(status));
}

void destroy_events(cudaEvent_t& reached, cudaEvent_t& done) noexcept {
  // An event may be destroyed before it completes: CUDA frees it then.
  if (reached != nullptr) cudaEventDestroy(reached);
  if (done != nullptr) cudaEventDestroy(done);
  reached = nullptr;
  done = nullptr;
}

}  // namespace

void abort_nccl_communicators(std::span<const ncclComm_t> comms,
                              const std::string& where) noexcept {
  const auto warn = [&where](const char* call, ncclResult_t status) noexcept {
    try {
      spdlog::warn("NcclAggregator ({}): {}", where, nccl_failure(call, status));
    } catch (...) {  // out of memory for the message: the abort went on regardless
    }
  };
  const auto live =
      std::count_if(comms.begin(), comms.end(), [](ncclComm_t comm) { return comm != nullptr; });
  // Note [Aborting without racing a call]: together, where NCCL can.
  bool grouped = false;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 22, 0)
  if (live > 1) {
    const ncclResult_t status = ncclGroupStart();
    grouped = status == ncclSuccess;
    if (!grouped) warn("ncclGroupStart (aborting one communicator after the other)", status);
  }
#else
  (void)live;
#endif
  for (ncclComm_t comm : comms) {
    if (comm == nullptr) continue;
    const ncclResult_t status = ncclCommAbort(comm);
    if (status != ncclSuccess) warn("ncclCommAbort", status);
  }
  if (grouped) {
    const ncclResult_t status = ncclGroupEnd();
    if (status != ncclSuccess) warn("ncclGroupEnd after ncclCommAbort", status);
  }
}

NcclMonitor::NcclMonitor(std::vector<ncclComm_t> comms, std::vector<Context> devices,
                         std::string where, double timeout_seconds)
    : comms_(std::move(comms)),
      devices_(std::move(devices)),
      where_(std::move(where)),
      freed_(comms_.size(), false),
      busy_(comms_.size()),
      watch_(CollectiveWatch::Seconds(timeout_seconds)) {
  TAGFLOW_CHECK(comms_.size() == devices_.size() && !comms_.empty(),
                "NcclMonitor: expected one communicator per GPU, got {} for {} GPUs", comms_.size(),
                devices_.size());
  try {
    thread_ = std::thread([this] { watch(); });
  } catch (...) {
    // Nothing was issued on them; aborting frees them without waiting for
    // the other ranks, as a destroy would.
    abort_nccl_communicators(comms_, where_);
    throw;
  }
}

NcclMonitor::~NcclMonitor() { close(); }

void NcclMonitor::issue(cudaStream_t stream, const NcclCollective& collective) {
  const NcclLaunch part{.stream = stream, .collective = collective};
  issue_together(std::span(&part, 1));
}

void NcclMonitor::issue_together(std::span<const NcclLaunch> parts) {
  assert(!parts.empty());
  const std::size_t n = parts.size();
  const bool grouped = n > 1;
  // One part: on the caller's current device, which is its GPU. Several:
  // each part's events on its own GPU, the caller's device restored after.
  int saved_device = -1;
  std::string failure;
  if (grouped) {
    const cudaError_t status = cudaGetDevice(&saved_device);
    if (status != cudaSuccess) {
      ::tagflow::detail::throw_error<DeviceError>(
          "NcclAggregator: {} and {} more not issued: cudaGetDevice failed: {}",
          describe(parts[0].collective), n - 1, ::tagflow::detail::cuda_status(status));
    }
  }
  const auto on_device = [&](std::size_t i) {
    if (!grouped) return true;
    const Context c = devices_[static_cast<std::size_t>(parts[i].collective.local)];
    const cudaError_t status = cudaSetDevice(c.index);
    if (status == cudaSuccess) return true;
    failure = fmt::format("cudaSetDevice failed on {}: {}", c.str(),
                          ::tagflow::detail::cuda_status(status));
    return false;
  };
  // Allocated before anything is marked: a std::bad_alloc here changes nothing.
  std::vector<cudaEvent_t> reached(n, nullptr);
  std::vector<cudaEvent_t> done(n, nullptr);
  {
    const std::lock_guard lock(mutex_);
    if (broken_ || closed_) {
      ::tagflow::detail::throw_error<CommunicationError>(
          "NcclAggregator: {} not issued: {}", describe(parts[0].collective),
          broken_ ? reason_ : std::string("the aggregator was destroyed"));
    }
    for (const NcclLaunch& part : parts) {
      const auto local = static_cast<std::size_t>(part.collective.local);
      assert(local < comms_.size());
      busy_[local] = {.active = true, .finalizing = false, .collective = part.collective};
    }
  }
  // Outside the mutex from here to the end of the NCCL calls: the gate may
  // wait for a release of memory, and a call may block until the other
  // ranks have made theirs, the other GPUs of this process among them.
  std::size_t counted = 0;  // on the ReleaseGate
  try {
    for (; counted < n; ++counted) ReleaseGate::process().collective_began();
  } catch (const std::exception& e) {
    failure = fmt::format("counting it in flight failed: {}", e.what());
  }
  bool issued = false;
  {
    const std::lock_guard lock(mutex_);
    if (failure.empty() && !broken_ && !closed_) {
      const Clock::time_point now = Clock::now();
      for (const NcclLaunch& part : parts) {
        watch_.call_began(static_cast<std::size_t>(part.collective.local), now);
      }
      issued = true;
    }
  }
  if (issued) {
    for (std::size_t i = 0; i < n && failure.empty(); ++i) {
      if (on_device(i)) failure = record_event(reached[i], parts[i].stream, "before");
    }
    bool group_open = false;
    if (failure.empty() && grouped) {
      const ncclResult_t status = ncclGroupStart();
      if (status == ncclSuccess) {
        group_open = true;
      } else {
        failure = nccl_failure("ncclGroupStart", status);
      }
    }
    for (std::size_t i = 0; i < n && failure.empty(); ++i) {
      const NcclCollective& c = parts[i].collective;
      const ncclComm_t comm = comms_[static_cast<std::size_t>(c.local)];
      const ncclResult_t status =
          c.kind == NcclCollective::kAllreduce
              ? ncclAllReduce(c.buffer, c.buffer, c.count, c.type, ncclSum, comm, parts[i].stream)
              : ncclBroadcast(c.buffer, c.buffer, c.count, c.type, /*root=*/0, comm,
                              parts[i].stream);
      if (status != ncclSuccess) {
        failure = nccl_failure(
            c.kind == NcclCollective::kAllreduce ? "ncclAllReduce" : "ncclBroadcast", status);
      }
    }
    if (group_open) {  // closed whatever happened in it: the calls launch here
      const ncclResult_t status = ncclGroupEnd();
      if (failure.empty() && status != ncclSuccess) failure = nccl_failure("ncclGroupEnd", status);
    }
    for (std::size_t i = 0; i < n && failure.empty(); ++i) {
      if (on_device(i)) failure = record_event(done[i], parts[i].stream, "after");
    }
  }
  if (grouped) {
    const cudaError_t status = cudaSetDevice(saved_device);
    if (failure.empty() && status != cudaSuccess) {
      failure = fmt::format("cudaSetDevice (restoring the current device) failed: {}",
                            ::tagflow::detail::cuda_status(status));
    }
  }
  const std::string what = grouped ? fmt::format("{} and the parts on {} more GPUs",
                                                 describe(parts[0].collective), n - 1)
                                   : describe(parts[0].collective);
  Aftermath after;
  std::size_t watched = 0;
  std::string broke;
  {
    const std::lock_guard lock(mutex_);
    for (const NcclLaunch& part : parts) {
      const auto local = static_cast<std::size_t>(part.collective.local);
      busy_[local].active = false;
      watch_.call_ended(local);
    }
    if (issued && failure.empty() && !broken_ && !closed_) {
      try {
        for (; watched < n; ++watched) {
          const std::uint64_t id = watch_.enqueued(Clock::now());
          try {
            in_flight_.push_back({.reached = reached[watched],
                                  .done = done[watched],
                                  .id = id,
                                  .collective = parts[watched].collective});
          } catch (...) {
            watch_.finished(id);
            throw;
          }
          reached[watched] = nullptr;
          done[watched] = nullptr;
        }
      } catch (const std::exception& e) {
        failure = fmt::format("watching it failed: {}", e.what());
      }
    }
    // Counted and not watched: ended now, or by the abort below.
    after.ended = counted > watched ? counted - watched : 0;
    if (!failure.empty()) {
      // A rank did not take part, or is not watched: the others would wait
      // for it for ever.
      break_locked(fmt::format("{}: {}", what, failure), after);
    } else if (broken_ || closed_) {
      take_idle_locked(after);  // these (Note [Aborting without racing a call])
      broke = broken_ ? reason_ : std::string("the aggregator was destroyed");
    }
  }
  for (std::size_t i = 0; i < n; ++i) destroy_events(reached[i], done[i]);  // not watched
  carry_out(after);
  if (!failure.empty()) {
    ::tagflow::detail::throw_error<DeviceError>("NcclAggregator: {}: {}", what, failure);
  }
  if (watched < n) {
    ::tagflow::detail::throw_error<CommunicationError>("NcclAggregator: {} was {}: {}", what,
                                                       issued ? "aborted" : "not issued", broke);
  }
}

bool NcclMonitor::broken() const {
  const std::lock_guard lock(mutex_);
  return broken_;
}

std::string NcclMonitor::reason() const {
  const std::lock_guard lock(mutex_);
  return reason_;
}

void NcclMonitor::close() {
  bool finalize = false;
  Aftermath after;
  {
    const std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    if (!broken_) {
      const auto inside =
          std::find_if(busy_.begin(), busy_.end(), [](const Busy& busy) { return busy.active; });
      if (inside != busy_.end()) {
        break_locked(fmt::format("the aggregator was destroyed while {} was being issued",
                                 describe(inside->collective)),
                     after);
      } else {
        const Clock::time_point now = Clock::now();
        for (std::size_t i = 0; i < comms_.size(); ++i) {
          busy_[i] = {.active = true, .finalizing = true, .collective = {}};
          watch_.call_began(i, now);
        }
        finalize = true;
      }
    }
  }
  carry_out(after);
  if (finalize) finalize_and_destroy();  // the watching thread still times it
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  // The collectives still listed have ended: finalised, or aborted.
  Aftermath rest;
  {
    const std::lock_guard lock(mutex_);
    for (InFlight& f : in_flight_) destroy_events(f.reached, f.done);
    rest.ended = in_flight_.size();
    in_flight_.clear();
    watch_.clear_collectives();
  }
  carry_out(rest);
}

void NcclMonitor::finalize_and_destroy() {
  std::string failure;
  if (const ncclResult_t status = ncclGroupStart(); status != ncclSuccess) {
    failure = nccl_failure("ncclGroupStart", status);
  } else {
    for (std::size_t i = 0; i < comms_.size(); ++i) {
      const ncclResult_t finalized = ncclCommFinalize(comms_[i]);
      if (finalized != ncclSuccess && finalized != ncclInProgress && failure.empty()) {
        failure = fmt::format("on {}: {}", devices_[i].str(),
                              nccl_failure("ncclCommFinalize", finalized));
      }
    }
    const ncclResult_t ended = ncclGroupEnd();  // closes the group whatever happened in it
    if (ended != ncclSuccess && ended != ncclInProgress && failure.empty()) {
      failure = nccl_failure("ncclGroupEnd after ncclCommFinalize", ended);
    }
  }
  // Each reports ncclInProgress until it has finished (at once for blocking
  // communicators, done when ncclGroupEnd returned).
  for (std::size_t i = 0; i < comms_.size() && failure.empty(); ++i) {
    for (;;) {
      ncclResult_t state = ncclInProgress;
      const ncclResult_t status = ncclCommGetAsyncError(comms_[i], &state);
      if (status != ncclSuccess) state = status;
      if (state == ncclSuccess) break;
      if (state != ncclInProgress) {
        failure = fmt::format("on {}: finalising reported {} (NCCL error {})", devices_[i].str(),
                              ncclGetErrorString(state), static_cast<int>(state));
        break;
      }
      if (broken()) break;  // timed out by the watching thread: aborted below
      std::this_thread::sleep_for(kFinalizePollInterval);
    }
  }
  Aftermath after;
  bool destroy = false;
  {
    const std::lock_guard lock(mutex_);
    for (std::size_t i = 0; i < comms_.size(); ++i) {
      busy_[i].active = false;
      watch_.call_ended(i);
    }
    if (!failure.empty()) {
      break_locked("finalising the communicators: " + failure, after);
    } else if (broken_) {
      take_idle_locked(after);  // all of them: none was idle when it broke
    } else {
      std::fill(freed_.begin(), freed_.end(), true);
      destroy = true;
    }
  }
  carry_out(after);
  if (!destroy) return;
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    const ncclResult_t status = ncclCommDestroy(comms_[i]);
    if (status != ncclSuccess) {
      spdlog::warn("NcclAggregator ({}): ncclCommDestroy failed on {}: {} (NCCL error {})", where_,
                   devices_[i].str(), ncclGetErrorString(status), static_cast<int>(status));
    }
  }
}

void NcclMonitor::watch() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, kPollInterval, [this] { return stopping_; });
    if (stopping_ || broken_) continue;
    Aftermath after;
    try {
      after.to_abort.reserve(comms_.size());
      poll_locked(after);
    } catch (const std::exception& e) {  // formatting a message: out of memory
      spdlog::error("NcclAggregator ({}): watching the collectives failed: {}", where_, e.what());
    }
    if (after.to_abort.empty() && after.ended == 0) continue;
    lock.unlock();
    carry_out(after);
    lock.lock();
  }
}

void NcclMonitor::poll_locked(Aftermath& after) {
  const Clock::time_point now = Clock::now();
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    cudaError_t status = cudaEventQuery(it->done);
    if (status == cudaSuccess) {
      watch_.finished(it->id);
      destroy_events(it->reached, it->done);
      it = in_flight_.erase(it);
      ++after.ended;
      continue;
    }
    if (status == cudaErrorNotReady && !watch_.has_started(it->id)) {
      // Note [NCCL failures and timeouts]: its clock starts when its stream
      // gets to it, seen at this poll.
      status = cudaEventQuery(it->reached);
      if (status == cudaSuccess) {
        watch_.started(it->id, now);
        status = cudaErrorNotReady;
      }
    }
    if (status != cudaErrorNotReady) {
      return break_locked(
          fmt::format("{} failed on the device after {:.1f} s: {}", describe(it->collective),
                      seconds(watch_.since_enqueued(it->id, now)),
                      ::tagflow::detail::cuda_status(status)),
          after);
    }
    ++it;
  }
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    if (freed_[i] || busy_[i].active) continue;  // Note [Aborting without racing a call]
    ncclResult_t error = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comms_[i], &error);
    if (status != ncclSuccess) error = status;
    if (error == ncclSuccess || error == ncclInProgress) continue;
    const auto longest = watch_.longest(now);
    return break_locked(
        fmt::format(
            "NCCL reported {} (NCCL error {}) on {}; {}", ncclGetErrorString(error),
            static_cast<int>(error), devices_[i].str(),
            longest ? describe_locked(*longest, now) : std::string("no collective was running")),
        after);
  }
  if (const auto late = watch_.late(now)) {
    return break_locked(
        fmt::format("{} (timeout {} s)", describe_locked(*late, now), watch_.timeout().count()),
        after);
  }
}

void NcclMonitor::break_locked(std::string reason, Aftermath& after) {
  if (broken_) return;
  broken_ = true;
  reason_ = std::move(reason);
  spdlog::error("NcclAggregator ({}): {}; aborting its NCCL communicators", where_, reason_);
  for (InFlight& f : in_flight_) destroy_events(f.reached, f.done);
  after.ended += in_flight_.size();  // once aborted
  in_flight_.clear();
  watch_.clear_collectives();
  take_idle_locked(after);
}

void NcclMonitor::take_idle_locked(Aftermath& after) {
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    if (freed_[i] || busy_[i].active) continue;
    freed_[i] = true;  // ncclCommAbort frees it: never ncclCommDestroy after
    after.to_abort.push_back(comms_[i]);
  }
}

void NcclMonitor::carry_out(const Aftermath& after) noexcept {
  if (!after.to_abort.empty()) abort_nccl_communicators(after.to_abort, where_);
  // Their kernels have ended: memory may go back to the devices again.
  for (std::size_t i = 0; i < after.ended; ++i) ReleaseGate::process().collective_ended();
}

std::string NcclMonitor::describe(const NcclCollective& collective) const {
  return fmt::format("{} of key {} ({} elements) on {}",
                     collective.kind == NcclCollective::kAllreduce ? "allreduce" : "broadcast",
                     collective.key, collective.count,
                     devices_[static_cast<std::size_t>(collective.local)].str());
}

std::string NcclMonitor::describe_locked(const CollectiveWatch::Wait& wait,
                                         Clock::time_point now) const {
  if (wait.kind == CollectiveWatch::Wait::kCall) {
    const Busy& busy = busy_[static_cast<std::size_t>(wait.id)];
    if (busy.finalizing) {
      return fmt::format("finalising the communicator of {} has not returned after {:.1f} s",
                         devices_[static_cast<std::size_t>(wait.id)].str(), seconds(wait.waited));
    }
    return fmt::format("{} has been inside its NCCL call for {:.1f} s", describe(busy.collective),
                       seconds(wait.waited));
  }
  const auto f = std::find_if(in_flight_.begin(), in_flight_.end(),
                              [&wait](const InFlight& i) { return i.id == wait.id; });
  if (f == in_flight_.end()) return "a collective";  // not reached: the two lists go together
  return fmt::format(
      "{} has run {:.1f} s since its stream reached it ({:.1f} s since it was issued)",
      describe(f->collective), seconds(wait.waited), seconds(watch_.since_enqueued(wait.id, now)));
}

}  // namespace tagflow::dist
