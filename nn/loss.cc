#include "tagflow/nn/loss.h"

#include "tagflow/ops/elementwise.h"
#include "tagflow/ops/one_hot.h"
#include "tagflow/ops/reduce.h"
#include "tagflow/ops/softmax.h"

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

NDArray SoftmaxCrossEntropyLoss::operator()(const NDArray& pred, const NDArray& label) const {
  check_batch("SoftmaxCrossEntropyLoss", pred, label);
  TAGFLOW_CHECK(pred.ndim() == 2,
                "SoftmaxCrossEntropyLoss: expected predictions of shape (batch, classes), got ({})",
                pred.shape().str());
  const NDArray log_p = log_softmax(pred, 1);
  NDArray target = sparse_label_ ? one_hot(label.reshape({-1}), pred.shape()[1]) : label;
  TAGFLOW_CHECK(target.shape() == pred.shape(),
                "SoftmaxCrossEntropyLoss: expected labels of shape ({}), got ({})",
                sparse_label_ ? std::to_string(pred.shape()[0]) : pred.shape().str(),
                label.shape().str());
  return -sum(log_p * target, 1);
}

NDArray L2Loss::operator()(const NDArray& pred, const NDArray& label) const {
  check_batch("L2Loss", pred, label);
  return per_sample_mean(square(pred - label.reshape(pred.shape()))) * 0.5;
}

NDArray L1Loss::operator()(const NDArray& pred, const NDArray& label) const {
  check_batch("L1Loss", pred, label);
  return per_sample_mean(abs(pred - label.reshape(pred.shape())));
}

}  // namespace tagflow::nn
