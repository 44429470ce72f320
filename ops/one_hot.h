#pragma once
// one_hot: indices to rows with one "on" value (like mx.nd.one_hot).
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include <cstdint>

#include "ops/ndarray.h"

namespace tagflow {

/// For indices of shape S, an array of shape S + (depth) in `dtype`:
/// element [s..., j] is `on_value` where indices[s...] == j, else
/// `off_value`. The indices may be of any dtype; a float32 index is
/// truncated toward zero. An index outside [0, depth) (negative, too large,
/// NaN) gives a row of off values, as in MXNet: it is not an error, since
/// the indices are only known on the device. `on_value` and `off_value`
/// must be representable in `dtype`; depth >= 0.
///
///   NDArray labels = array({0.f, 2.f, 5.f}, gpu(0));
///   NDArray y = one_hot(labels, 3);
///   // [[1. 0. 0.]
///   //  [0. 0. 1.]
///   //  [0. 0. 0.]]   5 is out of range
NDArray one_hot(const NDArray& indices, std::int64_t depth, double on_value = 1,
                double off_value = 0, DType dtype = DType::kFloat32);

}  // namespace tagflow
