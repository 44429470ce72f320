// The GPU pooling kernels: cuDNN (the legacy pooling API of cuDNN 9) on the
// operation's stream, with the per-stream handle of conv.cu. Max pooling
// uses cuDNN's deterministic max mode and propagates NaNs, as the CPU
// kernels do (Note [Gradient of max pooling] in pool.h). Every status is
// checked.

#include <cuda_runtime.h>
#include <cudnn.h>

#include "tagflow/ops/kernels/conv_kernels.h"
#include "tagflow/ops/kernels/cuda_check.h"
#include "tagflow/ops/kernels/pool_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

int as_int(std::int64_t value, const char* what) {
  if (value > 0x7fffffff) throw_dimension_too_large(what, value);
  return static_cast<int>(value);
}

/// Owns one cuDNN descriptor (a base class, so that a descriptor whose
/// setting-up throws is still destroyed).
template <typename Desc, cudnnStatus_t (*create)(Desc*), cudnnStatus_t (*destroy)(Desc)>
struct OwnedDescriptor {
  Desc desc = nullptr;
  OwnedDescriptor() { check_cudnn(create(&desc), "pool2d: creating a cuDNN descriptor"); }
  ~OwnedDescriptor() { destroy(desc); }
  OwnedDescriptor(const OwnedDescriptor&) = delete;
  OwnedDescriptor& operator=(const OwnedDescriptor&) = delete;
};

struct TensorDescriptor : OwnedDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                          cudnnDestroyTensorDescriptor> {
  TensorDescriptor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w) {
    check_cudnn(
        cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, as_int(n, "batch"),
                                   as_int(c, "channels"), as_int(h, "height"), as_int(w, "width")),
        "pool2d: cudnnSetTensor4dDescriptor");
  }
};

struct PoolingDescriptor : OwnedDescriptor<cudnnPoolingDescriptor_t, cudnnCreatePoolingDescriptor,
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

cudnnHandle_t handle(void* stream, int device) {
  return static_cast<cudnnHandle_t>(cudnn_handle_for(stream, device));
}

}  // namespace

void pool2d_forward(const PoolGeometry& g, const float* x, float* y, int device, void* stream) {
  cudnnHandle_t h = handle(stream, device);
  PoolDescriptors d(g);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnPoolingForward(h, d.pool.desc, &one, d.x.desc, x, &zero, d.y.desc, y),
              "pool2d: cudnnPoolingForward");
}

void pool2d_backward(const PoolGeometry& g, const float* x, const float* y, const float* dy,
                     float* dx, int device, void* stream) {
  cudnnHandle_t h = handle(stream, device);
  PoolDescriptors d(g);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnPoolingBackward(h, d.pool.desc, &one, d.y.desc, y, d.y.desc, dy, d.x.desc, x,
                                   &zero, d.x.desc, dx),
              "pool2d_backward: cudnnPoolingBackward");
}

}  // namespace tagflow::detail::gpu_kernels
