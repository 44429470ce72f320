// The CPU dropout kernel (Note [One kernel, three devices] in launch.h): one
// pass over the elements; each is independent, so any split gives the same
// bits.

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/dropout_kernels.h"

namespace tagflow::detail::cpu_kernels {

void dropout(const DropoutParams& params, DType dtype, const void* in, const float* uniform,
             void* out, std::int64_t n) {
  TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) y[i] = dropout_value(x[i], uniform[i], params);
    });
  });
}

}  // namespace tagflow::detail::cpu_kernels
