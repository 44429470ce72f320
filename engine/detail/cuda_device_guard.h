#pragma once
// CudaDeviceGuard: makes a GPU current on the calling thread for a scope and
// puts the previous one back, for code that must touch a device other than
// the one its thread runs for (making a library handle, enabling peer
// access) without changing the thread's device behind its back. Internal;
// for sources built with CUDA only (TAGFLOW_HAVE_CUDA, and the .cu kernels).

#include <cuda_runtime_api.h>

#include "engine/context.h"
#include "engine/detail/cuda_check.h"

namespace tagflow::detail {

/// Makes `device` current for its lifetime, then restores the device that
/// was current before. Throws DeviceError (Note [CUDA status messages]) when
/// either cannot be read or set; restoring is best effort (a destructor
/// cannot report), and clears the error it may leave.
///
///   {
///     CudaDeviceGuard on_device(1);
///     check_cuda(cudaDeviceEnablePeerAccess(0, 0), "cudaDeviceEnablePeerAccess", gpu(1));
///   }  // the thread's device is what it was
class CudaDeviceGuard {
 public:
  explicit CudaDeviceGuard(int device) {
    check_cuda(cudaGetDevice(&previous_), "cudaGetDevice", gpu(device));
    if (previous_ != device) {
      check_cuda(cudaSetDevice(device), "cudaSetDevice", gpu(device));
      restore_ = true;
    }
  }
  ~CudaDeviceGuard() {
    if (restore_ && cudaSetDevice(previous_) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
    }
  }
  CudaDeviceGuard(const CudaDeviceGuard&) = delete;
  CudaDeviceGuard& operator=(const CudaDeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool restore_ = false;
};

}  // namespace tagflow::detail
