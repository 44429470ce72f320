#include "nn/amp.h"

#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "engine/error.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace tagflow::nn::amp {

namespace {
thread_local DType current = DType::kFloat32;
}  // namespace

DType compute_dtype() { return current; }

AutocastScope::AutocastScope(DType dtype) : previous_(current) {
  TAGFLOW_CHECK(is_floating(dtype),
                "amp::autocast: expected float16, bfloat16 or float32 (off), got {}",
                dtype_name(dtype));
  current = dtype;
}

AutocastScope::~AutocastScope() { current = previous_; }

AutocastScope autocast(DType dtype) { return AutocastScope(dtype); }

NDArray to_compute_dtype(const NDArray& x) {
  if (!is_half(current) || !x.defined() || x.dtype() != DType::kFloat32) return x;
  return x.astype(current);
}

NDArray to_float32(const NDArray& x) {
  if (!is_half(current) || !x.defined() || !is_half(x.dtype())) return x;
  return x.astype(DType::kFloat32);
}

LossScaler::LossScaler(LossScaleOptions options) : options_(options) {
  const LossScaleOptions& o = options_;
  TAGFLOW_CHECK(
      !o.enabled || (o.initial_scale > 0 && std::isfinite(o.initial_scale) && o.growth_factor > 1 &&
                     o.backoff_factor > 0 && o.backoff_factor < 1 && o.growth_interval >= 1),
      "Trainer: expected a loss scale with initial_scale > 0 (finite), growth_factor "
      "> 1, backoff_factor in (0, 1) and growth_interval >= 1, got {}, {}, {} and {}",
      o.initial_scale, o.growth_factor, o.backoff_factor, o.growth_interval);
}

void LossScaler::make_state(Context home) {
  if (scale_.defined()) return;
  scale_ = full({1}, options_.initial_scale, home);
  clean_steps_ = zeros({1}, DType::kFloat32, home);
  skipped_ = zeros({1}, DType::kFloat32, home);
}

NDArray LossScaler::scale(const NDArray& loss, Context home) {
  if (!options_.enabled) return loss;
  TAGFLOW_CHECK(loss.defined() && is_floating(loss.dtype()),
                "Trainer::scale_loss: expected a floating-point loss, got {}",
                loss.defined() ? std::string(dtype_name(loss.dtype())) : "an empty array");
  make_state(home);
  const NDArray s = scale_.context() == loss.context() ? scale_ : scale_.copyto(loss.context());
  // A 16-bit loss is scaled in float32 (2^16 times a loss overflows
  // float16); its gradient, the scale, flows back into it through astype in
  // its own dtype, where 2^16 is infinite: the first step is skipped and the
  // scale halved (the losses of nn/loss.h are float32 in an autocast scope).
  return (loss.dtype() == DType::kFloat32 ? loss : loss.astype(DType::kFloat32)) * s;
}

// A gradient is not finite exactly when sum(g * 0) is NaN (0 times an
// infinity or a NaN is NaN; a sum of zeros cannot overflow), so the check
// is an elementwise product, a sum and a comparison per parameter, summed
// on the state's device.
NDArray LossScaler::unscale(const std::vector<std::vector<NDArray>>& grads, Context home) {
  make_state(home);
  const Context at = scale_.context();
  NDArray bad;  // how many parameters have a gradient that is not finite
  for (const std::vector<NDArray>& copies : grads) {
    if (copies.empty()) continue;
    const NDArray s = sum(copies.front() * 0.0);
    NDArray b = not_equal(s, s);
    if (b.dtype() != DType::kFloat32) b = b.astype(DType::kFloat32);
    if (b.context() != at) b = b.copyto(at);
    bad = bad.defined() ? bad + b : b;
  }
  if (!bad.defined()) return zeros({1}, DType::kFloat32, at);
  const NDArray inverse = 1.0 / scale_;
  std::map<Context, NDArray> inverses;  // one copy per device
  for (const std::vector<NDArray>& copies : grads) {
    for (NDArray g : copies) {
      NDArray& f = inverses[g.context()];
      if (!f.defined()) f = g.context() == at ? inverse : inverse.copyto(g.context());
      g *= f.dtype() == g.dtype() ? f : f.astype(g.dtype());
    }
  }
  return greater(bad, 0.0);
}

void LossScaler::update(const NDArray& overflow) {
  const LossScaleOptions& o = options_;
  const NDArray clean = 1.0 - overflow;
  clean_steps_ = (clean_steps_ + 1.0) * clean;
  // Grown only while the grown scale stays finite in float32.
  const NDArray grow = greater_equal(clean_steps_, static_cast<double>(o.growth_interval)) *
                       lesser_equal(scale_, static_cast<double>(std::numeric_limits<float>::max()) /
                                                o.growth_factor);
  scale_ = scale_ * (overflow * o.backoff_factor + clean * (grow * (o.growth_factor - 1.0) + 1.0));
  clean_steps_ = clean_steps_ * (1.0 - grow);
  skipped_ = skipped_ + overflow;
}

void LossScaler::restore(const NDArray& scale, const NDArray& clean_steps, const NDArray& skipped,
                         Context home) {
  make_state(home);
  const Context at = scale_.context();
  scale_ = scale.copyto(at);
  clean_steps_ = clean_steps.copyto(at);
  skipped_ = skipped.copyto(at);
}

}  // namespace tagflow::nn::amp
