// tagflow.autograd: record, pause, train_mode, predict_mode and backward, as
// mx.autograd. Recording is per thread (Note [The recorded graph] in
// ops/autograd.h), as the `with` blocks that switch it are.

#include <memory>
#include <optional>
#include <vector>

#include "array_support.h"
#include "bindings.h"
#include "gluon_support.h"

namespace tagflow::python {
namespace {

/// A `with` block that sets recording and training mode on entry (nullopt:
/// as they are) and restores them on exit.
class ModeBlock {
 public:
  ModeBlock(std::optional<bool> recording, std::optional<bool> training)
      : recording_(recording), training_(training) {}
  ModeBlock(const ModeBlock&) = delete;
  ModeBlock& operator=(const ModeBlock&) = delete;
  ModeBlock(ModeBlock&&) = default;
  ModeBlock& operator=(ModeBlock&&) = default;

  void enter() {
    scopes_.push_back(
        std::make_unique<autograd::RecordScope>(recording_.value_or(autograd::is_recording()),
                                                training_.value_or(autograd::is_training())));
  }
  void exit() {
    if (!scopes_.empty()) scopes_.pop_back();
  }

 private:
  std::optional<bool> recording_;
  std::optional<bool> training_;
  /// One per entry: a block object entered again while inside itself
  /// restores each level in turn.
  std::vector<std::unique_ptr<autograd::RecordScope>> scopes_;
};

/// The heads as one: the head itself and its gradient, or for several heads
/// sum_i <head_i, head_grad_i>, recorded as one head, so that each leaf
/// receives the sum over the heads (a few operators: under the GIL).
std::pair<NDArray, NDArray> one_head(const py::handle& heads, const py::handle& head_grads) {
  if (const NDArray* head = as_array(heads)) {
    return {*head, head_grads.is_none() ? NDArray() : head_grads.cast<const NDArray&>()};
  }
  std::vector<NDArray> list;
  for (const py::handle item : heads.cast<py::sequence>())
    list.push_back(item.cast<const NDArray&>());
  std::vector<NDArray> grads;
  if (!head_grads.is_none()) {
    for (const py::handle item : head_grads.cast<py::sequence>()) {
      grads.push_back(item.is_none() ? NDArray() : item.cast<const NDArray&>());
    }
    if (grads.size() != list.size()) {
      throw py::value_error("backward: " + std::to_string(list.size()) + " heads but " +
                            std::to_string(grads.size()) + " head gradients");
    }
  }
  if (list.empty()) throw py::value_error("backward: no heads");
  NDArray total;
  const auto recording = autograd::record(autograd::is_training());
  for (std::size_t i = 0; i < list.size(); ++i) {
    const NDArray weighted = grads.empty() || !grads[i].defined() ? list[i] : list[i] * grads[i];
    const NDArray term = sum(weighted);
    total = total.defined() ? total + term : term;
  }
  return {total, NDArray()};
}

void backward(const py::handle& heads, const py::handle& head_grads, bool retain_graph) {
  const auto [head, grad] = one_head(heads, head_grads);
  py::gil_scoped_release released;
  autograd::backward(head, grad, retain_graph);
}

py::list grad(const py::handle& heads, const py::handle& variables, const py::handle& head_grads,
              bool retain_graph) {
  std::vector<NDArray> marked;
  if (const NDArray* one = as_array(variables)) {
    marked.push_back(*one);
  } else {
    for (const py::handle item : variables.cast<py::sequence>())
      marked.push_back(item.cast<const NDArray&>());
  }
  const Flavor flavor = marked.empty() ? Flavor::kClassic : flavor_for(py::cast(marked[0]));
  const auto [head, head_grad] = one_head(heads, head_grads);
  std::vector<NDArray> grads;
  {
    py::gil_scoped_release released;
    grads = autograd::grad(head, marked, head_grad, retain_graph);
  }
  py::list out;
  for (NDArray& g : grads) out.append(wrap(std::move(g), flavor));
  return out;
}

}  // namespace

void bind_autograd(py::module_& m) {
  py::module_ autograd_module =
      m.def_submodule("autograd", "Recording and gradients (tagflow.autograd).");
  py::class_<ModeBlock>(autograd_module, "_ModeBlock")
      .def("__enter__", [](ModeBlock& block) { block.enter(); })
      .def("__exit__", [](ModeBlock& block, const py::args&) { block.exit(); });
  autograd_module.def(
      "record", [](bool train_mode) { return ModeBlock(true, train_mode); },
      py::arg("train_mode") = true,
      "`with autograd.record():` records the operators run inside for backward().");
  autograd_module.def(
      "pause", [](bool train_mode) { return ModeBlock(false, train_mode); },
      py::arg("train_mode") = false,
      "`with autograd.pause():` stops recording inside a recorded block.");
  autograd_module.def(
      "train_mode", [] { return ModeBlock(std::nullopt, true); },
      "`with autograd.train_mode():` dropout and batch norm behave as in training.");
  autograd_module.def(
      "predict_mode", [] { return ModeBlock(std::nullopt, false); },
      "`with autograd.predict_mode():` dropout and batch norm behave as in prediction.");
  autograd_module.def("is_recording", &autograd::is_recording);
  autograd_module.def("is_training", &autograd::is_training);
  autograd_module.def("backward", &backward, py::arg("heads"), py::arg("head_grads") = py::none(),
                      py::arg("retain_graph") = false,
                      "Gradients of the heads (an array or a list) with respect to every leaf.");
  autograd_module.def("_grad", &grad, py::arg("heads"), py::arg("variables"),
                      py::arg("head_grads") = py::none(), py::arg("retain_graph") = false,
                      "The gradients of the heads with respect to `variables`, returned; no "
                      "leaf's .grad changes.");
}

}  // namespace tagflow::python
