// tagflow.gluon: the C++ library's blocks, and the base a block written in
// Python derives from (PythonBlock), which the C++ side calls like any other.

#include <filesystem>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "array_support.h"
#include "gluon_support.h"

namespace tagflow::python {
namespace {

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
  if (pair.size() != 2) {
    throw py::value_error("expected an int or a pair of ints, got " + std::to_string(pair.size()) +
                          " ints");
  }
  return nn::Size2(pair[0], pair[1]);
}

/// One extent: an int or a tuple of one int, as Gluon's 1-D layers take it.
int size1_of(const py::handle& value, const char* what) {
  if (py::isinstance<py::int_>(value)) return value.cast<int>();
  const auto one = value.cast<std::vector<int>>();
  if (one.size() != 1) {
    throw py::value_error(std::string("Conv1D: expected ") + what +
                          " as an int or a tuple of one int, got " + std::to_string(one.size()) +
                          " ints");
  }
  return one[0];
}

template <typename Layer>
using LayerClass = py::class_<Layer, nn::Block, std::shared_ptr<Layer>>;

}  // namespace

void bind_gluon_blocks(py::module_& m) {
  py::class_<nn::Block, PythonBlock, std::shared_ptr<nn::Block>>(m, "Block", py::dynamic_attr(),
                                                                 R"doc(
The base of every block. A Python subclass calls Block.__init__, assigns its
children and parameters as attributes, and defines forward().)doc")
      .def(py::init_alias<std::string>(), py::arg("kind") = "block")
      .def("__call__", &call_block)
      .def(
          "hybridize",
          [](const nn::Block&, const py::args&, const py::kwargs&) {
            // Said once per process (under the GIL, which guards the flag).
            static bool warned = false;
            if (warned) return;
            warned = true;
            if (PyErr_WarnEx(PyExc_UserWarning,
                             "hybridize() has no effect in tagflow: every block runs as written, "
                             "its operations pushed one by one to the engine (static_alloc and "
                             "static_shape too); said once",
                             1) != 0) {
              throw py::error_already_set();
            }
          },
          "Accepted for MXNet's code, with a warning (once): networks run as they are "
          "written.")
      .def_property_readonly("name", &nn::Block::name)
      .def(
          "collect_params",
          [](const nn::Block& b, const py::handle& select) {
            nn::ParameterDict all = b.collect_params();
            if (select.is_none()) return all;
            // MXNet's selection: Python's re.match of the pattern on each name.
            const py::object pattern = py::module_::import("re").attr("compile")(select);
            nn::ParameterDict chosen;
            for (const nn::ParameterPtr& p : all) {
              if (!pattern.attr("match")(p->name()).is_none()) chosen.add(p);
            }
            return chosen;
          },
          py::arg("select") = py::none(),
          "This block's parameters and its children's, in registration order; with `select`, "
          "those whose names the regular expression matches (from the start, as re.match: "
          "'.*weight').")
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
          throw py::index_error("Sequential: no child " + std::to_string(i) + " among " +
                                std::to_string(size));
        return s.children()[static_cast<std::size_t>(at)];
      });

  LayerClass<nn::Dense>(m, "Dense", py::dynamic_attr())
      // MXNet's order of the arguments.
      .def(py::init([](int units, const py::handle& activation, bool use_bias, bool flatten,
                       const py::handle& weight_initializer, const py::handle& bias_initializer,
                       int in_units) {
             const std::string act = activation.is_none() ? "" : activation.cast<std::string>();
             auto bias_init = initializer_of(bias_initializer);
             return std::make_shared<nn::Dense>(units, act, in_units, use_bias,
                                                initializer_of(weight_initializer),
                                                bias_init ? bias_init : init::Zero(), flatten);
           }),
           py::arg("units"), py::arg("activation") = py::none(), py::arg("use_bias") = true,
           py::arg("flatten") = true, py::arg("weight_initializer") = py::none(),
           py::arg("bias_initializer") = "zeros", py::arg("in_units") = 0)
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

  LayerClass<nn::Conv1D>(m, "Conv1D", py::dynamic_attr())
      .def(py::init([](int channels, const py::handle& kernel_size, const py::handle& strides,
                       const py::handle& padding, const py::handle& dilation, int groups,
                       const std::string& layout, const py::handle& activation, bool use_bias,
                       const py::handle& weight_initializer, const py::handle& bias_initializer,
                       int in_channels) {
             if (layout != "NCW") {
               throw py::value_error(
                   "Conv1D: only layout 'NCW' (batch, channels, width) is "
                   "available, got '" +
                   layout + "'");
             }
             const nn::Conv1DOptions options{.stride = size1_of(strides, "strides"),
                                             .padding = size1_of(padding, "padding"),
                                             .dilation = size1_of(dilation, "dilation"),
                                             .groups = groups};
             const std::string act = activation.is_none() ? "" : activation.cast<std::string>();
             auto bias_init = initializer_of(bias_initializer);
             return std::make_shared<nn::Conv1D>(channels, size1_of(kernel_size, "kernel_size"),
                                                 act, options, in_channels, use_bias,
                                                 initializer_of(weight_initializer),
                                                 bias_init ? bias_init : init::Zero());
           }),
           // MXNet's order of the arguments.
           py::arg("channels"), py::arg("kernel_size"), py::arg("strides") = 1,
           py::arg("padding") = 0, py::arg("dilation") = 1, py::arg("groups") = 1,
           py::arg("layout") = "NCW", py::arg("activation") = py::none(),
           py::arg("use_bias") = true, py::arg("weight_initializer") = py::none(),
           py::arg("bias_initializer") = "zeros", py::arg("in_channels") = 0)
      .def_property_readonly("weight", &nn::Conv1D::weight)
      .def_property_readonly("bias", &nn::Conv1D::bias);

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
      // MXNet's rule for the running variance: the biased batch variance.
      .def(py::init([](double momentum, double epsilon, bool center, bool scale, int in_channels) {
             return std::make_shared<nn::BatchNorm>(momentum, epsilon, center, scale, in_channels,
                                                    /*unbiased_running_var=*/false);
           }),
           py::arg("momentum") = 0.9, py::arg("epsilon") = 1e-5, py::arg("center") = true,
           py::arg("scale") = true, py::arg("in_channels") = 0)
      .def_property_readonly("gamma", &nn::BatchNorm::gamma)
      .def_property_readonly("beta", &nn::BatchNorm::beta)
      .def_property_readonly("running_mean", &nn::BatchNorm::running_mean)
      .def_property_readonly("running_var", &nn::BatchNorm::running_var);
}

/// A loss as a Python callable: `loss(pred, label)`, one value per sample,
/// times `weight` when one is given.

void bind_gluon_model_zoo(py::module_& m) {
  py::module_ zoo = m.def_submodule(
      "model_zoo", "The library's networks (nn/models/): those tagflow train trains.");
  zoo.def(
      "lenet", [](int classes) { return std::make_shared<nn::Sequential>(models::lenet(classes)); },
      py::arg("classes") = 10, "The tutorials' LeNet (tagflow train --model lenet).");
  zoo.def(
      "mlp", [](int classes) { return std::make_shared<nn::Sequential>(models::mlp(classes)); },
      py::arg("classes") = 10, "A multilayer perceptron (tagflow train --model mlp).");
  zoo.def(
      "resnet18",
      [](int classes, int in_channels) {
        return std::make_shared<nn::Sequential>(models::resnet18(classes, in_channels));
      },
      py::arg("classes") = 10, py::arg("in_channels") = 0,
      "The tutorials' ResNet-18 for 28x28 images (tagflow train --model resnet18).");
}

}  // namespace tagflow::python
