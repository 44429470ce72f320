#include "engine/detail/cuda_check.h"

#include <fmt/format.h>

#include "engine/error.h"

namespace tagflow::detail {

std::string cuda_status(cudaError_t status) {
  return fmt::format("{} ({})", cudaGetErrorString(status), cudaGetErrorName(status));
}

std::string cuda_failure(cudaError_t status, std::string_view call, Context where) {
  return fmt::format("{} failed on {}: {}", call, where.str(), cuda_status(status));
}

std::string cuda_failure(cudaError_t status, std::string_view call) {
  return fmt::format("{} failed: {}", call, cuda_status(status));
}

void throw_cuda_error(cudaError_t status, std::string_view call, Context where) {
  static_cast<void>(cudaGetLastError());
  throw DeviceError(cuda_failure(status, call, where));
}

void throw_cuda_error(cudaError_t status, std::string_view call) {
  static_cast<void>(cudaGetLastError());
  throw DeviceError(cuda_failure(status, call));
}

}  // namespace tagflow::detail
