#include "ops/reduce.h"

#include <numeric>
#include <vector>

#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/detail/operator_checks.h"
#include "ops/elementwise.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/reduce_kernels.h"

namespace tagflow {

namespace {

using detail::ReduceOp;

/// The axes a reduction reduces, and the shape of its result.
struct ReducedAxes {
  bool flags[Shape::kMaxDims] = {};
  Shape out_shape;
};

/// Normalises `axes` against `shape` (negative axes count from the end;
/// out of range or repeated axes throw, naming `op` and the shape).
ReducedAxes reduced_axes(const char* op, const Shape& shape, std::span<const int> axes,
                         bool keepdims) {
  ReducedAxes result;
  int given_as[Shape::kMaxDims] = {};
  for (const int axis : axes) {
    const int normalized = shape.normalize_axis(axis, op);
    TAGFLOW_CHECK(!result.flags[normalized],
                  "{}: axis {} repeats axis {} of an array of shape ({}): each axis may be "
                  "reduced only once",
                  op, axis, given_as[normalized], shape.str());
    result.flags[normalized] = true;
    given_as[normalized] = axis;
  }
  for (int axis = 0; axis < shape.ndim(); ++axis) {
    if (!result.flags[axis]) {
      result.out_shape.push_back(shape[axis]);
    } else if (keepdims) {
      result.out_shape.push_back(1);
    }
  }
  // No axis left: shape (1), as MXNet gives (a 0-d input with keepdims stays 0-d).
  if (result.out_shape.ndim() == 0 && !(keepdims && shape.ndim() == 0)) {
    result.out_shape.push_back(1);
  }
  return result;
}

/// Throws unless every reduced axis has elements: the mean, max, min and
/// argmax of no elements do not exist.
void check_not_empty(const char* op, const Shape& shape, const ReducedAxes& axes) {
  for (int axis = 0; axis < shape.ndim(); ++axis) {
    TAGFLOW_CHECK(!axes.flags[axis] || shape[axis] > 0,
                  "{}: cannot reduce axis {} of an array of shape ({}): it has extent 0, and the "
                  "{} of no elements is undefined (only sum and norm reduce empty axes, to 0)",
                  op, axis, shape.str(), op);
  }
}

DType output_dtype(ReduceOp op, DType input) {
  switch (op) {
    case ReduceOp::kMean:
    case ReduceOp::kNorm:
      return is_half(input) ? input : DType::kFloat32;
    case ReduceOp::kArgmax:
      return DType::kInt64;
    case ReduceOp::kSum:
    case ReduceOp::kMax:
    case ReduceOp::kMin:
      break;
  }
  return input;
}

/// Records the gradient of a floating-point reduction: the output's gradient,
/// given back its reduced axes (extent 1), broadcast over the input.
void record_reduction(const char* name, ReduceOp op, const NDArray& x, const bool* flags,
                      NDArray& out) {
  Shape kept;
  for (int axis = 0; axis < x.ndim(); ++axis) kept.push_back(flags[axis] ? 1 : x.shape()[axis]);
  const double count =
      out.size() == 0 ? 1.0 : static_cast<double>(x.size()) / static_cast<double>(out.size());
  detail::record(name, out, {&x}, [&] {
    return [op, kept, count, x = x.detach(), y = out.detach()](const NDArray& dy) {
      const NDArray dy_kept = dy.reshape(kept);
      NDArray dx;
      switch (op) {
        case ReduceOp::kSum:
          dx = zeros_like(x) + dy_kept;
          break;
        case ReduceOp::kMean:
          dx = zeros_like(x) + dy_kept / count;
          break;
        // Every element equal to the extreme gets the gradient (ties share it whole).
        case ReduceOp::kMax:
        case ReduceOp::kMin:
          dx = dy_kept * equal(x, y.reshape(kept));
          break;
        case ReduceOp::kNorm:
          // A floor the dtype holds (1e-30 is 0 in float16): a zero norm
          // gives a zero gradient, not 0 / 0.
          dx = dy_kept * x /
               maximum(y.reshape(kept), x.dtype() == DType::kFloat16 ? 0x1p-24 : 1e-30);
          break;
        case ReduceOp::kArgmax:
          break;
      }
      return std::vector<NDArray>{dx};
    };
  });
}

NDArray reduce(const char* name, ReduceOp op, const NDArray& x, std::span<const int> axes,
               bool keepdims) {
  detail::check_defined(name, x, 1);
  if (op == ReduceOp::kMean || op == ReduceOp::kNorm) detail::check_floating(name, x, 1);
  const ReducedAxes reduced = reduced_axes(name, x.shape(), axes, keepdims);
  if (op != ReduceOp::kSum && op != ReduceOp::kNorm) check_not_empty(name, x.shape(), reduced);

  NDArray out(reduced.out_shape, output_dtype(op, x.dtype()), x.context());
  if (out.size() == 0) return out;
  const std::int64_t in_size = x.size();
  const std::int64_t out_size = out.size();
  const DType out_dtype = out.dtype();
  const detail::ReducePlan plan = detail::make_reduce_plan(x.shape(), reduced.flags);
  const DType dtype = x.dtype();
  const void* in = x.raw_data();
  void* po = out.raw_data();
  detail::push_operation(name, x.context(), {x.var()}, {out.var()}, [=](const RunContext& rc) {
    detail::run_kernel(
        rc,
        detail::kernel_work(
            static_cast<double>(in_size),
            detail::bytes_of(in_size, dtype) + detail::bytes_of(out_size, out_dtype), dtype),
        [=] { detail::cpu_kernels::reduce(op, dtype, in, po, plan); },
        [=](void* stream) { detail::gpu_kernels::reduce(op, dtype, in, po, plan, stream); });
  });
  if (is_floating(x.dtype()) && op != ReduceOp::kArgmax) {
    record_reduction(name, op, x, reduced.flags, out);
  }
  return out;
}

NDArray reduce_all(const char* name, ReduceOp op, const NDArray& x, bool keepdims) {
  std::vector<int> axes(static_cast<std::size_t>(x.ndim()));
  std::iota(axes.begin(), axes.end(), 0);
  return reduce(name, op, x, axes, keepdims);
}

}  // namespace

NDArray sum(const NDArray& x, std::initializer_list<int> axes, bool keepdims) {
  return reduce("sum", ReduceOp::kSum, x, std::span<const int>(axes.begin(), axes.size()),
                keepdims);
}
NDArray sum(const NDArray& x, std::span<const int> axes, bool keepdims) {
  return reduce("sum", ReduceOp::kSum, x, axes, keepdims);
}
NDArray sum(const NDArray& x, int axis, bool keepdims) {
  return reduce("sum", ReduceOp::kSum, x, std::span<const int>(&axis, 1), keepdims);
}
NDArray sum(const NDArray& x, bool keepdims) {
  return reduce_all("sum", ReduceOp::kSum, x, keepdims);
}

NDArray mean(const NDArray& x, std::initializer_list<int> axes, bool keepdims) {
  return reduce("mean", ReduceOp::kMean, x, std::span<const int>(axes.begin(), axes.size()),
                keepdims);
}
NDArray mean(const NDArray& x, std::span<const int> axes, bool keepdims) {
  return reduce("mean", ReduceOp::kMean, x, axes, keepdims);
}
NDArray mean(const NDArray& x, int axis, bool keepdims) {
  return reduce("mean", ReduceOp::kMean, x, std::span<const int>(&axis, 1), keepdims);
}
NDArray mean(const NDArray& x, bool keepdims) {
  return reduce_all("mean", ReduceOp::kMean, x, keepdims);
}

NDArray max(const NDArray& x, std::initializer_list<int> axes, bool keepdims) {
  return reduce("max", ReduceOp::kMax, x, std::span<const int>(axes.begin(), axes.size()),
                keepdims);
}
NDArray max(const NDArray& x, std::span<const int> axes, bool keepdims) {
  return reduce("max", ReduceOp::kMax, x, axes, keepdims);
}
NDArray max(const NDArray& x, int axis, bool keepdims) {
  return reduce("max", ReduceOp::kMax, x, std::span<const int>(&axis, 1), keepdims);
}
NDArray max(const NDArray& x, bool keepdims) {
  return reduce_all("max", ReduceOp::kMax, x, keepdims);
}

NDArray min(const NDArray& x, std::initializer_list<int> axes, bool keepdims) {
  return reduce("min", ReduceOp::kMin, x, std::span<const int>(axes.begin(), axes.size()),
                keepdims);
}
NDArray min(const NDArray& x, std::span<const int> axes, bool keepdims) {
  return reduce("min", ReduceOp::kMin, x, axes, keepdims);
}
NDArray min(const NDArray& x, int axis, bool keepdims) {
  return reduce("min", ReduceOp::kMin, x, std::span<const int>(&axis, 1), keepdims);
}
NDArray min(const NDArray& x, bool keepdims) {
  return reduce_all("min", ReduceOp::kMin, x, keepdims);
}

NDArray norm(const NDArray& x, std::initializer_list<int> axes, bool keepdims) {
  return reduce("norm", ReduceOp::kNorm, x, std::span<const int>(axes.begin(), axes.size()),
                keepdims);
}
NDArray norm(const NDArray& x, std::span<const int> axes, bool keepdims) {
  return reduce("norm", ReduceOp::kNorm, x, axes, keepdims);
}
NDArray norm(const NDArray& x, int axis, bool keepdims) {
  return reduce("norm", ReduceOp::kNorm, x, std::span<const int>(&axis, 1), keepdims);
}
NDArray norm(const NDArray& x, bool keepdims) {
  return reduce_all("norm", ReduceOp::kNorm, x, keepdims);
}

NDArray argmax(const NDArray& x, int axis, bool keepdims) {
  return reduce("argmax", ReduceOp::kArgmax, x, std::span<const int>(&axis, 1), keepdims);
}

}  // namespace tagflow
