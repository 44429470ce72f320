#pragma once
// A multilayer perceptron for flattened images, written with the public API
// only.
//
//   nn::Sequential net = models::mlp();
//   net.initialize(init::Normal(0.01f), {cpu(0)});
//   NDArray scores = net(images);   // any [batch, ...]: Dense flattens
//
// Threads: safe to call concurrently. mlp() makes a new network on each
// call; the network follows the rule of every Block (nn/block.h).

#include "nn/basic_layers.h"

namespace tagflow::models {

/// Dense layers of 256 and 128 units with ReLU, then one of `classes` units
/// (the scores, before softmax). Not yet initialized. Throws tagflow::Error
/// unless classes >= 1.
nn::Sequential mlp(int classes = 10);

}  // namespace tagflow::models
