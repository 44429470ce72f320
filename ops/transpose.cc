#include "ops/transpose.h"

#include <vector>

#include "ops/autograd.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/transpose_kernels.h"

namespace tagflow {

NDArray transpose(const NDArray& x) {
  detail::check_defined("transpose", x, 1);
  std::vector<int> axes(static_cast<std::size_t>(x.ndim()));
  for (int i = 0; i < x.ndim(); ++i) axes[static_cast<std::size_t>(i)] = x.ndim() - 1 - i;
  return transpose(x, axes);
}

NDArray transpose(const NDArray& x, std::initializer_list<int> axes) {
  return transpose(x, std::span<const int>(axes.begin(), axes.size()));
}

NDArray transpose(const NDArray& x, std::span<const int> axes) {
  constexpr const char* kName = "transpose";
  detail::check_defined(kName, x, 1);
  const Shape& in = x.shape();
  TAGFLOW_CHECK(static_cast<int>(axes.size()) == in.ndim(),
                "transpose: expected {} axes for shape ({}), got {}", in.ndim(), in.str(),
                axes.size());
  std::int64_t in_strides[Shape::kMaxDims];
  std::int64_t stride = 1;
  for (int axis = in.ndim() - 1; axis >= 0; --axis) {
    in_strides[axis] = stride;
    stride *= in[axis];
  }
  bool seen[Shape::kMaxDims] = {};
  detail::TransposePlan plan;
  plan.ndim = in.ndim();
  Shape out;
  for (std::size_t i = 0; i < axes.size(); ++i) {
    const int axis = in.normalize_axis(axes[i], kName);
    TAGFLOW_CHECK(!seen[axis], "transpose: axis {} appears twice in the permutation", axis);
    seen[axis] = true;
    out.push_back(in[axis]);
    plan.dims[i] = in[axis];
    plan.in_strides[i] = in_strides[axis];
  }
  NDArray y(out, x.dtype(), x.context());
  if (x.ndim() == 0 || x.size() == 0) return y;
  const std::int64_t n = x.size();
  const DType dtype = x.dtype();
  const void* source = x.raw_data();
  void* target = y.raw_data();
  detail::push_operation(kName, x.context(), {x.var()}, {y.var()}, [=](const RunContext& rc) {
    detail::run_kernel(
        rc, detail::elementwise_work(n, dtype, 2, 0),
        [=] { detail::cpu_kernels::transpose(dtype, source, target, plan); },
        [=](void* stream) { detail::gpu_kernels::transpose(dtype, source, target, plan, stream); });
  });
  detail::record(kName, y, {&x}, [&] {
    std::vector<int> inverse(axes.size());
    for (std::size_t i = 0; i < axes.size(); ++i) {
      inverse[static_cast<std::size_t>(in.normalize_axis(axes[i], kName))] = static_cast<int>(i);
    }
    return [inverse](const NDArray& dy) { return std::vector<NDArray>{transpose(dy, inverse)}; };
  });
  return y;
}

}  // namespace tagflow
