// The GPU pooling kernels: cuDNN (the legacy pooling API of cuDNN 9) on the
// operation's stream, with the per-stream handle of cudnn_util.h. Max pooling
// uses cuDNN's deterministic max mode and propagates NaNs, as the CPU
// kernels do (Note [Gradient of max pooling] in pool.h). Every status is
// checked.

#include <cuda_runtime.h>
#include <cudnn.h>

#include "ops/kernels/cudnn_util.h"
#include "ops/kernels/pool_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

struct PoolingDescriptor : CudnnDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
                                           cudnnDestroyPoolingDescriptor> {
  explicit PoolingDescriptor(const PoolGeometry& g) {
    cudnnPoolingMode_t mode = CUDNN_POOLING_MAX_DETERMINISTIC;
    if (g.mode == PoolMode::kAverageIncludePad) mode = CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING;
    if (g.mode == PoolMode::kAverageExcludePad) mode = CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    check_cudnn(cudnnSetPooling2dDescriptor(desc, mode, CUDNN_PROPAGATE_NAN, g.kernel_h, g.kernel_w,
                                            g.pad_h, g.pad_w, g.stride_h, g.stride_w),
                "pool2d: cudnnSetPooling2dDescriptor");
  }
};

/// The descriptors of one pooling: input, output and the window.
struct PoolDescriptors {
  TensorDescriptor x;
  TensorDescriptor y;
  PoolingDescriptor pool;
  explicit PoolDescriptors(const PoolGeometry& g)
      : x(g.batch, g.channels, g.in_h, g.in_w), y(g.batch, g.channels, g.out_h, g.out_w), pool(g) {}
};

}  // namespace

void pool2d_forward(const PoolGeometry& g, const float* x, float* y, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  PoolDescriptors d(g);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnPoolingForward(h, d.pool.desc, &one, d.x.desc, x, &zero, d.y.desc, y),
              "pool2d: cudnnPoolingForward");
}

void pool2d_backward(const PoolGeometry& g, const float* x, const float* y, const float* dy,
                     float* dx, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  PoolDescriptors d(g);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnPoolingBackward(h, d.pool.desc, &one, d.y.desc, y, d.y.desc, dy, d.x.desc, x,
                                   &zero, d.x.desc, dx),
              "pool2d_backward: cudnnPoolingBackward");
}

}  // namespace tagflow::detail::gpu_kernels
