#pragma once
// The 2-D pooling kernels (NCHW): forward and the backward pass the
// gradient pushes as an engine operation of its own. The CPU kernels take
// float32 (16-bit arrays are staged through float32: float_staging.h); the
// CUDA kernels every floating dtype, computing in float. The CPU ones
// (pool_cpu.cc, also run by simulated GPUs) are direct loops; the CUDA ones
// (pool.cu) are kernels of their own for max pooling and cuDNN for
// averages. Both take the window rules from pool_functors.h. Internal to
// ops/.
//
// Windows never lie wholly in the padding (the operator checks that the
// padding is at most half the window), so every window has an input
// element, a maximum and a non-zero count.

#include <cstdint>

#include "ops/dtype.h"

namespace tagflow::detail {

/// What a window gives: its maximum, or its mean over the whole window
/// (padding counted as zeros) or over its input elements only.
enum class PoolMode : std::uint8_t { kMax, kAverageIncludePad, kAverageExcludePad };

struct PoolGeometry {
  std::int64_t batch = 0, channels = 0, in_h = 0, in_w = 0;
  std::int64_t out_h = 0, out_w = 0;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_h = 0, pad_w = 0;
  PoolMode mode = PoolMode::kMax;

  std::int64_t planes() const { return batch * channels; }
};

namespace cpu_kernels {
/// y = the pooled windows of x. A window holding a NaN gives its first NaN
/// (max).
void pool2d_forward(const PoolGeometry& g, const float* x, float* y);
/// dx = the gradient of x: max sends each window's dy to the window's first
/// maximum in row-major order (rows of the window top to bottom, each left
/// to right), or to its first NaN; average spreads it evenly over the
/// window. `y` is the forward output (read by cuDNN's average pooling on
/// GPUs; every max pooling kernel finds the maxima in x).
void pool2d_backward(const PoolGeometry& g, const float* x, const float* y, const float* dy,
                     float* dx);
}  // namespace cpu_kernels

namespace gpu_kernels {
/// As the CPU kernels, on arrays of floating-point `dtype`; `device` is the
/// GPU whose compute stream `stream` is.
void pool2d_forward(const PoolGeometry& g, DType dtype, const void* x, void* y, int device,
                    void* stream);
void pool2d_backward(const PoolGeometry& g, DType dtype, const void* x, const void* y,
                     const void* dy, void* dx, int device, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
