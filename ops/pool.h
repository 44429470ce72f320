#pragma once
// 2-D pooling, NCHW, float32: the maximum or the mean of each window, as
// PyTorch's max_pool2d / avg_pool2d and MXNet's Pooling compute them (output
// extents floored). One engine operation: direct loops on CPU devices and
// simulated GPUs, cuDNN on real GPUs. Recorded for autograd, with a backward
// operation of its own.
//
//   NDArray x = random::normal(0, 1, {8, 6, 28, 28}, gpu(0));
//   NDArray m = max_pool2d(x, {2, 2}, {2, 2});                      // (8, 6, 14, 14)
//   NDArray a = pool2d(x, PoolType::kAverage,
//                      {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1},
//                       .count_include_pad = false});               // (8, 6, 28, 28)
//
// Note [Gradient of max pooling]
// Each window's gradient goes whole to the window's first maximum: the first
// in row-major order over the window (its rows top to bottom, each left to
// right), as MXNet's and PyTorch's CPU kernels choose. Tied elements after
// it get nothing, and an element that is the maximum of several overlapping
// windows receives the sum of their gradients. A NaN counts as the maximum
// (and is propagated forward). On real GPUs cuDNN's deterministic max mode
// decides ties; NVIDIA does not document its choice.

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
