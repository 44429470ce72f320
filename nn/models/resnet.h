#pragma once
// ResNet-18 as the tutorials' multi-GPU chapter trains it on Fashion-MNIST,
// written with the public API only: the residual block is a block of one's
// own (children registered in its constructor, a forward of its own), and
// the network a Sequential of them. Read it as an example of both.
//
//   nn::Sequential net = models::resnet18(10);
//   net.initialize(init::Normal(0.01), {gpu(0), gpu(1)});
//   NDArray scores = net(images);   // images: [batch, 1, 28, 28] -> [batch, 10]
//
// Threads: safe to call concurrently. resnet18() makes a new network on each
// call.
// Threads: concurrent reads, exclusive writes. A Residual is a Block
// (nn/block.h): forward from several threads at once.

#include <memory>

#include "nn/basic_layers.h"
#include "nn/conv_layers.h"

namespace tagflow::models {

/// The residual block: y = relu(x' + bn2(conv2(relu(bn1(conv1(x)))))), two
/// 3x3 convolutions with `channels` outputs, the first with `stride`; x' is
/// x, or with `use_1x1conv` a 1x1 convolution of x with that stride (the
/// projection a block needs when it changes the channels or the size).
/// Children, in order: conv1, conv2, [conv3,] bn1, bn2.
class Residual : public nn::Block {
 public:
  explicit Residual(int channels, bool use_1x1conv = false, int stride = 1);
  NDArray forward(const NDArray& x) override;

 private:
  std::shared_ptr<nn::Conv2D> conv1_, conv2_, conv3_;
  std::shared_ptr<nn::BatchNorm> bn1_, bn2_;
};

/// A 3x3 convolution with 64 channels, batch norm and ReLU; four stages of
/// two residual blocks with 64, 128, 256 and 512 channels, the first block
/// of stages 2 to 4 halving the height and width (with a projection); the
/// mean over the image; a dense layer of `classes` units (the scores).
/// For (N, in_channels, H, W) images, H and W at least 1; on 28x28 the
/// stages see 28, 14, 7 and 4 pixels. `in_channels` 0: inferred on the first
/// call. Not yet initialized. Throws tagflow::Error unless classes >= 1 and
/// in_channels >= 0.
nn::Sequential resnet18(int classes = 10, int in_channels = 0);

}  // namespace tagflow::models
