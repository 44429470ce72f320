// The GPU batch normalization kernels: cuDNN's batch normalization (the
// legacy API of cuDNN 9, spatial mode: one mean and variance per channel
// over the batch and the spatial axes) on the operation's stream, with the
// per-stream handle of cudnn_util.h. The input (N, C, ...) is described to cuDNN
// as (N, C, spatial, 1), so an (N, C) array is (N, C, 1, 1) and a 3-D or
// 5-D one is folded the same way; the per-channel tensors are (1, C, 1, 1).
// cuDNN updates the running variance with the unbiased batch variance, as
// the CPU kernels do by default (Note [Batch statistics and running
// statistics] in batch_norm.h), and its exponentialAverageFactor is
// 1 - momentum. For the biased rule cuDNN is given no running statistics
// (it takes both or neither) and a kernel of ours updates them from the
// mean and 1 / sqrt(var + eps) cuDNN saved. cuDNN
// has no affine (inference) backward pass: that one, and the snapshot of
// the running statistics an inference forward saves for it, are small
// kernels of our own. float16 and bfloat16 inputs are described as such,
// the per-channel tensors stay float32 and the scaling factors float, as
// cuDNN takes them for 16-bit data (its statistics are accumulated in
// float). Every status and launch is checked.

#include <cuda_runtime.h>
#include <cudnn.h>

#include "ops/kernels/batch_norm_kernels.h"
#include "ops/kernels/cudnn_util.h"
#include "ops/kernels/grid_stride.h"

namespace tagflow::detail::gpu_kernels {

// batch_norm() refuses eps <= 0 before pushing anything; that check covers
// cuDNN's minimum only while the minimum is not positive.
static_assert(CUDNN_BN_MIN_EPSILON <= 0.0,
              "cuDNN now needs eps >= CUDNN_BN_MIN_EPSILON > 0: check it in batch_norm.cc");

namespace {

constexpr int kThreads = 256;  // a power of two: the tree halves it

/// The input as (N, C, spatial, 1) and the per-channel tensors as (1, C, 1, 1).
struct BatchNormDescriptors {
  TensorDescriptor x;
  TensorDescriptor per_channel;
  BatchNormDescriptors(const BatchNormShape& s, DType dtype)
      : x(s.batch, s.channels, s.spatial, 1, dtype), per_channel(1, s.channels, 1, 1) {
    // cuDNN's strides are ints too.
    as_int(s.channels * s.spatial, "channels times spatial size");
  }
};

/// save_mean = running_mean, save_inv_std = 1 / sqrt(running_var + eps).
__global__ void snapshot_kernel(const float* running_mean, const float* running_var, double eps,
                                float* save_mean, float* save_inv_std, std::int64_t channels) {
  for (std::int64_t c = first_index(); c < channels; c += grid_stride()) {
    save_mean[c] = running_mean[c];
    save_inv_std[c] = static_cast<float>(1.0 / ::sqrt(static_cast<double>(running_var[c]) + eps));
  }
}

/// The affine gradient (inference): a block per channel (grid-stride over
/// channels); the block's threads stride over the channel's values, writing
/// dx = gamma inv_std dy and summing dy and dy (x - mean) in double, then
/// combine their sums in a shared-memory tree.
template <typename T>
__global__ void __launch_bounds__(kThreads)
    affine_backward_kernel(BatchNormShape s, const T* x, const T* dy, const float* gamma,
                           const float* mean, const float* inv_std, T* dx, float* dgamma,
                           float* dbeta) {
  __shared__ double shared_dy[kThreads];
  __shared__ double shared_dy_xmu[kThreads];
  const std::int64_t m = s.per_channel();
  for (std::int64_t c = blockIdx.x; c < s.channels; c += gridDim.x) {
    const float mu = mean[c];
    const float istd = inv_std[c];
    const auto a = static_cast<float>(static_cast<double>(gamma[c]) * istd);
    double sum_dy = 0;
    double sum_dy_xmu = 0;
    for (std::int64_t j = threadIdx.x; j < m; j += kThreads) {
      const std::int64_t i = ((j / s.spatial) * s.channels + c) * s.spatial + j % s.spatial;
      const auto g = static_cast<float>(dy[i]);
      sum_dy += g;
      sum_dy_xmu += static_cast<double>(g) * (static_cast<double>(static_cast<float>(x[i])) - mu);
      dx[i] = convert_element<T>(a * g);
    }
    shared_dy[threadIdx.x] = sum_dy;
    shared_dy_xmu[threadIdx.x] = sum_dy_xmu;
    __syncthreads();
    for (int half = kThreads / 2; half > 0; half /= 2) {
      if (static_cast<int>(threadIdx.x) < half) {
        shared_dy[threadIdx.x] += shared_dy[threadIdx.x + half];
        shared_dy_xmu[threadIdx.x] += shared_dy_xmu[threadIdx.x + half];
      }
      __syncthreads();
    }
    if (threadIdx.x == 0) {
      dbeta[c] = static_cast<float>(shared_dy[0]);
      dgamma[c] = static_cast<float>(shared_dy_xmu[0] * istd);
    }
    __syncthreads();  // the sums are read before the next channel overwrites them
  }
}

/// MXNet's rule: running_mean and running_var move towards the batch mean
/// and biased variance, recovered from what cuDNN saved
/// (var = 1 / inv_std^2 - eps, in double).
__global__ void biased_running_update_kernel(const float* save_mean, const float* save_inv_std,
                                             double eps, double momentum, float* running_mean,
                                             float* running_var, std::int64_t channels) {
  for (std::int64_t c = first_index(); c < channels; c += grid_stride()) {
    const double inv_std = save_inv_std[c];
    const double var = ::fmax(0.0, 1.0 / (inv_std * inv_std) - eps);
    running_mean[c] =
        static_cast<float>(momentum * running_mean[c] + (1 - momentum) * save_mean[c]);
    running_var[c] = static_cast<float>(momentum * running_var[c] + (1 - momentum) * var);
  }
}

}  // namespace

void batch_norm_forward_training(const BatchNormShape& s, const BatchNormParams& p, DType dtype,
                                 const void* x, const float* gamma, const float* beta, void* y,
                                 float* save_mean, float* save_inv_std, float* running_mean,
                                 float* running_var, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  BatchNormDescriptors d(s, dtype);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(
      cudnnBatchNormalizationForwardTraining(
          h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.desc, x, d.x.desc, y, d.per_channel.desc,
          gamma, beta, 1.0 - p.momentum, p.unbiased_running_var ? running_mean : nullptr,
          p.unbiased_running_var ? running_var : nullptr, p.eps, save_mean, save_inv_std),
      "batch_norm: cudnnBatchNormalizationForwardTraining");
  if (p.unbiased_running_var) return;
  biased_running_update_kernel<<<blocks_for(s.channels, kThreads), kThreads, 0,
                                 as_stream(stream)>>>(save_mean, save_inv_std, p.eps, p.momentum,
                                                      running_mean, running_var, s.channels);
  check_launch("batch_norm running statistics kernel");
}

void batch_norm_forward_inference(const BatchNormShape& s, const BatchNormParams& p, DType dtype,
                                  const void* x, const float* gamma, const float* beta,
                                  const float* running_mean, const float* running_var, void* y,
                                  float* save_mean, float* save_inv_std, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  BatchNormDescriptors d(s, dtype);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnBatchNormalizationForwardInference(
                  h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, d.x.desc, x, d.x.desc, y,
                  d.per_channel.desc, gamma, beta, running_mean, running_var, p.eps),
              "batch_norm: cudnnBatchNormalizationForwardInference");
  if (save_mean == nullptr) return;
  snapshot_kernel<<<blocks_for(s.channels, kThreads), kThreads, 0, as_stream(stream)>>>(
      running_mean, running_var, p.eps, save_mean, save_inv_std, s.channels);
  check_launch("batch_norm snapshot kernel");
}

void batch_norm_backward(const BatchNormShape& s, const BatchNormParams& p, bool batch_statistics,
                         DType dtype, const void* x, const void* dy, const float* gamma,
                         const float* save_mean, const float* save_inv_std, void* dx, float* dgamma,
                         float* dbeta, int device, void* stream) {
  if (!batch_statistics) {
    TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, {
      affine_backward_kernel<T><<<block_count(s.channels), kThreads, 0, as_stream(stream)>>>(
          s, static_cast<const T*>(x), static_cast<const T*>(dy), gamma, save_mean, save_inv_std,
          static_cast<T*>(dx), dgamma, dbeta);
    });
    check_launch("batch_norm affine backward kernel");
    return;
  }
  cudnnHandle_t h = cudnn_handle(stream, device);
  BatchNormDescriptors d(s, dtype);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(
      cudnnBatchNormalizationBackward(h, CUDNN_BATCHNORM_SPATIAL, &one, &zero, &one, &zero,
                                      d.x.desc, x, d.x.desc, dy, d.x.desc, dx, d.per_channel.desc,
                                      gamma, dgamma, dbeta, p.eps, save_mean, save_inv_std),
      "batch_norm_backward: cudnnBatchNormalizationBackward");
}

}  // namespace tagflow::detail::gpu_kernels
