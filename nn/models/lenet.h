#pragma once
// LeNet: the convolutional network of the tutorials, for 28x28 grey images
// such as Fashion-MNIST, written with the public API only (a model is a
// function that returns blocks; read it as an example).
//
//   nn::Sequential net = models::lenet();
//   net.initialize(init::Xavier(), {gpu(0)});   // shapes inferred on the first call
//   NDArray scores = net(images);                // images: [batch, 1, 28, 28]
//
// Threads: safe to call concurrently. lenet() makes a new network on each
// call; the network follows the rule of every Block (nn/block.h).

#include "nn/basic_layers.h"

namespace tagflow::models {

/// Two 5x5 / 3x3 convolutions with ReLU, each followed by 2x2 max pooling,
/// then dense layers of 120 and 84 units with ReLU and a last one of
/// `classes` units (the scores, before softmax). Not yet initialized.
/// Throws tagflow::Error unless classes >= 1.
nn::Sequential lenet(int classes = 10);

}  // namespace tagflow::models
