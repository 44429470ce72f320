#pragma once
// BroadcastPlan: how the elements of two broadcast operands map to those of
// the output, with adjacent axes merged where they broadcast alike (so a
// bias add (N, C) + (C) becomes one outer and one inner axis). Internal to
// ops/.

#include <cstdint>

#include "ops/kernels/host_device.h"
#include "ops/shape.h"

namespace tagflow::detail {

struct BroadcastPlan {
  int ndim = 0;
  std::int64_t dims[Shape::kMaxDims] = {};
  /// Element strides of each operand per output axis; 0 where it broadcasts.
  std::int64_t a_strides[Shape::kMaxDims] = {};
  std::int64_t b_strides[Shape::kMaxDims] = {};

  /// Offsets into `a` and `b` of output element `index`.
  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE void offsets(std::int64_t index, std::int64_t& a,
                                                  std::int64_t& b) const {
    a = 0;
    b = 0;
    for (int axis = ndim - 1; axis >= 0; --axis) {
      const std::int64_t i = index % dims[axis];
      index /= dims[axis];
      a += i * a_strides[axis];
      b += i * b_strides[axis];
    }
  }
};

/// The plan for `a` and `b` broadcast to `out` (from broadcast_shapes).
BroadcastPlan make_broadcast_plan(const Shape& a, const Shape& b, const Shape& out);

}  // namespace tagflow::detail
