#pragma once
// Fused optimiser updates: one engine operation per parameter and device,
// reading the gradient and writing the weight and the optimiser's state in
// place (no temporaries). Used by nn::Trainer.
//
//   sgd_update(weight, grad, momentum, {.learning_rate = 0.1, .momentum = 0.9});
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h):
// updates of one weight pushed from several threads run in push order.
// Threads: concurrent reads, exclusive writes. SgdOptions and AdamOptions are
// values.

#include "ops/ndarray.h"

namespace tagflow {

struct SgdOptions {
  double learning_rate = 0.01;
  double momentum = 0;        ///< 0: plain SGD (the state may be undefined)
  double weight_decay = 0;    ///< L2 penalty added to the gradient
  double rescale_grad = 1;    ///< the gradient is multiplied by this first (1 / batch size)
  double clip_gradient = -1;  ///< when > 0, gradients are clipped to ±clip_gradient
  bool nesterov = false;      ///< with momentum: Nesterov's accelerated gradient
};

/// g = clip(rescale * grad) + wd * w; with momentum: m = momentum * m - lr * g,
/// then w += m, or with Nesterov w += momentum * m - lr * g (PyTorch's
/// nesterov=True and MXNet's NAG, for a constant rate); without momentum:
/// w -= lr * g. `momentum_state` like `weight` (or undefined without
/// momentum).
///
/// `skip_if`, when defined, is a (1) float32 array on the weight's device
/// read when the update runs: nonzero leaves the weight and the state
/// unchanged. Mixed precision skips the update of a step whose gradients
/// overflowed this way, without the host waiting for the check
/// (nn::Trainer with loss scaling).
void sgd_update(const NDArray& weight, const NDArray& grad, const NDArray& momentum_state,
                const SgdOptions& options, const NDArray& skip_if = NDArray());

struct AdamOptions {
  double learning_rate = 0.001;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  double weight_decay = 0;
  double rescale_grad = 1;
  double clip_gradient = -1;
};

/// Adam (Kingma & Ba) with bias correction for step `t` (from 1):
/// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g²;
/// w -= lr * sqrt(1-b2^t)/(1-b1^t) * m / (sqrt(v) + eps). `skip_if` as
/// for sgd_update.
void adam_update(const NDArray& weight, const NDArray& grad, const NDArray& mean,
                 const NDArray& variance, const AdamOptions& options, std::int64_t t,
                 const NDArray& skip_if = NDArray());

}  // namespace tagflow
