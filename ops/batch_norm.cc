#include "ops/batch_norm.h"

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/batch_norm_kernels.h"
#include "ops/kernels/float_staging.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"

namespace tagflow {

namespace {

constexpr const char* kName = "batch_norm";

using detail::BatchNormParams;
using detail::BatchNormShape;
using detail::run_kernel;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

/// True when `a` and `b` share memory (views of one chunk whose elements
/// overlap); arrays of different chunks never do.
bool overlaps(const NDArray& a, const NDArray& b) {
  if (a.var() != b.var() || a.nbytes() == 0 || b.nbytes() == 0) return false;
  const auto begin_a = reinterpret_cast<std::uintptr_t>(a.raw_data());
  const auto begin_b = reinterpret_cast<std::uintptr_t>(b.raw_data());
  return begin_a < begin_b + b.nbytes() && begin_b < begin_a + a.nbytes();
}

/// An argument, for the messages.
struct Argument {
  const NDArray* array;
  const char* name;
  int position;
};

/// Every check, before anything is pushed; the input's extents.
BatchNormShape check_arguments(const NDArray& x, const NDArray& gamma, const NDArray& beta,
                               const NDArray& running_mean, const NDArray& running_var,
                               const BatchNormOptions& o) {
  const Argument arguments[] = {{&x, "the input", 1},
                                {&gamma, "gamma", 2},
                                {&beta, "beta", 3},
                                {&running_mean, "running_mean", 4},
                                {&running_var, "running_var", 5}};
  detail::check_same_context(kName, {&x, &gamma, &beta, &running_mean, &running_var});
  // The input in any floating dtype; the per-channel values float32 (the
  // master values of mixed precision, as cuDNN takes them).
  detail::check_floating(kName, x, 1);
  for (const Argument& a : arguments) {
    if (a.position != 1) detail::check_float32(kName, *a.array, a.position);
  }
  TAGFLOW_CHECK(x.ndim() >= 2,
                "batch_norm: expected the input as an (N, C) or (N, C, ...) array with the "
                "channels on axis 1, got ({})",
                x.shape().str());
  const std::int64_t channels = x.shape()[1];
  for (const Argument& a : arguments) {
    if (a.position == 1) continue;
    TAGFLOW_CHECK(a.array->ndim() == 1 && a.array->shape()[0] == channels,
                  "batch_norm: expected {} (the {} argument) of shape ({}), one value per channel "
                  "of the input ({}), got ({})",
                  a.name, detail::ordinal(a.position), channels, x.shape().str(),
                  a.array->shape().str());
  }
  TAGFLOW_CHECK(std::isfinite(o.eps) && o.eps > 0, "batch_norm: expected a finite eps > 0, got {}",
                o.eps);
  TAGFLOW_CHECK(o.momentum >= 0 && o.momentum <= 1,
                "batch_norm: expected a momentum in [0, 1], got {}", o.momentum);
  BatchNormShape s;
  s.batch = x.shape()[0];
  s.channels = channels;
  for (int axis = 2; axis < x.ndim(); ++axis) s.spatial *= x.shape()[axis];
  if (!o.training) return s;
  TAGFLOW_CHECK(s.per_channel() > 1,
                "batch_norm: training normalizes with the batch variance, which needs more than "
                "one value per channel, but the input ({}) has {} (batch {} times spatial size "
                "{}); pass training = false to normalize with the running statistics",
                x.shape().str(), s.per_channel(), s.batch, s.spatial);
  // The running statistics are written in place: by the operation that reads the rest.
  for (const Argument& written : {arguments[3], arguments[4]}) {
    for (const Argument& a : arguments) {
      if (a.position == written.position) continue;
      TAGFLOW_CHECK(!overlaps(*written.array, *a.array),
                    "batch_norm: {} (the {} argument) shares memory with {} (the {} argument); "
                    "training updates the running statistics in place, so they need memory of "
                    "their own",
                    written.name, detail::ordinal(written.position), a.name,
                    detail::ordinal(a.position));
    }
  }
  return s;
}

/// dx, dgamma and dbeta (Note [Gradient of batch normalization]): one
/// operation, computing all three; the ones not `needed` are dropped.
std::vector<NDArray> backward(const BatchNormShape& s, const BatchNormParams& p,
                              bool batch_statistics, const NDArray& x, const NDArray& gamma,
                              const NDArray& save_mean, const NDArray& save_inv_std,
                              const NDArray& dy, const std::vector<bool>& needed) {
  const Context ctx = x.context();
  const Shape per_channel{s.channels};
  std::vector<NDArray> grads(3);
  if (s.size() == 0) {  // an empty batch in inference: nothing flows
    grads = {zeros(x.shape(), x.dtype(), ctx), zeros(per_channel, DType::kFloat32, ctx),
             zeros(per_channel, DType::kFloat32, ctx)};
  } else {
    const DType dtype = x.dtype();
    NDArray dx(x.shape(), dtype, ctx);
    NDArray dgamma(per_channel, DType::kFloat32, ctx);
    NDArray dbeta(per_channel, DType::kFloat32, ctx);
    const void* px = x.raw_data();
    const void* pdy = dy.raw_data();
    const float* pgamma = gamma.data<float>();
    const float* pmean = save_mean.data<float>();
    const float* pinv_std = save_inv_std.data<float>();
    void* pdx = dx.raw_data();
    const std::int64_t n = s.size();
    float* pdgamma = dgamma.data<float>();
    float* pdbeta = dbeta.data<float>();
    const int device = ctx.index;
    detail::push_operation(
        "batch_norm_backward", ctx,
        {x.var(), dy.var(), gamma.var(), save_mean.var(), save_inv_std.var()},
        {dx.var(), dgamma.var(), dbeta.var()}, [=](const RunContext& rc) {
          run_kernel(
              rc,
              detail::kernel_work(8.0 * static_cast<double>(n), 5 * detail::bytes_of(n, dtype),
                                  dtype),
              [=] {
                detail::Float32Staging staging(ctx, dtype);
                cpu_kernels::batch_norm_backward(s, p, batch_statistics, staging.input(px, n),
                                                 staging.input(pdy, n), pgamma, pmean, pinv_std,
                                                 staging.output(pdx, n), pdgamma, pdbeta);
                staging.commit();
              },
              [=](void* stream) {
                gpu_kernels::batch_norm_backward(s, p, batch_statistics, dtype, px, pdy, pgamma,
                                                 pmean, pinv_std, pdx, pdgamma, pdbeta, device,
                                                 stream);
              });
        });
    grads = {dx, dgamma, dbeta};
  }
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (!needed[i]) grads[i] = NDArray();
  }
  return grads;
}

}  // namespace

NDArray batch_norm(const NDArray& x, const NDArray& gamma, const NDArray& beta,
                   const NDArray& running_mean, const NDArray& running_var,
                   const BatchNormOptions& options) {
  const BatchNormShape s = check_arguments(x, gamma, beta, running_mean, running_var, options);
  const BatchNormParams p{.eps = options.eps,
                          .momentum = options.momentum,
                          .unbiased_running_var = options.unbiased_running_var};
  const bool training = options.training;
  const Context ctx = x.context();
  const bool recorded = detail::recording() && detail::any_needs_grad({&x, &gamma, &beta});
  const DType dtype = x.dtype();
  NDArray y(x.shape(), dtype, ctx);
  // What the backward pass reads: Note [Gradient of batch normalization].
  NDArray save_mean;
  NDArray save_inv_std;
  if (training || recorded) {
    save_mean = NDArray(Shape{s.channels}, DType::kFloat32, ctx);
    save_inv_std = NDArray(Shape{s.channels}, DType::kFloat32, ctx);
  }
  if (s.size() != 0) {
    const void* px = x.raw_data();
    const float* pgamma = gamma.data<float>();
    const float* pbeta = beta.data<float>();
    void* py = y.raw_data();
    const std::int64_t n = s.size();
    float* psave_mean = save_mean.defined() ? save_mean.data<float>() : nullptr;
    float* psave_inv_std = save_inv_std.defined() ? save_inv_std.data<float>() : nullptr;
    float* prunning_mean = running_mean.data<float>();
    float* prunning_var = running_var.data<float>();
    const int device = ctx.index;
    // The running statistics are read as well as written: an error stored on
    // them passes on instead of being overwritten.
    const VarList reads = {x.var(), gamma.var(), beta.var(), running_mean.var(), running_var.var()};
    VarList writes = {y.var()};
    if (save_mean.defined()) {
      writes.push_back(save_mean.var());
      writes.push_back(save_inv_std.var());
    }
    if (training) {
      writes.push_back(running_mean.var());
      writes.push_back(running_var.var());
      detail::push_operation(kName, ctx, reads, writes, [=](const RunContext& rc) {
        run_kernel(
            rc,
            detail::kernel_work(6.0 * static_cast<double>(n), 3 * detail::bytes_of(n, dtype),
                                dtype),
            [=] {
              detail::Float32Staging staging(ctx, dtype);
              cpu_kernels::batch_norm_forward_training(s, p, staging.input(px, n), pgamma, pbeta,
                                                       staging.output(py, n), psave_mean,
                                                       psave_inv_std, prunning_mean, prunning_var);
              staging.commit();
            },
            [=](void* stream) {
              gpu_kernels::batch_norm_forward_training(s, p, dtype, px, pgamma, pbeta, py,
                                                       psave_mean, psave_inv_std, prunning_mean,
                                                       prunning_var, device, stream);
            });
      });
    } else {
      detail::push_operation(kName, ctx, reads, writes, [=](const RunContext& rc) {
        run_kernel(
            rc,
            detail::kernel_work(2.0 * static_cast<double>(n), 2 * detail::bytes_of(n, dtype),
                                dtype),
            [=] {
              detail::Float32Staging staging(ctx, dtype);
              cpu_kernels::batch_norm_forward_inference(
                  s, p, staging.input(px, n), pgamma, pbeta, prunning_mean, prunning_var,
                  staging.output(py, n), psave_mean, psave_inv_std);
              staging.commit();
            },
            [=](void* stream) {
              gpu_kernels::batch_norm_forward_inference(s, p, dtype, px, pgamma, pbeta,
                                                        prunning_mean, prunning_var, py, psave_mean,
                                                        psave_inv_std, device, stream);
            });
      });
    }
  }
  detail::record(kName, y, {&x, &gamma, &beta}, [&] {
    const std::vector<bool> needed = {x.grad_node() != nullptr, gamma.grad_node() != nullptr,
                                      beta.grad_node() != nullptr};
    return [s, p, training, needed, x = x.detach(), gamma = gamma.detach(), save_mean,
            save_inv_std](const NDArray& dy) {
      return backward(s, p, training, x, gamma, save_mean, save_inv_std, dy, needed);
    };
  });
  return y;
}

}  // namespace tagflow
