#include "nn/loss.h"

#include "nn/amp.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/softmax.h"
#include "ops/softmax_cross_entropy.h"

namespace tagflow::nn {

namespace {

void check_batch(const char* loss, const NDArray& pred, const NDArray& label) {
  TAGFLOW_CHECK(pred.defined() && label.defined() && pred.ndim() >= 1 && label.ndim() >= 1 &&
                    pred.shape()[0] == label.shape()[0],
                "{}: expected a prediction and a label with the same batch size, got ({}) and ({})",
                loss, pred.defined() ? pred.shape().str() : "empty",
                label.defined() ? label.shape().str() : "empty");
}

/// Mean over every axis but the first: one value per sample.
NDArray per_sample_mean(const NDArray& x) { return mean(x.reshape({x.shape()[0], -1}), 1); }

}  // namespace

NDArray SoftmaxCrossEntropyLoss::operator()(const NDArray& input, const NDArray& label) const {
  const NDArray pred = amp::to_float32(input);  // Note [Mixed precision]
  check_batch("SoftmaxCrossEntropyLoss", pred, label);
  TAGFLOW_CHECK(pred.ndim() == 2,
                "SoftmaxCrossEntropyLoss: expected predictions of shape (batch, classes), got ({})",
                pred.shape().str());
  if (sparse_label_) {
    // Class indices: the fused operator (one operation forward, one
    // backward; a label outside [0, classes) is an error on CPU devices and
    // NaN on GPUs, see ops/softmax_cross_entropy.h). Labels of shape
    // (batch, 1) are accepted as (batch).
    TAGFLOW_CHECK(label.size() == pred.shape()[0],
                  "SoftmaxCrossEntropyLoss: expected labels of shape ({}), got ({})",
                  pred.shape()[0], label.shape().str());
    return softmax_cross_entropy(pred, label.reshape({-1}));
  }
  TAGFLOW_CHECK(label.shape() == pred.shape(),
                "SoftmaxCrossEntropyLoss: expected labels of shape ({}), got ({})",
                pred.shape().str(), label.shape().str());
  return -sum(log_softmax(pred, 1) * label, 1);
}

NDArray L2Loss::operator()(const NDArray& input, const NDArray& label) const {
  const NDArray pred = amp::to_float32(input);
  check_batch("L2Loss", pred, label);
  return per_sample_mean(square(pred - label.reshape(pred.shape()))) * 0.5;
}

NDArray L1Loss::operator()(const NDArray& input, const NDArray& label) const {
  const NDArray pred = amp::to_float32(input);
  check_batch("L1Loss", pred, label);
  return per_sample_mean(abs(pred - label.reshape(pred.shape())));
}

}  // namespace tagflow::nn
