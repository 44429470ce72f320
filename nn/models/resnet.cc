#include "nn/models/resnet.h"

#include "engine/error.h"
#include "ops/elementwise.h"

namespace tagflow::models {

Residual::Residual(int channels, bool use_1x1conv, int stride)
    : nn::Block("residual"),
      conv1_(register_child(
          nn::Conv2D(channels, 3, "", {.stride = {stride, stride}, .padding = {1, 1}}))),
      conv2_(register_child(nn::Conv2D(channels, 3, "", {.padding = {1, 1}}))) {
  TAGFLOW_CHECK(channels >= 1 && stride >= 1,
                "models::Residual: expected channels >= 1 and stride >= 1, got {} and {}", channels,
                stride);
  if (use_1x1conv) {
    conv3_ = register_child(nn::Conv2D(channels, 1, "", {.stride = {stride, stride}}));
  }
  bn1_ = register_child(nn::BatchNorm());
  bn2_ = register_child(nn::BatchNorm());
}

NDArray Residual::forward(const NDArray& x) {
  const NDArray y = relu((*bn1_)((*conv1_)(x)));
  const NDArray z = (*bn2_)((*conv2_)(y));
  return relu(z + (conv3_ != nullptr ? (*conv3_)(x) : x));
}

nn::Sequential resnet18(int classes, int in_channels) {
  TAGFLOW_CHECK(classes >= 1 && in_channels >= 0,
                "models::resnet18: expected classes >= 1 and in_channels >= 0 (0: inferred), got "
                "{} and {}",
                classes, in_channels);
  const auto stage = [](int channels, bool first_stage) {
    nn::Sequential blocks;
    if (first_stage) {
      blocks.add(Residual(channels), Residual(channels));
    } else {
      blocks.add(Residual(channels, true, 2), Residual(channels));
    }
    return blocks;
  };
  nn::Sequential net;
  net.add(nn::Conv2D(64, 3, "", {.padding = {1, 1}}, in_channels), nn::BatchNorm(),
          nn::Activation("relu"));
  net.add(stage(64, true), stage(128, false), stage(256, false), stage(512, false));
  net.add(nn::GlobalAvgPool2D(), nn::Dense(classes));
  return net;
}

}  // namespace tagflow::models
