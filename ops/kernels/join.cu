// The CUDA join and one_hot kernels, launched on the operation's stream with
// grid-stride loops and 64-bit indices. Every launch is checked.
//
// A join copies in the widest unit (16, 8, 4, 2 or 1 bytes) that divides
// every address, row length and offset, and takes up to kJoinBatch inputs
// per launch (blockIdx.y picks the input), their descriptions passed by
// value as a kernel parameter so that no device table is needed.

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/join_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kJoinBatch = 16;

/// Up to kJoinBatch inputs, in units of the copy.
struct JoinBatch {
  const void* src[kJoinBatch];
  std::int64_t row_units[kJoinBatch];
  std::int64_t offset_units[kJoinBatch];
};

template <typename Unit>
__global__ void join_kernel(JoinBatch batch, Unit* out, std::int64_t rows,
                            std::int64_t out_row_units) {
  const int k = static_cast<int>(blockIdx.y);
  const Unit* src = static_cast<const Unit*>(batch.src[k]);
  const std::int64_t row_units = batch.row_units[k];
  const std::int64_t offset = batch.offset_units[k];
  const std::int64_t n = rows * row_units;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t row = i / row_units;
    const std::int64_t column = i - row * row_units;
    out[row * out_row_units + offset + column] = src[i];
  }
}

template <typename Index, typename T>
__global__ void one_hot_kernel(const Index* indices, T on, T off, T* out, std::int64_t depth,
                               std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t row = i / depth;
    const std::int64_t column = i - row * depth;
    out[i] = column == one_hot_column(indices[row], depth) ? on : off;
  }
}

/// The widest power of two up to 16 dividing every address and length.
std::int64_t unit_bytes(const JoinPlan& plan, const void* out) {
  std::uint64_t bits =
      reinterpret_cast<std::uintptr_t>(out) | static_cast<std::uint64_t>(plan.out_row_bytes);
  for (const JoinInput& input : plan.inputs) {
    bits |= reinterpret_cast<std::uintptr_t>(input.data) |
            static_cast<std::uint64_t>(input.row_bytes) |
            static_cast<std::uint64_t>(input.offset_bytes);
  }
  std::int64_t unit = 16;
  while (unit > 1 && bits % static_cast<std::uint64_t>(unit) != 0) unit /= 2;
  return unit;
}

template <typename Unit>
void launch_join(const JoinPlan& plan, void* out, cudaStream_t stream) {
  constexpr auto kUnit = static_cast<std::int64_t>(sizeof(Unit));
  const std::size_t count = plan.inputs.size();
  for (std::size_t first = 0; first < count; first += kJoinBatch) {
    const int batch_size = static_cast<int>(std::min<std::size_t>(kJoinBatch, count - first));
    JoinBatch batch{};
    std::int64_t most_units = 0;
    for (int k = 0; k < batch_size; ++k) {
      const JoinInput& input = plan.inputs[first + static_cast<std::size_t>(k)];
      batch.src[k] = input.data;
      batch.row_units[k] = input.row_bytes / kUnit;
      batch.offset_units[k] = input.offset_bytes / kUnit;
      most_units = std::max(most_units, plan.rows * batch.row_units[k]);
    }
    const dim3 grid(blocks_for(most_units, kThreads), static_cast<unsigned>(batch_size));
    join_kernel<Unit><<<grid, kThreads, 0, stream>>>(batch, static_cast<Unit*>(out), plan.rows,
                                                     plan.out_row_bytes / kUnit);
    check_launch("join kernel");
  }
}

}  // namespace

void join(const JoinPlan& plan, void* out, void* stream) {
  if (plan.rows == 0 || plan.inputs.empty()) return;
  const cudaStream_t s = as_stream(stream);
  switch (unit_bytes(plan, out)) {
    case 16:
      launch_join<uint4>(plan, out, s);
      break;
    case 8:
      launch_join<unsigned long long>(plan, out, s);
      break;
    case 4:
      launch_join<unsigned int>(plan, out, s);
      break;
    case 2:
      launch_join<unsigned short>(plan, out, s);
      break;
    default:
      launch_join<unsigned char>(plan, out, s);
      break;
  }
}

void one_hot(DType index_dtype, const void* indices, DType dtype, const OneHotParams& params,
             void* out, void* stream) {
  const std::int64_t n = params.rows * params.depth;
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(index_dtype, Index, {
    TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
      one_hot_kernel<Index, T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
          static_cast<const Index*>(indices), convert_element<T>(params.on_value),
          convert_element<T>(params.off_value), static_cast<T*>(out), params.depth, n);
    });
  });
  check_launch("one_hot kernel");
}

}  // namespace tagflow::detail::gpu_kernels
