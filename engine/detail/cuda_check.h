#pragma once
// The CUDA runtime's status check, one for the whole library: the engine's
// streams, storage's device memory, ops' copies and kernels and nn/dist's
// NCCL set-up all check their CUDA calls with it. Internal; for sources built
// with CUDA only (TAGFLOW_HAVE_CUDA, and the .cu kernels). It includes
// neither fmt nor the error types, so that nvcc compiles it as it is: the
// messages are made, and DeviceError thrown, in cuda_check.cc.
//
// Note [CUDA status messages]
// A failed CUDA runtime call reads the same wherever it happens:
//   "<call> failed on <device>: <CUDA's message> (<error name>)"
//   e.g. "cudaMalloc failed on gpu(1): out of memory (cudaErrorMemoryAllocation)"
// that is the call as the call site names it (with what it was for when that
// helps), the device when the caller knows it ("<call> failed: ..." when it
// does not), CUDA's own sentence, and the error's name, which is what one
// searches for. A failure throws DeviceError, except on the engine's streams,
// which throw tagflow::Error (check_cuda_as). Throwing clears the calling
// thread's last error first, so that a later cudaGetLastError (a kernel
// launch's check) does not report the same failure again; a sticky error
// stays regardless. cuBLAS and cuDNN (ops/kernels/cuda_check.h) and NCCL
// (nn/dist) word their failures the same way, with the library's status in
// the parentheses.

#include <cuda_runtime_api.h>

#include <string>
#include <string_view>

#include "engine/context.h"

namespace tagflow::detail {

/// What CUDA says of `status`: "<CUDA's message> (<error name>)", for a
/// message worded around it.
std::string cuda_status(cudaError_t status);

/// "<call> failed on <where>: <CUDA's message> (<error name>)" (Note [CUDA
/// status messages]).
std::string cuda_failure(cudaError_t status, std::string_view call, Context where);
/// "<call> failed: <CUDA's message> (<error name>)", where the device is not known.
std::string cuda_failure(cudaError_t status, std::string_view call);

/// Throws DeviceError with cuda_failure's message, after clearing the calling
/// thread's last error.
[[noreturn]] void throw_cuda_error(cudaError_t status, std::string_view call, Context where);
[[noreturn]] void throw_cuda_error(cudaError_t status, std::string_view call);

/// Throws DeviceError naming `call` and `where` unless `status` is cudaSuccess:
///
///   check_cuda(cudaSetDevice(ctx.index), "cudaSetDevice", ctx);
inline void check_cuda(cudaError_t status, std::string_view call, Context where) {
  if (status != cudaSuccess) [[unlikely]]
    throw_cuda_error(status, call, where);
}
/// The same where the device is not known (a kernel launch on a stream).
inline void check_cuda(cudaError_t status, std::string_view call) {
  if (status != cudaSuccess) [[unlikely]]
    throw_cuda_error(status, call);
}

/// check_cuda throwing `E` instead of DeviceError. Host code only (it needs
/// E's definition): the engine's streams throw tagflow::Error.
template <typename E>
void check_cuda_as(cudaError_t status, std::string_view call, Context where) {
  if (status != cudaSuccess) [[unlikely]] {
    static_cast<void>(cudaGetLastError());
    throw E(cuda_failure(status, call, where));
  }
}

}  // namespace tagflow::detail
