#include "ops/elementwise.h"

#include "ops/autograd.h"
#include "ops/detail/elementwise_grad.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/elementwise_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"

namespace tagflow {

namespace {

using detail::BinaryOp;
using detail::run_kernel;
using detail::ScalarOperand;
using detail::UnaryOp;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

NDArray unary(const char* name, UnaryOp op, const NDArray& x) {
  detail::check_defined(name, x, 1);
  if (detail::float_only(op)) detail::check_floating(name, x, 1);
  NDArray y(x.shape(), x.dtype(), x.context());
  const DType dtype = x.dtype();
  const void* in = x.raw_data();
  void* out = y.raw_data();
  const std::int64_t n = x.size();
  detail::push_operation(name, x.context(), {x.var()}, {y.var()}, [=](const RunContext& rc) {
    run_kernel(
        rc, detail::elementwise_work(n, dtype, 2),
        [=] { cpu_kernels::unary(op, dtype, in, out, n); },
        [=](void* stream) { gpu_kernels::unary(op, dtype, in, out, n, stream); });
  });
  detail::record_unary(name, op, x, y);
  return y;
}

/// Pushes `out = a op b`; `out` has the broadcast shape and may be `a` (in place).
void push_binary(const char* name, BinaryOp op, const NDArray& a, const NDArray& b,
                 const NDArray& out) {
  const DType dtype = a.dtype();
  const void* pa = a.raw_data();
  const void* pb = b.raw_data();
  void* po = out.raw_data();
  VarList reads = {a.var(), b.var()};
  if (a.shape() == b.shape()) {
    const std::int64_t n = out.size();
    detail::push_operation(
        name, out.context(), std::move(reads), {out.var()}, [=](const RunContext& rc) {
          run_kernel(
              rc, detail::elementwise_work(n, dtype, 3),
              [=] { cpu_kernels::binary(op, dtype, pa, pb, po, n); },
              [=](void* stream) { gpu_kernels::binary(op, dtype, pa, pb, po, n, stream); });
        });
    return;
  }
  const detail::BroadcastPlan plan = detail::make_broadcast_plan(a.shape(), b.shape(), out.shape());
  if (out.size() == 0) return;
  const std::int64_t plan_size = out.size();
  detail::push_operation(name, out.context(), std::move(reads), {out.var()},
                         [=](const RunContext& rc) {
                           run_kernel(
                               rc, detail::elementwise_work(plan_size, dtype, 3),
                               [=] { cpu_kernels::binary_broadcast(op, dtype, pa, pb, po, plan); },
                               [=](void* stream) {
                                 gpu_kernels::binary_broadcast(op, dtype, pa, pb, po, plan, stream);
                               });
                         });
}

void check_binary(const char* name, BinaryOp op, const NDArray& a, const NDArray& b) {
  // A few compares in the common case; the full checks say what differs.
  if (!a.defined() || !b.defined() || a.context() != b.context() || a.dtype() != b.dtype())
      [[unlikely]] {
    detail::check_same_context(name, {&a, &b});
    detail::check_same_dtype(name, {&a, &b});
  }
  if (op == BinaryOp::kPow) detail::check_floating(name, a, 1);
}

/// The shape of `a op b`: `a`'s when both have it, without the general rule.
Shape result_shape(const char* name, const NDArray& a, const NDArray& b) {
  return a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape(), name);
}

NDArray binary(const char* name, BinaryOp op, const NDArray& a, const NDArray& b) {
  check_binary(name, op, a, b);
  NDArray out(result_shape(name, a, b), a.dtype(), a.context());
  push_binary(name, op, a, b, out);
  detail::record_binary(name, op, a, b, out);
  return out;
}

NDArray& binary_in_place(const char* name, BinaryOp op, NDArray& a, const NDArray& b) {
  check_binary(name, op, a, b);
  detail::refuse_in_place_while_recording(name, a, &b);
  const Shape shape = result_shape(name, a, b);
  TAGFLOW_CHECK(shape == a.shape(),
                "{}: an in-place result keeps the shape of the first argument ({}), but "
                "broadcasting with ({}) gives ({})",
                name, a.shape().str(), b.shape().str(), shape.str());
  push_binary(name, op, a, b, a);
  return a;
}

void push_scalar(const char* name, BinaryOp op, const NDArray& a, ScalarOperand s,
                 const NDArray& out) {
  const DType dtype = a.dtype();
  const void* pa = a.raw_data();
  void* po = out.raw_data();
  const std::int64_t n = a.size();
  detail::push_operation(name, a.context(), {a.var()}, {out.var()}, [=](const RunContext& rc) {
    run_kernel(
        rc, detail::elementwise_work(n, dtype, 2),
        [=] { cpu_kernels::binary_scalar(op, dtype, pa, s, po, n); },
        [=](void* stream) { gpu_kernels::binary_scalar(op, dtype, pa, s, po, n, stream); });
  });
}

NDArray scalar(const char* name, BinaryOp op, const NDArray& a, double value, bool on_left) {
  detail::check_defined(name, a, on_left ? 2 : 1);
  if (op == BinaryOp::kPow) detail::check_floating(name, a, on_left ? 2 : 1);
  detail::check_scalar_fits(name, value, a.dtype());
  NDArray out(a.shape(), a.dtype(), a.context());
  push_scalar(name, op, a, {value, on_left}, out);
  detail::record_scalar(name, op, a, value, on_left, out);
  return out;
}

NDArray& scalar_in_place(const char* name, BinaryOp op, NDArray& a, double value) {
  detail::check_defined(name, a, 1);
  detail::check_scalar_fits(name, value, a.dtype());
  detail::refuse_in_place_while_recording(name, a, nullptr);
  push_scalar(name, op, a, {value, false}, a);
  return a;
}

}  // namespace

NDArray exp(const NDArray& x) { return unary("exp", UnaryOp::kExp, x); }
NDArray log(const NDArray& x) { return unary("log", UnaryOp::kLog, x); }
NDArray sqrt(const NDArray& x) { return unary("sqrt", UnaryOp::kSqrt, x); }
NDArray square(const NDArray& x) { return unary("square", UnaryOp::kSquare, x); }
NDArray abs(const NDArray& x) { return unary("abs", UnaryOp::kAbs, x); }
NDArray negative(const NDArray& x) { return unary("negative", UnaryOp::kNegative, x); }
NDArray relu(const NDArray& x) { return unary("relu", UnaryOp::kRelu, x); }
NDArray sigmoid(const NDArray& x) { return unary("sigmoid", UnaryOp::kSigmoid, x); }
NDArray tanh(const NDArray& x) { return unary("tanh", UnaryOp::kTanh, x); }
NDArray operator-(const NDArray& x) { return negative(x); }

NDArray operator+(const NDArray& a, const NDArray& b) {
  return binary("broadcast_add", BinaryOp::kAdd, a, b);
}
NDArray operator-(const NDArray& a, const NDArray& b) {
  return binary("broadcast_sub", BinaryOp::kSub, a, b);
}
NDArray operator*(const NDArray& a, const NDArray& b) {
  return binary("broadcast_mul", BinaryOp::kMul, a, b);
}
NDArray operator/(const NDArray& a, const NDArray& b) {
  return binary("broadcast_div", BinaryOp::kDiv, a, b);
}
NDArray power(const NDArray& a, const NDArray& b) {
  return binary("broadcast_power", BinaryOp::kPow, a, b);
}
NDArray maximum(const NDArray& a, const NDArray& b) {
  return binary("broadcast_maximum", BinaryOp::kMaximum, a, b);
}
NDArray minimum(const NDArray& a, const NDArray& b) {
  return binary("broadcast_minimum", BinaryOp::kMinimum, a, b);
}
NDArray equal(const NDArray& a, const NDArray& b) {
  return binary("broadcast_equal", BinaryOp::kEqual, a, b);
}
NDArray not_equal(const NDArray& a, const NDArray& b) {
  return binary("broadcast_not_equal", BinaryOp::kNotEqual, a, b);
}
NDArray lesser(const NDArray& a, const NDArray& b) {
  return binary("broadcast_lesser", BinaryOp::kLess, a, b);
}
NDArray lesser_equal(const NDArray& a, const NDArray& b) {
  return binary("broadcast_lesser_equal", BinaryOp::kLessEqual, a, b);
}
NDArray greater(const NDArray& a, const NDArray& b) {
  return binary("broadcast_greater", BinaryOp::kGreater, a, b);
}
NDArray greater_equal(const NDArray& a, const NDArray& b) {
  return binary("broadcast_greater_equal", BinaryOp::kGreaterEqual, a, b);
}

NDArray operator+(const NDArray& a, double s) {
  return scalar("plus_scalar", BinaryOp::kAdd, a, s, false);
}
NDArray operator-(const NDArray& a, double s) {
  return scalar("minus_scalar", BinaryOp::kSub, a, s, false);
}
NDArray operator*(const NDArray& a, double s) {
  return scalar("mul_scalar", BinaryOp::kMul, a, s, false);
}
NDArray operator/(const NDArray& a, double s) {
  return scalar("div_scalar", BinaryOp::kDiv, a, s, false);
}
NDArray operator+(double s, const NDArray& a) {
  return scalar("plus_scalar", BinaryOp::kAdd, a, s, true);
}
NDArray operator-(double s, const NDArray& a) {
  return scalar("rminus_scalar", BinaryOp::kSub, a, s, true);
}
NDArray operator*(double s, const NDArray& a) {
  return scalar("mul_scalar", BinaryOp::kMul, a, s, true);
}
NDArray operator/(double s, const NDArray& a) {
  return scalar("rdiv_scalar", BinaryOp::kDiv, a, s, true);
}
NDArray power(const NDArray& a, double s) {
  return scalar("power_scalar", BinaryOp::kPow, a, s, false);
}
NDArray power(double s, const NDArray& a) {
  return scalar("rpower_scalar", BinaryOp::kPow, a, s, true);
}
NDArray maximum(const NDArray& a, double s) {
  return scalar("maximum_scalar", BinaryOp::kMaximum, a, s, false);
}
NDArray minimum(const NDArray& a, double s) {
  return scalar("minimum_scalar", BinaryOp::kMinimum, a, s, false);
}
NDArray equal(const NDArray& a, double s) {
  return scalar("equal_scalar", BinaryOp::kEqual, a, s, false);
}
NDArray not_equal(const NDArray& a, double s) {
  return scalar("not_equal_scalar", BinaryOp::kNotEqual, a, s, false);
}
NDArray lesser(const NDArray& a, double s) {
  return scalar("lesser_scalar", BinaryOp::kLess, a, s, false);
}
NDArray lesser_equal(const NDArray& a, double s) {
  return scalar("lesser_equal_scalar", BinaryOp::kLessEqual, a, s, false);
}
NDArray greater(const NDArray& a, double s) {
  return scalar("greater_scalar", BinaryOp::kGreater, a, s, false);
}
NDArray greater_equal(const NDArray& a, double s) {
  return scalar("greater_equal_scalar", BinaryOp::kGreaterEqual, a, s, false);
}

NDArray& operator+=(NDArray& a, const NDArray& b) {
  return binary_in_place("broadcast_add", BinaryOp::kAdd, a, b);
}
NDArray& operator-=(NDArray& a, const NDArray& b) {
  return binary_in_place("broadcast_sub", BinaryOp::kSub, a, b);
}
NDArray& operator*=(NDArray& a, const NDArray& b) {
  return binary_in_place("broadcast_mul", BinaryOp::kMul, a, b);
}
NDArray& operator/=(NDArray& a, const NDArray& b) {
  return binary_in_place("broadcast_div", BinaryOp::kDiv, a, b);
}
NDArray& operator+=(NDArray& a, double s) {
  return scalar_in_place("plus_scalar", BinaryOp::kAdd, a, s);
}
NDArray& operator-=(NDArray& a, double s) {
  return scalar_in_place("minus_scalar", BinaryOp::kSub, a, s);
}
NDArray& operator*=(NDArray& a, double s) {
  return scalar_in_place("mul_scalar", BinaryOp::kMul, a, s);
}
NDArray& operator/=(NDArray& a, double s) {
  return scalar_in_place("div_scalar", BinaryOp::kDiv, a, s);
}

NDArray clip(const NDArray& x, double low, double high) {
  constexpr const char* kName = "clip";
  detail::check_defined(kName, x, 1);
  TAGFLOW_CHECK(low <= high, "clip: expected low <= high, got low {} and high {}", low, high);
  detail::check_scalar_fits(kName, low, x.dtype());
  detail::check_scalar_fits(kName, high, x.dtype());
  NDArray y(x.shape(), x.dtype(), x.context());
  const DType dtype = x.dtype();
  const void* in = x.raw_data();
  void* out = y.raw_data();
  const std::int64_t n = x.size();
  detail::push_operation(kName, x.context(), {x.var()}, {y.var()}, [=](const RunContext& rc) {
    run_kernel(
        rc, detail::elementwise_work(n, dtype, 2),
        [=] { cpu_kernels::clip(dtype, in, low, high, out, n); },
        [=](void* stream) { gpu_kernels::clip(dtype, in, low, high, out, n, stream); });
  });
  detail::record_clip(x, low, high, y);
  return y;
}

NDArray where(const NDArray& condition, const NDArray& x, const NDArray& y) {
  constexpr const char* kName = "where";
  detail::check_same_context(kName, {&condition, &x, &y});
  detail::check_same_dtype(kName, {&x, &y});
  TAGFLOW_CHECK(condition.shape() == x.shape() && x.shape() == y.shape(),
                "where: expected the condition, x and y of one shape, got ({}), ({}) and ({})",
                condition.shape().str(), x.shape().str(), y.shape().str());
  NDArray out(x.shape(), x.dtype(), x.context());
  const DType cond_dtype = condition.dtype();
  const DType dtype = x.dtype();
  const void* pc = condition.raw_data();
  const void* px = x.raw_data();
  const void* py = y.raw_data();
  void* po = out.raw_data();
  const std::int64_t n = x.size();
  detail::push_operation(
      kName, x.context(), {condition.var(), x.var(), y.var()}, {out.var()},
      [=](const RunContext& rc) {
        run_kernel(
            rc,
            detail::kernel_work(static_cast<double>(n),
                                detail::bytes_of(n, cond_dtype) + 3 * detail::bytes_of(n, dtype),
                                dtype),
            [=] { cpu_kernels::where(cond_dtype, pc, dtype, px, py, po, n); },
            [=](void* stream) {
              gpu_kernels::where(cond_dtype, pc, dtype, px, py, po, n, stream);
            });
      });
  detail::record_where(condition, x, y, out);
  return out;
}

namespace detail {

NDArray relu_backward(const NDArray& x, const NDArray& dy) {
  // Not recorded: a gradient computed while the backward pass runs.
  constexpr const char* kName = "relu_backward";
  check_binary(kName, BinaryOp::kReluGrad, x, dy);
  TAGFLOW_CHECK(x.shape() == dy.shape(),
                "{}: expected the gradient in the input's shape ({}), got ({})", kName,
                x.shape().str(), dy.shape().str());
  NDArray out(x.shape(), x.dtype(), x.context());
  push_binary(kName, BinaryOp::kReluGrad, x, dy, out);
  return out;
}

}  // namespace detail

}  // namespace tagflow

namespace tagflow {

using detail::run_kernel;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

NDArray NDArray::astype(DType dtype) const {
  check_defined("astype");
  NDArray out(shape_, dtype, context());
  const DType from = dtype_;
  const void* in = raw_data();
  void* data = out.raw_data();
  const std::int64_t n = size();
  if (n == 0) return out;
  detail::push_operation("cast", context(), {var()}, {out.var()}, [=](const RunContext& rc) {
    run_kernel(
        rc,
        detail::kernel_work(static_cast<double>(n),
                            detail::bytes_of(n, from) + detail::bytes_of(n, dtype), dtype),
        [=] { cpu_kernels::cast(from, dtype, in, data, n); },
        [=](void* stream) { gpu_kernels::cast(from, dtype, in, data, n, stream); });
  });
  // Between floating-point dtypes the gradient flows back, converted to the
  // input's dtype (a float16 copy of float32 weights passes its gradient to
  // them in float32); a conversion from or to an integer type ends it (as a
  // comparison does).
  if (is_floating(from) && is_floating(dtype)) {
    detail::record("cast", out, {this}, [from] {
      return [from](const NDArray& out_grad) {
        return std::vector<NDArray>{out_grad.dtype() == from ? out_grad : out_grad.astype(from)};
      };
    });
  }
  return out;
}

}  // namespace tagflow
