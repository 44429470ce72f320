#pragma once
// The basic layers, as Gluon's basic_layers: Dense (fully connected),
// Activation, Flatten, Dropout, BatchNorm.
//
//   nn::Dense(120, "relu")          // in_units inferred on the first call
//   nn::Dense(10, "", /*in_units=*/84)
//   nn::Dropout(0.5)                // only while training
//   nn::BatchNorm()                 // channels (axis 1) inferred
//
// Dropout and BatchNorm behave differently while training: inside
// `autograd::record()` (training mode unless asked otherwise) Dropout drops
// and BatchNorm normalizes with the batch's statistics and updates its
// running ones; outside, Dropout passes its input through and BatchNorm
// uses the running statistics.
//
// Threads: concurrent reads, exclusive writes. Like every Block (nn/block.h):
// forward from several threads at once. BatchNorm in training mode updates
// its running statistics in the order the threads' calls were pushed;
// Dropout's masks then depend on that order too (ops/random.h).

#include <string>

#include "nn/block.h"

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
  /// With `flatten = false` the layer maps the last axis only, as MXNet's
  /// Dense(flatten=False): (..., in_units) -> (..., units).
  explicit Dense(int units, std::string activation = "", int in_units = 0, bool use_bias = true,
                 init::InitializerPtr weight_init = nullptr,
                 init::InitializerPtr bias_init = init::Zero(), bool flatten = true);
  NDArray forward(const NDArray& x) override;
  /// "Dense(784 -> 256, Activation(relu))", "None" for in_units not yet known.
  std::string describe() const override;
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }

 private:
  int units_;
  std::string activation_;
  bool flatten_;
  ParameterPtr weight_;
  ParameterPtr bias_;  ///< null without a bias
};

class Activation : public Block {
 public:
  explicit Activation(std::string activation);
  NDArray forward(const NDArray& x) override { return activate(x, activation_); }
  std::string describe() const override { return "Activation(" + activation_ + ")"; }

 private:
  std::string activation_;
};

/// (batch, ...) -> (batch, features): a view, no copy.
class Flatten : public Block {
 public:
  Flatten() : Block("flatten") {}
  NDArray forward(const NDArray& x) override;
};

/// Zeroes each element with probability `rate` while training, scaling the
/// others by 1 / (1 - rate); the identity otherwise. The elements dropped
/// come from the random stream of random::seed.
class Dropout : public Block {
 public:
  /// Throws unless 0 <= rate < 1.
  explicit Dropout(double rate);
  NDArray forward(const NDArray& x) override;
  std::string describe() const override;

 private:
  double rate_;
};

/// Batch normalization over axis 1 (channels) of (N, C) or (N, C, H, W)
/// input: y = gamma (x - mean) / sqrt(var + epsilon) + beta per channel,
/// see ops/batch_norm.h. Parameters gamma (ones), beta (zeros), and the
/// running statistics running_mean (zeros) and running_var (ones), which
/// are not learned (GradReq::kNull) but saved with the others. Without
/// `center` beta stays 0, without `scale` gamma stays 1 (not learned).
/// The running variance follows the unbiased batch variance (PyTorch's
/// rule), or the biased one with `unbiased_running_var = false` (MXNet's,
/// which Python's gluon.nn.BatchNorm uses): ops/batch_norm.h.
class BatchNorm : public Block {
 public:
  explicit BatchNorm(double momentum = 0.9, double epsilon = 1e-5, bool center = true,
                     bool scale = true, int in_channels = 0, bool unbiased_running_var = true);
  NDArray forward(const NDArray& x) override;
  std::string describe() const override;
  const ParameterPtr& gamma() const { return gamma_; }
  const ParameterPtr& beta() const { return beta_; }
  const ParameterPtr& running_mean() const { return running_mean_; }
  const ParameterPtr& running_var() const { return running_var_; }

 private:
  double momentum_;
  double epsilon_;
  bool unbiased_running_var_;
  ParameterPtr gamma_;
  ParameterPtr beta_;
  ParameterPtr running_mean_;
  ParameterPtr running_var_;
};

}  // namespace tagflow::nn
