// The CPU dropout kernel (Note [One kernel, three devices] in launch.h): one
// pass over the elements; each is independent, so any split gives the same
// bits.

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/dropout_kernels.h"

namespace tagflow::detail::cpu_kernels {

void dropout(const DropoutParams& params, const float* in, const float* uniform, float* out,
             std::int64_t n) {
  parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) out[i] = dropout_value(in[i], uniform[i], params);
  });
}

}  // namespace tagflow::detail::cpu_kernels
