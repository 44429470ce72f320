// The GPU pooling kernels. Max pooling is this file's own kernels over the
// window rule shared with the CPU kernels (pool_functors.h), so that both
// devices pick the same element of every window, ties and NaNs included
// (Note [Gradient of max pooling] in pool.h); cuDNN's max modes leave the
// choice among ties undocumented. Average pooling calls cuDNN (the legacy
// pooling API of cuDNN 9) with the per-stream handle of cudnn_util.h. All
// work goes on the operation's stream; every launch and status is checked.

#include <cuda_runtime.h>
#include <cudnn.h>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/cudnn_util.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/pool_functors.h"
#include "ops/kernels/pool_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;

/// y[i] = the maximum of output i's window: a thread per output element.
template <typename T>
__global__ void max_pool_forward_kernel(PoolGeometry g, const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    y[i] = convert_element<T>(max_pool_output(g, x, i));  // exact: one of x's elements
  }
}

/// dx[i] gathered from the windows whose maximum is input element i: a
/// thread per input element, every element written (Note [Max pooling's
/// gradient, gathered] in pool_functors.h).
template <typename T>
__global__ void max_pool_backward_kernel(PoolGeometry g, const T* x, const T* dy, T* dx,
                                         std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    dx[i] = convert_element<T>(max_pool_input_gradient(g, x, dy, i));  // summed in float
  }
}

struct PoolingDescriptor : CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                           cudnnDestroyPoolingDescriptor> {
  explicit PoolingDescriptor(const PoolGeometry& g) {
    const cudnnPoolingMode_t mode = g.mode == PoolMode::kAverageIncludePad
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    check_cudnn(cudnnSetPooling2dDescriptor(desc, mode, CUDNN_PROPAGATE_NAN, g.kernel_h, g.kernel_w,
                                            g.pad_h, g.pad_w, g.stride_h, g.stride_w),
                "pool2d: cudnnSetPooling2dDescriptor");
  }
};

/// The descriptors of one average pooling: input, output and the window.
struct PoolDescriptors {
  TensorDescriptor x;
  TensorDescriptor y;
  PoolingDescriptor pool;
  PoolDescriptors(const PoolGeometry& g, DType dtype)
      : x(g.batch, g.channels, g.in_h, g.in_w, dtype),
        y(g.batch, g.channels, g.out_h, g.out_w, dtype),
        pool(g) {}
};

}  // namespace

void pool2d_forward(const PoolGeometry& g, DType dtype, const void* x, void* y, int device,
                    void* stream) {
  if (g.mode == PoolMode::kMax) {
    const std::int64_t n = g.planes() * g.out_h * g.out_w;
    if (n == 0) return;
    TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
      max_pool_forward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
          g, static_cast<const T*>(x), static_cast<T*>(y), n);
    });
    check_launch("max pool forward kernel");
    return;
  }
  cudnnHandle_t h = cudnn_handle(stream, device);
  PoolDescriptors d(g, dtype);  // float scaling factors for every floating dtype
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnPoolingForward(h, d.pool.desc, &one, d.x.desc, x, &zero, d.y.desc, y),
              "pool2d: cudnnPoolingForward");
}

void pool2d_backward(const PoolGeometry& g, DType dtype, const void* x, const void* y,
                     const void* dy, void* dx, int device, void* stream) {
  if (g.mode == PoolMode::kMax) {
    const std::int64_t n = g.planes() * g.in_h * g.in_w;
    if (n == 0) return;
    TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
      max_pool_backward_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
          g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx), n);
    });
    check_launch("max pool backward kernel");
    return;
  }
  cudnnHandle_t h = cudnn_handle(stream, device);
  PoolDescriptors d(g, dtype);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnPoolingBackward(h, d.pool.desc, &one, d.y.desc, y, d.y.desc, dy, d.x.desc, x,
                                   &zero, d.x.desc, dx),
              "pool2d_backward: cudnnPoolingBackward");
}

}  // namespace tagflow::detail::gpu_kernels
