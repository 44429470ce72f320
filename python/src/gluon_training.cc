// tagflow.gluon: the losses, Trainer and split_and_load.

#include <algorithm>
#include <array>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include "array_support.h"
#include "gluon_support.h"

namespace tagflow::python {
namespace {

/// `sample_weight` as one value per sample, (batch): MXNet multiplies the
/// loss's elements by it before their mean over the sample, which is the
/// per-sample mean times the weight when the weight has one value per
/// sample, (batch) or (batch, 1, ...). Element-wise weights are refused.
NDArray per_sample_weight(const char* loss, const NDArray& sample_weight, std::int64_t batch) {
  const Shape& s = sample_weight.shape();
  bool per_sample = s.ndim() >= 1 && s[0] == batch;
  for (int axis = 1; axis < s.ndim(); ++axis) per_sample = per_sample && s[axis] == 1;
  if (!per_sample) {
    throw py::value_error(
        std::string(loss) + ": expected sample_weight with one value per sample, of shape (" +
        std::to_string(batch) + ") or (" + std::to_string(batch) + ", 1, ...), got (" + s.str() +
        "); element-wise weights are not available here");
  }
  return sample_weight.reshape({batch});
}

template <typename Loss>
class PythonLoss {
 public:
  PythonLoss(Loss loss, double weight, const char* name)
      : loss_(std::move(loss)), weight_(weight), name_(name) {}
  py::object operator()(const NDArray& pred, const NDArray& label,
                        const std::optional<NDArray>& sample_weight) const {
    const Flavor flavor = flavor_for(py::cast(pred));
    NDArray out;
    {
      py::gil_scoped_release released;
      out = loss_(pred, label);
      if (weight_ != 1.0) out = out * weight_;
    }
    if (sample_weight) out = out * per_sample_weight(name_, *sample_weight, out.shape()[0]);
    return wrap(std::move(out), flavor);
  }

 private:
  Loss loss_;
  double weight_;
  const char* name_;
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

/// MXNet's optimizer_params, and the options they set.
constexpr std::array<std::pair<std::string_view, double nn::TrainerOptions::*>, 7> kOptimizerParams{
    {
        {"learning_rate", &nn::TrainerOptions::learning_rate},
        {"momentum", &nn::TrainerOptions::momentum},
        {"wd", &nn::TrainerOptions::weight_decay},
        {"beta1", &nn::TrainerOptions::beta1},
        {"beta2", &nn::TrainerOptions::beta2},
        {"epsilon", &nn::TrainerOptions::epsilon},
        {"clip_gradient", &nn::TrainerOptions::clip_gradient},
    }};

}  // namespace

void bind_gluon_training(py::module_& m) {
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
             return SoftmaxLoss(nn::SoftmaxCrossEntropyLoss(sparse_label), weight_of(weight),
                                "SoftmaxCrossEntropyLoss");
           }),
           py::arg("axis") = -1, py::arg("sparse_label") = true, py::arg("from_logits") = false,
           py::arg("weight") = py::none(), py::arg("batch_axis") = 0)
      .def("__call__", &SoftmaxLoss::operator(), py::arg("pred"), py::arg("label"),
           py::arg("sample_weight") = py::none());
  using L2 = PythonLoss<nn::L2Loss>;
  py::class_<L2>(loss, "L2Loss")
      .def(py::init([](const py::handle& weight, int batch_axis) {
             check_loss_options("L2Loss", batch_axis, weight);
             return L2(nn::L2Loss(), weight_of(weight), "L2Loss");
           }),
           py::arg("weight") = 1.0, py::arg("batch_axis") = 0)
      .def("__call__", &L2::operator(), py::arg("pred"), py::arg("label"),
           py::arg("sample_weight") = py::none());
  using L1 = PythonLoss<nn::L1Loss>;
  py::class_<L1>(loss, "L1Loss")
      .def(py::init([](const py::handle& weight, int batch_axis) {
             check_loss_options("L1Loss", batch_axis, weight);
             return L1(nn::L1Loss(), weight_of(weight), "L1Loss");
           }),
           py::arg("weight") = py::none(), py::arg("batch_axis") = 0)
      .def("__call__", &L1::operator(), py::arg("pred"), py::arg("label"),
           py::arg("sample_weight") = py::none());

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
                 const auto known = std::find_if(kOptimizerParams.begin(), kOptimizerParams.end(),
                                                 [&](const auto& p) { return name == p.first; });
                 if (known == kOptimizerParams.end()) {
                   throw py::value_error("Trainer: unknown optimizer parameter '" + name +
                                         "' (known: learning_rate, momentum, wd, beta1, beta2, "
                                         "epsilon, clip_gradient)");
                 }
                 options.*(known->second) = value.cast<double>();
               }
             }
             // 'nag' as MXNet's: SGD whose step looks ahead along the
             // momentum (without momentum, plain SGD): nn::make_optimizer.
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
        if (batch_axis != 0) {
          throw py::value_error("split_and_load: only batch_axis=0 is supported, got " +
                                std::to_string(batch_axis));
        }
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
        if (batch_axis != 0) {
          throw py::value_error("split_data: only batch_axis=0 is supported, got " +
                                std::to_string(batch_axis));
        }
        const Flavor flavor = flavor_for(py::cast(data));
        py::list out;
        for (auto& part : nn::split_data(data, num_slice, even_split))
          out.append(wrap(std::move(part), flavor));
        return out;
      },
      py::arg("data"), py::arg("num_slice"), py::arg("batch_axis") = 0,
      py::arg("even_split") = true);
}

}  // namespace tagflow::python
