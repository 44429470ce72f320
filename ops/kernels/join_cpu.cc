// The CPU join and one_hot kernels (Note [One kernel, three devices] in
// launch.h). Both only move or set values, so any split of the rows gives
// the same bytes.

#include <algorithm>
#include <cstring>

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/join_kernels.h"

namespace tagflow::detail::cpu_kernels {

namespace {
/// Bytes a block of rows should move: about kParallelGrain floats.
constexpr std::int64_t kGrainBytes = kParallelGrain * 4;

std::int64_t rows_per_block(std::int64_t row_bytes) {
  return std::max<std::int64_t>(1, kGrainBytes / std::max<std::int64_t>(row_bytes, 1));
}
}  // namespace

void join(const JoinPlan& plan, void* out) {
  auto* dst = static_cast<unsigned char*>(out);
  parallel_for_range(plan.rows, rows_per_block(plan.out_row_bytes),
                     [&](std::int64_t begin, std::int64_t end) {
                       // Row by row, so each block writes one contiguous stretch of the output.
                       for (std::int64_t row = begin; row < end; ++row) {
                         unsigned char* out_row = dst + row * plan.out_row_bytes;
                         for (const JoinInput& input : plan.inputs) {
                           const auto* src = static_cast<const unsigned char*>(input.data);
                           std::memcpy(out_row + input.offset_bytes, src + row * input.row_bytes,
                                       static_cast<std::size_t>(input.row_bytes));
                         }
                       }
                     });
}

void one_hot(DType index_dtype, const void* indices, DType dtype, const OneHotParams& params,
             void* out) {
  const std::int64_t depth = params.depth;
  TAGFLOW_ANY_DTYPE_SWITCH(index_dtype, Index, {
    TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
      const Index* index = static_cast<const Index*>(indices);
      T* y = static_cast<T*>(out);
      const T on = convert_element<T>(params.on_value);
      const T off = convert_element<T>(params.off_value);
      parallel_for_range(params.rows, rows_per_block(depth * static_cast<std::int64_t>(sizeof(T))),
                         [&](std::int64_t begin, std::int64_t end) {
                           for (std::int64_t row = begin; row < end; ++row) {
                             T* out_row = y + row * depth;
                             std::fill(out_row, out_row + depth, off);
                             const std::int64_t column = one_hot_column(index[row], depth);
                             if (column >= 0) out_row[column] = on;
                           }
                         });
    });
  });
}

}  // namespace tagflow::detail::cpu_kernels
