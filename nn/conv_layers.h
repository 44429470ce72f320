#pragma once
// The image layers: Conv2D, MaxPool2D, AvgPool2D, GlobalAvgPool2D,
// GlobalMaxPool2D, on NCHW float32 input; Conv1D on NCW sequences.
// The tutorial's LeNet:
//
//   nn::Sequential net;
//   net.add(nn::Conv2D(6, 5, "relu"), nn::MaxPool2D(2, 2),
//           nn::Conv2D(16, 3, "relu"), nn::MaxPool2D(2, 2),
//           nn::Dense(120, "relu"), nn::Dense(84, "relu"), nn::Dense(10));
//
// Every extent pair is (height, width); a single number means both:
//
//   nn::Conv2D(64, {3, 1}, "", {.stride = {2, 2}, .padding = {1, 0}})
//   nn::AvgPool2D(3, 1, 1)          // 3x3 windows, stride 1, padding 1
//
// Threads: concurrent reads, exclusive writes. Like every Block (nn/block.h):
// forward from several threads at once. Size2 is a value.

#include <array>
#include <optional>
#include <string>

#include "nn/block.h"
#include "ops/conv.h"
#include "ops/pool.h"

namespace tagflow::nn {

/// A (height, width) pair; an int gives both.
struct Size2 {
  Size2(int both) : value{both, both} {}  // NOLINT(google-explicit-constructor): reads as Gluon
  Size2(int height, int width) : value{height, width} {}
  std::array<int, 2> value;
};

/// y = activation(conv2d(x, weight, bias)), weight (channels, in_channels /
/// groups, kh, kw), bias (channels). `in_channels` 0: inferred on the first
/// call, and the initialization deferred until then.
class Conv2D : public Block {
 public:
  explicit Conv2D(int channels, Size2 kernel_size, std::string activation = "",
                  Conv2DOptions options = {}, int in_channels = 0, bool use_bias = true,
                  init::InitializerPtr weight_init = nullptr,
                  init::InitializerPtr bias_init = init::Zero());
  NDArray forward(const NDArray& x) override;
  /// "Conv2D(1 -> 6, kernel_size=(5, 5), stride=(1, 1), Activation(sigmoid))".
  std::string describe() const override;
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }
  const Conv2DOptions& options() const { return options_; }

 private:
  std::string activation_;
  Conv2DOptions options_;
  ParameterPtr weight_;
  ParameterPtr bias_;  ///< null without a bias
};

/// Conv1D's stride, padding, dilation and groups, one number each.
struct Conv1DOptions {
  int stride = 1;
  int padding = 0;  ///< zeros added on both sides
  int dilation = 1;
  int groups = 1;
};

/// y = activation(conv1d(x, weight, bias)) on (N, C, W) input, weight
/// (channels, in_channels / groups, k), bias (channels), as Gluon's Conv1D:
/// computed as conv2d over (N, C, 1, W) with a (1, k) kernel, the input and
/// the weight seen through reshaped views (no copies). `in_channels` 0:
/// inferred on the first call.
///
///   nn::Conv1D(16, 3, "relu", {.padding = 1})   // (N, C, W) -> (N, 16, W)
class Conv1D : public Block {
 public:
  explicit Conv1D(int channels, int kernel_size, std::string activation = "",
                  Conv1DOptions options = {}, int in_channels = 0, bool use_bias = true,
                  init::InitializerPtr weight_init = nullptr,
                  init::InitializerPtr bias_init = init::Zero());
  NDArray forward(const NDArray& x) override;
  /// "Conv1D(4 -> 16, kernel_size=(3,), stride=(1,), padding=(1,))".
  std::string describe() const override;
  const ParameterPtr& weight() const { return weight_; }
  const ParameterPtr& bias() const { return bias_; }

 private:
  std::string activation_;
  Conv1DOptions options_;
  ParameterPtr weight_;
  ParameterPtr bias_;  ///< null without a bias
};

/// The maximum of each window; `strides` defaults to the window (Gluon's
/// MaxPool2D(pool_size, strides=None)).
class MaxPool2D : public Block {
 public:
  explicit MaxPool2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                     Size2 padding = 0);
  NDArray forward(const NDArray& x) override;
  std::string describe() const override;

 private:
  Pool2DOptions options_;
};

/// The mean of each window; with `count_include_pad` the padding counts as
/// zeros in the mean, else only the input elements in the window count.
class AvgPool2D : public Block {
 public:
  explicit AvgPool2D(Size2 pool_size = 2, std::optional<Size2> strides = std::nullopt,
                     Size2 padding = 0, bool count_include_pad = true);
  NDArray forward(const NDArray& x) override;
  std::string describe() const override;

 private:
  Pool2DOptions options_;
};

/// The mean of each channel over the whole image: (N, C, H, W) to
/// (N, C, 1, 1), as Gluon's GlobalAvgPool2D (ResNet's last pooling).
class GlobalAvgPool2D : public Block {
 public:
  GlobalAvgPool2D() : Block("pool") {}
  NDArray forward(const NDArray& x) override;
  std::string describe() const override { return "GlobalAvgPool2D(output_size=(1, 1))"; }
};

/// The maximum of each channel over the whole image: (N, C, H, W) to
/// (N, C, 1, 1); its gradient goes to the element max pooling picks (Note
/// [Gradient of max pooling] in ops/pool.h).
class GlobalMaxPool2D : public Block {
 public:
  GlobalMaxPool2D() : Block("pool") {}
  NDArray forward(const NDArray& x) override;
  std::string describe() const override { return "GlobalMaxPool2D(output_size=(1, 1))"; }
};

}  // namespace tagflow::nn
