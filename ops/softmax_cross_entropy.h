#pragma once
// softmax_cross_entropy: the loss of a classifier, fused into one operator
// (like MXNet's softmax_cross_entropy and PyTorch's cross_entropy with class
// indices): per sample, -log softmax(pred_i)[label_i], computed as
// logsumexp(pred_i) - pred_i[label_i] with the row maximum subtracted, so
// logits of any magnitude (1000, -1000) give finite, accurate losses. One
// engine operation forward; its gradient, (softmax(pred_i) - onehot(label_i))
// times the loss's gradient, is one more. Cheaper and more accurate than
// log_softmax, one_hot, a product and a sum.
//
//   NDArray logits = net(x);                               // (batch, classes)
//   NDArray loss = softmax_cross_entropy(logits, labels);  // (batch)
//   sum(loss).backward();
//
// A label outside [0, classes) is known only once the operation runs:
// - on a CPU device the operation throws LabelOutOfRangeError ("label 12 of
//   sample 3 is outside [0, 10)"); the engine stores it on the loss, which
//   rethrows it from wait_to_read() (inside an OperationError) and passes it
//   on to whatever depends on the loss;
// - on a GPU, real or simulated, kernels cannot throw: that sample's loss
//   and its row of the gradient are NaN, and the other samples are computed
//   as usual.
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h);
// a LabelOutOfRangeError is immutable once thrown.

#include "engine/error.h"
#include "ops/ndarray.h"

namespace tagflow {

/// A class label outside [0, classes), found by softmax_cross_entropy on a
/// CPU device.
class LabelOutOfRangeError : public Error {
 public:
  using Error::Error;
};

/// The cross-entropy of softmax(pred) against class indices: `pred`
/// (batch, classes) float32, float16 or bfloat16, `label` (batch) of any
/// dtype on the same device (a float label is truncated toward zero, as
/// one_hot does). The result is (batch) in pred's dtype, computed in float
/// with the row sums in double and rounded once. Recorded for autograd: the
/// gradient reaches `pred`; labels get none.
///
///   NDArray l = softmax_cross_entropy(array(std::vector<float>{1, 2, 3}, {1, 3}),
///                                     array(std::vector<std::int32_t>{2}, {1}));
///   // [0.40760595]
NDArray softmax_cross_entropy(const NDArray& pred, const NDArray& label);

}  // namespace tagflow
