#include "ops/kernels/broadcast.h"

namespace tagflow::detail {

namespace {

/// Row-major strides of `shape` aligned to `out`'s axes, 0 where it broadcasts.
void aligned_strides(const Shape& shape, const Shape& out, std::int64_t* strides) {
  std::int64_t stride = 1;
  for (int axis = out.ndim() - 1; axis >= 0; --axis) {
    const int own = axis - (out.ndim() - shape.ndim());
    const std::int64_t extent = own >= 0 ? shape[own] : 1;
    strides[axis] = extent == 1 ? 0 : stride;
    stride *= extent;
  }
}

}  // namespace

BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const Shape& out) {
  std::int64_t as[Shape::kMaxDims];
  std::int64_t bs[Shape::kMaxDims];
  aligned_strides(a, out, as);
  aligned_strides(b, out, bs);
  BroadcastPlan plan;
  for (int axis = 0; axis < out.ndim(); ++axis) {
    if (out[axis] == 1) continue;  // contributes nothing
    if (plan.ndim > 0) {
      // Merge with the previous axis when both operands step through the
      // pair as through one axis (contiguously, or both not at all).
      const int last = plan.ndim - 1;
      const bool a_merges = as[axis] * out[axis] == plan.a_strides[last] ||
                            (as[axis] == 0 && plan.a_strides[last] == 0);
      const bool b_merges = bs[axis] * out[axis] == plan.b_strides[last] ||
                            (bs[axis] == 0 && plan.b_strides[last] == 0);
      if (a_merges && b_merges) {
        plan.dims[last] *= out[axis];
        plan.a_strides[last] = as[axis];
        plan.b_strides[last] = bs[axis];
        continue;
      }
    }
    plan.dims[plan.ndim] = out[axis];
    plan.a_strides[plan.ndim] = as[axis];
    plan.b_strides[plan.ndim] = bs[axis];
    ++plan.ndim;
  }
  if (plan.ndim == 0) {  // a single element
    plan.ndim = 1;
    plan.dims[0] = 1;
  }
  return plan;
}

}  // namespace tagflow::detail
