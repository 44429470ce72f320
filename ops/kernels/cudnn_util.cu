// The cuDNN handle of each stream (see cudnn_util.h).

#include <cuda_runtime.h>
#include <cudnn.h>

#include <exception>

#include "engine/detail/cuda_device_guard.h"
#include "engine/detail/lifetime.h"
#include "engine/detail/stream_listeners.h"
#include "ops/kernels/cudnn_util.h"

namespace tagflow::detail::gpu_kernels {

namespace {

/// Destroys the handle of a stream of `device` as the stream goes away.
void destroy_handle(int device, cudnnHandle_t handle) {
  cudnnStatus_t status = CUDNN_STATUS_SUCCESS;
  try {
    const CudaDeviceGuard on_device(device);  // the device the handle was made on
    status = cudnnDestroy(handle);
  } catch (const std::exception& e) {  // the device could not be made current
    log_error("cudnnDestroy skipped: ", e.what());
    return;
  }
  if (status != CUDNN_STATUS_SUCCESS) {
    static_cast<void>(cudaGetLastError());
    log_error("cudnnDestroy failed: ", cudnnGetErrorString(status));
  }
}

}  // namespace

cudnnHandle_t cudnn_handle(void* stream, int device) {
  // Never destroyed; its entries go with their streams (see the header).
  static auto* handles = new PerStreamHandles<cudnnHandle_t>(&destroy_handle);
  return handles->get(device, stream, [&] {
    const CudaDeviceGuard on_device(device);  // cuDNN binds a handle to the current device
    cudnnHandle_t made = nullptr;
    check_cudnn(cudnnCreate(&made), "cuDNN: cudnnCreate");
    const cudnnStatus_t bound = cudnnSetStream(made, static_cast<cudaStream_t>(stream));
    if (bound != CUDNN_STATUS_SUCCESS) {
      cudnnDestroy(made);
      check_cudnn(bound, "cuDNN: cudnnSetStream");
    }
    return made;
  });
}

}  // namespace tagflow::detail::gpu_kernels
