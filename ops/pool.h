#pragma once
// 2-D pooling, NCHW, float32, float16 or bfloat16 (half means summed in
// float and rounded once): the maximum or the mean of each window, as
// PyTorch's max_pool2d / avg_pool2d and MXNet's Pooling compute them (output
// extents floored). One engine operation: direct loops on CPU devices and
// simulated GPUs; on real GPUs, CUDA kernels of tagflow's own for max
// pooling and cuDNN for averages. Recorded for autograd, with a backward
// operation of its own.
//
//   NDArray x = random::normal(0, 1, {8, 6, 28, 28}, gpu(0));
//   NDArray m = max_pool2d(x, {2, 2}, {2, 2});                      // (8, 6, 14, 14)
//   NDArray a = pool2d(x, PoolType::kAverage,
//                      {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1},
//                       .count_include_pad = false});               // (8, 6, 28, 28)
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).
// Threads: concurrent reads, exclusive writes. Pool2DOptions is a value.
//
// Note [Gradient of max pooling]
// One rule picks each window's element, forward and backward, on every
// device: the window's first NaN if it holds one, else its first maximum,
// "first" in row-major order over the window (its rows top to bottom, each
// left to right), as MXNet's and PyTorch's CPU kernels choose. Elements that
// compare equal tie, -0.0 and +0.0 among them: the earlier one is picked, and
// the output is a copy of it (so a window of -0.0 then +0.0 gives -0.0).
// +inf and -inf are values like others; a window of -inf gives -inf and
// picks its first element. Padding is never a candidate.
// Forward, a window gives its element; backward, the window's whole
// gradient goes to that element, tied elements after it get nothing, and an
// element picked by several overlapping windows gets the sum of their
// gradients, added from +0.0 in the order of the windows (output rows top
// to bottom, each left to right). The rule is written once
// (window_maximum in ops/kernels/pool_functors.h) and run by the CPU
// kernels and by tagflow's own CUDA kernels, which thereby give the same
// bits. cuDNN's max pooling is not used: its documentation says neither
// which tied element its backward picks nor where the gradient of a window
// holding a NaN goes.

#include <array>

#include "ops/ndarray.h"

namespace tagflow {

enum class PoolType { kMax, kAverage };

/// A pooling window and how it steps; pairs are (height, width).
struct Pool2DOptions {
  std::array<int, 2> kernel{2, 2};
  std::array<int, 2> stride{2, 2};
  /// Added on both sides of each spatial axis; at most half the window.
  /// Max pooling ignores it; averages count it as zeros when
  /// `count_include_pad`.
  std::array<int, 2> padding{0, 0};
  /// Averages divide by the whole window (true) or by the input elements in
  /// it (false).
  bool count_include_pad = true;
};

/// The pooled windows of `x` (N, C, H, W): (N, C, OH, OW) with
/// OH = floor((H + 2 padding - kernel) / stride) + 1, and OW alike.
NDArray pool2d(const NDArray& x, PoolType type, const Pool2DOptions& options);

/// `pool2d(x, PoolType::kMax, {kernel, stride, padding})`.
NDArray max_pool2d(const NDArray& x, std::array<int, 2> kernel = {2, 2},
                   std::array<int, 2> stride = {2, 2}, std::array<int, 2> padding = {0, 0});

/// `pool2d(x, PoolType::kAverage, {kernel, stride, padding, count_include_pad})`.
NDArray avg_pool2d(const NDArray& x, std::array<int, 2> kernel = {2, 2},
                   std::array<int, 2> stride = {2, 2}, std::array<int, 2> padding = {0, 0},
                   bool count_include_pad = true);

}  // namespace tagflow
