// tagflow.gluon's C++ half: parameters and initializers
// (gluon_parameters.cc), the blocks of the C++ library and the base a Python
// subclass derives from (gluon_blocks.cc), losses, Trainer and split_and_load
// (gluon_training.cc), the native data pipeline (data.cc).
// python/tagflow/gluon/ gives them Gluon's names and adds what is Python's
// own (registering children by attribute).

#include "gluon_support.h"

#include <string>
#include <vector>

namespace tagflow::python {

namespace {
/// After `npx.set_np()`, networks take and give NumPy-style arrays.
bool numpy_mode = false;
}  // namespace

Flavor flavor_of_results() { return numpy_mode ? Flavor::kNumpy : Flavor::kClassic; }

Flavor flavor_for(const py::handle& input) {
  return py::isinstance<NumpyArray>(input) ? Flavor::kNumpy : flavor_of_results();
}

init::InitializerPtr initializer_of(const py::handle& value) {
  if (value.is_none()) return nullptr;
  if (py::isinstance<py::str>(value)) {
    const auto name = value.cast<std::string>();
    if (name == "xavier") return init::Xavier();
    if (name == "uniform") return init::Uniform();
    if (name == "normal") return init::Normal();
    if (name == "zeros") return init::Zero();
    if (name == "ones") return init::One();
    throw py::value_error("init: expected 'xavier', 'uniform', 'normal', 'zeros' or 'ones', got '" +
                          name + "'");
  }
  return value.cast<const Initializer&>().pointer;
}

std::vector<Context> contexts_of(const py::handle& ctx) {
  if (ctx.is_none()) return {current_context()};
  if (py::isinstance<Context>(ctx)) return {ctx.cast<Context>()};
  std::vector<Context> list;
  for (const py::handle item : ctx.cast<py::sequence>()) list.push_back(item.cast<Context>());
  if (list.empty()) throw py::value_error("ctx: expected a context or a non-empty list of them");
  return list;
}

py::tuple shape_tuple(const Shape& shape) {
  py::tuple dims(shape.ndim());
  for (int i = 0; i < shape.ndim(); ++i) dims[i] = py::int_(shape[i]);
  return dims;
}

void bind_gluon(py::module_& m) {
  py::module_ gluon = m.def_submodule("gluon", "The network layer (tagflow.gluon).");
  gluon.def(
      "_set_numpy_mode", [](bool on) { numpy_mode = on; }, py::arg("on"));
  bind_gluon_parameters(gluon);
  bind_gluon_blocks(gluon);
  bind_gluon_training(gluon);
  bind_gluon_model_zoo(gluon);
  bind_data(gluon);
}

}  // namespace tagflow::python
