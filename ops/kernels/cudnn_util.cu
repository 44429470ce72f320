// The cuDNN handle of each stream (see cudnn_util.h).

#include <cuda_runtime.h>
#include <cudnn.h>

#include <map>
#include <mutex>

#include "ops/kernels/cudnn_util.h"

namespace tagflow::detail::gpu_kernels {

cudnnHandle_t cudnn_handle(void* stream, int device) {
  static std::mutex mutex;
  static auto* handles = new std::map<void*, cudnnHandle_t>;  // never destroyed: see the header
  std::lock_guard lock(mutex);
  auto it = handles->find(stream);
  if (it != handles->end()) return it->second;
  check_cuda(cudaSetDevice(device), "cuDNN: cudaSetDevice", gpu(device));
  cudnnHandle_t made = nullptr;
  check_cudnn(cudnnCreate(&made), "cuDNN: cudnnCreate");
  const cudnnStatus_t bound = cudnnSetStream(made, static_cast<cudaStream_t>(stream));
  if (bound != CUDNN_STATUS_SUCCESS) {
    cudnnDestroy(made);
    check_cudnn(bound, "cuDNN: cudnnSetStream");
  }
  handles->emplace(stream, made);
  return made;
}

}  // namespace tagflow::detail::gpu_kernels
