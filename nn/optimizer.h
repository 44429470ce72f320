#pragma once
// Optimizers: how a Trainer turns a parameter's gradient into its update.
// An optimizer names its per-parameter state (zeros until the first update,
// one set per device copy, saved by Trainer::save_states) and pushes one
// copy's update; the Trainer owns the rate and its schedule, clipping by
// the global norm, loss scaling and the sum over devices.
//
//   nn::Trainer trainer(net.collect_params(), nn::adamw({.weight_decay = 0.01}),
//                       {.learning_rate = 1e-3});
//
// Your own: derive from Optimizer and push engine operations (operators)
// on the weight and its state, as the library's do:
//
//   class Rmsprop final : public nn::Optimizer {   // s = 0.9 s + 0.1 g², w -= lr g / √(s + ε)
//    public:
//     std::string name() const override { return "rmsprop"; }
//     std::vector<std::string> state_names() const override { return {"s"}; }
//     void update(const NDArray& weight, const NDArray& grad, std::span<const NDArray> state,
//                 const nn::UpdateStep& step) const override {
//       const NDArray g = grad * step.rescale_grad;
//       NDArray s = state[0], w = weight;       // handles: the operators write their memory
//       s *= 0.9;
//       s += square(g) * 0.1;
//       w -= g / sqrt(s + 1e-8) * step.learning_rate;
//     }
//   };
//
// Threads: an Optimizer is immutable after construction and may be shared
// by trainers on several threads; update() is called by the thread that
// steps its trainer.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ops/ndarray.h"

namespace tagflow::nn {

/// What one update of one parameter copy depends on besides its arrays.
struct UpdateStep {
  double learning_rate = 0;  ///< this update's rate (the schedule's)
  double rescale_grad = 1;   ///< the gradient is multiplied by this first (1 / batch size)
  std::int64_t t = 1;        ///< the update's number, from 1 (Adam's bias correction)
  /// Loss scaling's overflow flag, a (1) float32 array on the weight's
  /// device, or undefined: nonzero when the update runs means "change
  /// nothing" (ops/optimizer_update.h). An optimizer of your own that
  /// ignores it updates even after an overflow.
  NDArray skip_if;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  /// Saved with the trainer's state and checked when it is loaded ("sgd").
  virtual std::string name() const = 0;
  /// The state arrays each parameter copy has, each of the weight's shape
  /// and float32, by name: saved as "<parameter index>.<name>".
  virtual std::vector<std::string> state_names() const = 0;
  /// Pushes the update of `weight` from `grad` (not yet rescaled) and its
  /// `state` (state_names().size() arrays, in that order, zeros before the
  /// first update). Returns at once.
  virtual void update(const NDArray& weight, const NDArray& grad, std::span<const NDArray> state,
                      const UpdateStep& step) const = 0;
};

using OptimizerPtr = std::shared_ptr<const Optimizer>;

struct SgdParams {
  double momentum = 0;        ///< 0: plain SGD
  double weight_decay = 0;    ///< L2 penalty added to the gradient
  double clip_gradient = -1;  ///< > 0: each gradient element clipped to ±clip_gradient
  bool nesterov = false;      ///< with momentum: Nesterov's accelerated gradient (MXNet's NAG)
};

struct AdamParams {
  double beta1 = 0.9;
  double beta2 = 0.999;
  double epsilon = 1e-8;
  /// Adam: an L2 penalty added to the gradient. AdamW: the weight decays
  /// by lr * weight_decay before each update, apart from the moments
  /// (Loshchilov & Hutter's decoupled weight decay, PyTorch's AdamW).
  double weight_decay = 0;
  double clip_gradient = -1;
};

/// SGD with momentum (state "m", kept even without momentum, so that the
/// state files of both agree); throws unless momentum and weight_decay >= 0
/// and, with nesterov, momentum > 0.
OptimizerPtr sgd(SgdParams params = {});
/// SGD with Nesterov's momentum: sgd() with nesterov = true (its state is
/// sgd's, and so is its name in a state file).
OptimizerPtr nag(SgdParams params = {.momentum = 0.9});
/// Adam (states "m" and "v"), ops/optimizer_update.h.
OptimizerPtr adam(AdamParams params = {});
/// Adam with decoupled weight decay (states "m" and "v"): w *= 1 - lr wd,
/// then Adam's step without the penalty.
OptimizerPtr adamw(AdamParams params = {.weight_decay = 0.01});

}  // namespace tagflow::nn
