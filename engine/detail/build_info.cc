// Build facts for `tagflow info`: whether CUDA was built in, and the versions
// of the libraries this binary was compiled against (taken from their headers,
// so they describe the build, not what is loaded at run time).

#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <oneapi/tbb/version.h>
#include <spdlog/version.h>

#include "engine/detail/device_backend.h"
#include "tagflow/version.h"

#if defined(TAGFLOW_HAVE_CUDA)
#include <cuda_runtime_api.h>
#if __has_include(<cublas_api.h>)
// cublas_api.h drags in the fp16/bf16 headers, which use C casts in inline code.
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#endif
#include <cublas_api.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
#endif
#if __has_include(<cudnn_version.h>)
#include <cudnn_version.h>
#endif
#endif

/// The GPU architectures the CUDA kernels are compiled for; the build may
/// override it to match CMAKE_CUDA_ARCHITECTURES.
#if !defined(TAGFLOW_CUDA_ARCHITECTURES)
#define TAGFLOW_CUDA_ARCHITECTURES "sm_80, sm_90"
#endif

namespace tagflow::detail {
namespace {

std::string cuda_state() {
#if defined(TAGFLOW_HAVE_CUDA)
  return fmt::format("on ({})", TAGFLOW_CUDA_ARCHITECTURES);
#else
  return "off";
#endif
}

std::string cuda_runtime_version() {
#if defined(TAGFLOW_HAVE_CUDA)
  // CUDART_VERSION is 1000 * major + 10 * minor, e.g. 13000 for 13.0.
  return fmt::format("{}.{}", CUDART_VERSION / 1000, (CUDART_VERSION % 1000) / 10);
#else
  return "not built";
#endif
}

std::string cublas_version() {
#if defined(TAGFLOW_HAVE_CUDA) && defined(CUBLAS_VER_MAJOR)
  return fmt::format("{}.{}.{}", CUBLAS_VER_MAJOR, CUBLAS_VER_MINOR, CUBLAS_VER_PATCH);
#elif defined(TAGFLOW_HAVE_CUDA)
  return "headers not found";
#else
  return "not built";
#endif
}

std::string cudnn_version() {
#if defined(TAGFLOW_HAVE_CUDA) && defined(CUDNN_MAJOR)
  return fmt::format("{}.{}.{}", CUDNN_MAJOR, CUDNN_MINOR, CUDNN_PATCHLEVEL);
#elif defined(TAGFLOW_HAVE_CUDA)
  return "headers not found";
#else
  return "not built";
#endif
}

std::string compiler_version() {
#if defined(__clang__)
  return __VERSION__;  // already names the compiler, e.g. "Debian Clang 16.0.6"
#elif defined(__GNUC__)
  return fmt::format("g++ {}", __VERSION__);
#elif defined(__VERSION__)
  return __VERSION__;
#else
  return "unknown";
#endif
}

std::string build_type() {
#if defined(TAGFLOW_BUILD_TYPE)
  return TAGFLOW_BUILD_TYPE;
#else
  return "unknown";
#endif
}

}  // namespace

std::vector<std::pair<std::string, std::string>> build_info() {
  return {
      {"tagflow", version_string()},
      {"CUDA", cuda_state()},
      {"CUDA runtime", cuda_runtime_version()},
      {"cuBLAS", cublas_version()},
      {"cuDNN", cudnn_version()},
      {"oneTBB", TBB_VERSION_STRING},
      {"spdlog", fmt::format("{}.{}.{}", SPDLOG_VER_MAJOR, SPDLOG_VER_MINOR, SPDLOG_VER_PATCH)},
      {"compiler", compiler_version()},
      {"build type", build_type()},
  };
}

}  // namespace tagflow::detail

namespace tagflow {

const char* version_string() { return TAGFLOW_VERSION_STRING; }

}  // namespace tagflow
