#pragma once
// The batch normalization kernels (channels on axis 1): forward in
// training and in inference, and the backward pass the gradient pushes as an
// engine operation of its own (Notes [Batch statistics and running
// statistics] and [Gradient of batch normalization] in batch_norm.h). The
// CPU ones (batch_norm_cpu.cc, also run by simulated GPUs) are direct loops
// parallel over channels, on float32 (16-bit inputs staged through float32:
// float_staging.h); the CUDA ones (batch_norm.cu) call cuDNN, with x, y, dy
// and dx of the input's floating dtype. The per-channel values (gamma,
// beta, the running and saved statistics, their gradients) are float32 for
// every input dtype, as cuDNN takes them. Internal to ops/.

#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/host_device.h"

namespace tagflow::detail {

/// The input as (batch, channels, spatial) in row-major order: `spatial` is
/// the product of the extents after the channels (1 for an (N, C) input).
struct BatchNormShape {
  std::int64_t batch = 0, channels = 0, spatial = 1;

  /// Values per channel: what the statistics are taken over.
  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE std::int64_t per_channel() const { return batch * spatial; }
  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE std::int64_t size() const {
    return batch * channels * spatial;
  }
};

/// The scalars of a batch normalization (see BatchNormOptions).
struct BatchNormParams {
  double eps = 1e-5;
  double momentum = 0.9;
  bool unbiased_running_var = true;  ///< else the biased batch variance
};

namespace cpu_kernels {
/// y = gamma (x - mean) inv_std + beta with the batch's mean and biased
/// variance per channel, inv_std = 1 / sqrt(var + eps); writes mean and
/// inv_std to save_mean and save_inv_std and updates running_mean and
/// running_var in place (the latter with the unbiased variance, or the
/// biased one as `p` says). Needs per_channel() > 1.
void batch_norm_forward_training(const BatchNormShape& s, const BatchNormParams& p, const float* x,
                                 const float* gamma, const float* beta, float* y, float* save_mean,
                                 float* save_inv_std, float* running_mean, float* running_var);
/// y with the running statistics. When `save_mean` is not null, also writes
/// running_mean to save_mean and 1 / sqrt(running_var + eps) to save_inv_std.
void batch_norm_forward_inference(const BatchNormShape& s, const BatchNormParams& p, const float* x,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float* y, float* save_mean,
                                  float* save_inv_std);
/// dx, dgamma and dbeta from dy and the forward's saved mean and inv_std:
/// through the batch statistics when `batch_statistics` (training), else
/// the affine gradient (inference).
void batch_norm_backward(const BatchNormShape& s, const BatchNormParams& p, bool batch_statistics,
                         const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_inv_std, float* dx,
                         float* dgamma, float* dbeta);
}  // namespace cpu_kernels

namespace gpu_kernels {
/// As the CPU kernels, with x, y, dy and dx of floating-point `dtype`;
/// `device` is the GPU whose compute stream `stream` is.
void batch_norm_forward_training(const BatchNormShape& s, const BatchNormParams& p, DType dtype,
                                 const void* x, const float* gamma, const float* beta, void* y,
                                 float* save_mean, float* save_inv_std, float* running_mean,
                                 float* running_var, int device, void* stream);
void batch_norm_forward_inference(const BatchNormShape& s, const BatchNormParams& p, DType dtype,
                                  const void* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, void* y,
                                  float* save_mean, float* save_inv_std, int device, void* stream);
void batch_norm_backward(const BatchNormShape& s, const BatchNormParams& p, bool batch_statistics,
                         DType dtype, const void* x, const void* dy, const float* gamma,
                         const float* save_mean, const float* save_inv_std, void* dx, float* dgamma,
                         float* dbeta, int device, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
