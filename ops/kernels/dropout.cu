// The CUDA dropout kernel: a grid-stride loop over the body shared with the
// CPU kernel (dropout_kernels.h), launched on the operation's stream. The
// launch is checked.

#include <cuda_runtime.h>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/dropout_kernels.h"
#include "ops/kernels/grid_stride.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;

template <typename T>
__global__ void dropout_kernel(DropoutParams params, const T* in, const float* uniform, T* out,
                               std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = dropout_value(in[i], uniform[i], params);
  }
}

}  // namespace

void dropout(const DropoutParams& params, DType dtype, const void* in, const float* uniform,
             void* out, std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
    dropout_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
        params, static_cast<const T*>(in), uniform, static_cast<T*>(out), n);
  });
  check_launch("dropout kernel");
}

}  // namespace tagflow::detail::gpu_kernels
