#include "nn/basic_layers.h"

#include <fmt/format.h>

#include "nn/amp.h"
#include "ops/autograd.h"
#include "ops/batch_norm.h"
#include "ops/dropout.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"

namespace tagflow::nn {

NDArray activate(const NDArray& x, const std::string& activation) {
  if (activation.empty()) return x;
  if (activation == "relu") return relu(x);
  if (activation == "sigmoid") return sigmoid(x);
  if (activation == "tanh") return tanh(x);
  check_activation("activation", activation);
  return x;  // not reached: check_activation threw
}

void check_activation(const std::string& layer, const std::string& activation) {
  TAGFLOW_CHECK(
      activation.empty() || activation == "relu" || activation == "sigmoid" || activation == "tanh",
      "{}: unknown activation \"{}\"; expected relu, sigmoid, tanh or \"\"", layer, activation);
}

Dense::Dense(int units, std::string activation, int in_units, bool use_bias,
             init::InitializerPtr weight_init, init::InitializerPtr bias_init, bool flatten)
    : Block("dense"), units_(units), activation_(std::move(activation)), flatten_(flatten) {
  TAGFLOW_CHECK(units > 0 && in_units >= 0,
                "Dense: expected units > 0 and in_units >= 0 (0: inferred), got {} and {}", units,
                in_units);
  check_activation("Dense", activation_);
  weight_ = register_parameter("weight", Shape{units, in_units}, std::move(weight_init));
  if (use_bias) bias_ = register_parameter("bias", Shape{units}, std::move(bias_init));
}

NDArray Dense::forward(const NDArray& x) {
  TAGFLOW_CHECK(x.defined() && x.ndim() >= 1, "{}: expected an input with a batch axis", name());
  // Flattening: (batch, features...) as (batch, features); otherwise every
  // axis but the last is a batch axis.
  const std::int64_t features =
      flatten_ ? (x.shape()[0] == 0 ? 0 : x.size() / x.shape()[0]) : x.shape()[x.ndim() - 1];
  const std::int64_t batch = flatten_ ? x.shape()[0] : (features == 0 ? 0 : x.size() / features);
  if (weight_->shape()[1] == 0) weight_->infer_shape(Shape{units_, features});
  TAGFLOW_CHECK(weight_->shape()[1] == features,
                "{}: expected {} input features, got {} (input shape ({}))", name(),
                weight_->shape()[1], features, x.shape().str());
  const Context ctx = x.context();
  // In an autocast scope, in its dtype (Note [Mixed precision] in nn/amp.h).
  NDArray y = dot(amp::to_compute_dtype(x).reshape({batch, features}),
                  amp::to_compute_dtype(weight_->data(ctx)), false, true);
  if (bias_ != nullptr) y = y + amp::to_compute_dtype(bias_->data(ctx));
  y = activate(y, activation_);
  if (flatten_ || x.ndim() == 2) return y;
  Shape out = x.shape();
  out[out.ndim() - 1] = units_;
  return y.reshape(out);
}

namespace {

/// Gluon's way of writing an extent that is not known yet.
std::string extent(std::int64_t n) { return n == 0 ? "None" : std::to_string(n); }

}  // namespace

std::string Dense::describe() const {
  return fmt::format("Dense({} -> {}, {})", extent(weight_->shape()[1]), units_,
                     activation_.empty() ? "linear" : "Activation(" + activation_ + ")");
}

Activation::Activation(std::string activation)
    : Block("activation"), activation_(std::move(activation)) {
  TAGFLOW_CHECK(activation_ == "relu" || activation_ == "sigmoid" || activation_ == "tanh",
                "Activation: unknown activation \"{}\"; expected relu, sigmoid or tanh",
                activation_);
}

std::string Dropout::describe() const { return fmt::format("Dropout(p = {})", rate_); }

std::string BatchNorm::describe() const {
  return fmt::format("BatchNorm(axis=1, eps={}, momentum={}, in_channels={})", epsilon_, momentum_,
                     extent(gamma_->shape()[0]));
}

NDArray Flatten::forward(const NDArray& x) {
  TAGFLOW_CHECK(x.defined() && x.ndim() >= 1, "{}: expected an input with a batch axis", name());
  return x.reshape({x.shape()[0], -1});
}

Dropout::Dropout(double rate) : Block("dropout"), rate_(rate) {
  TAGFLOW_CHECK(rate >= 0 && rate < 1, "Dropout: expected a rate in [0, 1), got {}", rate);
}

NDArray Dropout::forward(const NDArray& x) { return dropout(x, rate_, autograd::is_training()); }

BatchNorm::BatchNorm(double momentum, double epsilon, bool center, bool scale, int in_channels,
                     bool unbiased_running_var)
    : Block("batchnorm"),
      momentum_(momentum),
      epsilon_(epsilon),
      unbiased_running_var_(unbiased_running_var) {
  TAGFLOW_CHECK(momentum >= 0 && momentum <= 1 && epsilon > 0 && in_channels >= 0,
                "BatchNorm: expected momentum in [0, 1], epsilon > 0 and in_channels >= 0 (0: "
                "inferred), got {}, {} and {}",
                momentum, epsilon, in_channels);
  const Shape shape{in_channels};
  gamma_ =
      register_parameter("gamma", shape, init::One(), scale ? GradReq::kWrite : GradReq::kNull);
  beta_ =
      register_parameter("beta", shape, init::Zero(), center ? GradReq::kWrite : GradReq::kNull);
  running_mean_ = register_parameter("running_mean", shape, init::Zero(), GradReq::kNull,
                                     ParameterKind::kRunningState);
  running_var_ = register_parameter("running_var", shape, init::One(), GradReq::kNull,
                                    ParameterKind::kRunningState);
}

NDArray BatchNorm::forward(const NDArray& x) {
  TAGFLOW_CHECK(x.defined() && x.ndim() >= 2,
                "{}: expected an input of shape (batch, channels, ...), got {}", name(),
                x.defined() ? "(" + x.shape().str() + ")" : "an undefined array");
  const Shape channels{x.shape()[1]};
  for (const ParameterPtr& p : {gamma_, beta_, running_mean_, running_var_}) {
    if (p->shape()[0] == 0) p->infer_shape(channels);
  }
  TAGFLOW_CHECK(gamma_->shape() == channels, "{}: expected {} channels (axis 1), got input ({})",
                name(), gamma_->shape()[0], x.shape().str());
  const Context ctx = x.context();
  return batch_norm(x, gamma_->data(ctx), beta_->data(ctx), running_mean_->data(ctx),
                    running_var_->data(ctx),
                    {.eps = epsilon_,
                     .momentum = momentum_,
                     .training = autograd::is_training(),
                     .unbiased_running_var = unbiased_running_var_});
}

}  // namespace tagflow::nn
