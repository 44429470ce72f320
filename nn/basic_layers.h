#pragma once
// The basic layers: Dense (fully connected), Activation, Flatten.
//
//   nn::Dense(120, "relu")          // in_units inferred on the first call
//   nn::Dense(10, "", /*in_units=*/84)

#include <string>

#include "tagflow/nn/block.h"

namespace tagflow::nn {

/// An activation by name: "relu", "sigmoid", "tanh", or "" (identity).
/// Throws for an unknown name, listing the known ones.
NDArray activate(const NDArray& x, const std::string& activation);

/// Throws, naming `layer`, unless activate() knows `activation`.
void check_activation(const std::string& layer, const std::string& activation);

/// y = activation(x · Wᵀ + b), x flattened to (batch, features) first, as
/// MXNet's Dense does. W has shape (units, in_units).
class Dense : public Block {
 public:
  explicit Dense(int units, std::string activation = "", int in_units = 0, bool use_bias = true,
                 init::InitializerPtr weight_init = nullptr,
                 init::InitializerPtr bias_init = init::Zero());
  NDArray forward(const NDArray& x) override;
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }

 private:
  int units_;
  std::string activation_;
  ParameterPtr weight_;
  ParameterPtr bias_;  ///< null without a bias
};

class Activation : public Block {
 public:
  explicit Activation(std::string activation);
  NDArray forward(const NDArray& x) override { return activate(x, activation_); }

 private:
  std::string activation_;
};

/// (batch, ...) -> (batch, features): a view, no copy.
class Flatten : public Block {
 public:
  Flatten() : Block("flatten") {}
  NDArray forward(const NDArray& x) override;
};

}  // namespace tagflow::nn
