#include "nn/optimizer.h"

#include "engine/error.h"
#include "ops/elementwise.h"
#include "ops/optimizer_update.h"

namespace tagflow::nn {

namespace {

class Sgd final : public Optimizer {
 public:
  explicit Sgd(SgdParams p) : p_(p) {
    TAGFLOW_CHECK(p_.momentum >= 0 && p_.weight_decay >= 0,
                  "sgd: expected momentum and weight decay >= 0, got {} and {}", p_.momentum,
                  p_.weight_decay);
    TAGFLOW_CHECK(!p_.nesterov || p_.momentum > 0,
                  "sgd: Nesterov's momentum needs momentum > 0, got {}", p_.momentum);
  }
  std::string name() const override { return "sgd"; }
  std::vector<std::string> state_names() const override { return {"m"}; }
  void update(const NDArray& weight, const NDArray& grad, std::span<const NDArray> state,
              const UpdateStep& step) const override {
    sgd_update(weight, grad, state[0],
               {.learning_rate = step.learning_rate,
                .momentum = p_.momentum,
                .weight_decay = p_.weight_decay,
                .rescale_grad = step.rescale_grad,
                .clip_gradient = p_.clip_gradient,
                .nesterov = p_.nesterov},
               step.skip_if);
  }

 private:
  SgdParams p_;
};

class Adam final : public Optimizer {
 public:
  Adam(AdamParams p, bool decoupled) : p_(p), decoupled_(decoupled) {
    TAGFLOW_CHECK(p_.beta1 >= 0 && p_.beta1 < 1 && p_.beta2 >= 0 && p_.beta2 < 1 &&
                      p_.epsilon > 0 && p_.weight_decay >= 0,
                  "{}: expected beta1 and beta2 in [0, 1), epsilon > 0 and weight decay >= 0, got "
                  "{}, {}, {} and {}",
                  name(), p_.beta1, p_.beta2, p_.epsilon, p_.weight_decay);
  }
  std::string name() const override { return decoupled_ ? "adamw" : "adam"; }
  std::vector<std::string> state_names() const override { return {"m", "v"}; }
  void update(const NDArray& weight, const NDArray& grad, std::span<const NDArray> state,
              const UpdateStep& step) const override {
    if (decoupled_ && p_.weight_decay > 0) {
      // The decay is part of the update: skipped with it after an overflow.
      const double decay = step.learning_rate * p_.weight_decay;
      NDArray w = weight;
      if (step.skip_if.defined()) {
        w *= step.skip_if * decay + (1 - decay);  // 1 when skipped, 1 - decay otherwise
      } else {
        w *= 1 - decay;
      }
    }
    adam_update(weight, grad, state[0], state[1],
                {.learning_rate = step.learning_rate,
                 .beta1 = p_.beta1,
                 .beta2 = p_.beta2,
                 .epsilon = p_.epsilon,
                 .weight_decay = decoupled_ ? 0.0 : p_.weight_decay,
                 .rescale_grad = step.rescale_grad,
                 .clip_gradient = p_.clip_gradient},
                step.t, step.skip_if);
  }

 private:
  AdamParams p_;
  bool decoupled_;
};

}  // namespace

OptimizerPtr sgd(SgdParams params) { return std::make_shared<const Sgd>(params); }

OptimizerPtr nag(SgdParams params) {
  params.nesterov = true;
  return std::make_shared<const Sgd>(params);
}

OptimizerPtr adam(AdamParams params) {
  return std::make_shared<const Adam>(params, /*decoupled=*/false);
}

OptimizerPtr adamw(AdamParams params) {
  return std::make_shared<const Adam>(params, /*decoupled=*/true);
}

}  // namespace tagflow::nn
