#include "tagflow/ops/kernels/cuda_check.h"

#include "tagflow/engine/error.h"

namespace tagflow::detail {

void throw_cuda_error(cudaError_t status, const char* what) {
  throw_error<DeviceError>("{}: {} ({})", what, cudaGetErrorString(status),
                           cudaGetErrorName(status));
}

}  // namespace tagflow::detail
