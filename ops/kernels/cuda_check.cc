#include "ops/kernels/cuda_check.h"

#include <cublas_v2.h>
#include <cudnn.h>

#include "engine/error.h"

namespace tagflow::detail {

void throw_cublas_error(int status, const char* what) {
  throw_error<DeviceError>("{} failed: {} (cuBLAS status {})", what,
                           cublasGetStatusString(static_cast<cublasStatus_t>(status)), status);
}

void throw_cudnn_error(int status, const char* what) {
  throw_error<DeviceError>("{} failed: {} (cuDNN status {})", what,
                           cudnnGetErrorString(static_cast<cudnnStatus_t>(status)), status);
}

void throw_dimension_too_large(const char* what, std::int64_t value) {
  throw_error<DeviceError>("{} = {} exceeds the 32-bit range of the CUDA libraries", what, value);
}

}  // namespace tagflow::detail
