#include "ops/optimizer_update.h"

#include <cmath>

#include "ops/detail/operator_checks.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/optimizer_kernels.h"

namespace tagflow {

namespace {

/// Every state like the weight: float32, same shape, same device.
void check_state(const char* op, const NDArray& weight,
                 std::initializer_list<const NDArray*> arrays) {
  int position = 1;
  for (const NDArray* a : arrays) {
    ++position;
    detail::check_defined(op, *a, position);
    detail::check_float32(op, *a, position);
    TAGFLOW_CHECK(a->shape() == weight.shape(),
                  "{}: expected the {} argument of the weight's shape ({}), got ({})", op,
                  detail::ordinal(position), weight.shape().str(), a->shape().str());
  }
}

/// Throws unless `skip_if` is undefined or a (1) float32 array on the
/// weight's device.
void check_skip(const char* op, const NDArray& weight, const NDArray& skip_if) {
  if (!skip_if.defined()) return;
  TAGFLOW_CHECK(skip_if.dtype() == DType::kFloat32 && skip_if.size() == 1 &&
                    skip_if.context() == weight.context(),
                "{}: expected skip_if as one float32 value on {} (the weight's device), got {} "
                "({}) on {}",
                op, weight.context().str(), dtype_name(skip_if.dtype()), skip_if.shape().str(),
                skip_if.context().str());
}

}  // namespace

void sgd_update(const NDArray& weight, const NDArray& grad, const NDArray& momentum_state,
                const SgdOptions& o, const NDArray& skip_if) {
  constexpr const char* kName = "sgd_update";
  detail::check_defined(kName, weight, 1);
  detail::check_float32(kName, weight, 1);
  const bool has_momentum = o.momentum != 0;
  if (has_momentum) {
    check_state(kName, weight, {&grad, &momentum_state});
    detail::check_same_context(kName, {&weight, &grad, &momentum_state});
  } else {
    check_state(kName, weight, {&grad});
    detail::check_same_context(kName, {&weight, &grad});
  }
  check_skip(kName, weight, skip_if);
  const detail::SgdStep step{static_cast<float>(o.learning_rate),
                             static_cast<float>(o.momentum),
                             static_cast<float>(o.weight_decay),
                             static_cast<float>(o.rescale_grad),
                             static_cast<float>(o.clip_gradient),
                             has_momentum,
                             o.nesterov};
  float* w = weight.data<float>();
  const float* g = grad.data<float>();
  float* m = has_momentum ? momentum_state.data<float>() : nullptr;
  const std::int64_t n = weight.size();
  const float* skip = skip_if.defined() ? skip_if.data<float>() : nullptr;
  VarList reads = {grad.var()};
  if (skip_if.defined()) reads.push_back(skip_if.var());
  VarList writes = {weight.var()};
  if (has_momentum) writes.push_back(momentum_state.var());
  detail::push_operation(kName, weight.context(), reads, writes, [=](const RunContext& rc) {
    detail::run_kernel(
        rc, detail::elementwise_work(n, DType::kFloat32, has_momentum ? 5 : 3, 3),
        [=] { detail::cpu_kernels::sgd(step, w, g, m, n, skip); },
        [=](void* stream) { detail::gpu_kernels::sgd(step, w, g, m, n, skip, stream); });
  });
}

void adam_update(const NDArray& weight, const NDArray& grad, const NDArray& mean,
                 const NDArray& variance, const AdamOptions& o, std::int64_t t,
                 const NDArray& skip_if) {
  constexpr const char* kName = "adam_update";
  detail::check_defined(kName, weight, 1);
  detail::check_float32(kName, weight, 1);
  check_state(kName, weight, {&grad, &mean, &variance});
  detail::check_same_context(kName, {&weight, &grad, &mean, &variance});
  check_skip(kName, weight, skip_if);
  TAGFLOW_CHECK(t >= 1, "adam_update: expected a step count t >= 1, got {}", t);
  // beta1 = 1 divides by zero in the bias correction, beta2 > 1 takes the
  // square root of a negative number: either turns the weights into NaN.
  TAGFLOW_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1,
                "adam_update: expected beta1 in [0, 1) and beta2 in [0, 1), got {} and {}", o.beta1,
                o.beta2);
  const double correction = std::sqrt(1 - std::pow(o.beta2, static_cast<double>(t))) /
                            (1 - std::pow(o.beta1, static_cast<double>(t)));
  const detail::AdamStep step{
      static_cast<float>(o.learning_rate), static_cast<float>(o.beta1),
      static_cast<float>(o.beta2),         static_cast<float>(o.epsilon),
      static_cast<float>(o.weight_decay),  static_cast<float>(o.rescale_grad),
      static_cast<float>(o.clip_gradient), static_cast<float>(o.learning_rate * correction)};
  float* w = weight.data<float>();
  const float* g = grad.data<float>();
  float* m = mean.data<float>();
  float* v = variance.data<float>();
  const std::int64_t n = weight.size();
  const float* skip = skip_if.defined() ? skip_if.data<float>() : nullptr;
  VarList reads = {grad.var()};
  if (skip_if.defined()) reads.push_back(skip_if.var());
  detail::push_operation(
      kName, weight.context(), reads, {weight.var(), mean.var(), variance.var()},
      [=](const RunContext& rc) {
        detail::run_kernel(
            rc, detail::elementwise_work(n, DType::kFloat32, 7, 12),
            [=] { detail::cpu_kernels::adam(step, w, g, m, v, n, skip); },
            [=](void* stream) { detail::gpu_kernels::adam(step, w, g, m, v, n, skip, stream); });
      });
}

}  // namespace tagflow
