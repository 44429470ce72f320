// The CPU transpose: rows of the output's last axis, each gathered with the
// input stride of that axis.

#include <algorithm>

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/transpose_kernels.h"

namespace tagflow::detail::cpu_kernels {

void transpose(DType dtype, const void* in, void* out, const TransposePlan& plan) {
  const std::int64_t inner = plan.dims[plan.ndim - 1];
  const std::int64_t step = plan.in_strides[plan.ndim - 1];
  std::int64_t rows = 1;
  for (int axis = 0; axis + 1 < plan.ndim; ++axis) rows *= plan.dims[axis];
  if (rows * inner == 0) return;
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / inner);
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    parallel_for_range(rows, grain, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t row = begin; row < end; ++row) {
        const T* source = x + plan.offset(row * inner);
        T* target = y + row * inner;
        for (std::int64_t j = 0; j < inner; ++j) target[j] = source[j * step];
      }
    });
  });
}

}  // namespace tagflow::detail::cpu_kernels
