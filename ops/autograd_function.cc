#include "ops/autograd_function.h"

#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/detail/operator_checks.h"

namespace tagflow::autograd {

std::vector<NDArray> Function::operator()(const std::vector<NDArray>& inputs) {
  TAGFLOW_CHECK(!inputs.empty(), "{}: expected at least one input array, got none", name());
  // A later call would replace what the recorded one saved for its backward.
  TAGFLOW_CHECK(outputs_.empty(),
                "{}: called again after a call that autograd recorded; make one object per call",
                name());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    detail::check_defined(name(), inputs[i], static_cast<int>(i) + 1);
  }
  const bool record = detail::recording();
  bool needs_grad = false;
  for (const NDArray& in : inputs) needs_grad = needs_grad || in.grad_node() != nullptr;
  std::vector<NDArray> outputs;
  {
    const RecordScope paused(false, is_training());
    outputs = forward(inputs);
  }
  if (!record || !needs_grad) return outputs;
  std::shared_ptr<Function> self = weak_from_this().lock();
  TAGFLOW_CHECK(self != nullptr,
                "{}: called while recording, so backward must keep it alive: create it with "
                "std::make_shared",
                name());
  inputs_.clear();
  for (const NDArray& in : inputs) inputs_.push_back(in.detach());
  outputs_.clear();
  for (NDArray& out : outputs) {
    TAGFLOW_CHECK(out.defined(), "{}: forward returned an empty array", name());
    outputs_.push_back(out.detach());
    out = out.detach();  // its history is this function's node, not forward's operators
  }
  for (std::size_t index = 0; index < outputs.size(); ++index) {
    std::vector<std::shared_ptr<detail::GradNode>> producers;
    for (const NDArray& in : inputs) producers.push_back(in.grad_node());
    detail::record_node(
        name(), outputs[index], std::move(producers),
        [self, index](const NDArray& out_grad) { return self->backward_checked(index, out_grad); });
  }
  return outputs;
}

NDArray Function::operator()(const NDArray& x) {
  std::vector<NDArray> outputs = (*this)(std::vector<NDArray>{x});
  TAGFLOW_CHECK(outputs.size() == 1, "{}: called for one output, but forward gave {}", name(),
                outputs.size());
  return outputs[0];
}

void Function::save_for_backward(std::vector<NDArray> arrays) {
  for (NDArray& a : arrays) a = a.detach();
  saved_ = std::move(arrays);
}

std::vector<NDArray> Function::backward_checked(std::size_t index, const NDArray& out_grad) {
  std::vector<NDArray> output_grads;
  for (std::size_t i = 0; i < outputs_.size(); ++i) {
    output_grads.push_back(i == index ? out_grad : zeros_like(outputs_[i]));
  }
  std::vector<NDArray> grads = backward(output_grads);
  detail::check_user_gradients(name(), inputs_, grads);
  return grads;
}

}  // namespace tagflow::autograd
