// tagflow.gluon's C++ half: parameters, initializers, the blocks of the C++
// library (and the base a Python subclass derives from), losses, Trainer and
// split_and_load. python/tagflow/gluon/ gives them Gluon's names and adds
// what is Python's own (registering children by attribute).

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "array_support.h"
#include "bindings.h"

namespace tagflow::python {
namespace {

/// After `npx.set_np()`, networks take and give NumPy-style arrays.
bool numpy_mode = false;

Flavor flavor_of_results() { return numpy_mode ? Flavor::kNumpy : Flavor::kClassic; }
/// Results of a call on `input`: NumPy-style for a NumPy-style input.
Flavor flavor_for(const py::handle& input) {
  return py::isinstance<NumpyArray>(input) ? Flavor::kNumpy : flavor_of_results();
}

/// An initializer as a Python value (the C++ one is a pointer to const).
struct Initializer {
  init::InitializerPtr pointer;
};

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

/// One context, a list of them, or None (the current context).
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

/// The block a Python class derives from (tagflow.gluon.Block): forward(),
/// describe() and the multi-input forward go to the Python methods of those
/// names when the subclass defines them.
class PythonBlock : public nn::Block {
 public:
  explicit PythonBlock(const std::string& kind) : nn::Block(kind.c_str()) {}

  NDArray forward(const NDArray& x) override {
    py::gil_scoped_acquire gil;
    if (py::function method = py::get_override(static_cast<const nn::Block*>(this), "forward")) {
      return result_of(method(wrap(x, flavor_of_results())));
    }
    return nn::Block::forward(x);
  }

  NDArray forward_inputs(const std::vector<NDArray>& inputs) override {
    py::gil_scoped_acquire gil;
    if (py::function method = py::get_override(static_cast<const nn::Block*>(this), "forward")) {
      py::tuple args(inputs.size());
      for (std::size_t i = 0; i < inputs.size(); ++i)
        args[i] = wrap(inputs[i], flavor_of_results());
      return result_of(method(*args));
    }
    return nn::Block::forward_inputs(inputs);
  }

  std::string describe() const override {
    py::gil_scoped_acquire gil;
    if (py::function method = py::get_override(static_cast<const nn::Block*>(this), "describe")) {
      return method().cast<std::string>();
    }
    return py::str(py::cast(this).get_type().attr("__name__"));
  }

  using nn::Block::adopt_parameter;
  using nn::Block::register_parameter;
  void register_child_block(std::shared_ptr<nn::Block> child) { register_child(std::move(child)); }

 private:
  NDArray result_of(const py::object& result) const {
    if (const NDArray* array = as_array(result)) return *array;
    throw py::type_error(name() + ".forward: expected an array as the result, got " +
                         std::string(py::str(result.get_type().attr("__name__"))));
  }
};

/// `block(x)` or `block(x, y, ...)`, with the GIL released while C++ runs
/// the network (a Python forward takes it back).
py::object call_block(nn::Block& block, const py::args& args) {
  if (args.size() == 0) throw py::type_error(block.name() + ": expected at least one input");
  std::vector<NDArray> inputs;
  for (const py::handle arg : args) {
    const NDArray* array = as_array(arg);
    if (array == nullptr) {
      throw py::type_error(block.name() + ": expected arrays as inputs, got " +
                           std::string(py::str(py::type::handle_of(arg).attr("__name__"))));
    }
    inputs.push_back(*array);
  }
  NDArray out;
  {
    py::gil_scoped_release released;
    out = inputs.size() == 1 ? block.forward(inputs[0]) : block.forward_inputs(inputs);
  }
  return wrap(std::move(out), flavor_for(args[0]));
}

nn::Size2 size2_of(const py::handle& value) {
  if (py::isinstance<py::int_>(value)) return nn::Size2(value.cast<int>());
  const auto pair = value.cast<std::vector<int>>();
  if (pair.size() != 2) throw py::value_error("expected an int or a pair of ints");
  return nn::Size2(pair[0], pair[1]);
}

template <typename Layer>
using LayerClass = py::class_<Layer, nn::Block, std::shared_ptr<Layer>>;

void bind_parameters(py::module_& m) {
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

void bind_blocks(py::module_& m) {
  py::class_<nn::Block, PythonBlock, std::shared_ptr<nn::Block>>(m, "Block", py::dynamic_attr(),
                                                                 R"doc(
The base of every block. A Python subclass calls Block.__init__, assigns its
children and parameters as attributes, and defines forward().)doc")
      .def(py::init_alias<std::string>(), py::arg("kind") = "block")
      .def("__call__", &call_block)
      .def(
          "hybridize", [](const nn::Block&, const py::args&, const py::kwargs&) {},
          "Accepted for MXNet's code; networks run as they are written.")
      .def_property_readonly("name", &nn::Block::name)
      .def("collect_params", &nn::Block::collect_params,
           "This block's parameters and its children's, in registration order.")
      .def(
          "initialize",
          [](nn::Block& b, const py::handle& init, const py::handle& ctx, bool force_reinit) {
            auto chosen = initializer_of(init);
            if (!chosen) chosen = init::Uniform();
            const auto contexts = contexts_of(ctx);
            py::gil_scoped_release released;
            b.initialize(chosen, contexts, force_reinit);
          },
          py::arg("init") = py::none(), py::arg("ctx") = py::none(),
          py::arg("force_reinit") = false,
          "Initializes every parameter on `ctx` (one context or a list).")
      .def(
          "save_parameters",
          [](const nn::Block& b, const std::filesystem::path& path) {
            py::gil_scoped_release released;
            b.save_parameters(path);
          },
          py::arg("filename"),
          "Writes the parameters to a safetensors file, by place in the network.")
      .def(
          "load_parameters",
          [](nn::Block& b, const std::filesystem::path& path, const py::handle& ctx,
             bool allow_missing, bool ignore_extra) {
            const auto contexts = contexts_of(ctx);
            py::gil_scoped_release released;
            b.load_parameters(path, contexts, allow_missing, ignore_extra);
          },
          py::arg("filename"), py::arg("ctx") = py::none(), py::arg("allow_missing") = false,
          py::arg("ignore_extra") = false,
          "Reads parameters saved by save_parameters onto `ctx`, checking them against the "
          "network.")
      .def("_children", [](const nn::Block& b) { return b.children(); })
      .def("_describe", &nn::Block::describe)
      .def("__repr__",
           [](const nn::Block& b) {
             std::ostringstream text;
             text << b;
             return text.str();
           })
      // For Python subclasses (tagflow.gluon.Block).
      .def("_register_child",
           [](nn::Block& b, std::shared_ptr<nn::Block> child) {
             auto* own = dynamic_cast<PythonBlock*>(&b);
             if (own == nullptr)
               throw py::type_error(b.name() + ": only a Python block takes children so");
             own->register_child_block(std::move(child));
           })
      .def("_adopt_parameter",
           [](nn::Block& b, const std::string& suffix, nn::ParameterPtr parameter) {
             auto* own = dynamic_cast<PythonBlock*>(&b);
             if (own == nullptr)
               throw py::type_error(b.name() + ": only a Python block takes parameters so");
             return own->adopt_parameter(suffix, std::move(parameter));
           });

  LayerClass<nn::Sequential>(m, "Sequential", py::dynamic_attr())
      .def(py::init<>())
      .def("_add",
           [](nn::Sequential& s, std::shared_ptr<nn::Block> block) { s.add(std::move(block)); })
      .def("__len__", &nn::Sequential::size)
      .def("__getitem__", [](const nn::Sequential& s, std::int64_t i) {
        const auto size = static_cast<std::int64_t>(s.size());
        const std::int64_t at = i < 0 ? i + size : i;
        if (at < 0 || at >= size)
          throw py::index_error("Sequential: no child " + std::to_string(i));
        return s.children()[static_cast<std::size_t>(at)];
      });

  LayerClass<nn::Dense>(m, "Dense", py::dynamic_attr())
      .def(py::init([](int units, const py::handle& activation, bool use_bias, int in_units,
                       const py::handle& weight_initializer, const py::handle& bias_initializer) {
             const std::string act = activation.is_none() ? "" : activation.cast<std::string>();
             auto bias_init = initializer_of(bias_initializer);
             return std::make_shared<nn::Dense>(units, act, in_units, use_bias,
                                                initializer_of(weight_initializer),
                                                bias_init ? bias_init : init::Zero());
           }),
           py::arg("units"), py::arg("activation") = py::none(), py::arg("use_bias") = true,
           py::arg("in_units") = 0, py::arg("weight_initializer") = py::none(),
           py::arg("bias_initializer") = "zeros")
      .def_property_readonly("weight", &nn::Dense::weight)
      .def_property_readonly("bias", &nn::Dense::bias);

  LayerClass<nn::Conv2D>(m, "Conv2D", py::dynamic_attr())
      .def(py::init([](int channels, const py::handle& kernel_size, const py::handle& strides,
                       const py::handle& padding, const py::handle& dilation, int groups,
                       const py::handle& activation, bool use_bias, int in_channels,
                       const py::handle& weight_initializer, const py::handle& bias_initializer) {
             Conv2DOptions options;
             options.stride = size2_of(strides).value;
             options.padding = size2_of(padding).value;
             options.dilation = size2_of(dilation).value;
             options.groups = groups;
             const std::string act = activation.is_none() ? "" : activation.cast<std::string>();
             auto bias_init = initializer_of(bias_initializer);
             return std::make_shared<nn::Conv2D>(
                 channels, size2_of(kernel_size), act, options, in_channels, use_bias,
                 initializer_of(weight_initializer), bias_init ? bias_init : init::Zero());
           }),
           py::arg("channels"), py::arg("kernel_size"), py::arg("strides") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1,
           py::arg("activation") = py::none(), py::arg("use_bias") = true,
           py::arg("in_channels") = 0, py::arg("weight_initializer") = py::none(),
           py::arg("bias_initializer") = "zeros")
      .def_property_readonly("weight", &nn::Conv2D::weight)
      .def_property_readonly("bias", &nn::Conv2D::bias);

  LayerClass<nn::MaxPool2D>(m, "MaxPool2D", py::dynamic_attr())
      .def(py::init([](const py::handle& pool_size, const py::handle& strides,
                       const py::handle& padding) {
             std::optional<nn::Size2> stride;
             if (!strides.is_none()) stride = size2_of(strides);
             return std::make_shared<nn::MaxPool2D>(size2_of(pool_size), stride, size2_of(padding));
           }),
           py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = 0);
  LayerClass<nn::AvgPool2D>(m, "AvgPool2D", py::dynamic_attr())
      .def(py::init([](const py::handle& pool_size, const py::handle& strides,
                       const py::handle& padding, bool count_include_pad) {
             std::optional<nn::Size2> stride;
             if (!strides.is_none()) stride = size2_of(strides);
             return std::make_shared<nn::AvgPool2D>(size2_of(pool_size), stride, size2_of(padding),
                                                    count_include_pad);
           }),
           py::arg("pool_size") = 2, py::arg("strides") = py::none(), py::arg("padding") = 0,
           py::arg("count_include_pad") = true);
  LayerClass<nn::GlobalAvgPool2D>(m, "GlobalAvgPool2D", py::dynamic_attr()).def(py::init<>());
  LayerClass<nn::GlobalMaxPool2D>(m, "GlobalMaxPool2D", py::dynamic_attr()).def(py::init<>());
  LayerClass<nn::Flatten>(m, "Flatten", py::dynamic_attr()).def(py::init<>());
  LayerClass<nn::Activation>(m, "Activation", py::dynamic_attr())
      .def(py::init<std::string>(), py::arg("activation"));
  LayerClass<nn::Dropout>(m, "Dropout", py::dynamic_attr())
      .def(py::init<double>(), py::arg("rate"));
  LayerClass<nn::BatchNorm>(m, "BatchNorm", py::dynamic_attr())
      .def(py::init<double, double, bool, bool, int>(), py::arg("momentum") = 0.9,
           py::arg("epsilon") = 1e-5, py::arg("center") = true, py::arg("scale") = true,
           py::arg("in_channels") = 0)
      .def_property_readonly("gamma", &nn::BatchNorm::gamma)
      .def_property_readonly("beta", &nn::BatchNorm::beta)
      .def_property_readonly("running_mean", &nn::BatchNorm::running_mean)
      .def_property_readonly("running_var", &nn::BatchNorm::running_var);
}

/// A loss as a Python callable: `loss(pred, label)`, one value per sample,
/// times `weight` when one is given.
template <typename Loss>
class PythonLoss {
 public:
  PythonLoss(Loss loss, double weight) : loss_(std::move(loss)), weight_(weight) {}
  py::object operator()(const NDArray& pred, const NDArray& label) const {
    const Flavor flavor = flavor_for(py::cast(pred));
    NDArray out;
    {
      py::gil_scoped_release released;
      out = loss_(pred, label);
      if (weight_ != 1.0) out = out * weight_;
    }
    return wrap(std::move(out), flavor);
  }

 private:
  Loss loss_;
  double weight_;
};

/// Refuses what MXNet's losses take and these do not compute, instead of
/// ignoring it.
void check_loss_options(const char* loss, int batch_axis, const py::handle& weight) {
  if (batch_axis != 0) {
    throw py::value_error(std::string(loss) + ": only batch_axis=0 is supported, got " +
                          std::to_string(batch_axis));
  }
  if (!weight.is_none() && !py::isinstance<py::float_>(weight) &&
      !py::isinstance<py::int_>(weight)) {
    throw py::type_error(std::string(loss) + ": weight is a number (or None)");
  }
}

double weight_of(const py::handle& weight) {
  return weight.is_none() ? 1.0 : weight.cast<double>();
}

void bind_training(py::module_& m) {
  py::module_ loss = m.def_submodule("loss", "Losses (tagflow.gluon.loss): per-sample values.");
  using SoftmaxLoss = PythonLoss<nn::SoftmaxCrossEntropyLoss>;
  py::class_<SoftmaxLoss>(loss, "SoftmaxCrossEntropyLoss")
      .def(py::init([](int axis, bool sparse_label, bool from_logits, const py::handle& weight,
                       int batch_axis) {
             check_loss_options("SoftmaxCrossEntropyLoss", batch_axis, weight);
             if (axis != -1) {
               throw py::value_error(
                   "SoftmaxCrossEntropyLoss: only axis=-1 (the classes last) is "
                   "supported, got " +
                   std::to_string(axis));
             }
             if (from_logits) {
               throw py::value_error(
                   "SoftmaxCrossEntropyLoss: from_logits=True (log-probabilities given) is not "
                   "supported: give the scores");
             }
             return SoftmaxLoss(nn::SoftmaxCrossEntropyLoss(sparse_label), weight_of(weight));
           }),
           py::arg("axis") = -1, py::arg("sparse_label") = true, py::arg("from_logits") = false,
           py::arg("weight") = py::none(), py::arg("batch_axis") = 0)
      .def("__call__", &SoftmaxLoss::operator(), py::arg("pred"), py::arg("label"));
  using L2 = PythonLoss<nn::L2Loss>;
  py::class_<L2>(loss, "L2Loss")
      .def(py::init([](const py::handle& weight, int batch_axis) {
             check_loss_options("L2Loss", batch_axis, weight);
             return L2(nn::L2Loss(), weight_of(weight));
           }),
           py::arg("weight") = 1.0, py::arg("batch_axis") = 0)
      .def("__call__", &L2::operator(), py::arg("pred"), py::arg("label"));
  using L1 = PythonLoss<nn::L1Loss>;
  py::class_<L1>(loss, "L1Loss")
      .def(py::init([](const py::handle& weight, int batch_axis) {
             check_loss_options("L1Loss", batch_axis, weight);
             return L1(nn::L1Loss(), weight_of(weight));
           }),
           py::arg("weight") = py::none(), py::arg("batch_axis") = 0)
      .def("__call__", &L1::operator(), py::arg("pred"), py::arg("label"));

  py::class_<nn::Trainer>(m, "Trainer", R"doc(
Applies an optimizer ('sgd', 'nag', 'adam') to a network's parameters, summing
the gradients of the copies on several devices first, as gluon.Trainer.)doc")
      // kvstore, compression_params and update_on_kvstore are MXNet's: the
      // gradients are summed by the library's aggregator whatever they say.
      .def(py::init([](const nn::ParameterDict& params, const std::string& optimizer,
                       const py::handle& optimizer_params, const py::handle&, const py::handle&,
                       const py::handle&) {
             nn::TrainerOptions options;
             if (!optimizer_params.is_none()) {
               for (const auto& [key, value] : optimizer_params.cast<py::dict>()) {
                 const auto name = key.cast<std::string>();
                 if (name == "learning_rate") {
                   options.learning_rate = value.cast<double>();
                 } else if (name == "momentum") {
                   options.momentum = value.cast<double>();
                 } else if (name == "wd") {
                   options.weight_decay = value.cast<double>();
                 } else if (name == "beta1") {
                   options.beta1 = value.cast<double>();
                 } else if (name == "beta2") {
                   options.beta2 = value.cast<double>();
                 } else if (name == "epsilon") {
                   options.epsilon = value.cast<double>();
                 } else if (name == "clip_gradient") {
                   options.clip_gradient = value.cast<double>();
                 } else {
                   throw py::value_error("Trainer: unknown optimizer parameter '" + name +
                                         "' (known: learning_rate, momentum, wd, beta1, beta2, "
                                         "epsilon, clip_gradient)");
                 }
               }
             }
             return std::make_unique<nn::Trainer>(params, optimizer, options);
           }),
           py::arg("params"), py::arg("optimizer"), py::arg("optimizer_params") = py::none(),
           py::arg("kvstore") = "device", py::arg("compression_params") = py::none(),
           py::arg("update_on_kvstore") = py::none())
      .def(
          "step",
          [](nn::Trainer& t, std::int64_t batch_size, bool ignore_stale_grad) {
            (void)ignore_stale_grad;
            py::gil_scoped_release released;
            t.step(batch_size);
          },
          py::arg("batch_size"), py::arg("ignore_stale_grad") = false,
          "Sums the gradients over the devices, then updates every parameter (rescaled by "
          "1/batch_size).")
      .def("allreduce_grads",
           [](nn::Trainer& t) {
             py::gil_scoped_release released;
             t.allreduce_grads();
           })
      .def(
          "update",
          [](nn::Trainer& t, std::int64_t batch_size) {
            py::gil_scoped_release released;
            t.update(batch_size);
          },
          py::arg("batch_size"))
      .def_property_readonly("learning_rate", &nn::Trainer::learning_rate)
      .def("set_learning_rate", &nn::Trainer::set_learning_rate, py::arg("lr"))
      .def(
          "save_states",
          [](nn::Trainer& t, const std::filesystem::path& path) {
            py::gil_scoped_release released;
            t.save_states(path);
          },
          py::arg("fname"))
      .def(
          "load_states",
          [](nn::Trainer& t, const std::filesystem::path& path) {
            py::gil_scoped_release released;
            t.load_states(path);
          },
          py::arg("fname"));

  py::module_ utils =
      m.def_submodule("utils", "split_and_load and split_data (tagflow.gluon.utils).");
  utils.def(
      "split_and_load",
      [](const NDArray& data, const py::handle& ctx_list, int batch_axis, bool even_split) {
        if (batch_axis != 0)
          throw py::value_error("split_and_load: only batch_axis=0 is supported");
        const Flavor flavor = flavor_for(py::cast(data));
        const auto contexts = contexts_of(ctx_list);
        std::vector<NDArray> parts;
        {
          py::gil_scoped_release released;
          parts = nn::split_and_load(data, contexts, even_split);
        }
        py::list out;
        for (auto& part : parts) out.append(wrap(std::move(part), flavor));
        return out;
      },
      py::arg("data"), py::arg("ctx_list"), py::arg("batch_axis") = 0, py::arg("even_split") = true,
      "Splits a batch along its first axis into one part per context, copied there.");
  utils.def(
      "split_data",
      [](const NDArray& data, int num_slice, int batch_axis, bool even_split) {
        if (batch_axis != 0) throw py::value_error("split_data: only batch_axis=0 is supported");
        const Flavor flavor = flavor_for(py::cast(data));
        py::list out;
        for (auto& part : nn::split_data(data, num_slice, even_split))
          out.append(wrap(std::move(part), flavor));
        return out;
      },
      py::arg("data"), py::arg("num_slice"), py::arg("batch_axis") = 0,
      py::arg("even_split") = true);
}

}  // namespace

void bind_gluon(py::module_& m) {
  py::module_ gluon = m.def_submodule("gluon", "The network layer (tagflow.gluon).");
  gluon.def(
      "_set_numpy_mode", [](bool on) { numpy_mode = on; }, py::arg("on"));
  bind_parameters(gluon);
  bind_blocks(gluon);
  bind_training(gluon);
  bind_data(gluon);
}

}  // namespace tagflow::python
