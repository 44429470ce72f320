#pragma once
// Trainer: applies an optimiser to a set of parameters, as Gluon's does.
//
//   nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.1});
//   ... forward and backward on a batch ...
//   trainer.step(batch_size);   // gradients are divided by the batch size
//
// A parameter on several devices has its gradients summed over them, and
// every copy receives the same update, so the copies stay identical.

#include <cstdint>
#include <string>
#include <vector>

#include "tagflow/nn/parameter.h"

namespace tagflow::nn {

struct TrainerOptions {
  double learning_rate = 0.01;
  double momentum = 0;        ///< sgd
  double weight_decay = 0;    ///< sgd and adam: L2 penalty
  double beta1 = 0.9;         ///< adam
  double beta2 = 0.999;       ///< adam
  double epsilon = 1e-8;      ///< adam
  double clip_gradient = -1;  ///< > 0: gradients clipped to ±clip_gradient
};

class Trainer {
 public:
  /// `optimizer`: "sgd" (with momentum and weight decay) or "adam". Throws
  /// for another name.
  Trainer(ParameterDict params, std::string optimizer, TrainerOptions options = {});

  /// One update of every parameter that has a gradient, from the gradients
  /// of the last backward, scaled by 1 / batch_size. Fused update operators
  /// on each parameter's devices; returns at once.
  void step(std::int64_t batch_size);

  double learning_rate() const { return options_.learning_rate; }
  void set_learning_rate(double rate) { options_.learning_rate = rate; }
  const std::string& optimizer() const { return optimizer_; }

 private:
  /// The summed gradient of `p`, one copy on each of its devices.
  static std::vector<NDArray> aggregated_grads(const Parameter& p);

  ParameterDict params_;
  std::string optimizer_;
  TrainerOptions options_;
  std::int64_t steps_ = 0;
  /// Optimiser state per parameter and device: momentum (sgd), or the first
  /// and second moments (adam). Made on the first step.
  std::vector<std::vector<std::pair<NDArray, NDArray>>> states_;
};

}  // namespace tagflow::nn
