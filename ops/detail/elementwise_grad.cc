#include "ops/detail/elementwise_grad.h"

#include <cmath>

#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/elementwise.h"

namespace tagflow::detail {

namespace {

/// 1 where x > 0, -1 where x < 0, 0 at 0.
NDArray sign(const NDArray& x) { return greater(x, 0) - lesser(x, 0); }

NDArray unary_grad(UnaryOp op, const NDArray& x, const NDArray& y, const NDArray& dy) {
  switch (op) {
    case UnaryOp::kExp:
      return dy * y;
    case UnaryOp::kLog:
      return dy / x;
    case UnaryOp::kSqrt:
      return dy * 0.5 / y;
    case UnaryOp::kSquare:
      return dy * x * 2;
    case UnaryOp::kAbs:
      return dy * sign(x);
    case UnaryOp::kNegative:
      return -dy;
    case UnaryOp::kRelu:
      return relu_backward(x, dy);
    case UnaryOp::kSigmoid:
      return dy * y * (1 - y);
    case UnaryOp::kTanh:
      return dy * (1 - y * y);
  }
  return NDArray();
}

bool differentiable(BinaryOp op) {
  return op == BinaryOp::kAdd || op == BinaryOp::kSub || op == BinaryOp::kMul ||
         op == BinaryOp::kDiv || op == BinaryOp::kPow || op == BinaryOp::kMaximum ||
         op == BinaryOp::kMinimum;
}

}  // namespace

void record_unary(const char* name, UnaryOp op, const NDArray& x, NDArray& y) {
  // The output is kept detached inside the closure: holding y's own node
  // there would make the node own itself.
  record(name, y, {&x}, [&] {
    return [op, x = x.detach(), y = y.detach()](const NDArray& dy) {
      return std::vector<NDArray>{unary_grad(op, x, y, dy)};
    };
  });
}

void record_binary(const char* name, BinaryOp op, const NDArray& a, const NDArray& b,
                   NDArray& out) {
  if (!differentiable(op)) return;  // comparisons: no gradient flows
  record(name, out, {&a, &b}, [&] {
    return [op, a = a.detach(), b = b.detach(), out = out.detach()](const NDArray& dy) {
      NDArray da;
      NDArray db;
      switch (op) {
        case BinaryOp::kAdd:
          da = dy;
          db = dy;
          break;
        case BinaryOp::kSub:
          da = dy;
          db = -dy;
          break;
        case BinaryOp::kMul:
          da = dy * b;
          db = dy * a;
          break;
        case BinaryOp::kDiv:
          da = dy / b;
          db = -dy * out / b;
          break;
        case BinaryOp::kPow:
          da = dy * b * power(a, b - 1);
          db = dy * out * log(a);
          break;
        case BinaryOp::kMaximum: {  // ties go to the first operand
          NDArray first = greater_equal(a, b);
          da = dy * first;
          db = dy * (1 - first);
          break;
        }
        case BinaryOp::kMinimum: {
          NDArray first = lesser_equal(a, b);
          da = dy * first;
          db = dy * (1 - first);
          break;
        }
        default:
          break;
      }
      return std::vector<NDArray>{sum_to(da, a.shape()), sum_to(db, b.shape())};
    };
  });
}

void record_scalar(const char* name, BinaryOp op, const NDArray& a, double s, bool on_left,
                   NDArray& out) {
  if (!differentiable(op)) return;
  record(name, out, {&a}, [&] {
    return [op, s, on_left, a = a.detach(), out = out.detach()](const NDArray& dy) {
      NDArray da;
      switch (op) {
        case BinaryOp::kAdd:
          da = dy;
          break;
        case BinaryOp::kSub:
          da = on_left ? -dy : dy;
          break;
        case BinaryOp::kMul:
          da = dy * s;
          break;
        case BinaryOp::kDiv:
          da = on_left ? -dy * out / a : dy / s;
          break;
        case BinaryOp::kPow:
          da = on_left ? dy * out * std::log(s) : dy * s * power(a, s - 1);
          break;
        case BinaryOp::kMaximum:
          da = dy * greater_equal(a, s);
          break;
        case BinaryOp::kMinimum:
          da = dy * lesser_equal(a, s);
          break;
        default:
          break;
      }
      return std::vector<NDArray>{da};
    };
  });
}

void record_clip(const NDArray& x, double low, double high, NDArray& y) {
  record("clip", y, {&x}, [&] {
    return [x = x.detach(), low, high](const NDArray& dy) {
      return std::vector<NDArray>{dy * greater_equal(x, low) * lesser_equal(x, high)};
    };
  });
}

void record_where(const NDArray& condition, const NDArray& x, const NDArray& y, NDArray& out) {
  record("where", out, {&condition, &x, &y}, [&] {
    return [condition = condition.detach()](const NDArray& dy) {
      NDArray zero = zeros_like(dy);
      return std::vector<NDArray>{NDArray(), where(condition, dy, zero),
                                  where(condition, zero, dy)};
    };
  });
}

void refuse_in_place_while_recording(const char* name, const NDArray& a, const NDArray* b) {
  if (!recording()) return;
  const bool needs = a.grad_node() != nullptr || (b != nullptr && b->grad_node() != nullptr);
  TAGFLOW_CHECK(!needs,
                "{}: an in-place operator cannot be recorded on arrays that need a gradient; "
                "write `a = a + b` instead of `a += b` inside autograd::record()",
                name);
}

}  // namespace tagflow::detail
