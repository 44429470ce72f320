#pragma once
// The kernels that assemble an output from pieces: concat and stack (a
// strided block copy per input), and one_hot (rows of off values with one on
// value), which lives here because it is the same kind of layout work and
// too small for its own files. CPU entry points in join_cpu.cc (also run by
// simulated GPUs), CUDA ones in join.cu. Internal to ops/.

#include <cstdint>
#include <type_traits>
#include <vector>

#include "ops/dtype.h"
#include "ops/kernels/host_device.h"

namespace tagflow::detail {

// --- concat, stack ----------------------------------------------------------------

/// One input of a join: `rows` rows of `row_bytes` contiguous bytes, row r
/// going to `offset_bytes` past the start of output row r.
struct JoinInput {
  const void* data = nullptr;
  std::int64_t row_bytes = 0;
  std::int64_t offset_bytes = 0;
};

/// A join seen as bytes: the output is `rows` rows of `out_row_bytes`, each
/// the concatenation of one row of every input, in order. Concatenating
/// along axis a makes `rows` the product of the extents before a; inputs
/// with no element are left out.
struct JoinPlan {
  std::vector<JoinInput> inputs;
  std::int64_t rows = 0;
  std::int64_t out_row_bytes = 0;
};

// --- one_hot ------------------------------------------------------------------------

/// The column of the on value for `index`, or -1 when the index is outside
/// [0, depth) (the row is then all off values). A floating-point index is
/// truncated toward zero, as MXNet casts it; NaN is out of range.
template <typename Index>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE std::int64_t one_hot_column(Index index, std::int64_t depth) {
  if constexpr (std::is_floating_point_v<ComputeType<Index>>) {
    const double x = static_cast<double>(static_cast<ComputeType<Index>>(index));
    // trunc(x) lies in [0, depth) exactly when -1 < x < depth.
    return (x > -1.0 && x < static_cast<double>(depth)) ? static_cast<std::int64_t>(x) : -1;
  } else if constexpr (std::is_unsigned_v<Index>) {
    return static_cast<std::int64_t>(index) < depth ? static_cast<std::int64_t>(index) : -1;
  } else {
    return (index >= 0 && static_cast<std::int64_t>(index) < depth)
               ? static_cast<std::int64_t>(index)
               : -1;
  }
}

/// The values of one_hot, already checked to fit the output dtype.
struct OneHotParams {
  std::int64_t rows = 0;  ///< number of indices
  std::int64_t depth = 0;
  double on_value = 1;
  double off_value = 0;
};

namespace cpu_kernels {
void join(const JoinPlan& plan, void* out);
/// out has shape (rows, depth) in `dtype`; indices hold `index_dtype`.
void one_hot(DType index_dtype, const void* indices, DType dtype, const OneHotParams& params,
             void* out);
}  // namespace cpu_kernels

namespace gpu_kernels {
void join(const JoinPlan& plan, void* out, void* stream);
void one_hot(DType index_dtype, const void* indices, DType dtype, const OneHotParams& params,
             void* out, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
