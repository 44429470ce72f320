#pragma once
// Losses: each gives one value per sample (shape (batch)), as Gluon's do;
// sum or average them as the training loop needs.
//
//   nn::SoftmaxCrossEntropyLoss loss;
//   NDArray l = loss(net(x), y);      // y: class indices, (batch), any dtype
//   sum(l).backward();
//
// Threads: safe to call concurrently. A loss is immutable once made and
// calls only operators.

#include "ops/ndarray.h"

namespace tagflow::nn {

/// -log softmax(pred)[label] per sample; `pred` (batch, classes) floating
/// point (a 16-bit one is made float32 inside an autocast scope: Note
/// [Mixed precision] in nn/amp.h),
/// `label` (batch) class indices (any dtype). With `sparse_label` false the
/// label is a (batch, classes) distribution instead.
class SoftmaxCrossEntropyLoss {
 public:
  explicit SoftmaxCrossEntropyLoss(bool sparse_label = true) : sparse_label_(sparse_label) {}
  NDArray operator()(const NDArray& pred, const NDArray& label) const;

 private:
  bool sparse_label_;
};

/// 0.5 * mean((pred - label)^2) over each sample's elements.
class L2Loss {
 public:
  NDArray operator()(const NDArray& pred, const NDArray& label) const;
};

/// mean(|pred - label|) over each sample's elements.
class L1Loss {
 public:
  NDArray operator()(const NDArray& pred, const NDArray& label) const;
};

}  // namespace tagflow::nn
