#include "ops/one_hot.h"

#include <limits>

#include "ops/detail/operator_checks.h"
#include "ops/kernels/join_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"

namespace tagflow {

NDArray one_hot(const NDArray& indices, std::int64_t depth, double on_value, double off_value,
                DType dtype) {
  constexpr const char* kName = "one_hot";
  detail::check_defined(kName, indices, 1);
  TAGFLOW_CHECK(depth >= 0, "{}: expected depth >= 0, got {}", kName, depth);
  TAGFLOW_CHECK(indices.ndim() < Shape::kMaxDims,
                "{}: the result would have {} dimensions, but arrays have at most {}", kName,
                indices.ndim() + 1, Shape::kMaxDims);
  TAGFLOW_CHECK(depth == 0 || indices.size() <= std::numeric_limits<std::int64_t>::max() / depth,
                "{}: expected at most 2^63 - 1 elements, got indices of shape ({}) times depth {}",
                kName, indices.shape().str(), depth);
  detail::check_scalar_fits(kName, on_value, dtype);
  detail::check_scalar_fits(kName, off_value, dtype);
  Shape out_shape = indices.shape();
  out_shape.push_back(depth);
  NDArray out(out_shape, dtype, indices.context());
  if (out.size() == 0) return out;
  const std::int64_t out_size = out.size();
  const detail::OneHotParams params{
      .rows = indices.size(), .depth = depth, .on_value = on_value, .off_value = off_value};
  const DType index_dtype = indices.dtype();
  const void* in = indices.raw_data();
  void* data = out.raw_data();
  detail::push_operation(
      kName, out.context(), {indices.var()}, {out.var()}, [=](const RunContext& rc) {
        detail::run_kernel(
            rc,
            detail::kernel_work(
                static_cast<double>(out_size),
                detail::bytes_of(params.rows, index_dtype) + detail::bytes_of(out_size, dtype),
                dtype),
            [=] { detail::cpu_kernels::one_hot(index_dtype, in, dtype, params, data); },
            [=](void* stream) {
              detail::gpu_kernels::one_hot(index_dtype, in, dtype, params, data, stream);
            });
      });
  return out;
}

}  // namespace tagflow
