#include "tagflow/nn/nccl_aggregator.h"

#include <algorithm>

#include "tagflow/engine/engine.h"
#include "tagflow/ops/device.h"
#include "tagflow/ops/priority.h"
#include "tagflow/storage/storage.h"

#ifdef TAGFLOW_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>
#endif

namespace tagflow::nn {

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

}  // namespace

#ifdef TAGFLOW_HAVE_NCCL

namespace {

void check_nccl(ncclResult_t status, const char* call, Context ctx) {
  if (status != ncclSuccess) [[unlikely]] {
    detail::throw_error<DeviceError>("{} on {} failed: {} (NCCL error {})", call, ctx.str(),
                                     ncclGetErrorString(status), static_cast<int>(status));
  }
}

void check_cuda(cudaError_t status, const char* call, Context ctx) {
  if (status != cudaSuccess) [[unlikely]] {
    detail::throw_error<DeviceError>("{} on {} failed: {} ({})", call, ctx.str(),
                                     cudaGetErrorString(status), cudaGetErrorName(status));
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
  }
  detail::throw_error<DeviceError>("NcclAggregator: no NCCL type for dtype {}", dtype_name(dtype));
}

}  // namespace

bool nccl_available() { return true; }

struct NcclAggregator::Communicators {
  std::vector<ncclComm_t> comms;
  /// One per GPU: the collectives' issue order (Note [NCCL collectives as
  /// engine operations]).
  std::vector<VarHandle> order;
};

NcclAggregator::NcclAggregator(const std::vector<Context>& gpus)
    : devices_(gpus), comms_(std::make_unique<Communicators>()) {
  check_real_gpus(gpus);
  std::vector<int> indices;
  for (Context c : gpus) indices.push_back(c.index);
  comms_->comms.resize(gpus.size());
  check_nccl(ncclCommInitAll(comms_->comms.data(), static_cast<int>(gpus.size()), indices.data()),
             "ncclCommInitAll", gpus[0]);
  for (std::size_t i = 0; i < gpus.size(); ++i) comms_->order.push_back(Engine::get().new_var());
}

NcclAggregator::~NcclAggregator() {
  Engine& engine = Engine::get();
  for (VarHandle v : comms_->order) {
    try {
      engine.wait_to_write(v);  // the last collective of this rank has finished
    } catch (...) {
      // Its error was stored on the gradients it wrote, where it is reported.
    }
    engine.delete_var(v);
  }
  for (ncclComm_t comm : comms_->comms) ncclCommDestroy(comm);  // a status here cannot be acted on
}

void NcclAggregator::allreduce(std::span<const NDArray> copies, int key) {
  check_aggregation_input(copies, key, "NcclAggregator::allreduce");
  TAGFLOW_CHECK(copies.size() == devices_.size(),
                "NcclAggregator::allreduce: expected one array on each of the clique's {} GPUs, "
                "got {} arrays",
                devices_.size(), copies.size());
  std::vector<std::size_t> rank_of(copies.size());
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const auto at = std::find(devices_.begin(), devices_.end(), copies[i].context());
    TAGFLOW_CHECK(at != devices_.end(),
                  "NcclAggregator::allreduce: array {} is on {}, which is not in the clique", i,
                  copies[i].context().str());
    rank_of[i] = static_cast<std::size_t>(at - devices_.begin());
  }
  const ncclDataType_t type = nccl_type(copies[0].dtype());
  const auto count = static_cast<std::size_t>(copies[0].size());
  if (count == 0) return;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    const std::size_t rank = rank_of[i];
    ncclComm_t comm = comms_->comms[rank];
    void* buffer = copies[i].raw_data();
    // Written, not read: an operation that reads a failed gradient is
    // skipped, and a skipped rank would leave the others' kernels waiting
    // on the device for ever. The failure stays on the loss that produced
    // it, where the training loop waits.
    Engine::get().push({.name = "nccl_allreduce",
                        .ctx = devices_[rank],
                        .writes = {copies[i].var(), comms_->order[rank]},
                        .priority = kCommunicationPriority,
                        .queue = QueueKind::kCompute,
                        .fn = [comm, buffer, count, type](const RunContext& rc) {
                          auto* stream = static_cast<cudaStream_t>(rc.stream->native_handle());
                          check_cuda(cudaSetDevice(rc.ctx.index), "cudaSetDevice", rc.ctx);
                          check_nccl(
                              ncclAllReduce(buffer, buffer, count, type, ncclSum, comm, stream),
                              "ncclAllReduce", rc.ctx);
                        }});
  }
}

#else  // no NCCL in this build

bool nccl_available() { return false; }

struct NcclAggregator::Communicators {};

NcclAggregator::NcclAggregator(const std::vector<Context>& gpus) : devices_(gpus) {
  check_real_gpus(gpus);
  detail::throw_error<DeviceError>(
      "NcclAggregator: this build of tagflow has no NCCL (built without CUDA, or nccl.h and "
      "libnccl were not found)");
}

NcclAggregator::~NcclAggregator() = default;

void NcclAggregator::allreduce(std::span<const NDArray>, int) {
  detail::throw_error<DeviceError>("NcclAggregator: this build of tagflow has no NCCL");
}

#endif

}  // namespace tagflow::nn
