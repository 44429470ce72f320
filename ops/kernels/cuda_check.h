#pragma once
// Status checks for the CUDA kernels and libraries: every call's status is
// checked and a failure throws DeviceError naming the call, worded as Note
// [CUDA status messages] (engine/detail/cuda_check.h) says. The CUDA runtime's
// check is the engine's; cuBLAS's and cuDNN's are here. Internal to ops/;
// included only by .cu files and CUDA-only .cc files. The throwing lives in
// cuda_check.cc, compiled by the host compiler.

#include <cuda_runtime_api.h>

#include <cstdint>

#include "engine/detail/cuda_check.h"

namespace tagflow::detail {

/// Throws DeviceError for a failed cuBLAS call (status as an int, so that
/// this header needs no cuBLAS include).
[[noreturn]] void throw_cublas_error(int status, const char* what);
/// Throws DeviceError for a failed cuDNN call (status as an int, so that
/// this header needs no cuDNN include).
[[noreturn]] void throw_cudnn_error(int status, const char* what);
/// Throws DeviceError: a dimension too large for a 32-bit library argument.
[[noreturn]] void throw_dimension_too_large(const char* what, std::int64_t value);

template <typename Status>
inline void check_cublas(Status status, const char* what) {
  if (static_cast<int>(status) != 0) [[unlikely]]
    throw_cublas_error(static_cast<int>(status), what);
}

template <typename Status>
inline void check_cudnn(Status status, const char* what) {
  if (static_cast<int>(status) != 0) [[unlikely]]
    throw_cudnn_error(static_cast<int>(status), what);
}

/// `value` as an int, for a library's 32-bit argument; throws DeviceError
/// naming `what` when it does not fit.
inline int as_int(std::int64_t value, const char* what) {
  if (value > 0x7fffffff) [[unlikely]]
    throw_dimension_too_large(what, value);
  return static_cast<int>(value);
}

/// After a kernel launch: a bad configuration shows here, at once.
inline void check_launch(const char* kernel) { check_cuda(cudaGetLastError(), kernel); }

}  // namespace tagflow::detail
