// The CPU softmax cross-entropy kernels (Note [One kernel, three devices] in
// launch.h): rows split over oneTBB's threads, each row reduced in the order
// of its own elements, so any split gives the same bits. With
// BadLabel::kThrow the labels are checked first, in one serial pass (a
// batch of integers, cheap next to the rows), so that a bad label throws
// before anything is written.

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "engine/error.h"
#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/softmax_cross_entropy_kernels.h"
#include "ops/softmax_cross_entropy.h"

namespace tagflow::detail::cpu_kernels {

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Rows per block: about kParallelGrain elements.
std::int64_t rows_per_block(std::int64_t classes) {
  return std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(classes, 1));
}

/// Throws LabelOutOfRangeError for the first label outside [0, classes).
template <typename Label>
void check_labels(const Label* label, const CrossEntropyShape& shape) {
  for (std::int64_t row = 0; row < shape.batch; ++row) {
    if (one_hot_column(label[row], shape.classes) >= 0) continue;
    if constexpr (std::is_floating_point_v<Label>) {
      throw_error<LabelOutOfRangeError>(
          "softmax_cross_entropy: label {} of sample {} is outside [0, {})",
          static_cast<double>(label[row]), row, shape.classes);
    } else {
      throw_error<LabelOutOfRangeError>(
          "softmax_cross_entropy: label {} of sample {} is outside [0, {})",
          static_cast<std::int64_t>(label[row]), row, shape.classes);
    }
  }
}

template <typename Label>
void forward_rows(const float* pred, const Label* label, const CrossEntropyShape& shape,
                  float* loss, float* stats) {
  using MaxOf = MaxReducer<float>;
  const std::int64_t classes = shape.classes;
  parallel_for_range(
      shape.batch, rows_per_block(classes), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t row = begin; row < end; ++row) {
          const float* x = pred + row * classes;
          float row_max = MaxOf::init();
          for (std::int64_t j = 0; j < classes; ++j) {
            row_max = MaxOf::step(row_max, x[j], j);
          }
          double sum = 0.0;
          for (std::int64_t j = 0; j < classes; ++j) {
            sum += static_cast<double>(std::exp(x[j] - row_max));
          }
          const double log_sum = std::log(sum);
          const std::int64_t column = one_hot_column(label[row], classes);
          loss[row] = column < 0 ? kNaN : cross_entropy_loss(row_max, log_sum, x[column]);
          if (stats != nullptr) {
            stats[2 * row] = row_max;
            stats[2 * row + 1] = static_cast<float>(log_sum);
          }
        }
      });
}

template <typename Label>
void backward_rows(const float* pred, const Label* label, const float* stats, const float* out_grad,
                   const CrossEntropyShape& shape, float* pred_grad) {
  const std::int64_t classes = shape.classes;
  parallel_for_range(shape.batch, rows_per_block(classes),
                     [&](std::int64_t begin, std::int64_t end) {
                       for (std::int64_t row = begin; row < end; ++row) {
                         const float* x = pred + row * classes;
                         float* dx = pred_grad + row * classes;
                         const std::int64_t column = one_hot_column(label[row], classes);
                         if (column < 0) {
                           std::fill(dx, dx + classes, kNaN);
                           continue;
                         }
                         const RowStats row_stats{stats[2 * row], stats[2 * row + 1]};
                         const float dy = out_grad[row];
                         for (std::int64_t j = 0; j < classes; ++j) {
                           dx[j] = cross_entropy_gradient(x[j], row_stats, j == column, dy);
                         }
                       }
                     });
}

}  // namespace

void softmax_cross_entropy_forward(const float* pred, DType label_dtype, const void* label,
                                   const CrossEntropyShape& shape, BadLabel bad_label, float* loss,
                                   float* stats) {
  TAGFLOW_DTYPE_SWITCH(label_dtype, Label, {
    const Label* labels = static_cast<const Label*>(label);
    if (bad_label == BadLabel::kThrow) check_labels(labels, shape);
    forward_rows(pred, labels, shape, loss, stats);
  });
}

void softmax_cross_entropy_backward(const float* pred, DType label_dtype, const void* label,
                                    const float* stats, const float* out_grad,
                                    const CrossEntropyShape& shape, BadLabel bad_label,
                                    float* pred_grad) {
  TAGFLOW_DTYPE_SWITCH(label_dtype, Label, {
    const Label* labels = static_cast<const Label*>(label);
    if (bad_label == BadLabel::kThrow) check_labels(labels, shape);
    backward_rows(pred, labels, stats, out_grad, shape, pred_grad);
  });
}

}  // namespace tagflow::detail::cpu_kernels
