#pragma once
// softmax and log_softmax along one axis of a float32, float16 or bfloat16
// array, giving its dtype (half ones computed in float, the sums in double,
// rounded once). Each checks its input, allocates its output on the input's
// device and pushes one kernel; it returns at once.
//
//   NDArray logits = array({1.f, 2.f, 3.f, 1.f, 1.f, 1.f}, {2, 3});
//   NDArray p = softmax(logits);          // each row sums to 1
//   NDArray lp = log_softmax(logits, 1);  // log(p), without forming p
//
// Numerically stable: the maximum along the axis is subtracted first, so
// logits of any magnitude (1e4, -1e4) give finite, exact-to-float results.
// A -inf element gives probability 0 (log-probability -inf) as long as the
// row has a finite maximum; a row whose elements are all -inf, or that
// holds +inf or NaN, gives NaN, as in NumPy and PyTorch.
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include "ops/ndarray.h"

namespace tagflow {

/// exp(x - max) / sum(exp(x - max)) along `axis` (negative from the end).
NDArray softmax(const NDArray& x, int axis = -1);

/// x - max - log(sum(exp(x - max))) along `axis` (negative from the end):
/// the log of softmax, accurate where softmax underflows to 0.
NDArray log_softmax(const NDArray& x, int axis = -1);

}  // namespace tagflow
