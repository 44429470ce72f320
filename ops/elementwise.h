#pragma once
// Elementwise operators: unary functions, binary arithmetic and comparisons
// with NumPy broadcasting, scalar and in-place forms, clip and where. Each
// checks its inputs, allocates its output on the inputs' device and pushes
// one kernel; it returns at once.
//
//   NDArray y = exp(x + 2.f) * x;      // broadcasting: (3,1) + (4) gives (3,4)
//   y += 1.f;                          // in place: writes y's memory
//   NDArray m = maximum(y, zeros_like(y));
//
// Comparisons return 1 or 0 in the inputs' dtype, as MXNet does. Integer
// arithmetic wraps around; integer division by zero gives 0.
//
// Threads: safe to call concurrently. Several threads may call operators on
// the same arrays at once: an operator only reads the handles it is given,
// and the engine runs the work in push order. The in-place forms too:
// `y += 1.f` writes y's memory, not the NDArray object y.

#include "ops/ndarray.h"

namespace tagflow {

// --- unary ------------------------------------------------------------------------
// exp, log, sqrt, sigmoid and tanh need float32; the others take any dtype.
NDArray exp(const NDArray& x);
NDArray log(const NDArray& x);
NDArray sqrt(const NDArray& x);
NDArray square(const NDArray& x);
NDArray abs(const NDArray& x);
NDArray negative(const NDArray& x);
NDArray relu(const NDArray& x);
NDArray sigmoid(const NDArray& x);
NDArray tanh(const NDArray& x);
NDArray operator-(const NDArray& x);

// --- binary, with broadcasting ------------------------------------------------------
NDArray operator+(const NDArray& a, const NDArray& b);
NDArray operator-(const NDArray& a, const NDArray& b);
NDArray operator*(const NDArray& a, const NDArray& b);
NDArray operator/(const NDArray& a, const NDArray& b);
NDArray power(const NDArray& a, const NDArray& b);
NDArray maximum(const NDArray& a, const NDArray& b);
NDArray minimum(const NDArray& a, const NDArray& b);
NDArray equal(const NDArray& a, const NDArray& b);
NDArray not_equal(const NDArray& a, const NDArray& b);
NDArray lesser(const NDArray& a, const NDArray& b);
NDArray lesser_equal(const NDArray& a, const NDArray& b);
NDArray greater(const NDArray& a, const NDArray& b);
NDArray greater_equal(const NDArray& a, const NDArray& b);

// --- with a scalar (converted to the array's dtype; an integer array needs an
// integer scalar) ---------------------------------------------------------------------
NDArray operator+(const NDArray& a, double s);
NDArray operator-(const NDArray& a, double s);
NDArray operator*(const NDArray& a, double s);
NDArray operator/(const NDArray& a, double s);
NDArray operator+(double s, const NDArray& a);
NDArray operator-(double s, const NDArray& a);
NDArray operator*(double s, const NDArray& a);
NDArray operator/(double s, const NDArray& a);
NDArray power(const NDArray& a, double s);
NDArray power(double s, const NDArray& a);
NDArray maximum(const NDArray& a, double s);
NDArray minimum(const NDArray& a, double s);
NDArray equal(const NDArray& a, double s);
NDArray not_equal(const NDArray& a, double s);
NDArray lesser(const NDArray& a, double s);
NDArray lesser_equal(const NDArray& a, double s);
NDArray greater(const NDArray& a, double s);
NDArray greater_equal(const NDArray& a, double s);

// --- in place: `a` is written (its views and handles see it); `b` must
// broadcast to a's shape ------------------------------------------------------------
NDArray& operator+=(NDArray& a, const NDArray& b);
NDArray& operator-=(NDArray& a, const NDArray& b);
NDArray& operator*=(NDArray& a, const NDArray& b);
NDArray& operator/=(NDArray& a, const NDArray& b);
NDArray& operator+=(NDArray& a, double s);
NDArray& operator-=(NDArray& a, double s);
NDArray& operator*=(NDArray& a, double s);
NDArray& operator/=(NDArray& a, double s);

// --- others ---------------------------------------------------------------------------
/// Values limited to [low, high].
NDArray clip(const NDArray& x, double low, double high);
/// `x` where `condition` is non-zero, else `y`. All three of one shape;
/// x and y of one dtype; the condition of any dtype.
NDArray where(const NDArray& condition, const NDArray& x, const NDArray& y);

}  // namespace tagflow
