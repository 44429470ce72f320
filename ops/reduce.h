#pragma once
// Reductions: sum, mean, max, min and the L2 norm over some axes or all of
// them, and argmax along one axis. Each checks its input, allocates its
// output on the input's device and pushes one kernel; it returns at once.
//
//   NDArray x = arange(0, 6).reshape({2, 3});   // [[0. 1. 2.] [3. 4. 5.]]
//   sum(x)              // [15.]              shape (1): every axis, as MXNet
//   sum(x, 0)           // [3. 5. 7.]         shape (3)
//   sum(x, {-1}, true)  // [[ 3.] [12.]]      shape (2x1): keepdims
//   max(x, {0, 1})      // [5.]
//   argmax(x, 1)        // [2 2]              int64
//
// Axes: negative ones count from the end; an axis given twice is an error.
// An empty list reduces nothing (as NumPy's `axis=()`): the result is a copy
// (the norm's, absolute values). Reducing every axis without keepdims gives
// shape (1), not a 0-d array, as MXNet does.
//
// Dtypes: sum, max and min take every dtype and give the input's dtype. An
// integer sum accumulates in 64 bits and wraps into the dtype, exactly as a
// chain of elementwise integer additions wraps. mean and norm take the
// floating-point dtypes and give float32 for float32, the input's dtype for
// float16 and bfloat16. Float sums, means and norms accumulate in double,
// half ones too (rounded once at the end: Note [Half precision arithmetic]
// in ops/half.h).
//
// Empty reductions: over an axis of extent 0, sum and norm give 0; mean,
// max, min and argmax throw tagflow::Error (there is no such element).
// max and min propagate NaN, as NumPy's max and min do.
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include <initializer_list>
#include <span>

#include "ops/ndarray.h"

namespace tagflow {

/// Sum over `axes` / `axis` / every axis: `sum(x, {0, 2})`, `sum(x, 1)`,
/// `sum(x)`, `sum(x, /*keepdims=*/true)`. The input's dtype.
NDArray sum(const NDArray& x, std::initializer_list<int> axes, bool keepdims = false);
NDArray sum(const NDArray& x, std::span<const int> axes, bool keepdims = false);
NDArray sum(const NDArray& x, int axis, bool keepdims = false);
NDArray sum(const NDArray& x, bool keepdims = false);

/// Arithmetic mean, of floating-point arrays: `mean(images, {2, 3})` gives the mean of
/// each image and channel.
NDArray mean(const NDArray& x, std::initializer_list<int> axes, bool keepdims = false);
NDArray mean(const NDArray& x, std::span<const int> axes, bool keepdims = false);
NDArray mean(const NDArray& x, int axis, bool keepdims = false);
NDArray mean(const NDArray& x, bool keepdims = false);

/// Largest element, NaN if any element is NaN: `max(scores, -1)`.
NDArray max(const NDArray& x, std::initializer_list<int> axes, bool keepdims = false);
NDArray max(const NDArray& x, std::span<const int> axes, bool keepdims = false);
NDArray max(const NDArray& x, int axis, bool keepdims = false);
NDArray max(const NDArray& x, bool keepdims = false);

/// Smallest element, NaN if any element is NaN: `min(x, {0})`.
NDArray min(const NDArray& x, std::initializer_list<int> axes, bool keepdims = false);
NDArray min(const NDArray& x, std::span<const int> axes, bool keepdims = false);
NDArray min(const NDArray& x, int axis, bool keepdims = false);
NDArray min(const NDArray& x, bool keepdims = false);

/// L2 norm, sqrt(sum(x * x)), of floating-point arrays: `norm(gradient)` (shape (1)),
/// `norm(weights, {1})` (one norm per row).
NDArray norm(const NDArray& x, std::initializer_list<int> axes, bool keepdims = false);
NDArray norm(const NDArray& x, std::span<const int> axes, bool keepdims = false);
NDArray norm(const NDArray& x, int axis, bool keepdims = false);
NDArray norm(const NDArray& x, bool keepdims = false);

/// int64 index of the first maximum along `axis` (a NaN counts as the
/// maximum, as in NumPy); any dtype: `argmax(logits, 1)` gives the
/// predicted class of each row of a (batch, classes) array.
NDArray argmax(const NDArray& x, int axis, bool keepdims = false);

}  // namespace tagflow
