// The CPU optimiser updates: the shared step bodies over parallel blocks.

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/optimizer_kernels.h"

namespace tagflow::detail::cpu_kernels {

void sgd(const SgdStep& step, float* w, const float* g, float* m, std::int64_t n,
         const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      step(w[i], g[i], step.has_momentum ? m + i : nullptr);
  });
}

void adam(const AdamStep& step, float* w, const float* g, float* m, float* v, std::int64_t n,
          const float* skip) {
  if (skip != nullptr && *skip != 0.f) return;
  parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) step(w[i], g[i], m[i], v[i]);
  });
}

}  // namespace tagflow::detail::cpu_kernels
