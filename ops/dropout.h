#pragma once
// Dropout (inverted, as in MXNet and PyTorch): in training, each element is
// kept with probability 1 - p and scaled by 1 / (1 - p), or set to 0, so the
// expected value of every element is unchanged; outside training it is the
// identity.
//
//   random::seed(42);
//   NDArray h = relu(dense(x));
//   {
//     auto recording = autograd::record();     // training mode
//     NDArray y = dropout(h, 0.5);             // about half the elements 0, the rest 2 h
//   }
//   NDArray z = dropout(h, 0.5);               // not training: z is h itself
//   NDArray w = dropout(h, 0.2, true, 7);      // always the same mask for seed 7
//
// The mask is the Philox stream of ops/random.h: a call draws
// random::uniform(0, 1, x.shape(), x.context()) and keeps the elements whose
// draw is at least p. So random::seed(s) makes dropout reproducible, the
// same seed gives the same mask on cpu(i), simulated GPUs and real GPUs,
// and dropout takes its place in the global call sequence like any random
// call (one call number per dropout that drops). See Note [The dropout
// mask] in dropout.cc.
//
// Threads: safe to call concurrently. Without a seed of its own, a mask takes
// the next call number of the global generator, so while several threads
// call random operators the masks depend on the order of their calls
// (ops/random.h).

#include <cstdint>

#include "ops/autograd.h"
#include "ops/ndarray.h"

namespace tagflow {

/// Inverted dropout of floating-point `x` (float32, float16 or bfloat16;
/// the mask's draws are float32) with drop probability `p` in [0, 1).
/// When `training` (by default: autograd::is_training(), true inside
/// autograd::record()), two engine operations on x's device draw the mask
/// and compute x * mask / (1 - p); the gradient, out_grad * mask / (1 - p),
/// is one more (reusing the drawn mask). When not training, or when
/// p == 0, it returns `x` itself: no operation, no random call. A dropped
/// element is exactly 0, even where x is infinite or NaN.
///
/// Mind the overloads: `dropout(x, 0.5, 7)` converts 7 to `training`; a
/// seed needs the four-argument form.
///
///   NDArray y = dropout(x, 0.3, /*training=*/true);
NDArray dropout(const NDArray& x, double p, bool training = autograd::is_training());

/// The same with its own key `seed_value` (call number 0): the global
/// generator is neither read nor advanced, and the mask is the one the
/// first dropout after random::seed(seed_value) draws.
///
///   NDArray a = dropout(x, 0.5, true, 3);  // the same mask at every call
NDArray dropout(const NDArray& x, double p, bool training, std::uint64_t seed_value);

}  // namespace tagflow
