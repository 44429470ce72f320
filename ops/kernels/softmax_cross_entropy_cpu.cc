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
    if constexpr (std::is_floating_point_v<ComputeType<Label>>) {
      throw_error<LabelOutOfRangeError>(
          "softmax_cross_entropy: label {} of sample {} is outside [0, {})",
          static_cast<double>(static_cast<ComputeType<Label>>(label[row])), row, shape.classes);
    } else {
      throw_error<LabelOutOfRangeError>(
          "softmax_cross_entropy: label {} of sample {} is outside [0, {})",
          static_cast<std::int64_t>(label[row]), row, shape.classes);
    }
  }
}

template <typename P, typename Label>
void forward_rows(const P* pred, const Label* label, const CrossEntropyShape& shape, P* loss,
                  float* stats) {
  using MaxOf = MaxReducer<float>;
  const std::int64_t classes = shape.classes;
  parallel_for_range(
      shape.batch, rows_per_block(classes), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t row = begin; row < end; ++row) {
          const P* x = pred + row * classes;
          float row_max = MaxOf::init();
          for (std::int64_t j = 0; j < classes; ++j) {
            row_max = MaxOf::step(row_max, static_cast<float>(x[j]), j);
          }
          double sum = 0.0;
          for (std::int64_t j = 0; j < classes; ++j) {
            sum += static_cast<double>(std::exp(static_cast<float>(x[j]) - row_max));
          }
          const double log_sum = std::log(sum);
          const std::int64_t column = one_hot_column(label[row], classes);
          loss[row] = column < 0 ? convert_element<P>(kNaN)
                                 : convert_element<P>(cross_entropy_loss(
                                       row_max, log_sum, static_cast<float>(x[column])));
          if (stats != nullptr) {
            stats[2 * row] = row_max;
            stats[2 * row + 1] = static_cast<float>(log_sum);
          }
        }
      });
}

template <typename P, typename Label>
void backward_rows(const P* pred, const Label* label, const float* stats, const P* out_grad,
                   const CrossEntropyShape& shape, P* pred_grad) {
  const std::int64_t classes = shape.classes;
  parallel_for_range(
      shape.batch, rows_per_block(classes), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t row = begin; row < end; ++row) {
          const P* x = pred + row * classes;
          P* dx = pred_grad + row * classes;
          const std::int64_t column = one_hot_column(label[row], classes);
          if (column < 0) {
            std::fill(dx, dx + classes, convert_element<P>(kNaN));
            continue;
          }
          const RowStats row_stats{stats[2 * row], stats[2 * row + 1]};
          const auto dy = static_cast<float>(out_grad[row]);
          for (std::int64_t j = 0; j < classes; ++j) {
            dx[j] = convert_element<P>(
                cross_entropy_gradient(static_cast<float>(x[j]), row_stats, j == column, dy));
          }
        }
      });
}

}  // namespace

void softmax_cross_entropy_forward(const CrossEntropyArrays& in, const CrossEntropyShape& shape,
                                   BadLabel bad_label, void* loss, float* stats) {
  TAGFLOW_ANY_DTYPE_SWITCH(in.label_dtype, Label, {
    const Label* labels = static_cast<const Label*>(in.label);
    if (bad_label == BadLabel::kThrow) check_labels(labels, shape);
    TAGFLOW_FLOAT_DTYPE_SWITCH(in.dtype, P, {
      forward_rows(static_cast<const P*>(in.pred), labels, shape, static_cast<P*>(loss), stats);
    });
  });
}

void softmax_cross_entropy_backward(const CrossEntropyArrays& in, const float* stats,
                                    const void* out_grad, const CrossEntropyShape& shape,
                                    BadLabel bad_label, void* pred_grad) {
  TAGFLOW_ANY_DTYPE_SWITCH(in.label_dtype, Label, {
    const Label* labels = static_cast<const Label*>(in.label);
    if (bad_label == BadLabel::kThrow) check_labels(labels, shape);
    TAGFLOW_FLOAT_DTYPE_SWITCH(in.dtype, P, {
      backward_rows(static_cast<const P*>(in.pred), labels, stats, static_cast<const P*>(out_grad),
                    shape, static_cast<P*>(pred_grad));
    });
  });
}

}  // namespace tagflow::detail::cpu_kernels
