#pragma once
// The 2-D convolution kernels (NCHW, cross-correlation as in every
// deep-learning framework): forward, and the two backward passes that the
// gradient pushes as engine operations of their own. The CPU ones
// (conv_cpu.cc, also run by simulated GPUs) take float32 (16-bit arrays are
// staged through float32: float_staging.h) and call oneDNN's kernels
// (conv_onednn.cc) or lower each image to a matrix (im2col) and call the
// BLAS; the CUDA ones (conv.cu) call cuDNN with tensors of the arrays' own
// floating dtype and float32 accumulation. Internal to ops/.

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "engine/config.h"
#include "engine/context.h"
#include "ops/dtype.h"

namespace tagflow {
class Stream;
}  // namespace tagflow

namespace tagflow::detail {

struct MemoryBlock;  // storage/allocator.h, kept out of the CUDA sources

/// Every extent of one convolution. Weights are (out_channels,
/// in_channels / groups, kernel_h, kernel_w).
struct ConvGeometry {
  std::int64_t batch = 0, in_channels = 0, in_h = 0, in_w = 0;
  std::int64_t out_channels = 0, out_h = 0, out_w = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  int dilation_h = 1, dilation_w = 1;
  int groups = 1;

  std::int64_t group_in_channels() const { return in_channels / groups; }
  std::int64_t group_out_channels() const { return out_channels / groups; }
  /// Rows of one group's lowered image: a group's input channels times the taps.
  std::int64_t col_rows() const { return group_in_channels() * kernel_h * kernel_w; }
  /// Columns of a lowered image: the output positions.
  std::int64_t col_cols() const { return out_h * out_w; }
  std::int64_t in_image() const { return in_channels * in_h * in_w; }
  std::int64_t out_image() const { return out_channels * out_h * out_w; }
  std::int64_t weight_size() const { return out_channels * col_rows(); }
  /// Every extent that defines the convolution (the output's follow from
  /// them), as the key of the caches that keep something per geometry.
  std::array<std::int64_t, 14> extents() const {
    return {batch,    in_channels, in_h,  in_w,  out_channels, kernel_h,   kernel_w,
            stride_h, stride_w,    pad_h, pad_w, dilation_h,   dilation_w, groups};
  }
};

/// Device scratch memory (cuDNN's workspace) for the kernels of one
/// operation on a real GPU: blocks from the device's pooled allocator, handed
/// back once the stream has passed the work enqueued while they were held.
class GpuScratch {
 public:
  explicit GpuScratch(Stream& stream);
  ~GpuScratch();
  GpuScratch(const GpuScratch&) = delete;
  GpuScratch& operator=(const GpuScratch&) = delete;

  /// At least `bytes` bytes of device memory (null for 0), valid for the
  /// work enqueued on the stream before this object is destroyed.
  void* get(std::uint64_t bytes);

 private:
  Stream& stream_;
  std::vector<MemoryBlock> blocks_;
};

namespace cpu_kernels {
/// How the CPU kernels below convolve: the process-wide engine's
/// TAGFLOW_CPU_CONV, unless overridden.
CpuConv cpu_conv();
/// Overrides TAGFLOW_CPU_CONV for the whole process from the next kernel on
/// (nothing: back to the variable), so that tests run both paths.
void override_cpu_conv(std::optional<CpuConv> kind);

/// y = conv(x, w) (+ bias per output channel when `bias` is not null). The
/// lowered images are memory of `ctx`, the device the kernel runs for: a
/// request beyond what it may hold throws OutOfMemoryError.
void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, Context ctx);
/// dx = the gradient of the input, from the weights and dy.
void conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          Context ctx);
/// dw = the gradient of the weights, from the input and dy (summed over the
/// batch), and when `db` is not null the bias's too (dy summed over the
/// batch and the positions, per output channel).
void conv2d_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, Context ctx);
}  // namespace cpu_kernels

namespace gpu_kernels {
/// As the CPU kernels, on arrays of floating-point `dtype`; `device` is the
/// GPU whose compute stream `stream` is.
void conv2d_forward(const ConvGeometry& g, DType dtype, const void* x, const void* w,
                    const void* bias, void* y, GpuScratch& scratch, int device, void* stream);
void conv2d_backward_data(const ConvGeometry& g, DType dtype, const void* w, const void* dy,
                          void* dx, GpuScratch& scratch, int device, void* stream);
void conv2d_backward_weight(const ConvGeometry& g, DType dtype, const void* x, const void* dy,
                            void* dw, GpuScratch& scratch, int device, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
