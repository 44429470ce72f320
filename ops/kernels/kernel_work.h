#pragma once
// What each operator's kernel computes and moves, from its shapes and
// dtypes: the KernelWork that a simulated GPU with a device model times
// (Note [Modelled time] in engine/device_model.h). Internal to ops/.
//
// Note [Operator work]
// The counts describe the CUDA kernels (what a real GPU would do), in the
// simplest form that keeps the ratio of arithmetic to memory traffic right:
// - Elementwise operators, casts, fills, random numbers, one_hot, transpose,
//   concatenation, dropout, optimizer updates: every element of every input
//   and output crosses memory once; one flop per output element (a few for
//   the optimizers). They are memory-bound on every modelled card.
// - Reductions, softmax, cross entropy: the input read once, the output
//   written once; softmax and cross entropy count 5 flops per element (max,
//   subtract, exponential, sum, divide).
// - Matrix products: 2·m·n·k flops per product; A, B and C each cross
//   memory once (a tiled GEMM's traffic from device memory at these sizes).
// - Convolutions: 2·N·K·(C/groups)·R·S·P·Q flops for the forward pass and
//   the same for each of the two backward passes; input, filter and output
//   cross memory once.
// - Pooling: one flop per window element of each output; input and output
//   once (and dy, dx for the backward pass).
// - Batch norm: x read twice in training (statistics, then normalisation)
//   and y written; the backward pass reads x and dy twice and writes dx.
// Caches, fusion and the kernels' real efficiency are outside the model
// (README, "How far to trust a prediction").

#include <cstdint>

#include "engine/device_model.h"
#include "ops/dtype.h"
#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/gemm_kernels.h"
#include "ops/kernels/pool_kernels.h"

namespace tagflow::detail {

/// Which of a card's peak rates a dtype's arithmetic runs at: float16 and
/// bfloat16 on tensor cores, everything else as float32 (tagflow's float32
/// products use FMA, not TF32).
constexpr MathPrecision math_precision(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return MathPrecision::kFloat16;
    case DType::kBFloat16:
      return MathPrecision::kBFloat16;
    default:
      return MathPrecision::kFloat32;
  }
}

/// Bytes of `n` elements of `dtype`.
inline double bytes_of(std::int64_t n, DType dtype) {
  return static_cast<double>(n) * static_cast<double>(dtype_size(dtype));
}

/// `flops` in `dtype`'s arithmetic, moving `bytes`.
inline KernelWork kernel_work(double flops, double bytes, DType dtype) {
  return {.flops = flops, .bytes = bytes, .precision = math_precision(dtype)};
}

/// An elementwise kernel over `n` elements of `dtype`: `arrays` arrays of
/// them (inputs and outputs) cross memory, `flops_per_element` each.
inline KernelWork elementwise_work(std::int64_t n, DType dtype, int arrays,
                                   double flops_per_element = 1) {
  return kernel_work(static_cast<double>(n) * flops_per_element, arrays * bytes_of(n, dtype),
                     dtype);
}

/// A batch of matrix products C = A·B (Note [Operator work]).
inline KernelWork gemm_work(const GemmPlan& plan, DType dtype) {
  const double batch = static_cast<double>(plan.batch_count);
  return kernel_work(2.0 * batch * static_cast<double>(plan.m) * static_cast<double>(plan.n) *
                         static_cast<double>(plan.k),
                     batch * bytes_of(plan.a_matrix() + plan.b_matrix() + plan.c_matrix(), dtype),
                     dtype);
}

/// One pass of a convolution (forward, backward data or backward filter).
inline KernelWork conv_work(const ConvGeometry& g, DType dtype) {
  const double flops = 2.0 * static_cast<double>(g.batch) * static_cast<double>(g.out_image()) *
                       static_cast<double>(g.col_rows());
  const double bytes = bytes_of(g.batch * (g.in_image() + g.out_image()) + g.weight_size(), dtype);
  return kernel_work(flops, bytes, dtype);
}

/// Pooling: `arrays_of_input_size` arrays the size of x and
/// `arrays_of_output_size` the size of y cross memory.
inline KernelWork pool_work(const PoolGeometry& g, DType dtype, int arrays_of_input_size,
                            int arrays_of_output_size) {
  const std::int64_t x = g.planes() * g.in_h * g.in_w;
  const std::int64_t y = g.planes() * g.out_h * g.out_w;
  return kernel_work(
      static_cast<double>(y) * g.kernel_h * g.kernel_w,
      arrays_of_input_size * bytes_of(x, dtype) + arrays_of_output_size * bytes_of(y, dtype),
      dtype);
}

}  // namespace tagflow::detail
