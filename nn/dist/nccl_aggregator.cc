#include "nn/dist/nccl_aggregator.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <span>
#include <vector>

#include "engine/engine.h"
#include "engine/stream.h"
#include "nn/dist/communication_error.h"
#include "nn/dist/process_group.h"
#include "ops/device.h"
#include "ops/priority.h"
#include "storage/storage.h"

#ifdef TAGFLOW_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/detail/cuda_check.h"
#include "nn/dist/detail/nccl_monitor.h"
#endif

namespace tagflow::dist {

namespace {

/// Throws DeviceError unless every device of `gpus` is a real GPU, once.
void check_real_gpus(const std::vector<Context>& gpus) {
  TAGFLOW_CHECK_AS(DeviceError, !gpus.empty(), "NcclAggregator: expected at least one GPU");
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const Context c = gpus[i];
    check_device(c);
    TAGFLOW_CHECK_AS(DeviceError, is_real_gpu(c), "NcclAggregator: NCCL needs real GPUs, got {}{}",
                     c.str(), c.is_gpu() ? " (simulated)" : "");
    for (std::size_t j = 0; j < i; ++j) {
      TAGFLOW_CHECK_AS(DeviceError, gpus[j] != c, "NcclAggregator: {} is listed twice", c.str());
    }
  }
}

void check_timeout(double timeout_seconds) {
  TAGFLOW_CHECK(std::isfinite(timeout_seconds) && timeout_seconds > 0,
                "NcclAggregator: expected a timeout > 0 seconds, got {}", timeout_seconds);
}

void check_communicator(const std::shared_ptr<ProcessGroup>& processes) {
  TAGFLOW_CHECK(processes != nullptr,
                "NcclAggregator: expected a communicator between processes, got null");
}

}  // namespace

#ifdef TAGFLOW_HAVE_NCCL

namespace {

using detail::check_cuda;
using detail::cuda_failure;

/// Throws DeviceError unless `status` is ncclSuccess, worded as CUDA's
/// failures are (Note [CUDA status messages] in engine/detail/cuda_check.h).
void check_nccl(ncclResult_t status, const char* call, Context ctx) {
  if (status != ncclSuccess) [[unlikely]] {
    detail::throw_error<DeviceError>("{} failed on {}: {} (NCCL error {})", call, ctx.str(),
                                     ncclGetErrorString(status), static_cast<int>(status));
  }
}

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat32:
      return ncclFloat32;
    case DType::kInt32:
      return ncclInt32;
    case DType::kInt64:
      return ncclInt64;
    case DType::kUInt8:
      return ncclUint8;
    case DType::kFloat16:
      return ncclFloat16;
    case DType::kBFloat16:
      return ncclBfloat16;
  }
  detail::throw_error<DeviceError>("NcclAggregator: no NCCL type for dtype {}", dtype_name(dtype));
}

/// Process 0's new NCCL id, in every process. The message ends with a byte
/// saying whether process 0 got one, so that a failure there fails every
/// process instead of leaving them waiting in ncclCommInitRank.
ncclUniqueId shared_unique_id(ProcessGroup& processes, Context ctx) {
  std::array<std::byte, sizeof(ncclUniqueId) + 1> message{};
  ncclResult_t status = ncclSuccess;
  if (processes.rank() == 0) {
    ncclUniqueId id;
    status = ncclGetUniqueId(&id);
    if (status == ncclSuccess) {
      std::memcpy(message.data(), &id, sizeof id);
      message.back() = std::byte{1};
    }
  }
  processes.broadcast_bytes(message, /*root=*/0);
  check_nccl(status, "ncclGetUniqueId", ctx);  // process 0, with its reason
  TAGFLOW_CHECK_AS(DeviceError, message.back() == std::byte{1},
                   "NcclAggregator: process 0 could not make an NCCL id (ncclGetUniqueId failed "
                   "there)");
  ncclUniqueId id;
  std::memcpy(&id, message.data(), sizeof id);
  return id;
}

/// This process's communicators of a clique of `nranks` ranks over every
/// process: gpus[i] is rank first + i. Initialised in one group, as NCCL
/// requires when one thread sets up several ranks; the calling thread's
/// current device is restored. Frees what it made when it fails.
std::vector<ncclComm_t> init_ranks(const std::vector<Context>& gpus, int nranks,
                                   const ncclUniqueId& id, int first) {
  int saved_device = 0;
  check_cuda(cudaGetDevice(&saved_device), "cudaGetDevice", gpus[0]);
  std::vector<ncclComm_t> comms(gpus.size(), nullptr);
  check_nccl(ncclGroupStart(), "ncclGroupStart", gpus[0]);
  std::string failure;
  for (std::size_t i = 0; i < gpus.size(); ++i) {
    const Context c = gpus[i];
    const int rank = first + static_cast<int>(i);
    const cudaError_t cuda = cudaSetDevice(c.index);
    if (cuda != cudaSuccess) {
      failure = cuda_failure(cuda, "cudaSetDevice", c);
      break;
    }
    const ncclResult_t status = ncclCommInitRank(&comms[i], nranks, id, rank);
    if (status != ncclSuccess) {
      failure =
          fmt::format("ncclCommInitRank (rank {} of {}) failed on {}: {} (NCCL error {})", rank,
                      nranks, c.str(), ncclGetErrorString(status), static_cast<int>(status));
      break;
    }
  }
  const ncclResult_t end = ncclGroupEnd();  // closes the group whatever happened in it
  if (failure.empty() && end != ncclSuccess) {
    failure = fmt::format(
        "ncclGroupEnd after ncclCommInitRank of ranks {}..{} of {} failed: {} "
        "(NCCL error {})",
        first, first + static_cast<int>(gpus.size()) - 1, nranks, ncclGetErrorString(end),
        static_cast<int>(end));
  }
  const cudaError_t restored = cudaSetDevice(saved_device);
  if (failure.empty() && restored != cudaSuccess) {
    failure =
        cuda_failure(restored, "cudaSetDevice (restoring the current device)", gpu(saved_device));
  }
  if (!failure.empty()) {
    // Best effort: the set-up already failed.
    abort_nccl_communicators(comms, fmt::format("NCCL ranks {}.. of {}", first, nranks));
    detail::throw_error<DeviceError>("NcclAggregator: {}", failure);
  }
  return comms;
}

}  // namespace

bool nccl_available() { return true; }

struct NcclAggregator::Communicators {
  Communicators(std::vector<ncclComm_t> comms, const std::vector<Context>& gpus, std::string where,
                double timeout_seconds)
      : monitor(std::make_shared<NcclMonitor>(std::move(comms), gpus, std::move(where),
                                              timeout_seconds)) {
    for (std::size_t i = 0; i < gpus.size(); ++i) order.push_back(Engine::get().new_var());
  }

  /// The communicators and the thread that watches them (Note [NCCL failures
  /// and timeouts]); shared with the operations not yet run.
  std::shared_ptr<NcclMonitor> monitor;
  /// One per GPU: the collectives' issue order (Note [NCCL collectives as
  /// engine operations]).
  std::vector<VarHandle> order;
};

NcclAggregator::NcclAggregator(const std::vector<Context>& gpus, double timeout_seconds)
    : devices_(gpus), ranks_(gpus.size()) {
  check_timeout(timeout_seconds);
  check_real_gpus(gpus);
  std::vector<int> indices;
  for (Context c : gpus) indices.push_back(c.index);
  std::vector<ncclComm_t> comms(gpus.size(), nullptr);
  check_nccl(ncclCommInitAll(comms.data(), static_cast<int>(gpus.size()), indices.data()),
             "ncclCommInitAll", gpus[0]);
  comms_ = std::make_unique<Communicators>(std::move(comms), gpus, "one process", timeout_seconds);
}

NcclAggregator::NcclAggregator(const std::vector<Context>& local_gpus,
                               std::shared_ptr<ProcessGroup> processes, double timeout_seconds)
    : devices_(local_gpus), ranks_(local_gpus.size()) {
  check_communicator(processes);
  check_timeout(timeout_seconds);
  check_real_gpus(local_gpus);
  // The first collective: every process that passed the checks gets here.
  const std::vector<std::int64_t> counts =
      processes->gather(static_cast<std::int64_t>(local_gpus.size()));
  std::int64_t first = 0;
  std::int64_t total = 0;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    if (static_cast<int>(r) < processes->rank()) first += counts[r];
    total += counts[r];
  }
  ranks_ = static_cast<std::size_t>(total);
  const ncclUniqueId id = shared_unique_id(*processes, local_gpus[0]);
  std::vector<ncclComm_t> comms =
      init_ranks(local_gpus, static_cast<int>(total), id, static_cast<int>(first));
  comms_ = std::make_unique<Communicators>(
      std::move(comms), local_gpus,
      fmt::format("process {} of {}, NCCL ranks {}..{} of {}", processes->rank(), processes->size(),
                  first, first + std::ssize(local_gpus) - 1, total),
      timeout_seconds);
}

NcclAggregator::~NcclAggregator() {
  Engine& engine = Engine::get();
  for (VarHandle v : comms_->order) {
    // A healthy clique's collectives finish, or time out and break it (the
    // monitor still runs). A broken one's were aborted: nothing to wait for.
    if (!comms_->monitor->broken()) {
      try {
        engine.wait_to_write(v);  // the last collective of this rank has finished
      } catch (...) {
        // Its error was stored on the arrays it wrote, where it is reported.
      }
    }
    engine.delete_var(v);
  }
  // Finalises the communicators together and frees them, unless aborted
  // (Note [Ending the communicators] in nn/dist/detail/nccl_monitor.h).
  comms_->monitor->close();
}

bool NcclAggregator::broken() const { return comms_->monitor->broken(); }

std::size_t NcclAggregator::copies_summed(std::size_t) const { return ranks_; }

void NcclAggregator::allreduce(std::span<const NDArray> copies, int key) {
  push(copies, key, Collective::kAllreduce, "NcclAggregator::allreduce");
}

void NcclAggregator::broadcast(std::span<const NDArray> copies, int key) {
  push(copies, key, Collective::kBroadcast, "NcclAggregator::broadcast");
}

void NcclAggregator::push(std::span<const NDArray> copies, int key, Collective collective,
                          const char* who) {
  check_aggregation_input(copies, key, who);
  TAGFLOW_CHECK(copies.size() == devices_.size(),
                "{}: expected one array on each of this process's {} GPUs of the clique, got {} "
                "arrays",
                who, devices_.size(), copies.size());
  std::vector<std::size_t> local_of(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const auto at = std::find(devices_.begin(), devices_.end(), copies[i].context());
    TAGFLOW_CHECK(at != devices_.end(), "{}: array {} is on {}, which is not in the clique", who, i,
                  copies[i].context().str());
    local_of[i] = static_cast<std::size_t>(at - devices_.begin());
  }
  const ncclDataType_t type = nccl_type(copies[0].dtype());
  const auto count = static_cast<std::size_t>(copies[0].size());
  if (comms_->monitor->broken()) {
    detail::throw_error<CommunicationError>("{}: the NCCL communicators were aborted: {}", who,
                                            comms_->monitor->reason());
  }
  if (count == 0) return;
  // The ranks meet on the devices: pushed as a group (Note [Launch groups]
  // in engine/engine.h). The threaded engine issues each rank from its
  // GPU's worker; an engine that launches them all from one thread issues
  // them together, in one NCCL group.
  LaunchGroup group;
  group.parts.reserve(copies.size());
  auto parts = std::make_shared<std::vector<NcclCollective>>();
  parts->reserve(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const std::size_t local = local_of[i];
    const NcclCollective what{.kind = collective == Collective::kAllreduce
                                          ? NcclCollective::kAllreduce
                                          : NcclCollective::kBroadcast,
                              .local = static_cast<int>(local),
                              .key = key,
                              .type = type,
                              .buffer = copies[i].raw_data(),
                              .count = count};
    parts->push_back(what);
    // Written, not read: an operation that reads a failed array is skipped,
    // and a skipped rank would leave the others' kernels waiting on the
    // device for ever. The failure stays on the loss (or the weights) that
    // produced it, where the training loop waits.
    group.parts.push_back(
        {.name = collective == Collective::kAllreduce ? "nccl_allreduce" : "nccl_broadcast",
         .ctx = devices_[local],
         .writes = {copies[i].var(), comms_->order[local]},
         .priority = kCommunicationPriority,
         .queue = QueueKind::kCompute,
         .fn = [monitor = comms_->monitor, what](const RunContext& rc) {
           check_cuda(cudaSetDevice(rc.ctx.index), "cudaSetDevice", rc.ctx);
           monitor->issue(static_cast<cudaStream_t>(rc.stream->native_handle()), what);
         }});
  }
  group.together = [monitor = comms_->monitor, parts](std::span<const RunContext> contexts) {
    std::vector<NcclLaunch> launches;
    launches.reserve(contexts.size());
    for (std::size_t i = 0; i < contexts.size(); ++i) {
      launches.push_back({.stream = static_cast<cudaStream_t>(contexts[i].stream->native_handle()),
                          .collective = (*parts)[i]});
    }
    monitor->issue_together(launches);
  };
  Engine::get().push_group(std::move(group));
}

#else  // no NCCL in this build

namespace {

[[noreturn]] void throw_no_nccl() {
  detail::throw_error<DeviceError>(
      "NcclAggregator: this build of tagflow has no NCCL (built without CUDA, or nccl.h and "
      "libnccl were not found)");
}

}  // namespace

bool nccl_available() { return false; }

struct NcclAggregator::Communicators {};

NcclAggregator::NcclAggregator(const std::vector<Context>& gpus, double timeout_seconds)
    : devices_(gpus), ranks_(gpus.size()) {
  check_timeout(timeout_seconds);
  check_real_gpus(gpus);
  throw_no_nccl();
}

NcclAggregator::NcclAggregator(const std::vector<Context>& local_gpus,
                               std::shared_ptr<ProcessGroup> processes, double timeout_seconds)
    : devices_(local_gpus), ranks_(local_gpus.size()) {
  check_communicator(processes);
  check_timeout(timeout_seconds);
  check_real_gpus(local_gpus);
  throw_no_nccl();
}

NcclAggregator::~NcclAggregator() = default;

bool NcclAggregator::broken() const { return false; }

std::size_t NcclAggregator::copies_summed(std::size_t local_copies) const { return local_copies; }

void NcclAggregator::allreduce(std::span<const NDArray>, int) { throw_no_nccl(); }

void NcclAggregator::broadcast(std::span<const NDArray>, int) { throw_no_nccl(); }

void NcclAggregator::push(std::span<const NDArray>, int, Collective, const char*) {
  throw_no_nccl();
}

#endif

}  // namespace tagflow::dist
