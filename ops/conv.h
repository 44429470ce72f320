#pragma once
// 2-D convolution, NCHW, float32, float16 or bfloat16 (half ones summed in
// float32, rounded once): cross-correlation as PyTorch's conv2d and
// MXNet's Convolution compute it, with stride, zero padding, dilation and
// groups (depthwise when groups equals the input channels). One engine
// operation: im2col and the BLAS on CPU devices and simulated GPUs, cuDNN
// on real GPUs. Recorded for autograd: gradients flow to the input, the
// weights and the bias, each computed by engine operations of its own.
//
//   NDArray x = random::normal(0, 1, {8, 3, 32, 32}, gpu(0));   // (N, C, H, W)
//   NDArray w = random::normal(0, 0.1, {16, 3, 5, 5}, gpu(0));  // (O, C/groups, kh, kw)
//   NDArray b = zeros({16}, DType::kFloat32, gpu(0));
//   NDArray y = conv2d(x, w, b, {.padding = {2, 2}});           // (8, 16, 32, 32)
//   NDArray z = conv2d(y, w2, NDArray(), {.stride = {2, 2}, .groups = 16});  // no bias
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).
// Threads: concurrent reads, exclusive writes. Conv2DOptions is a value.

#include <array>

#include "ops/ndarray.h"

namespace tagflow {

/// How a convolution steps over its input; pairs are (height, width).
struct Conv2DOptions {
  std::array<int, 2> stride{1, 1};
  /// Zeros added on both sides of each spatial axis.
  std::array<int, 2> padding{0, 0};
  /// Spacing between the kernel's taps (1: adjacent).
  std::array<int, 2> dilation{1, 1};
  /// Input and output channels split into this many independent groups.
  int groups = 1;
};

/// The convolution of `x` (N, C, H, W) with `weight` (O, C / groups, kh, kw),
/// plus `bias` (O) per output channel when `bias` is defined (pass NDArray()
/// for none). The output is (N, O, OH, OW) with
/// OH = floor((H + 2 padding - dilation (kh - 1) - 1) / stride) + 1, and OW alike.
/// All three arrays of one floating dtype on one device; C and O divisible
/// by groups.
NDArray conv2d(const NDArray& x, const NDArray& weight, const NDArray& bias,
               const Conv2DOptions& options = {});

}  // namespace tagflow
