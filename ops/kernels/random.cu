// The CUDA random kernels: one thread per Philox group (four elements), in a
// grid-stride loop over the bodies shared with the CPU kernels
// (random_kernels.h), launched on the operation's stream. Every launch is
// checked.

#include <cuda_runtime.h>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/random_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;

__global__ void uniform_kernel(RandomDraw draw, UniformParams params, float* out, std::int64_t n,
                               std::int64_t groups) {
  for (std::int64_t g = first_index(); g < groups; g += grid_stride()) {
    uniform_group(draw, params, out, g, n);
  }
}

__global__ void normal_kernel(RandomDraw draw, NormalParams params, float* out, std::int64_t n,
                              std::int64_t groups) {
  for (std::int64_t g = first_index(); g < groups; g += grid_stride()) {
    normal_group(draw, params, out, g, n);
  }
}

std::int64_t groups_for(std::int64_t n) { return (n + kRandomGroup - 1) / kRandomGroup; }

}  // namespace

void random_uniform(RandomDraw draw, const UniformParams& params, float* out, std::int64_t n,
                    void* stream) {
  if (n == 0) return;
  const std::int64_t groups = groups_for(n);
  uniform_kernel<<<blocks_for(groups, kThreads), kThreads, 0, as_stream(stream)>>>(draw, params,
                                                                                   out, n, groups);
  check_launch("random uniform kernel");
}

void random_normal(RandomDraw draw, const NormalParams& params, float* out, std::int64_t n,
                   void* stream) {
  if (n == 0) return;
  const std::int64_t groups = groups_for(n);
  normal_kernel<<<blocks_for(groups, kThreads), kThreads, 0, as_stream(stream)>>>(draw, params, out,
                                                                                  n, groups);
  check_launch("random normal kernel");
}

}  // namespace tagflow::detail::gpu_kernels
