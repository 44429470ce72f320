// The CUDA transpose: one thread per output element, gathering through the
// plan's strides (reads are strided, writes coalesced).

#include <cuda_runtime.h>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/transpose_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

template <typename T>
__global__ void transpose_kernel(const T* in, T* out, TransposePlan plan, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = in[plan.offset(i)];
  }
}

}  // namespace

void transpose(DType dtype, const void* in, void* out, const TransposePlan& plan, void* stream) {
  std::int64_t n = 1;
  for (int axis = 0; axis < plan.ndim; ++axis) n *= plan.dims[axis];
  if (n == 0) return;
  constexpr int kThreads = 256;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    transpose_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<T*>(out), plan, n);
  });
  check_launch("transpose kernel");
}

}  // namespace tagflow::detail::gpu_kernels
