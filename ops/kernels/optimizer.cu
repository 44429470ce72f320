// The CUDA optimiser updates: grid-stride loops over the shared step bodies.

#include <cuda_runtime.h>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/optimizer_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;

__global__ void sgd_kernel(SgdStep step, float* w, const float* g, float* m, std::int64_t n,
                           const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;  // the same for every thread
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    step(w[i], g[i], step.has_momentum ? m + i : nullptr);
  }
}

__global__ void adam_kernel(AdamStep step, float* w, const float* g, float* m, float* v,
                            std::int64_t n, const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    step(w[i], g[i], m[i], v[i]);
  }
}

}  // namespace

void sgd(const SgdStep& step, float* w, const float* g, float* m, std::int64_t n, const float* skip,
         void* stream) {
  if (n == 0) return;
  sgd_kernel<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(step, w, g, m, n, skip);
  check_launch("sgd update kernel");
}

void adam(const AdamStep& step, float* w, const float* g, float* m, float* v, std::int64_t n,
          const float* skip, void* stream) {
  if (n == 0) return;
  adam_kernel<<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(step, w, g, m, v, n,
                                                                           skip);
  check_launch("adam update kernel");
}

}  // namespace tagflow::detail::gpu_kernels
