#include "nn/dist/detail/nccl_monitor.h"

#include <algorithm>
#include <cassert>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/detail/cuda_check.h"
#include "engine/error.h"
#include "nn/dist/communication_error.h"

namespace tagflow::dist {

namespace {

/// How often the watching thread looks at the collectives in flight: well
/// below any sensible timeout, and rare enough to cost nothing.
constexpr auto kPollInterval = std::chrono::milliseconds(50);

double seconds(NcclMonitor::Clock::duration d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

NcclMonitor::NcclMonitor(std::vector<ncclComm_t> comms, std::vector<Context> devices,
                         std::string where, double timeout_seconds)
    : comms_(std::move(comms)),
      devices_(std::move(devices)),
      where_(std::move(where)),
      timeout_(timeout_seconds),
      freed_(comms_.size(), false),
      issuing_(comms_.size()) {
  TAGFLOW_CHECK(comms_.size() == devices_.size() && !comms_.empty(),
                "NcclMonitor: expected one communicator per GPU, got {} for {} GPUs", comms_.size(),
                devices_.size());
  try {
    thread_ = std::thread([this] { watch(); });
  } catch (...) {
    for (ncclComm_t comm : comms_) ncclCommDestroy(comm);  // nothing was issued on them
    throw;
  }
}

NcclMonitor::~NcclMonitor() { close(); }

void NcclMonitor::issue(cudaStream_t stream, const NcclCollective& collective) {
  const auto local = static_cast<std::size_t>(collective.local);
  assert(local < comms_.size());
  Clock::time_point since;
  {
    const std::lock_guard lock(mutex_);
    if (broken_ || closed_) {
      ::tagflow::detail::throw_error<CommunicationError>(
          "NcclAggregator: {} not issued: {}", describe(collective),
          broken_ ? reason_ : std::string("the aggregator was destroyed"));
    }
    since = Clock::now();
    issuing_[local] = {.active = true, .since = since, .collective = collective};
  }
  // Outside the mutex: the call may block until the other ranks have made
  // theirs, and the other GPUs of this process are among them.
  const NcclCollective& c = collective;
  const ncclResult_t status =
      c.kind == NcclCollective::kAllreduce
          ? ncclAllReduce(c.buffer, c.buffer, c.count, c.type, ncclSum, comms_[local], stream)
          : ncclBroadcast(c.buffer, c.buffer, c.count, c.type, /*root=*/0, comms_[local], stream);
  std::string failure;
  cudaEvent_t event = nullptr;
  if (status != ncclSuccess) {
    failure = fmt::format("{} failed: {} (NCCL error {})",
                          c.kind == NcclCollective::kAllreduce ? "ncclAllReduce" : "ncclBroadcast",
                          ncclGetErrorString(status), static_cast<int>(status));
  } else {
    cudaError_t cuda = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (cuda == cudaSuccess) {
      cuda = cudaEventRecord(event, stream);
      if (cuda != cudaSuccess) {
        cudaEventDestroy(event);  // the record's error is the one to report
        event = nullptr;
      }
    }
    if (cuda != cudaSuccess) {
      failure = "recording an event after it failed: " + ::tagflow::detail::cuda_status(cuda);
    }
  }
  {
    const std::lock_guard lock(mutex_);
    issuing_[local].active = false;
    if (failure.empty() && !broken_ && !closed_) {
      in_flight_.push_back({.event = event, .issued = since, .collective = collective});
      event = nullptr;
    }
    if (!failure.empty()) {
      // This rank did not take part: the others would wait for it for ever.
      break_locked(fmt::format("{}: {}", describe(collective), failure));
    } else if (broken_ || closed_) {
      abort_idle_locked();  // this one (Note [Aborting without racing a call])
    }
  }
  if (event != nullptr) cudaEventDestroy(event);  // not watched: the clique broke meanwhile
  if (!failure.empty()) {
    ::tagflow::detail::throw_error<DeviceError>("NcclAggregator: {}: {}", describe(collective),
                                                failure);
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
  {
    const std::lock_guard lock(mutex_);
    if (closed_) return;
    closed_ = true;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  const std::lock_guard lock(mutex_);
  for (const InFlight& f : in_flight_) cudaEventDestroy(f.event);
  in_flight_.clear();
  if (broken_) return;  // aborted, which freed them (or issue() will, as it leaves)
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    if (freed_[i] || issuing_[i].active) continue;
    freed_[i] = true;
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
    try {
      poll_locked();
    } catch (const std::exception& e) {  // formatting a message: out of memory
      spdlog::error("NcclAggregator ({}): watching the collectives failed: {}", where_, e.what());
    }
  }
}

void NcclMonitor::poll_locked() {
  const Clock::time_point now = Clock::now();
  for (auto it = in_flight_.begin(); it != in_flight_.end();) {
    const cudaError_t status = cudaEventQuery(it->event);
    if (status == cudaErrorNotReady) {
      ++it;
      continue;
    }
    if (status != cudaSuccess) {
      return break_locked(fmt::format("{} failed on the device after {:.1f} s: {}",
                                      describe(it->collective), seconds(now - it->issued),
                                      ::tagflow::detail::cuda_status(status)));
    }
    cudaEventDestroy(it->event);  // finished; a failure to free it cannot be acted on
    it = in_flight_.erase(it);
  }
  const auto oldest =
      std::min_element(in_flight_.begin(), in_flight_.end(),
                       [](const InFlight& a, const InFlight& b) { return a.issued < b.issued; });
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    if (freed_[i] || issuing_[i].active) continue;  // Note [Aborting without racing a call]
    ncclResult_t error = ncclSuccess;
    const ncclResult_t status = ncclCommGetAsyncError(comms_[i], &error);
    if (status != ncclSuccess) error = status;
    if (error == ncclSuccess || error == ncclInProgress) continue;
    return break_locked(
        fmt::format("NCCL reported {} (NCCL error {}) on {}; {}", ncclGetErrorString(error),
                    static_cast<int>(error), devices_[i].str(),
                    oldest == in_flight_.end()
                        ? std::string("no collective was in flight")
                        : fmt::format("{} had waited {:.1f} s", describe(oldest->collective),
                                      seconds(now - oldest->issued))));
  }
  if (oldest != in_flight_.end() && now - oldest->issued > timeout_) {
    return break_locked(fmt::format("{} has not finished after {:.1f} s (timeout {} s)",
                                    describe(oldest->collective), seconds(now - oldest->issued),
                                    timeout_.count()));
  }
  for (const Issuing& issuing : issuing_) {
    if (issuing.active && now - issuing.since > timeout_) {
      return break_locked(fmt::format(
          "{} has been inside its NCCL call for {:.1f} s (timeout {} s)",
          describe(issuing.collective), seconds(now - issuing.since), timeout_.count()));
    }
  }
}

void NcclMonitor::break_locked(std::string reason) {
  if (broken_) return;
  broken_ = true;
  reason_ = std::move(reason);
  spdlog::error("NcclAggregator ({}): {}; aborting its NCCL communicators", where_, reason_);
  // Events may be destroyed before they complete: CUDA frees them then.
  for (const InFlight& f : in_flight_) cudaEventDestroy(f.event);
  in_flight_.clear();
  abort_idle_locked();
}

void NcclMonitor::abort_idle_locked() {
  for (std::size_t i = 0; i < comms_.size(); ++i) {
    if (freed_[i] || issuing_[i].active) continue;
    freed_[i] = true;  // ncclCommAbort frees it: never ncclCommDestroy after
    const ncclResult_t status = ncclCommAbort(comms_[i]);
    if (status != ncclSuccess) {
      spdlog::warn("NcclAggregator ({}): ncclCommAbort failed on {}: {} (NCCL error {})", where_,
                   devices_[i].str(), ncclGetErrorString(status), static_cast<int>(status));
    }
  }
}

std::string NcclMonitor::describe(const NcclCollective& collective) const {
  return fmt::format("{} of key {} ({} elements) on {}",
                     collective.kind == NcclCollective::kAllreduce ? "allreduce" : "broadcast",
                     collective.key, collective.count,
                     devices_[static_cast<std::size_t>(collective.local)].str());
}

}  // namespace tagflow::dist
