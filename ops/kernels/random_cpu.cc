// The CPU random kernels (Note [One kernel, three devices] in launch.h):
// loops over the Philox groups of random_kernels.h. Any split of the groups
// gives the same values (Note [Counter-based random numbers]).

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/random_kernels.h"

namespace tagflow::detail::cpu_kernels {

namespace {

std::int64_t groups_for(std::int64_t n) { return (n + kRandomGroup - 1) / kRandomGroup; }

/// Groups per block: a block writes about kParallelGrain elements.
constexpr std::int64_t kGroupGrain = kParallelGrain / kRandomGroup;

}  // namespace

void random_uniform(RandomDraw draw, const UniformParams& params, float* out, std::int64_t n) {
  parallel_for_range(groups_for(n), kGroupGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t g = begin; g < end; ++g) uniform_group(draw, params, out, g, n);
  });
}

void random_normal(RandomDraw draw, const NormalParams& params, float* out, std::int64_t n) {
  parallel_for_range(groups_for(n), kGroupGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t g = begin; g < end; ++g) normal_group(draw, params, out, g, n);
  });
}

}  // namespace tagflow::detail::cpu_kernels
