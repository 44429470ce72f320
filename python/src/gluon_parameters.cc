// tagflow.gluon: Parameter, ParameterDict and the initializers (mx.init).

#include <memory>
#include <sstream>
#include <string>

#include <pybind11/stl.h>

#include "array_support.h"
#include "gluon_support.h"

namespace tagflow::python {

namespace {

/// mx.init.Constant(value): every element `value`.
class ConstantInit final : public init::Initializer {
 public:
  explicit ConstantInit(double value) : value_(value) {}
  void fill(const NDArray& data) const override { tagflow::fill(data, value_); }
  std::string describe() const override {
    std::ostringstream text;
    text << "constant(" << value_ << ")";
    return text.str();
  }

 private:
  double value_;
};

}  // namespace

void bind_gluon_parameters(py::module_& m) {
  py::class_<Initializer>(m, "Initializer").def("__repr__", [](const Initializer& i) {
    return i.pointer->describe();
  });
  py::module_ initializers = m.def_submodule("init", "Initializers (tagflow.init, mx.init).");
  initializers.def(
      "Xavier", [](double magnitude) { return Initializer{init::Xavier(magnitude)}; },
      py::arg("magnitude") = 3.0);
  initializers.def(
      "Uniform", [](double scale) { return Initializer{init::Uniform(scale)}; },
      py::arg("scale") = 0.07);
  initializers.def(
      "Normal", [](double sigma) { return Initializer{init::Normal(sigma)}; },
      py::arg("sigma") = 0.01);
  initializers.def("Zero", [] { return Initializer{init::Zero()}; });
  initializers.def("One", [] { return Initializer{init::One()}; });
  initializers.def(
      "Constant",
      [](double value) { return Initializer{std::make_shared<const ConstantInit>(value)}; },
      py::arg("value"));

  py::class_<nn::Parameter, std::shared_ptr<nn::Parameter>>(m, "Parameter", R"doc(
A weight of a network, one copy per context it was initialized on, each with
its gradient. Its shape may hold 0s (unknown) until the first forward.)doc")
      .def(py::init([](const std::string& name, const py::handle& shape, const py::handle& init,
                       const std::string& grad_req) {
             const Shape dims = shape.is_none() ? Shape{} : to_shape(shape, "Parameter");
             return std::make_shared<nn::Parameter>(name, dims, initializer_of(init),
                                                    to_grad_req(grad_req));
           }),
           py::arg("name") = "weight", py::arg("shape") = py::none(), py::arg("init") = py::none(),
           py::arg("grad_req") = "write")
      .def_property_readonly("name", &nn::Parameter::name)
      .def_property_readonly("shape", [](const nn::Parameter& p) { return shape_tuple(p.shape()); })
      .def_property_readonly("grad_req",
                             [](const nn::Parameter& p) {
                               switch (p.grad_req()) {
                                 case GradReq::kNull:
                                   return "null";
                                 case GradReq::kAdd:
                                   return "add";
                                 case GradReq::kWrite:
                                   break;
                               }
                               return "write";
                             })
      .def(
          "initialize",
          [](nn::Parameter& p, const py::handle& init, const py::handle& ctx,
             const py::handle& default_init, bool force_reinit) {
            auto chosen = initializer_of(init);
            if (!chosen) chosen = initializer_of(default_init);
            if (!chosen) chosen = init::Uniform();
            const auto contexts = contexts_of(ctx);
            py::gil_scoped_release released;
            p.initialize(chosen, contexts, force_reinit);
          },
          py::arg("init") = py::none(), py::arg("ctx") = py::none(),
          py::arg("default_init") = py::none(), py::arg("force_reinit") = false)
      .def(
          "data",
          [](const nn::Parameter& p, const py::handle& ctx) {
            return wrap(ctx.is_none() ? p.data() : p.data(ctx.cast<Context>()),
                        flavor_of_results());
          },
          py::arg("ctx") = py::none(), "The copy on `ctx` (the first context when None).")
      .def(
          "grad",
          [](const nn::Parameter& p, const py::handle& ctx) {
            const Context at = ctx.is_none() ? p.list_ctx().at(0) : ctx.cast<Context>();
            return wrap(p.grad(at), flavor_of_results());
          },
          py::arg("ctx") = py::none())
      .def("list_data",
           [](const nn::Parameter& p) {
             py::list out;
             for (const NDArray& a : p.list_data()) out.append(wrap(a, flavor_of_results()));
             return out;
           })
      .def("list_grad",
           [](const nn::Parameter& p) {
             py::list out;
             for (const NDArray& a : p.list_grad()) out.append(wrap(a, flavor_of_results()));
             return out;
           })
      .def("list_ctx", &nn::Parameter::list_ctx)
      .def("set_data", [](nn::Parameter& p, const NDArray& value) { p.set_data(value); })
      .def("reset_ctx",
           [](nn::Parameter& p, const py::handle& ctx) { p.reset_ctx(contexts_of(ctx)); })
      .def("zero_grad", &nn::Parameter::zero_grad)
      .def("__repr__", [](const nn::Parameter& p) {
        std::ostringstream text;
        text << p;
        return text.str();
      });

  py::class_<nn::ParameterDict>(m, "ParameterDict", R"doc(
The parameters of a network by name, in registration order, as Gluon's
collect_params() gives them.)doc")
      .def("__len__", &nn::ParameterDict::size)
      .def("__contains__", &nn::ParameterDict::contains)
      .def("__getitem__",
           [](const nn::ParameterDict& d, const std::string& name) {
             if (!d.contains(name)) throw py::key_error(name);
             return d.get(name);
           })
      .def("keys",
           [](const nn::ParameterDict& d) {
             py::list names;
             for (const auto& p : d) names.append(p->name());
             return names;
           })
      .def("values",
           [](const nn::ParameterDict& d) {
             py::list values;
             for (const auto& p : d) values.append(py::cast(p));
             return values;
           })
      .def("items",
           [](const nn::ParameterDict& d) {
             py::list items;
             for (const auto& p : d) items.append(py::make_tuple(p->name(), py::cast(p)));
             return items;
           })
      .def("__iter__",
           [](const nn::ParameterDict& d) {
             py::list names;
             for (const auto& p : d) names.append(p->name());
             return py::iter(names);
           })
      .def(
          "initialize",
          [](nn::ParameterDict& d, const py::handle& init, const py::handle& ctx,
             bool force_reinit) {
            auto chosen = initializer_of(init);
            if (!chosen) chosen = init::Uniform();
            const auto contexts = contexts_of(ctx);
            py::gil_scoped_release released;
            d.initialize(chosen, contexts, force_reinit);
          },
          py::arg("init") = py::none(), py::arg("ctx") = py::none(),
          py::arg("force_reinit") = false)
      .def("reset_ctx",
           [](nn::ParameterDict& d, const py::handle& ctx) { d.reset_ctx(contexts_of(ctx)); })
      .def("zero_grad", &nn::ParameterDict::zero_grad)
      .def("__repr__", [](const nn::ParameterDict& d) {
        std::ostringstream text;
        text << d;
        return text.str();
      });
}

}  // namespace tagflow::python
