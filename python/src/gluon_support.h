#pragma once
// What the gluon binding files share (gluon.cc defines it): how results take
// the NumPy-style class after npx.set_np(), and how Python values become
// initializers and lists of contexts.

#include <memory>
#include <string>
#include <vector>

#include "bindings.h"

namespace tagflow::python {

/// The class of a network's results: NumPy-style after `npx.set_np()`.
Flavor flavor_of_results();
/// Results of a call on `input`: NumPy-style for a NumPy-style input.
Flavor flavor_for(const py::handle& input);

/// An initializer as a Python value (the C++ one is a pointer to const).
struct Initializer {
  init::InitializerPtr pointer;
};
/// None (null), a name ("xavier", "uniform", "normal", "zeros", "ones") or an
/// Initializer.
init::InitializerPtr initializer_of(const py::handle& value);
/// One context, a list of them, or None (the current context).
std::vector<Context> contexts_of(const py::handle& ctx);
/// A shape as a Python tuple.
py::tuple shape_tuple(const Shape& shape);

void bind_gluon_parameters(py::module_& gluon);
void bind_gluon_blocks(py::module_& gluon);
void bind_gluon_training(py::module_& gluon);
void bind_gluon_model_zoo(py::module_& gluon);

}  // namespace tagflow::python
