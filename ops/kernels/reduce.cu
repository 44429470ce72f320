// The CUDA reduction and softmax kernels, over the plan and accumulation
// bodies shared with the CPU kernels (reduce_kernels.h), launched on the
// operation's stream. Every launch is checked.
//
// A reduction runs one of two kernels of one family:
// - a block per output (grid-stride over outputs): the block's threads
//   stride over the reduced elements, then combine their partial results in
//   a shared-memory tree. For long rows, and for few outputs.
// - a thread per output: each thread reduces its output serially. For many
//   short reductions, or when consecutive outputs read consecutive inputs
//   (a reduction over an outer axis), where the loads then coalesce.
// A softmax runs a block per row (the same tree, for the max and the sum).

#include <cuda_runtime.h>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/grid_stride.h"
#include "ops/kernels/reduce_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;  // a power of two: the trees halve it
/// Reductions at least this long get a block per output.
constexpr std::int64_t kLongReduction = 64;
/// Below this many outputs, a block per output even when they interleave.
constexpr std::int64_t kFewOutputs = 2048;

/// Combines the kThreads values of `shared` into shared[0] with `combine`;
/// every thread must call it, having stored its own value.
template <typename Acc, typename Combine>
__device__ __forceinline__ void tree_reduce(Acc* shared, Combine combine) {
  __syncthreads();
  for (int half = kThreads / 2; half > 0; half /= 2) {
    if (static_cast<int>(threadIdx.x) < half) {
      shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + half]);
    }
    __syncthreads();
  }
}

template <typename R, typename T>
__global__ void __launch_bounds__(kThreads)
    reduce_block_per_output_kernel(const T* in, typename R::Out* out, ReducePlan plan) {
  using Acc = typename R::Acc;
  __shared__ Acc partial[kThreads];
  for (std::int64_t o = blockIdx.x; o < plan.outputs; o += gridDim.x) {
    const T* base = in + plan.output_offset(o);
    Acc acc = R::init();
    for (std::int64_t r = threadIdx.x; r < plan.reduced; r += kThreads) {
      acc = R::step(acc, base[plan.reduced_offset(r)], r);
    }
    partial[threadIdx.x] = acc;
    tree_reduce(partial, [](Acc a, Acc b) { return R::combine(a, b); });
    if (threadIdx.x == 0) out[o] = R::finish(partial[0], plan.reduced);
    __syncthreads();  // partial[0] is read before the next output overwrites it
  }
}

template <typename R, typename T>
__global__ void reduce_thread_per_output_kernel(const T* in, typename R::Out* out,
                                                ReducePlan plan) {
  for (std::int64_t o = first_index(); o < plan.outputs; o += grid_stride()) {
    const T* base = in + plan.output_offset(o);
    typename R::Acc acc = R::init();
    for (std::int64_t r = 0; r < plan.reduced; ++r) {
      acc = R::step(acc, base[plan.reduced_offset(r)], r);
    }
    out[o] = R::finish(acc, plan.reduced);
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    softmax_kernel(bool log_output, const T* in, T* out, SoftmaxShape shape) {
  using MaxOf = ExtremeReducer<float, true>;
  __shared__ float shared_max[kThreads];
  __shared__ double shared_sum[kThreads];
  const std::int64_t rows = shape.outer * shape.inner;
  for (std::int64_t row = blockIdx.x; row < rows; row += gridDim.x) {
    const std::int64_t offset =
        (row / shape.inner) * shape.extent * shape.inner + row % shape.inner;
    const T* x = in + offset;
    T* y = out + offset;

    float row_max = MaxOf::init();
    for (std::int64_t j = threadIdx.x; j < shape.extent; j += kThreads) {
      row_max = MaxOf::step(row_max, static_cast<float>(x[j * shape.inner]), j);
    }
    shared_max[threadIdx.x] = row_max;
    tree_reduce(shared_max, [](float a, float b) { return MaxOf::combine(a, b); });
    row_max = shared_max[0];

    double sum = 0.0;
    for (std::int64_t j = threadIdx.x; j < shape.extent; j += kThreads) {
      sum += static_cast<double>(::expf(static_cast<float>(x[j * shape.inner]) - row_max));
    }
    shared_sum[threadIdx.x] = sum;
    tree_reduce(shared_sum, [](double a, double b) { return a + b; });
    sum = shared_sum[0];

    const double log_sum = ::log(sum);
    for (std::int64_t j = threadIdx.x; j < shape.extent; j += kThreads) {
      const float v = static_cast<float>(x[j * shape.inner]);
      y[j * shape.inner] = convert_element<T>(
          log_output ? static_cast<double>(v) - static_cast<double>(row_max) - log_sum
                     : static_cast<double>(::expf(v - row_max)) / sum);
    }
    __syncthreads();  // the shared values are read before the next row overwrites them
  }
}

}  // namespace

void reduce(ReduceOp op, DType dtype, const void* in, void* out, const ReducePlan& plan,
            void* stream) {
  if (plan.outputs == 0) return;
  const bool block_per_output =
      plan.reduced >= kLongReduction && (!plan.innermost_kept() || plan.outputs < kFewOutputs);
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    with_reducer<T>(op, [&](auto reducer) {
      using R = decltype(reducer);
      const T* x = static_cast<const T*>(in);
      auto* y = static_cast<typename R::Out*>(out);
      if (block_per_output) {
        reduce_block_per_output_kernel<R, T>
            <<<block_count(plan.outputs), kThreads, 0, as_stream(stream)>>>(x, y, plan);
      } else {
        reduce_thread_per_output_kernel<R, T>
            <<<blocks_for(plan.outputs, kThreads), kThreads, 0, as_stream(stream)>>>(x, y, plan);
      }
    });
  });
  check_launch("reduce kernel");
}

void softmax(bool log_output, DType dtype, const void* in, void* out, SoftmaxShape shape,
             void* stream) {
  const std::int64_t rows = shape.outer * shape.inner;
  if (rows == 0 || shape.extent == 0) return;
  TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
    softmax_kernel<T><<<block_count(rows), kThreads, 0, as_stream(stream)>>>(
        log_output, static_cast<const T*>(in), static_cast<T*>(out), shape);
  });
  check_launch("softmax kernel");
}

}  // namespace tagflow::detail::gpu_kernels
