// Copies on real GPUs (Note [Where copies run] in copy.h). Every CUDA status
// is checked; a failure throws DeviceError from the copy operation, which
// the engine stores on the destination.

#include "engine/error.h"
#include "engine/stream.h"
#include "ops/kernels/copy.h"

#ifdef TAGFLOW_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstring>

#include "engine/detail/cuda_check.h"
#include "engine/detail/cuda_device_guard.h"
#include "storage/storage.h"
#endif

namespace tagflow::detail {

#ifdef TAGFLOW_HAVE_CUDA

namespace {

/// Pinned staging memory, handed back once the stream has passed the copy.
MemoryBlock stage(std::uint64_t bytes) {
  return Storage::get().allocator(cpu_pinned(0)).allocate(bytes);
}
void release_after(Stream& stream, MemoryBlock staging) {
  stream.when_finished(stream.record(),
                       [staging] { Storage::get().allocator(cpu_pinned(0)).release(staging); });
}

}  // namespace

void enqueue_gpu_copy(const CopyRequest& r, Stream& stream) {
  auto* native = static_cast<cudaStream_t>(stream.native_handle());
  const Context here = stream.context();
  // The copy worker has selected its GPU already; a caller on another
  // thread (the naive engine's pusher) gets its own device back afterwards.
  const CudaDeviceGuard on_device(here.index);
  if (r.src_ctx.is_gpu() && r.dst_ctx.is_gpu()) {
    if (r.src_ctx.index == r.dst_ctx.index) {
      check_cuda(cudaMemcpyAsync(r.dst, r.src, r.bytes, cudaMemcpyDeviceToDevice, native),
                 "cudaMemcpyAsync (device to device)", here);
    } else {
      check_cuda(
          cudaMemcpyPeerAsync(r.dst, r.dst_ctx.index, r.src, r.src_ctx.index, r.bytes, native),
          "cudaMemcpyPeerAsync", here);
    }
  } else if (r.dst_ctx.is_gpu()) {
    // Host to device: straight from pinned memory, else through staging so
    // that the copy is truly asynchronous.
    if (r.src_ctx.is_cpu_pinned()) {
      check_cuda(cudaMemcpyAsync(r.dst, r.src, r.bytes, cudaMemcpyHostToDevice, native),
                 "cudaMemcpyAsync (host to device)", here);
      return;
    }
    MemoryBlock staging = stage(r.bytes);
    std::memcpy(staging.data, r.src, r.bytes);  // the source is final: its writers completed
    const cudaError_t status =
        cudaMemcpyAsync(r.dst, staging.data, r.bytes, cudaMemcpyHostToDevice, native);
    release_after(stream, staging);
    check_cuda(status, "cudaMemcpyAsync (host to device)", here);
  } else {
    // Device to host: into pinned memory, then (in stream order) onward.
    if (r.dst_ctx.is_cpu_pinned()) {
      check_cuda(cudaMemcpyAsync(r.dst, r.src, r.bytes, cudaMemcpyDeviceToHost, native),
                 "cudaMemcpyAsync (device to host)", here);
      return;
    }
    MemoryBlock staging = stage(r.bytes);
    const cudaError_t status =
        cudaMemcpyAsync(staging.data, r.src, r.bytes, cudaMemcpyDeviceToHost, native);
    if (status == cudaSuccess) {
      stream.enqueue_host(
          [dst = r.dst, from = staging.data, bytes = r.bytes] { std::memcpy(dst, from, bytes); });
    }
    release_after(stream, staging);
    check_cuda(status, "cudaMemcpyAsync (device to host)", here);
  }
}

#else

void enqueue_gpu_copy(const CopyRequest& r, Stream&) {
  throw_error<DeviceError>("copy from {} to {}: tagflow was built without CUDA", r.src_ctx.str(),
                           r.dst_ctx.str());
}

#endif

}  // namespace tagflow::detail
