#pragma once
// Joining arrays: concat along an existing axis, stack along a new one (like
// mx.nd.concat and mx.nd.stack). The inputs must live on one context and
// share one dtype; nothing is copied implicitly. One engine operation reads
// every input and writes the new output; the call returns at once. Both are
// recorded for autograd: each input's gradient is its part of the output's.
//
//   NDArray a = ones({2, 3}, DType::kFloat32, gpu(0));
//   NDArray b = zeros({2, 1}, DType::kFloat32, gpu(0));
//   NDArray c = concat({a, b}, 1);          // 2x4 on gpu(0)
//   NDArray s = stack({a, a, a});           // 3x2x3
//   NDArray t = stack({a, a}, -1);          // 2x3x2
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include <initializer_list>
#include <span>

#include "ops/ndarray.h"

namespace tagflow {

/// The arrays joined along `axis` (negative counts from the end). Every
/// input has the first one's number of dimensions and extents, except
/// along `axis`; the result's extent there is the sum of theirs. Inputs may
/// be views and may repeat.
///
///   std::vector<NDArray> parts = {x.slice(0, 2), x.slice(2, 5)};
///   NDArray y = concat(parts);            // y has x's values
NDArray concat(std::span<const NDArray> arrays, int axis = 0);
NDArray concat(std::initializer_list<NDArray> arrays, int axis = 0);

/// The arrays, all of one shape, stacked along a new axis at `axis` (in
/// [-(ndim + 1), ndim]; -1 is a new last axis): the result has shape
/// (... , arrays.size(), ...) and `stack(xs, a)[..., i, ...]` is xs[i].
///
///   NDArray batch = stack(samples);       // N samples of 3x32x32: Nx3x32x32
NDArray stack(std::span<const NDArray> arrays, int axis = 0);
NDArray stack(std::initializer_list<NDArray> arrays, int axis = 0);

}  // namespace tagflow
