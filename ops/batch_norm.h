#pragma once
// Batch normalization (Ioffe and Szegedy), channels on axis 1: an
// (N, C) array, or (N, C, ...) such as NCHW images, is normalized per channel
// over the batch and every axis after the channels, then scaled and shifted
// per channel. As MXNet's BatchNorm and PyTorch's batch_norm compute it. One
// engine operation: direct loops on CPU devices and simulated GPUs, cuDNN
// (spatial mode) on real GPUs. Recorded for autograd: gradients flow to the
// input, gamma and beta through a backward operation of its own.
//
//   NDArray x = random::normal(0, 1, {8, 16, 32, 32}, gpu(0));    // (N, C, H, W)
//   NDArray gamma = ones({16}, DType::kFloat32, gpu(0));
//   NDArray beta = zeros({16}, DType::kFloat32, gpu(0));
//   NDArray mean = zeros({16}, DType::kFloat32, gpu(0));          // running statistics,
//   NDArray var = ones({16}, DType::kFloat32, gpu(0));            // updated in place
//   NDArray y = batch_norm(x, gamma, beta, mean, var);            // training step
//   NDArray z = batch_norm(x, gamma, beta, mean, var, {.training = false});  // inference
//
// Threads: safe to call concurrently. Calls from several threads on the
// same running statistics update them in the order they were pushed.
// Threads: concurrent reads, exclusive writes. BatchNormOptions is a value.
//
// Note [Batch statistics and running statistics]
// Training normalizes each channel with the mean and the biased variance
// (divided by m, the values per channel: N times the extents after the
// channels) of the batch: y = gamma (x - mean) / sqrt(var + eps) + beta.
// The same operation then updates the running statistics in place, with
// MXNet's convention for the momentum:
//   running_mean = momentum running_mean + (1 - momentum) mean
//   running_var  = momentum running_var  + (1 - momentum) var m / (m - 1)
// By default the running variance takes the unbiased batch variance, as
// PyTorch and cuDNN do (cuDNN's exponentialAverageFactor is 1 - momentum);
// `unbiased_running_var = false` takes the biased one (`var`), the rule
// MXNet documents and its CPU kernels follow (Python's gluon.nn.BatchNorm
// uses it). Either rule gives the same values on CPU devices, simulated
// GPUs and real GPUs; training needs m > 1. Inference normalizes with the running statistics and
// leaves them untouched. The CPU kernels accumulate the statistics in double (Note [Batch
// normalization on the CPU] in kernels/batch_norm_cpu.cc), cuDNN in its own way; y is computed in
// float32. The input (and so y and its gradient) may be float16 or bfloat16, computed in float32
// and rounded once; the per-channel values stay float32, as in mixed precision.
//
// Note [Gradient of batch normalization]
// With x^ = (x - mean) / sqrt(var + eps) and dy the output's gradient:
//   dbeta = sum(dy),  dgamma = sum(dy x^)       (sums over all but the channels)
//   dx    = gamma / sqrt(var + eps) (dy - dbeta / m - x^ dgamma / m)   in training,
//   dx    = gamma / sqrt(var + eps) dy                                 in inference,
// where training differentiates through the batch statistics and inference
// treats the running statistics as constants. The forward operation saves
// the mean and 1 / sqrt(var + eps) it used (cuDNN's resultSaveMean and
// resultSaveInvVariance; in inference a snapshot of the running statistics,
// taken only when recording), so a later update of the running statistics
// does not change the gradient. The running statistics get no gradient.

#include "ops/ndarray.h"

namespace tagflow {

/// How batch_norm normalizes and how it updates the running statistics.
struct BatchNormOptions {
  /// Added to the variance before its square root; must be positive.
  double eps = 1e-5;
  /// Weight of the old running statistics in their update, in [0, 1]
  /// (MXNet's convention: 0.9 keeps 90% of the old value).
  double momentum = 0.9;
  /// True: normalize with the batch statistics and update the running ones
  /// (a layer passes autograd::is_training()). False: normalize with the
  /// running statistics.
  bool training = true;
  /// The batch variance the running variance takes in training: unbiased
  /// (times m / (m - 1), PyTorch's rule) or biased (MXNet's rule).
  bool unbiased_running_var = true;
};

/// Batch normalization of `x` (N, C) or (N, C, ...): each channel c is
/// normalized (Note [Batch statistics and running statistics]), then
/// multiplied by gamma[c] and shifted by beta[c]. `gamma`, `beta`,
/// `running_mean` and `running_var` are (C) float32 on x's device (`x` is
/// float32, float16 or bfloat16; y has its dtype);
/// in training the running statistics are updated in place by the same
/// engine operation. The output has x's shape. Every argument is checked
/// before anything is pushed.
NDArray batch_norm(const NDArray& x, const NDArray& gamma, const NDArray& beta,
                   const NDArray& running_mean, const NDArray& running_var,
                   const BatchNormOptions& options = {});

}  // namespace tagflow
