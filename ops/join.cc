#include "ops/join.h"

#include <limits>
#include <memory>
#include <vector>

#include "ops/autograd.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/join_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/transpose.h"

namespace tagflow {

namespace {

using detail::JoinPlan;
using detail::ordinal;

constexpr const char* kConcat = "concat";
constexpr const char* kStack = "stack";

/// At least one input, all defined, on one context, of one dtype.
void check_inputs(const char* op, std::span<const NDArray> arrays) {
  TAGFLOW_CHECK(!arrays.empty(), "{}: expected at least one array, got none", op);
  detail::check_same_context(op, arrays);
  const DType dtype = arrays[0].dtype();
  for (std::size_t i = 1; i < arrays.size(); ++i) {
    TAGFLOW_CHECK(arrays[i].dtype() == dtype,
                  "{}: all inputs must have the same dtype, but the first argument is {} while "
                  "the {} argument is {}. Convert one with astype()",
                  op, dtype_name(dtype), ordinal(static_cast<int>(i) + 1),
                  dtype_name(arrays[i].dtype()));
  }
}

/// A new array of `out_shape` made of `rows` rows, each the concatenation
/// of one row of every input in order (an input's row holds size / rows of
/// its elements); one operation reading every input. Nothing is pushed for
/// an empty result.
NDArray push_join(const char* op, std::span<const NDArray> arrays, const Shape& out_shape,
                  std::int64_t rows) {
  const DType dtype = arrays[0].dtype();
  NDArray out(out_shape, dtype, arrays[0].context());
  if (out.size() == 0) return out;
  const auto element_bytes = static_cast<std::int64_t>(dtype_size(dtype));
  auto plan = std::make_shared<JoinPlan>();
  plan->rows = rows;
  VarList reads;
  for (const NDArray& a : arrays) {
    reads.push_back(a.var());  // a variable listed twice (views, repeats) counts once
    const std::int64_t row_bytes = a.size() / rows * element_bytes;
    if (row_bytes == 0) continue;
    plan->inputs.push_back(
        {.data = a.raw_data(), .row_bytes = row_bytes, .offset_bytes = plan->out_row_bytes});
    plan->out_row_bytes += row_bytes;
  }
  void* data = out.raw_data();
  const KernelWork work = detail::elementwise_work(out.size(), out.dtype(), 2, 0);
  detail::push_operation(
      op, out.context(), std::move(reads), {out.var()},
      [plan = std::shared_ptr<const JoinPlan>(std::move(plan)), data, work](const RunContext& rc) {
        detail::run_kernel(
            rc, work, [plan, data] { detail::cpu_kernels::join(*plan, data); },
            [plan, data](void* stream) { detail::gpu_kernels::join(*plan, data, stream); });
      });
  return out;
}

/// The product of the extents of `shape` before `axis`.
std::int64_t extent_product(const Shape& shape, int axis) {
  std::int64_t product = 1;
  for (int i = 0; i < axis; ++i) product *= shape[i];
  return product;
}

/// Records the gradient of a join whose output has its inputs one after the
/// other along `axis` of the output, input i taking `extents[i]` of it:
/// input i's gradient is its part of the output's gradient, reshaped to its
/// shape (for stack, the part has extent 1 along the new axis). Parts along
/// the first axis are views; along another axis, the gradient is first
/// transposed to bring that axis to the front, each part transposed back.
void record_join(const char* op, NDArray& out, std::span<const NDArray> arrays, int axis,
                 std::vector<std::int64_t> extents) {
  if (!detail::recording()) return;
  std::vector<std::shared_ptr<detail::GradNode>> producers;
  bool any = false;
  for (const NDArray& a : arrays) {
    producers.push_back(a.grad_node());
    any = any || producers.back() != nullptr;
  }
  if (!any) return;
  std::vector<Shape> shapes;
  std::vector<bool> needed;
  for (std::size_t i = 0; i < arrays.size(); ++i) {
    shapes.push_back(arrays[i].shape());
    needed.push_back(producers[i] != nullptr);
  }
  const int ndim = out.ndim();
  std::vector<int> to_front{axis};  // (axis, 0, 1, ..., axis - 1, axis + 1, ...)
  std::vector<int> back(static_cast<std::size_t>(ndim));
  for (int d = 0; d < ndim; ++d) {
    if (d != axis) to_front.push_back(d);
    back[static_cast<std::size_t>(d)] = d < axis ? d + 1 : (d == axis ? 0 : d);
  }
  detail::record_node(
      op, out, std::move(producers),
      [shapes = std::move(shapes), needed = std::move(needed), extents = std::move(extents), axis,
       to_front = std::move(to_front), back = std::move(back)](const NDArray& out_grad) {
        const NDArray moved = axis == 0 ? out_grad : transpose(out_grad, to_front);
        std::vector<NDArray> grads(shapes.size());
        std::int64_t begin = 0;
        for (std::size_t i = 0; i < shapes.size(); ++i) {
          const std::int64_t end = begin + extents[i];
          if (needed[i]) {
            NDArray part = moved.slice(begin, end);
            if (axis != 0) part = transpose(part, back);
            grads[i] = part.reshape(shapes[i]);
          }
          begin = end;
        }
        return grads;
      });
}

}  // namespace

NDArray concat(std::span<const NDArray> arrays, int axis) {
  check_inputs(kConcat, arrays);
  const Shape& first = arrays[0].shape();
  const int a = first.normalize_axis(axis, kConcat);
  std::vector<std::int64_t> out_dims(first.dims().begin(), first.dims().end());
  for (std::size_t i = 1; i < arrays.size(); ++i) {
    const Shape& shape = arrays[i].shape();
    bool matches = shape.ndim() == first.ndim();
    for (int d = 0; matches && d < first.ndim(); ++d) matches = d == a || shape[d] == first[d];
    TAGFLOW_CHECK(matches,
                  "{}: expected every input to have the shape of the first except along axis {}, "
                  "but the first argument has shape ({}) while the {} argument has shape ({})",
                  kConcat, a, first.str(), ordinal(static_cast<int>(i) + 1), shape.str());
    TAGFLOW_CHECK(shape[a] <= std::numeric_limits<std::int64_t>::max() - out_dims[a],
                  "{}: expected the extents along axis {} to add up to at most 2^63 - 1, but they "
                  "exceed it at the {} argument, of shape ({})",
                  kConcat, a, ordinal(static_cast<int>(i) + 1), shape.str());
    out_dims[a] += shape[a];
  }
  const Shape out_shape(out_dims);  // which checks its size
  NDArray out = push_join(kConcat, arrays, out_shape, extent_product(first, a));
  std::vector<std::int64_t> extents;
  for (const NDArray& array : arrays) extents.push_back(array.shape()[a]);
  record_join(kConcat, out, arrays, a, std::move(extents));
  return out;
}

NDArray concat(std::initializer_list<NDArray> arrays, int axis) {
  return concat(std::span<const NDArray>(arrays.begin(), arrays.size()), axis);
}

NDArray stack(std::span<const NDArray> arrays, int axis) {
  check_inputs(kStack, arrays);
  const Shape& first = arrays[0].shape();
  const int ndim = first.ndim();
  TAGFLOW_CHECK(ndim < Shape::kMaxDims,
                "{}: the result would have {} dimensions, but arrays have at most {}", kStack,
                ndim + 1, Shape::kMaxDims);
  TAGFLOW_CHECK(axis >= -(ndim + 1) && axis <= ndim,
                "{}: axis {} is out of range for inputs of shape ({}): expected an axis in "
                "[{}, {}]",
                kStack, axis, first.str(), -(ndim + 1), ndim);
  const int a = axis < 0 ? axis + ndim + 1 : axis;
  for (std::size_t i = 1; i < arrays.size(); ++i) {
    TAGFLOW_CHECK(arrays[i].shape() == first,
                  "{}: expected inputs of one shape, but the first argument has shape ({}) while "
                  "the {} argument has shape ({})",
                  kStack, first.str(), ordinal(static_cast<int>(i) + 1), arrays[i].shape().str());
  }
  Shape out_shape;
  for (int d = 0; d <= ndim; ++d) {
    if (d == a) out_shape.push_back(static_cast<std::int64_t>(arrays.size()));
    if (d < ndim) out_shape.push_back(first[d]);
  }
  NDArray out = push_join(kStack, arrays, out_shape, extent_product(first, a));
  record_join(kStack, out, arrays, a, std::vector<std::int64_t>(arrays.size(), 1));
  return out;
}

NDArray stack(std::initializer_list<NDArray> arrays, int axis) {
  return stack(std::span<const NDArray>(arrays.begin(), arrays.size()), axis);
}

}  // namespace tagflow
