#include "ops/autograd.h"

#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "ops/creation.h"
#include "ops/detail/operator_checks.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace tagflow {

namespace {

struct Mode {
  bool recording = false;
  bool training = false;
};
thread_local Mode mode;

}  // namespace

namespace autograd {

RecordScope::RecordScope(bool recording, bool training)
    : saved_recording_(mode.recording), saved_training_(mode.training) {
  mode.recording = recording;
  mode.training = training;
}

RecordScope::~RecordScope() {
  mode.recording = saved_recording_;
  mode.training = saved_training_;
}

RecordScope record(bool train_mode) { return RecordScope(true, train_mode); }
RecordScope pause(bool train_mode) { return RecordScope(false, train_mode); }
bool is_recording() { return mode.recording; }
bool is_training() { return mode.training; }

namespace {

using detail::GradNode;

bool is_leaf(const GradNode& node) { return node.req != GradReq::kNull; }

/// The nodes reachable from `head`, each after every node that consumes it
/// (reverse post-order of a depth-first walk). Owning: freeing the graph
/// below must not destroy a node still to be visited.
std::vector<std::shared_ptr<GradNode>> consumers_first(const std::shared_ptr<GradNode>& head) {
  std::vector<std::shared_ptr<GradNode>> post_order;
  std::unordered_set<GradNode*> seen{head.get()};
  std::vector<std::pair<std::shared_ptr<GradNode>, std::size_t>> stack{{head, 0}};
  while (!stack.empty()) {
    auto& [node, next] = stack.back();
    if (next < node->inputs.size()) {
      std::shared_ptr<GradNode> input = node->inputs[next++];
      if (input != nullptr && seen.insert(input.get()).second) stack.emplace_back(input, 0);
    } else {
      post_order.push_back(std::move(node));
      stack.pop_back();
    }
  }
  return {post_order.rbegin(), post_order.rend()};
}

/// Walks the graph from `head` (Note [The recorded graph] in autograd.h) and hands
/// each leaf's gradient to `reach_leaf(node, gradient)`; frees the graph
/// after unless `retain_graph`. `op` names the caller in the messages.
template <typename ReachLeaf>
void walk_back(const char* op, const NDArray& head, const NDArray& head_grad, bool retain_graph,
               ReachLeaf&& reach_leaf) {
  TAGFLOW_CHECK(head.defined(), "{}: the head is an empty array", op);
  const std::shared_ptr<GradNode>& root = head.grad_node();
  TAGFLOW_CHECK(root != nullptr,
                "{}: the head has no recorded history: compute it inside "
                "autograd::record() from arrays that called attach_grad()",
                op);
  NDArray seed = head_grad;
  if (seed.defined()) {
    TAGFLOW_CHECK(seed.shape() == head.shape() && seed.context() == head.context() &&
                      seed.dtype() == head.dtype(),
                  "{}: expected a head gradient of shape ({}) {} on {}, got ({}) {} on {}", op,
                  head.shape().str(), dtype_name(head.dtype()), head.context().str(),
                  seed.shape().str(), dtype_name(seed.dtype()), seed.context().str());
  } else {
    seed = ones_like(head);
  }
  const RecordScope not_recorded(false, is_training());  // gradients are not themselves recorded
  std::unordered_map<GradNode*, NDArray> gradients{{root.get(), seed}};
  const std::vector<std::shared_ptr<GradNode>> order = consumers_first(root);
  for (const std::shared_ptr<GradNode>& owned : order) {
    GradNode* node = owned.get();
    auto found = gradients.find(node);
    if (found == gradients.end()) continue;  // no gradient reached it
    const NDArray gradient = std::move(found->second);
    gradients.erase(found);
    if (is_leaf(*node)) {
      reach_leaf(*node, gradient);
      continue;
    }
    TAGFLOW_CHECK(static_cast<bool>(node->backward),
                  "{}: the graph through '{}' was freed by an earlier backward; pass "
                  "retain_graph = true to run backward twice",
                  op, node->op);
    std::vector<NDArray> input_grads = node->backward(gradient);
    for (std::size_t i = 0; i < node->inputs.size() && i < input_grads.size(); ++i) {
      GradNode* input = node->inputs[i].get();
      if (input == nullptr || !input_grads[i].defined()) continue;
      auto [slot, fresh] = gradients.try_emplace(input, input_grads[i]);
      if (!fresh) slot->second = slot->second + input_grads[i];
    }
  }
  if (!retain_graph) {
    for (const std::shared_ptr<GradNode>& node : order) {
      if (!is_leaf(*node)) {
        node->backward = nullptr;  // releases the arrays it kept
        node->inputs.clear();
      }
    }
  }
}

}  // namespace

void backward(const NDArray& head, const NDArray& head_grad, bool retain_graph) {
  walk_back("backward", head, head_grad, retain_graph, [](GradNode& leaf, const NDArray& gradient) {
    if (leaf.req == GradReq::kAdd) {
      leaf.grad += gradient;
    } else {
      gradient.copyto(leaf.grad);
    }
  });
}

std::vector<NDArray> grad(const NDArray& head, std::span<const NDArray> variables,
                          const NDArray& head_grad, bool retain_graph) {
  std::unordered_map<const GradNode*, std::size_t> wanted;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    const NDArray& v = variables[i];
    TAGFLOW_CHECK(v.defined() && v.grad_node() != nullptr && is_leaf(*v.grad_node()),
                  "grad: expected variable {} to be marked by attach_grad() before the "
                  "recording, got {}",
                  i, v.defined() ? "an array that is not" : "an empty array");
    wanted.emplace(v.grad_node().get(), i);
  }
  std::vector<NDArray> grads(variables.size());
  walk_back("grad", head, head_grad, retain_graph,
            [&](const GradNode& leaf, const NDArray& gradient) {
              const auto found = wanted.find(&leaf);
              if (found != wanted.end()) grads[found->second] = gradient;
            });
  for (std::size_t i = 0; i < grads.size(); ++i) {
    if (grads[i].defined()) {
      // A copy: a gradient may be a view of another array (an input's, passed through).
      grads[i] = grads[i].copyto(grads[i].context());
    } else {
      grads[i] = zeros_like(variables[i]);
    }
  }
  return grads;
}

}  // namespace autograd

// --- NDArray members -----------------------------------------------------------

void NDArray::attach_grad(GradReq req) {
  check_defined("attach_grad");
  if (req == GradReq::kNull) {
    grad_node_ = nullptr;
    return;
  }
  auto node = std::make_shared<detail::GradNode>();
  node->grad = zeros(shape_, dtype_, context());
  node->req = req;
  grad_node_ = std::move(node);
}

NDArray NDArray::grad() const {
  check_defined("grad");
  TAGFLOW_CHECK(grad_node_ != nullptr && grad_node_->req != GradReq::kNull,
                "grad: the array has no gradient buffer; call attach_grad() first");
  return grad_node_->grad;
}

void NDArray::backward() const { autograd::backward(*this); }

void NDArray::backward(const NDArray& head_grad, bool retain_graph) const {
  autograd::backward(*this, head_grad, retain_graph);
}

NDArray NDArray::detach() const {
  NDArray copy = *this;
  copy.grad_node_ = nullptr;
  return copy;
}

// --- recording -------------------------------------------------------------------

namespace detail {

bool recording() { return mode.recording; }

bool any_needs_grad(std::initializer_list<const NDArray*> inputs) {
  for (const NDArray* in : inputs) {
    if (in->grad_node() != nullptr) return true;
  }
  return false;
}

void record_node(const char* op, NDArray& out, std::vector<std::shared_ptr<GradNode>> inputs,
                 BackwardFunction backward) {
  for (const auto& input : inputs) {
    TAGFLOW_CHECK(input == nullptr || input != out.grad_node(),
                  "{}: an in-place operator cannot be recorded on an array that needs a "
                  "gradient; write `a = a + b` instead of `a += b` inside autograd::record()",
                  op);
  }
  auto node = std::make_shared<GradNode>();
  node->op = op;
  node->inputs = std::move(inputs);
  node->backward = std::move(backward);
  out.set_grad_node(std::move(node));
}

void check_user_gradients(const char* op, const std::vector<NDArray>& inputs,
                          const std::vector<NDArray>& grads) {
  TAGFLOW_CHECK(grads.size() == inputs.size(),
                "{}: its backward gave {} gradient{}, expected one per input ({}); give an empty "
                "NDArray for an input without one",
                op, grads.size(), grads.size() == 1 ? "" : "s", inputs.size());
  for (std::size_t i = 0; i < grads.size(); ++i) {
    const NDArray& in = inputs[i];
    if (!grads[i].defined()) continue;
    TAGFLOW_CHECK(grads[i].shape() == in.shape() && grads[i].dtype() == in.dtype() &&
                      grads[i].context() == in.context(),
                  "{}: its backward gave the gradient of the {} input as ({}) {} on {}, expected "
                  "the input's ({}) {} on {}",
                  op, ordinal(static_cast<int>(i) + 1), grads[i].shape().str(),
                  dtype_name(grads[i].dtype()), grads[i].context().str(), in.shape().str(),
                  dtype_name(in.dtype()), in.context().str());
  }
}

NDArray sum_to(const NDArray& grad, const Shape& shape) {
  if (grad.shape() == shape) return grad;
  const int extra = grad.ndim() - shape.ndim();
  std::vector<int> axes;
  for (int axis = 0; axis < grad.ndim(); ++axis) {
    if (axis < extra || (shape[axis - extra] == 1 && grad.shape()[axis] != 1)) {
      axes.push_back(axis);
    }
  }
  NDArray summed = axes.empty() ? grad : sum(grad, std::span<const int>(axes), true);
  return summed.reshape(shape);
}

}  // namespace detail
}  // namespace tagflow
