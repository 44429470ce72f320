#pragma once
// Mixed-precision training (nn::amp): parameters stay float32 (the master
// copies the optimizer updates); inside an autocast scope the layers that
// multiply (Dense, Conv2D) compute in float16 or bfloat16, and the Trainer
// scales the loss so that float16 gradients do not underflow.
//
//   nn::Trainer trainer(net.collect_params(), "sgd",
//                       {.learning_rate = 0.1, .loss_scale = {.enabled = true}});
//   {
//     auto recording = autograd::record();
//     auto half = nn::amp::autocast(DType::kFloat16);
//     NDArray l = loss(net(x), y);              // the loss in float32
//     trainer.scale_loss(l).backward();         // float32 gradients, scaled
//   }
//   trainer.step(batch_size);                   // unscaled; skipped on overflow
//
// Threads: one thread at a time. An AutocastScope holds for the thread that
// made it and ends there; compute_dtype() answers for the calling thread, so
// each thread that runs forward passes opens its own (Note [Mixed
// precision]). A LossScaler belongs to its Trainer's thread: it makes its
// state on first use. to_compute_dtype() and to_float32() are operators
// (ops/elementwise.h) and may be called from any thread.
// Threads: concurrent reads, exclusive writes. LossScaleOptions is a value.
//
// Note [Mixed precision]
// What runs in which precision inside autocast(dtype), as MXNet's AMP lists
// and PyTorch's autocast do:
// - Dense and Conv2D cast their float32 input, weight and bias to dtype
//   (astype, recorded: the gradients come back to the float32 parameters
//   in float32) and compute there: products and convolutions summed in
//   float32, results rounded once (Note [Half precision arithmetic] in
//   ops/half.h). Activations, pooling, dropout and reshapes keep their
//   input's dtype.
// - BatchNorm takes the 16-bit input with its float32 gamma, beta and
//   running statistics; the statistics are accumulated in float32 or
//   wider; its output keeps the input's dtype.
// - The losses take their prediction as float32 (softmax and its log over
//   many classes lose too much in 16 bits), so the loss and the first
//   gradient are float32.
// Outside a scope nothing is converted: operators refuse mixed dtypes. A
// scope holds for the thread that made it: each thread that runs forward
// passes opens its own.
//
// Note [Dynamic loss scaling]
// float16 keeps gradients down to 2^-24 only; smaller ones become 0. The
// Trainer multiplies the loss by a scale S before backward (scale_loss), so
// the gradients are S times larger, and before each update: checks every
// gradient for infinities and NaN, divides the gradients by S, and runs
// the update only if all were finite. On overflow the update is skipped
// (weights and optimizer state unchanged), S is multiplied by
// backoff_factor (0.5) and the skip counted; after growth_interval
// consecutive clean steps S is multiplied by growth_factor (2). All of it
// runs as engine operations on the first parameter's first device (the
// skip flag copied to each device's update), so the host never waits for
// the check: the scale and the skip count are arrays read when asked
// (Trainer::loss_scale(), skipped_updates()) and saved with the trainer's
// state. The scale grows only while the grown value is finite. Unlike
// PyTorch's GradScaler, which reads the flag on the host and then does
// not call the optimizer, a skipped update still advances the update
// count (the learning-rate schedule's position and Adam's bias correction
// t): that is what keeps the host from waiting. After k skips Adam's next
// step is therefore smaller than a fresh start's (its bias correction is
// that of step k + 1); the skips come in the first steps, while the scale
// falls from 2^16 to what the gradients allow. A 16-bit loss is scaled in
// float32. bfloat16 has float32's range and needs no scaling.

#include <cstdint>
#include <vector>

#include "ops/ndarray.h"

namespace tagflow::nn::amp {

/// The dtype Dense and Conv2D compute in on this thread: the innermost live
/// autocast scope's, or float32 outside any.
DType compute_dtype();

/// While alive, layers on this thread compute in `dtype` (Note [Mixed
/// precision]); scopes nest, the innermost wins. Not movable: it restores
/// what it replaced when destroyed.
class [[nodiscard]] AutocastScope {
 public:
  explicit AutocastScope(DType dtype);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  DType previous_;
};

/// `with autocast():`. Throws unless `dtype` is float16, bfloat16 or
/// float32 (float32: a scope that turns autocasting off).
[[nodiscard]] AutocastScope autocast(DType dtype = DType::kFloat16);

/// `x` converted to compute_dtype() when that is a 16-bit type and `x` is
/// float32; else `x` itself. What a layer that multiplies applies to its
/// input and parameters.
NDArray to_compute_dtype(const NDArray& x);

/// `x` converted to float32 inside an autocast scope when it is a 16-bit
/// array; else `x` itself. What the operators of the float32 list (the
/// losses) apply to their prediction.
NDArray to_float32(const NDArray& x);

/// Dynamic loss scaling (Note [Dynamic loss scaling]), a TrainerOptions
/// field. The defaults are PyTorch's GradScaler's.
struct LossScaleOptions {
  bool enabled = false;
  double initial_scale = 65536;
  double growth_factor = 2;             ///< > 1
  double backoff_factor = 0.5;          ///< in (0, 1)
  std::int64_t growth_interval = 2000;  ///< clean steps before the scale grows, >= 1
};

/// The state and steps of dynamic loss scaling (Note [Dynamic loss
/// scaling]), as nn::Trainer runs them: the scale, the clean steps since it
/// last changed and the skipped updates, (1) float32 arrays on one device
/// (the home given on first use), changed only by engine operations.
class LossScaler {
 public:
  /// Throws unless the options are valid (when enabled).
  explicit LossScaler(LossScaleOptions options);

  bool enabled() const { return options_.enabled; }
  /// `loss` times the scale, in float32 (a 16-bit loss converted first);
  /// `loss` itself when disabled. Makes the state on `home` on first use.
  NDArray scale(const NDArray& loss, Context home);
  /// Divides every gradient by the scale and returns, on the state's
  /// device, 1 when some gradient held an infinity or NaN, else 0. Each
  /// entry of `grads` is one parameter's gradients, one per device (equal
  /// after aggregation: the first is checked).
  NDArray unscale(const std::vector<std::vector<NDArray>>& grads, Context home);
  /// The next scale, clean-step count and skip count, from unscale()'s flag.
  void update(const NDArray& overflow);

  const NDArray& loss_scale() const { return scale_; }
  const NDArray& clean_steps() const { return clean_steps_; }
  const NDArray& skipped_updates() const { return skipped_; }
  /// Replaces the state (a checkpoint's), on `home` unless it exists.
  void restore(const NDArray& scale, const NDArray& clean_steps, const NDArray& skipped,
               Context home);
  /// Makes the state on `home` (the initial scale, no steps), unless it
  /// exists.
  void make_state(Context home);

 private:
  LossScaleOptions options_;
  NDArray scale_;
  NDArray clean_steps_;
  NDArray skipped_;
};

}  // namespace tagflow::nn::amp
