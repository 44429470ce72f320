// The CUDA softmax cross-entropy kernels, over the bodies shared with the CPU
// kernels (softmax_cross_entropy_kernels.h), launched on the operation's
// stream. Every launch is checked.
//
// The forward pass gives each row a team of threads that strides over the
// row's classes, then reduces the maximum and the sum of exps across the
// team: a warp per row (warp shuffles only; eight rows per block) for rows
// shorter than kBlockPerRowClasses, a block per row (warp shuffles, then the
// eight warps' values through shared memory) for longer ones. Teams stride
// over the rows, so any batch fits a capped grid. The backward pass is a
// thread per element in a grid-stride loop, reading its row's saved
// (max, log-sum) pair.
//
// A kernel cannot throw: a label outside [0, classes) gives NaN for that
// sample's loss and gradient row (BadLabel::kNaN).

#include <cuda_runtime.h>
#include <math_constants.h>

#include <cstdint>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/softmax_cross_entropy_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;
constexpr int kWarp = 32;
constexpr int kWarps = kThreads / kWarp;
constexpr unsigned kFullMask = 0xffffffffu;
/// Rows at least this long get a block each; shorter ones a warp each.
constexpr std::int64_t kBlockPerRowClasses = 1024;

using MaxOf = MaxReducer<float>;

/// The maximum (NaN-propagating, as MaxReducer) of the warp's values, in
/// every lane.
__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v = MaxOf::combine(v, __shfl_xor_sync(kFullMask, v, offset));
  }
  return v;
}

/// The sum of the warp's values, in every lane.
__device__ __forceinline__ double warp_sum(double v) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    v += __shfl_xor_sync(kFullMask, v, offset);
  }
  return v;
}

/// Combines the block's per-warp values (each warp's lane 0 holds its own)
/// in warp order, in every thread; `scratch` holds kWarps values. Every
/// thread of the block must call it.
template <typename T, typename Combine>
__device__ __forceinline__ T across_warps(T v, T* scratch, Combine combine) {
  if (threadIdx.x % kWarp == 0) scratch[threadIdx.x / kWarp] = v;
  __syncthreads();
  v = scratch[0];
#pragma unroll
  for (int w = 1; w < kWarps; ++w) v = combine(v, scratch[w]);
  __syncthreads();  // every thread has read scratch before the next call writes it
  return v;
}

/// The threads that share a row: a warp, or the whole block.
template <bool kBlockPerRow>
struct RowTeam {
  static constexpr int kSize = kBlockPerRow ? kThreads : kWarp;
  static constexpr int kRowsPerBlock = kThreads / kSize;

  __device__ static int lane() { return static_cast<int>(threadIdx.x) % kSize; }
  __device__ static std::int64_t first_row() {
    return static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kSize;
  }
  __device__ static std::int64_t row_stride() {
    return static_cast<std::int64_t>(gridDim.x) * kRowsPerBlock;
  }
  __device__ static float reduce_max(float v, float* scratch) {
    v = warp_max(v);
    if constexpr (kBlockPerRow) {
      v = across_warps(v, scratch, [](float a, float b) { return MaxOf::combine(a, b); });
    }
    return v;
  }
  __device__ static double reduce_sum(double v, double* scratch) {
    v = warp_sum(v);
    if constexpr (kBlockPerRow) {
      v = across_warps(v, scratch, [](double a, double b) { return a + b; });
    }
    return v;
  }
};

template <bool kBlockPerRow, typename P, typename Label>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const P* pred, const Label* label, CrossEntropyShape shape, P* loss,
                   float* stats) {
  using Team = RowTeam<kBlockPerRow>;
  __shared__ float max_scratch[kWarps];
  __shared__ double sum_scratch[kWarps];
  const std::int64_t classes = shape.classes;
  // The loop bound is the same for every thread of a team: the shuffles and
  // barriers inside are reached by all of them.
  for (std::int64_t row = Team::first_row(); row < shape.batch; row += Team::row_stride()) {
    const P* x = pred + row * classes;
    float row_max = MaxOf::init();
    for (std::int64_t j = Team::lane(); j < classes; j += Team::kSize) {
      row_max = MaxOf::step(row_max, static_cast<float>(x[j]), j);
    }
    row_max = Team::reduce_max(row_max, max_scratch);
    double sum = 0.0;
    for (std::int64_t j = Team::lane(); j < classes; j += Team::kSize) {
      sum += static_cast<double>(::expf(static_cast<float>(x[j]) - row_max));
    }
    sum = Team::reduce_sum(sum, sum_scratch);
    if (Team::lane() == 0) {
      const double log_sum = ::log(sum);
      const std::int64_t column = one_hot_column(label[row], classes);
      loss[row] = column < 0 ? convert_element<P>(CUDART_NAN_F)
                             : convert_element<P>(cross_entropy_loss(
                                   row_max, log_sum, static_cast<float>(x[column])));
      if (stats != nullptr) {
        stats[2 * row] = row_max;
        stats[2 * row + 1] = static_cast<float>(log_sum);
      }
    }
  }
}

template <typename P, typename Label>
__global__ void backward_kernel(const P* pred, const Label* label, const float* stats,
                                const P* out_grad, CrossEntropyShape shape, P* pred_grad) {
  const std::int64_t classes = shape.classes;
  const std::int64_t n = shape.batch * classes;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const std::int64_t row = i / classes;
    const std::int64_t column = one_hot_column(label[row], classes);
    const RowStats row_stats{stats[2 * row], stats[2 * row + 1]};
    pred_grad[i] = convert_element<P>(
        column < 0 ? CUDART_NAN_F
                   : cross_entropy_gradient(static_cast<float>(pred[i]), row_stats,
                                            i - row * classes == column,
                                            static_cast<float>(out_grad[row])));
  }
}

template <bool kBlockPerRow, typename P, typename Label>
void launch_forward(const P* pred, const Label* label, const CrossEntropyShape& shape, P* loss,
                    float* stats, cudaStream_t stream) {
  constexpr std::int64_t kRowsPerBlock = RowTeam<kBlockPerRow>::kRowsPerBlock;
  forward_kernel<kBlockPerRow, P, Label>
      <<<blocks_for(shape.batch, kRowsPerBlock), kThreads, 0, stream>>>(pred, label, shape, loss,
                                                                        stats);
}

}  // namespace

void softmax_cross_entropy_forward(const CrossEntropyArrays& in, const CrossEntropyShape& shape,
                                   void* loss, float* stats, void* stream) {
  if (shape.batch == 0) return;
  const auto s = as_stream(stream);
  const bool block_per_row = shape.classes >= kBlockPerRowClasses;
  TAGFLOW_ANY_DTYPE_SWITCH(in.label_dtype, Label, {
    TAGFLOW_FLOAT_DTYPE_SWITCH(in.dtype, P, {
      const P* pred = static_cast<const P*>(in.pred);
      const Label* labels = static_cast<const Label*>(in.label);
      P* losses = static_cast<P*>(loss);
      if (block_per_row) {
        launch_forward<true>(pred, labels, shape, losses, stats, s);
      } else {
        launch_forward<false>(pred, labels, shape, losses, stats, s);
      }
    });
  });
  check_launch("softmax_cross_entropy forward kernel");
}

void softmax_cross_entropy_backward(const CrossEntropyArrays& in, const float* stats,
                                    const void* out_grad, const CrossEntropyShape& shape,
                                    void* pred_grad, void* stream) {
  const std::int64_t n = shape.batch * shape.classes;
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(in.label_dtype, Label, {
    TAGFLOW_FLOAT_DTYPE_SWITCH(in.dtype, P, {
      backward_kernel<P, Label><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
          static_cast<const P*>(in.pred), static_cast<const Label*>(in.label), stats,
          static_cast<const P*>(out_grad), shape, static_cast<P*>(pred_grad));
    });
  });
  check_launch("softmax_cross_entropy backward kernel");
}

}  // namespace tagflow::detail::gpu_kernels
