#include "ops/softmax_cross_entropy.h"

#include <vector>

#include "ops/autograd.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/softmax_cross_entropy_kernels.h"

namespace tagflow {

namespace {

constexpr const char* kName = "softmax_cross_entropy";

using detail::BadLabel;
using detail::CrossEntropyShape;
using detail::run_kernel;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

CrossEntropyShape check_inputs(const NDArray& pred, const NDArray& label) {
  detail::check_same_context(kName, {&pred, &label});
  detail::check_floating(kName, pred, 1);
  TAGFLOW_CHECK(pred.ndim() == 2,
                "softmax_cross_entropy: expected the predictions as a 2-D (batch, classes) "
                "array, got ({})",
                pred.shape().str());
  const CrossEntropyShape shape{.batch = pred.shape()[0], .classes = pred.shape()[1]};
  TAGFLOW_CHECK(label.ndim() == 1 && label.shape()[0] == shape.batch,
                "softmax_cross_entropy: expected labels of shape ({}), one class index per row "
                "of the predictions ({}), got ({})",
                shape.batch, pred.shape().str(), label.shape().str());
  TAGFLOW_CHECK(shape.batch == 0 || shape.classes > 0,
                "softmax_cross_entropy: expected at least one class, got predictions of shape "
                "({})",
                pred.shape().str());
  return shape;
}

/// A label outside [0, classes) throws on a CPU device and gives NaN on a
/// GPU, real or simulated (BadLabel in softmax_cross_entropy_kernels.h).
BadLabel bad_label_policy(const RunContext& rc) {
  return rc.stream == nullptr ? BadLabel::kThrow : BadLabel::kNaN;
}

/// Pushes the forward operation, writing `loss` and (when defined) `stats`.
void push_forward(const CrossEntropyShape& shape, const NDArray& pred, const NDArray& label,
                  const NDArray& loss, const NDArray& stats) {
  const detail::CrossEntropyArrays in{.dtype = pred.dtype(),
                                      .pred = pred.raw_data(),
                                      .label_dtype = label.dtype(),
                                      .label = label.raw_data()};
  void* ploss = loss.raw_data();
  float* ps = stats.defined() ? stats.data<float>() : nullptr;
  VarList writes = {loss.var()};
  if (stats.defined()) writes.push_back(stats.var());
  detail::push_operation(
      kName, pred.context(), {pred.var(), label.var()}, writes, [=](const RunContext& rc) {
        const std::int64_t elements = shape.batch * shape.classes;
        const BadLabel bad_label = bad_label_policy(rc);
        run_kernel(
            rc,
            detail::kernel_work(5.0 * static_cast<double>(elements),
                                detail::bytes_of(elements, in.dtype) +
                                    detail::bytes_of(shape.batch, in.label_dtype) +
                                    detail::bytes_of(shape.batch, in.dtype),
                                in.dtype),
            [=] { cpu_kernels::softmax_cross_entropy_forward(in, shape, bad_label, ploss, ps); },
            [=](void* stream) {
              gpu_kernels::softmax_cross_entropy_forward(in, shape, ploss, ps, stream);
            });
      });
}

/// The gradient of `pred` from the loss's gradient `dy`: one operation.
NDArray backward(const CrossEntropyShape& shape, const NDArray& pred, const NDArray& label,
                 const NDArray& stats, const NDArray& dy) {
  NDArray grad(pred.shape(), pred.dtype(), pred.context());
  if (grad.size() == 0) return grad;
  const detail::CrossEntropyArrays in{.dtype = pred.dtype(),
                                      .pred = pred.raw_data(),
                                      .label_dtype = label.dtype(),
                                      .label = label.raw_data()};
  const float* ps = stats.data<float>();
  const void* pdy = dy.raw_data();
  void* pg = grad.raw_data();
  detail::push_operation(
      "softmax_cross_entropy_backward", pred.context(),
      {pred.var(), label.var(), stats.var(), dy.var()}, {grad.var()}, [=](const RunContext& rc) {
        const std::int64_t elements = shape.batch * shape.classes;
        const BadLabel bad_label = bad_label_policy(rc);
        run_kernel(
            rc,
            detail::kernel_work(5.0 * static_cast<double>(elements),
                                2 * detail::bytes_of(elements, in.dtype) +
                                    detail::bytes_of(shape.batch, in.label_dtype),
                                in.dtype),
            [=] { cpu_kernels::softmax_cross_entropy_backward(in, ps, pdy, shape, bad_label, pg); },
            [=](void* stream) {
              gpu_kernels::softmax_cross_entropy_backward(in, ps, pdy, shape, pg, stream);
            });
      });
  return grad;
}

}  // namespace

NDArray softmax_cross_entropy(const NDArray& pred, const NDArray& label) {
  const CrossEntropyShape shape = check_inputs(pred, label);
  const Context ctx = pred.context();
  NDArray loss(Shape{shape.batch}, pred.dtype(), ctx);
  // The (max, log-sum) pair of every row, for the backward pass: made only
  // when a gradient will be asked for.
  const bool need_grad = detail::recording() && detail::any_needs_grad({&pred});
  NDArray stats = need_grad ? NDArray(Shape{shape.batch, 2}, DType::kFloat32, ctx) : NDArray();
  if (shape.batch > 0) push_forward(shape, pred, label, loss, stats);
  // Labels are not differentiable: only pred is an input of the graph node.
  detail::record(kName, loss, {&pred}, [&] {
    return [shape, pred = pred.detach(), label = label.detach(), stats](const NDArray& dy) {
      return std::vector<NDArray>{backward(shape, pred, label, stats, dy)};
    };
  });
  return loss;
}

}  // namespace tagflow
