#include "nn/conv_layers.h"

#include <fmt/format.h>

#include "nn/amp.h"
#include "nn/basic_layers.h"

namespace tagflow::nn {

namespace {

void check_image_input(const Block& block, const NDArray& x) {
  TAGFLOW_CHECK(x.defined() && x.ndim() == 4,
                "{}: expected an input of shape (batch, channels, height, width), got {}",
                block.name(), x.defined() ? "(" + x.shape().str() + ")" : "an undefined array");
}

bool positive(std::array<int, 2> pair) { return pair[0] > 0 && pair[1] > 0; }

Pool2DOptions pool_options(const char* layer, Size2 pool_size, std::optional<Size2> strides,
                           Size2 padding, bool count_include_pad) {
  Pool2DOptions options{.kernel = pool_size.value,
                        .stride = strides ? strides->value : pool_size.value,
                        .padding = padding.value,
                        .count_include_pad = count_include_pad};
  TAGFLOW_CHECK(positive(options.kernel) && positive(options.stride) && options.padding[0] >= 0 &&
                    options.padding[1] >= 0,
                "{}: expected pool_size and strides > 0 and padding >= 0, got ({}, {}), ({}, {}) "
                "and ({}, {})",
                layer, options.kernel[0], options.kernel[1], options.stride[0], options.stride[1],
                options.padding[0], options.padding[1]);
  return options;
}

}  // namespace

Conv2D::Conv2D(int channels, Size2 kernel_size, std::string activation, Conv2DOptions options,
               int in_channels, bool use_bias, init::InitializerPtr weight_init,
               init::InitializerPtr bias_init)
    : Block("conv"), activation_(std::move(activation)), options_(options) {
  const auto [kh, kw] = kernel_size.value;
  TAGFLOW_CHECK(channels > 0 && kh > 0 && kw > 0 && in_channels >= 0,
                "Conv2D: expected channels > 0, a kernel_size > 0 and in_channels >= 0 (0: "
                "inferred), got {}, ({}, {}) and {}",
                channels, kh, kw, in_channels);
  TAGFLOW_CHECK(
      options.groups > 0 && channels % options.groups == 0 && in_channels % options.groups == 0,
      "Conv2D: expected groups > 0 dividing channels ({}) and in_channels ({}), got {}", channels,
      in_channels, options.groups);
  TAGFLOW_CHECK(positive(options.stride) && positive(options.dilation) && options.padding[0] >= 0 &&
                    options.padding[1] >= 0,
                "Conv2D: expected stride and dilation > 0 and padding >= 0, got ({}, {}), "
                "({}, {}) and ({}, {})",
                options.stride[0], options.stride[1], options.dilation[0], options.dilation[1],
                options.padding[0], options.padding[1]);
  check_activation("Conv2D", activation_);
  weight_ = register_parameter("weight", Shape{channels, in_channels / options.groups, kh, kw},
                               std::move(weight_init));
  if (use_bias) bias_ = register_parameter("bias", Shape{channels}, std::move(bias_init));
}

NDArray Conv2D::forward(const NDArray& x) {
  check_image_input(*this, x);
  const std::int64_t in_channels = x.shape()[1];
  TAGFLOW_CHECK(in_channels % options_.groups == 0,
                "{}: expected input channels divisible by groups ({}), got {}", name(),
                options_.groups, in_channels);
  Shape weight_shape = weight_->shape();
  if (weight_shape[1] == 0) {
    weight_->infer_shape(
        Shape{weight_shape[0], in_channels / options_.groups, weight_shape[2], weight_shape[3]});
  }
  TAGFLOW_CHECK(weight_->shape()[1] * options_.groups == in_channels,
                "{}: expected {} input channels, got {} (input shape ({}))", name(),
                weight_->shape()[1] * options_.groups, in_channels, x.shape().str());
  const Context ctx = x.context();
  // In an autocast scope, in its dtype (Note [Mixed precision] in nn/amp.h).
  NDArray y =
      conv2d(amp::to_compute_dtype(x), amp::to_compute_dtype(weight_->data(ctx)),
             bias_ != nullptr ? amp::to_compute_dtype(bias_->data(ctx)) : NDArray(), options_);
  return activate(y, activation_);
}

Conv1D::Conv1D(int channels, int kernel_size, std::string activation, Conv1DOptions options,
               int in_channels, bool use_bias, init::InitializerPtr weight_init,
               init::InitializerPtr bias_init)
    : Block("conv"), activation_(std::move(activation)), options_(options) {
  TAGFLOW_CHECK(channels > 0 && kernel_size > 0 && in_channels >= 0,
                "Conv1D: expected channels > 0, a kernel_size > 0 and in_channels >= 0 (0: "
                "inferred), got {}, {} and {}",
                channels, kernel_size, in_channels);
  TAGFLOW_CHECK(
      options.groups > 0 && channels % options.groups == 0 && in_channels % options.groups == 0,
      "Conv1D: expected groups > 0 dividing channels ({}) and in_channels ({}), got {}", channels,
      in_channels, options.groups);
  TAGFLOW_CHECK(options.stride > 0 && options.dilation > 0 && options.padding >= 0,
                "Conv1D: expected stride and dilation > 0 and padding >= 0, got {}, {} and {}",
                options.stride, options.dilation, options.padding);
  check_activation("Conv1D", activation_);
  weight_ = register_parameter("weight", Shape{channels, in_channels / options.groups, kernel_size},
                               std::move(weight_init));
  if (use_bias) bias_ = register_parameter("bias", Shape{channels}, std::move(bias_init));
}

NDArray Conv1D::forward(const NDArray& x) {
  TAGFLOW_CHECK(x.defined() && x.ndim() == 3,
                "{}: expected an input of shape (batch, channels, width), got {}", name(),
                x.defined() ? "(" + x.shape().str() + ")" : "an undefined array");
  const std::int64_t batch = x.shape()[0];
  const std::int64_t in_channels = x.shape()[1];
  const std::int64_t width = x.shape()[2];
  TAGFLOW_CHECK(in_channels % options_.groups == 0,
                "{}: expected input channels divisible by groups ({}), got {}", name(),
                options_.groups, in_channels);
  const Shape w = weight_->shape();
  if (w[1] == 0) weight_->infer_shape(Shape{w[0], in_channels / options_.groups, w[2]});
  TAGFLOW_CHECK(weight_->shape()[1] * options_.groups == in_channels,
                "{}: expected {} input channels, got {} (input shape ({}))", name(),
                weight_->shape()[1] * options_.groups, in_channels, x.shape().str());
  const Context ctx = x.context();
  const Shape& k = weight_->shape();
  const Conv2DOptions as_2d{.stride = {1, options_.stride},
                            .padding = {0, options_.padding},
                            .dilation = {1, options_.dilation},
                            .groups = options_.groups};
  // In an autocast scope, in its dtype (Note [Mixed precision] in nn/amp.h).
  NDArray y = conv2d(amp::to_compute_dtype(x).reshape({batch, in_channels, 1, width}),
                     amp::to_compute_dtype(weight_->data(ctx)).reshape({k[0], k[1], 1, k[2]}),
                     bias_ != nullptr ? amp::to_compute_dtype(bias_->data(ctx)) : NDArray(), as_2d);
  y = y.reshape({batch, k[0], y.shape()[3]});
  return activate(y, activation_);
}

std::string Conv1D::describe() const {
  const Shape& w = weight_->shape();
  const std::int64_t in_channels = w[1] * options_.groups;
  std::string text = fmt::format("Conv1D({} -> {}, kernel_size=({},), stride=({},)",
                                 in_channels == 0 ? "None" : std::to_string(in_channels), w[0],
                                 w[2], options_.stride);
  if (options_.padding != 0) text += fmt::format(", padding=({},)", options_.padding);
  if (options_.dilation != 1) text += fmt::format(", dilation=({},)", options_.dilation);
  if (options_.groups != 1) text += fmt::format(", groups={}", options_.groups);
  if (!activation_.empty()) text += ", Activation(" + activation_ + ")";
  return text + ")";
}

namespace {

std::string pair(const std::array<int, 2>& v) { return fmt::format("({}, {})", v[0], v[1]); }

std::string pool_description(const char* kind, const Pool2DOptions& o) {
  return fmt::format("{}(size={}, stride={}, padding={})", kind, pair(o.kernel), pair(o.stride),
                     pair(o.padding));
}

}  // namespace

std::string Conv2D::describe() const {
  const Shape& w = weight_->shape();
  const std::int64_t in_channels = w[1] * options_.groups;
  std::string text = fmt::format("Conv2D({} -> {}, kernel_size=({}, {}), stride={}",
                                 in_channels == 0 ? "None" : std::to_string(in_channels), w[0],
                                 w[2], w[3], pair(options_.stride));
  if (options_.padding != std::array<int, 2>{0, 0}) text += ", padding=" + pair(options_.padding);
  if (options_.dilation != std::array<int, 2>{1, 1}) {
    text += ", dilation=" + pair(options_.dilation);
  }
  if (options_.groups != 1) text += fmt::format(", groups={}", options_.groups);
  if (!activation_.empty()) text += ", Activation(" + activation_ + ")";
  return text + ")";
}

std::string MaxPool2D::describe() const { return pool_description("MaxPool2D", options_); }
std::string AvgPool2D::describe() const { return pool_description("AvgPool2D", options_); }

MaxPool2D::MaxPool2D(Size2 pool_size, std::optional<Size2> strides, Size2 padding)
    : Block("pool"), options_(pool_options("MaxPool2D", pool_size, strides, padding, true)) {}

NDArray MaxPool2D::forward(const NDArray& x) {
  check_image_input(*this, x);
  return pool2d(x, PoolType::kMax, options_);
}

AvgPool2D::AvgPool2D(Size2 pool_size, std::optional<Size2> strides, Size2 padding,
                     bool count_include_pad)
    : Block("pool"),
      options_(pool_options("AvgPool2D", pool_size, strides, padding, count_include_pad)) {}

NDArray AvgPool2D::forward(const NDArray& x) {
  check_image_input(*this, x);
  return pool2d(x, PoolType::kAverage, options_);
}

namespace {

/// One window over the whole image.
Pool2DOptions whole_image(const Block& block, const NDArray& x) {
  check_image_input(block, x);
  const auto height = x.shape()[2], width = x.shape()[3];
  TAGFLOW_CHECK(height > 0 && width > 0,
                "{}: expected an image of at least one pixel, got shape ({})", block.name(),
                x.shape().str());
  const std::array<int, 2> size{static_cast<int>(height), static_cast<int>(width)};
  return {.kernel = size, .stride = size};
}

}  // namespace

NDArray GlobalAvgPool2D::forward(const NDArray& x) {
  return pool2d(x, PoolType::kAverage, whole_image(*this, x));
}

NDArray GlobalMaxPool2D::forward(const NDArray& x) {
  return pool2d(x, PoolType::kMax, whole_image(*this, x));
}

}  // namespace tagflow::nn
