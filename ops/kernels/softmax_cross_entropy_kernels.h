#pragma once
// The fused softmax cross-entropy kernels: the per-row bodies shared by the
// CPU kernels (softmax_cross_entropy_cpu.cc, also run by simulated GPUs) and
// the CUDA kernels (softmax_cross_entropy.cu), and their entry points.
// Internal to ops/.
//
// The forward pass of row i computes m = max_j x_ij and
// s = log(sum_j exp(x_ij - m)) (exps in float, summed in double, as softmax
// does), and writes loss_i = (m - x_i,label) + s. When a gradient will be
// needed it also keeps (m, s) per row: with them the backward pass computes
// softmax(x_i)_j = exp(x_ij - m - s) without reducing the row again, from
// 8 bytes per sample instead of a saved (batch, classes) softmax.
//
// Labels are read in their own dtype and mapped to a column as one_hot does
// (one_hot_column in join_kernels.h: a float label is truncated toward
// zero; NaN is out of range). Predictions, losses and gradients share one
// floating-point dtype; float16 and bfloat16 ones are computed in float and
// rounded once when stored (Note [Half precision arithmetic] in ops/half.h);
// the (m, s) pairs stay float32.

#include <cmath>
#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/host_device.h"
#include "ops/kernels/join_kernels.h"

namespace tagflow::detail {

/// pred is (batch, classes), row-major; label and loss are (batch).
struct CrossEntropyShape {
  std::int64_t batch = 0;
  std::int64_t classes = 0;
};

/// What a kernel does with a label outside [0, classes).
enum class BadLabel : std::uint8_t {
  /// Throws LabelOutOfRangeError (softmax_cross_entropy.h) before writing
  /// anything: the CPU kernels on CPU devices.
  kThrow,
  /// Writes NaN for that sample's loss and gradient row: CUDA kernels, which
  /// cannot throw, and the CPU kernels on simulated GPUs, which behave as
  /// CUDA does (an exception there would become the stream's sticky error,
  /// not an error of the loss array).
  kNaN,
};

/// The values a row's backward pass needs from its forward pass. Kept in a
/// (batch, 2) float32 array: [i][0] = m, [i][1] = s.
struct RowStats {
  float max = 0;      ///< m
  float log_sum = 0;  ///< s
};

/// loss = (m - x_label) + s, in double (rounded once by the caller).
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE double cross_entropy_loss(float row_max, double log_sum,
                                                             float x_label) {
  return (static_cast<double>(row_max) - static_cast<double>(x_label)) + log_sum;
}

/// d loss / d x_j times the sample's output gradient: (softmax_j - [j is
/// the label]) * out_grad.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float cross_entropy_gradient(float x, RowStats stats,
                                                                bool is_label, float out_grad) {
  const float p = ::expf((x - stats.max) - stats.log_sum);
  return (is_label ? p - 1.0f : p) * out_grad;
}

/// The arrays of one loss: `pred`, `loss`, `out_grad` and `pred_grad` are
/// of `dtype` (floating point), `label` of `label_dtype`.
struct CrossEntropyArrays {
  DType dtype = DType::kFloat32;
  const void* pred = nullptr;  ///< (batch, classes)
  DType label_dtype = DType::kInt32;
  const void* label = nullptr;  ///< (batch)
};

namespace cpu_kernels {
/// loss (batch) from pred and label; `stats` (batch, 2) is written unless
/// null.
void softmax_cross_entropy_forward(const CrossEntropyArrays& in, const CrossEntropyShape& shape,
                                   BadLabel bad_label, void* loss, float* stats);
/// pred_grad (batch, classes) from pred, label, the forward's stats and the
/// loss's gradient `out_grad` (batch).
void softmax_cross_entropy_backward(const CrossEntropyArrays& in, const float* stats,
                                    const void* out_grad, const CrossEntropyShape& shape,
                                    BadLabel bad_label, void* pred_grad);
}  // namespace cpu_kernels

namespace gpu_kernels {
/// As the CPU kernels, with BadLabel::kNaN.
void softmax_cross_entropy_forward(const CrossEntropyArrays& in, const CrossEntropyShape& shape,
                                   void* loss, float* stats, void* stream);
void softmax_cross_entropy_backward(const CrossEntropyArrays& in, const float* stats,
                                    const void* out_grad, const CrossEntropyShape& shape,
                                    void* pred_grad, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
