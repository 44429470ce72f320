#include "ops/creation.h"

#include <cmath>
#include <cstring>

#include "ops/detail/operator_checks.h"
#include "ops/kernels/elementwise_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"

namespace tagflow {

NDArray array(std::initializer_list<float> values, Context ctx) {
  return array(std::span<const float>(values.begin(), values.size()),
               Shape{static_cast<std::int64_t>(values.size())}, ctx);
}

template <typename T>
NDArray array(std::span<const T> values, Shape shape, Context ctx) {
  TAGFLOW_CHECK(static_cast<std::int64_t>(values.size()) == shape.size(),
                "array: expected {} values for shape ({}), got {}", shape.size(), shape.str(),
                values.size());
  if (ctx.is_host()) {
    // A new array has no pending operation: its memory is ours to fill.
    NDArray out(shape, dtype_of<T>, ctx);
    if (!values.empty()) std::memcpy(out.raw_data(), values.data(), values.size_bytes());
    return out;
  }
  NDArray staging = array(values, shape, cpu(0));
  return staging.copyto(ctx);
}

template NDArray array<float>(std::span<const float>, Shape, Context);
template NDArray array<std::int32_t>(std::span<const std::int32_t>, Shape, Context);
template NDArray array<std::int64_t>(std::span<const std::int64_t>, Shape, Context);
template NDArray array<std::uint8_t>(std::span<const std::uint8_t>, Shape, Context);
template NDArray array<Half>(std::span<const Half>, Shape, Context);
template NDArray array<BFloat16>(std::span<const BFloat16>, Shape, Context);

NDArray empty(Shape shape, DType dtype, Context ctx) { return NDArray(shape, dtype, ctx); }

void fill(const NDArray& out, double value) {
  detail::check_defined("fill", out, 1);
  detail::check_scalar_fits("fill", value, out.dtype());
  const DType dtype = out.dtype();
  void* data = out.raw_data();
  const std::int64_t n = out.size();
  if (n == 0) return;
  detail::push_operation("fill", out.context(), {}, {out.var()}, [=](const RunContext& rc) {
    detail::run_kernel(
        rc, detail::elementwise_work(n, dtype, 1, 0),
        [=] { detail::cpu_kernels::fill(dtype, value, data, n); },
        [=](void* stream) { detail::gpu_kernels::fill(dtype, value, data, n, stream); });
  });
}

NDArray full(Shape shape, double value, DType dtype, Context ctx) {
  NDArray out(shape, dtype, ctx);
  fill(out, value);
  return out;
}

NDArray zeros(Shape shape, DType dtype, Context ctx) { return full(shape, 0, dtype, ctx); }
NDArray ones(Shape shape, DType dtype, Context ctx) { return full(shape, 1, dtype, ctx); }

NDArray zeros_like(const NDArray& like) {
  detail::check_defined("zeros_like", like, 1);
  return zeros(like.shape(), like.dtype(), like.context());
}

NDArray ones_like(const NDArray& like) {
  detail::check_defined("ones_like", like, 1);
  return ones(like.shape(), like.dtype(), like.context());
}

NDArray arange(double start, double stop, double step, DType dtype, Context ctx) {
  TAGFLOW_CHECK(step != 0 && std::isfinite(start) && std::isfinite(stop) && std::isfinite(step),
                "arange: expected finite start, stop and a non-zero step, got {}, {}, {}", start,
                stop, step);
  const double count = std::ceil((stop - start) / step);
  TAGFLOW_CHECK(count < 1e12,
                "arange: expected fewer than 10^12 elements, got {} from start {}, stop {} and "
                "step {}",
                count, start, stop, step);
  const auto n = static_cast<std::int64_t>(count > 0 ? count : 0);
  if (n > 0) {
    detail::check_scalar_fits("arange", start, dtype);
    detail::check_scalar_fits("arange", start + static_cast<double>(n - 1) * step, dtype);
  }
  NDArray out(Shape{n}, dtype, ctx);
  if (n == 0) return out;
  void* data = out.raw_data();
  detail::push_operation("arange", ctx, {}, {out.var()}, [=](const RunContext& rc) {
    detail::run_kernel(
        rc, detail::elementwise_work(n, dtype, 1),
        [=] { detail::cpu_kernels::arange(dtype, start, step, data, n); },
        [=](void* stream) { detail::gpu_kernels::arange(dtype, start, step, data, n, stream); });
  });
  return out;
}

NDArray empty(Shape shape, Context ctx) { return empty(shape, DType::kFloat32, ctx); }
NDArray zeros(Shape shape, Context ctx) { return zeros(shape, DType::kFloat32, ctx); }
NDArray ones(Shape shape, Context ctx) { return ones(shape, DType::kFloat32, ctx); }
NDArray full(Shape shape, double value, Context ctx) {
  return full(shape, value, DType::kFloat32, ctx);
}

}  // namespace tagflow
