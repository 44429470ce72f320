#pragma once
// The gradients of the elementwise operators (ops/elementwise.h), recorded
// when autograd records (ops/autograd.h). Internal to ops/.

#include "ops/kernels/elementwise_functors.h"
#include "ops/ndarray.h"

namespace tagflow::detail {

/// Records `y = op(x)`.
void record_unary(const char* name, UnaryOp op, const NDArray& x, NDArray& y);
/// Records `out = a op b` (with broadcasting).
void record_binary(const char* name, BinaryOp op, const NDArray& a, const NDArray& b, NDArray& out);
/// Records `out = a op s` (or `s op a` when `on_left`).
void record_scalar(const char* name, BinaryOp op, const NDArray& a, double s, bool on_left,
                   NDArray& out);
void record_clip(const NDArray& x, double low, double high, NDArray& y);
void record_where(const NDArray& condition, const NDArray& x, const NDArray& y, NDArray& out);
/// ReLU's gradient: dy where x > 0, else 0, in one pass (elementwise.cc).
NDArray relu_backward(const NDArray& x, const NDArray& dy);
/// Throws when an in-place operator would modify an array that needs a gradient.
void refuse_in_place_while_recording(const char* name, const NDArray& a, const NDArray* b);

}  // namespace tagflow::detail
