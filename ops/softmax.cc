#include "ops/softmax.h"

#include "ops/autograd.h"
#include "ops/detail/operator_checks.h"
#include "ops/elementwise.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/reduce_kernels.h"
#include "ops/reduce.h"

namespace tagflow {

namespace {

NDArray push_softmax(const char* name, bool log_output, const NDArray& x, int axis) {
  detail::check_defined(name, x, 1);
  detail::check_floating(name, x, 1);
  const int normalized = x.shape().normalize_axis(axis, name);
  detail::SoftmaxShape shape;
  for (int a = 0; a < x.ndim(); ++a) {
    if (a < normalized) shape.outer *= x.shape()[a];
    if (a > normalized) shape.inner *= x.shape()[a];
  }
  shape.extent = x.shape()[normalized];

  NDArray out(x.shape(), x.dtype(), x.context());
  if (out.size() == 0) return out;
  const std::int64_t out_size = out.size();
  const DType dtype = x.dtype();
  const void* in = x.raw_data();
  void* po = out.raw_data();
  detail::push_operation(name, x.context(), {x.var()}, {out.var()}, [=](const RunContext& rc) {
    detail::run_kernel(
        rc, detail::elementwise_work(out_size, dtype, 2, 5),
        [=] { detail::cpu_kernels::softmax(log_output, dtype, in, po, shape); },
        [=](void* stream) {
          detail::gpu_kernels::softmax(log_output, dtype, in, po, shape, stream);
        });
  });
  detail::record(name, out, {&x}, [&] {
    return [log_output, normalized, y = out.detach()](const NDArray& dy) {
      // softmax: y (dy - sum(dy y)); log_softmax: dy - exp(y) sum(dy), along the axis.
      const NDArray dx = log_output ? dy - exp(y) * sum(dy, normalized, true)
                                    : y * (dy - sum(dy * y, normalized, true));
      return std::vector<NDArray>{dx};
    };
  });
  return out;
}

}  // namespace

NDArray softmax(const NDArray& x, int axis) { return push_softmax("softmax", false, x, axis); }

NDArray log_softmax(const NDArray& x, int axis) {
  return push_softmax("log_softmax", true, x, axis);
}

}  // namespace tagflow
