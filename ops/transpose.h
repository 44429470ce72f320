#pragma once
// transpose: the axes of an array permuted (a copy, like MXNet's transpose).
//
//   NDArray t = transpose(x);              // (2,3,4) -> (4,3,2): axes reversed
//   NDArray u = transpose(x, {0, 2, 1});   // (2,3,4) -> (2,4,3)
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include <initializer_list>
#include <span>

#include "ops/ndarray.h"

namespace tagflow {

/// Axes reversed.
NDArray transpose(const NDArray& x);
/// Output axis i is input axis `axes[i]`; `axes` is a permutation of
/// 0..ndim-1 (negative entries count from the end).
NDArray transpose(const NDArray& x, std::span<const int> axes);
NDArray transpose(const NDArray& x, std::initializer_list<int> axes);

}  // namespace tagflow
