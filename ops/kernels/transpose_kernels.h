#pragma once
// The transpose kernels: a gather through a permuted stride table. Internal
// to ops/.

#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/host_device.h"
#include "ops/shape.h"

namespace tagflow::detail {

/// For each output axis: its extent and the input's element stride along it.
struct TransposePlan {
  int ndim = 0;
  std::int64_t dims[Shape::kMaxDims] = {};
  std::int64_t in_strides[Shape::kMaxDims] = {};

  /// Input offset of output element `index`.
  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE std::int64_t offset(std::int64_t index) const {
    std::int64_t offset = 0;
    for (int axis = ndim - 1; axis >= 0; --axis) {
      offset += (index % dims[axis]) * in_strides[axis];
      index /= dims[axis];
    }
    return offset;
  }
};

namespace cpu_kernels {
void transpose(DType dtype, const void* in, void* out, const TransposePlan& plan);
}
namespace gpu_kernels {
void transpose(DType dtype, const void* in, void* out, const TransposePlan& plan, void* stream);
}

}  // namespace tagflow::detail
