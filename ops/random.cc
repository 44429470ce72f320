#include "ops/random.h"

#include <cmath>
#include <limits>
#include <mutex>

#include "ops/detail/operator_checks.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/random_kernels.h"

namespace tagflow::random {

namespace {

using detail::NormalParams;
using detail::RandomDraw;
using detail::run_kernel;
using detail::UniformParams;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

constexpr const char* kUniform = "random_uniform";
constexpr const char* kNormal = "random_normal";

/// The global generator: a key and the next call number. One mutex keeps
/// the pair consistent when seed() races a call (an atomic counter alone
/// could pair the new seed with an old call number); it is taken once per
/// operator call, never per element.
class GlobalGenerator {
 public:
  static GlobalGenerator& get() {
    static GlobalGenerator generator;
    return generator;
  }
  void seed(std::uint64_t seed_value) {
    const std::lock_guard lock(mutex_);
    seed_ = seed_value;
    next_call_ = 0;
  }
  RandomDraw next_draw() {
    const std::lock_guard lock(mutex_);
    return {.seed = seed_, .call = next_call_++};
  }

 private:
  std::mutex mutex_;
  std::uint64_t seed_ = 0;
  std::uint64_t next_call_ = 0;
};

/// The element of `dtype` (float16 or bfloat16) next above `value`, one of
/// them; both encodings order like sign and magnitude.
float next_up(float value, DType dtype) {
  const std::uint16_t bits = dtype == DType::kFloat16 ? Half(value).bits : BFloat16(value).bits;
  std::uint16_t next = 0;
  if (bits == 0x8000u) {
    next = 1;  // -0 to the smallest positive subnormal
  } else {
    next = static_cast<std::uint16_t>((bits & 0x8000u) != 0 ? bits - 1 : bits + 1);
  }
  return dtype == DType::kFloat16 ? static_cast<float>(Half::from_bits(next))
                                  : static_cast<float>(BFloat16::from_bits(next));
}

/// `value` rounded to `dtype`'s nearest element, as a float.
float rounded(float value, DType dtype) {
  if (dtype == DType::kFloat16) return static_cast<float>(Half(value));
  if (dtype == DType::kBFloat16) return static_cast<float>(BFloat16(value));
  return value;
}

/// Checks the arguments of uniform and works out its bounds: the values of
/// `dtype` in [low, high), as floats.
UniformParams uniform_params(double low, double high, DType dtype) {
  TAGFLOW_CHECK(is_floating(dtype), "{}: expected dtype float32, float16 or bfloat16, got {}",
                kUniform, dtype_name(dtype));
  TAGFLOW_CHECK(
      std::isfinite(low) && std::isfinite(high) && low < high && std::isfinite(high - low),
      "{}: expected finite low < high, got low {} and high {}", kUniform, low, high);
  constexpr float kInf = std::numeric_limits<float>::infinity();
  // The smallest float >= low and the largest float < high.
  float min_value = static_cast<float>(low);
  if (static_cast<double>(min_value) < low) min_value = std::nextafter(min_value, kInf);
  float max_value = static_cast<float>(high);
  if (static_cast<double>(max_value) >= high) max_value = std::nextafter(max_value, -kInf);
  if (is_half(dtype)) {
    // The smallest element >= low and the largest < high: a float between
    // them rounds to an element between them.
    const float up = rounded(min_value, dtype);
    min_value = static_cast<double>(up) >= low ? up : next_up(up, dtype);
    float down = rounded(max_value, dtype);
    while (static_cast<double>(down) >= high) down = -next_up(-down, dtype);
    max_value = down;
  }
  TAGFLOW_CHECK(min_value <= max_value && std::isfinite(min_value) && std::isfinite(max_value),
                "{}: [low, high) = [{}, {}) contains no {} value; widen the interval", kUniform,
                low, high, dtype_name(dtype));
  return {.low = low, .scale = high - low, .min_value = min_value, .max_value = max_value};
}

NormalParams normal_params(double mean, double stddev, DType dtype) {
  TAGFLOW_CHECK(is_floating(dtype), "{}: expected dtype float32, float16 or bfloat16, got {}",
                kNormal, dtype_name(dtype));
  TAGFLOW_CHECK(std::isfinite(mean) && std::isfinite(stddev) && stddev >= 0,
                "{}: expected a finite mean and a finite stddev >= 0, got mean {} and stddev {}",
                kNormal, mean, stddev);
  return {.mean = mean, .stddev = stddev};
}

/// Pushes the kernel writing `out`. The draw is fixed by the caller, before
/// the push, so the values do not depend on when the operation runs.
void push_uniform(const NDArray& out, RandomDraw draw, UniformParams params) {
  float* data = out.data<float>();
  const std::int64_t n = out.size();
  if (n == 0) return;
  detail::push_operation(kUniform, out.context(), {}, {out.var()}, [=](const RunContext& rc) {
    run_kernel(
        rc, detail::elementwise_work(n, DType::kFloat32, 1, 4),
        [=] { cpu_kernels::random_uniform(draw, params, data, n); },
        [=](void* stream) { gpu_kernels::random_uniform(draw, params, data, n, stream); });
  });
}

void push_normal(const NDArray& out, RandomDraw draw, NormalParams params) {
  float* data = out.data<float>();
  const std::int64_t n = out.size();
  if (n == 0) return;
  detail::push_operation(kNormal, out.context(), {}, {out.var()}, [=](const RunContext& rc) {
    run_kernel(
        rc, detail::elementwise_work(n, DType::kFloat32, 1, 8),
        [=] { cpu_kernels::random_normal(draw, params, data, n); },
        [=](void* stream) { gpu_kernels::random_normal(draw, params, data, n, stream); });
  });
}

}  // namespace

void seed(std::uint64_t seed_value) { GlobalGenerator::get().seed(seed_value); }

// Each operator checks its arguments and allocates its output (which checks
// the device) before taking a call number, so a call that throws leaves
// the global sequence where it was.

NDArray uniform(double low, double high, Shape shape, Context ctx, DType dtype) {
  const UniformParams params = uniform_params(low, high, dtype);
  NDArray out(shape, DType::kFloat32, ctx);
  push_uniform(out, GlobalGenerator::get().next_draw(), params);
  return dtype == DType::kFloat32 ? out : out.astype(dtype);
}

NDArray uniform(double low, double high, Shape shape, std::uint64_t seed_value, Context ctx,
                DType dtype) {
  const UniformParams params = uniform_params(low, high, dtype);
  NDArray out(shape, DType::kFloat32, ctx);
  push_uniform(out, {.seed = seed_value, .call = 0}, params);
  return dtype == DType::kFloat32 ? out : out.astype(dtype);
}

NDArray normal(double mean, double stddev, Shape shape, Context ctx, DType dtype) {
  const NormalParams params = normal_params(mean, stddev, dtype);
  NDArray out(shape, DType::kFloat32, ctx);
  push_normal(out, GlobalGenerator::get().next_draw(), params);
  return dtype == DType::kFloat32 ? out : out.astype(dtype);
}

NDArray normal(double mean, double stddev, Shape shape, std::uint64_t seed_value, Context ctx,
               DType dtype) {
  const NormalParams params = normal_params(mean, stddev, dtype);
  NDArray out(shape, DType::kFloat32, ctx);
  push_normal(out, {.seed = seed_value, .call = 0}, params);
  return dtype == DType::kFloat32 ? out : out.astype(dtype);
}

}  // namespace tagflow::random
