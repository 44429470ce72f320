// The data pipeline that runs without Python: Fashion-MNIST read by the C++
// library, transformed by its ToTensor and Normalize, batched by its
// DataLoader's threads. tagflow.gluon.data.DataLoader uses it when the data
// set and the transforms are those (Note [Two data pipelines] in
// python/tagflow/gluon/data/dataloader.py); anything else runs in Python.

#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "bindings.h"

namespace tagflow::python {
namespace {

/// A DataLoader over Fashion-MNIST whose batches come as (data, label).
class NativeLoader {
 public:
  NativeLoader(data::Dataset dataset, std::int64_t batch_size, data::DataLoaderOptions options,
               Flavor flavor)
      : loader_(std::move(dataset), batch_size, options), flavor_(flavor) {}

  void start_epoch() {
    py::gil_scoped_release released;
    loader_.start_epoch();
  }
  py::object next() {
    std::optional<data::Batch> batch;
    {
      py::gil_scoped_release released;
      batch = loader_.next();
    }
    if (!batch) throw py::stop_iteration();
    return py::make_tuple(wrap(std::move(batch->data), flavor_),
                          wrap(std::move(batch->label), flavor_));
  }
  std::int64_t size() const { return loader_.size(); }

 private:
  data::DataLoader loader_;
  Flavor flavor_;
};

data::LastBatch last_batch_of(const std::string& name) {
  if (name == "keep") return data::LastBatch::kKeep;
  if (name == "discard") return data::LastBatch::kDiscard;
  if (name == "rollover") return data::LastBatch::kRollover;
  throw py::value_error("last_batch: expected 'keep', 'discard' or 'rollover', got '" + name + "'");
}

/// The transforms, each ("to_tensor",) or ("normalize", means, stddevs).
data::Transform transform_of(const std::vector<py::tuple>& steps) {
  std::vector<data::Transform> transforms;
  for (const py::tuple& step : steps) {
    const auto kind = step[0].cast<std::string>();
    if (kind == "to_tensor") {
      transforms.emplace_back(data::transforms::ToTensor());
    } else if (kind == "normalize") {
      transforms.emplace_back(data::transforms::Normalize(step[1].cast<std::vector<float>>(),
                                                          step[2].cast<std::vector<float>>()));
    } else {
      throw py::value_error("transform: no native transform '" + kind + "'");
    }
  }
  return data::transforms::Compose(std::move(transforms));
}

}  // namespace

void bind_data(py::module_& m) {
  py::module_ data = m.def_submodule("data", "The native data pipeline (tagflow.gluon.data).");
  data.def(
      "fashion_mnist_dir", [] { return data::default_fashion_mnist_dir().string(); },
      "Where Fashion-MNIST is read from (TAGFLOW_FASHION_MNIST_DIR, or Debian's package).");
  data.def(
      "fashion_mnist_arrays",
      [](const std::string& root, bool train) {
        data::FashionMnist set;
        {
          py::gil_scoped_release released;
          set = data::load_fashion_mnist(root, train);
        }
        return py::make_tuple(set.images, set.labels);
      },
      py::arg("root"), py::arg("train"), "The images (N, 28, 28, 1, uint8) and labels (N, int32).");

  py::class_<NativeLoader>(data, "NativeLoader")
      .def(py::init([](const std::string& root, bool train,
                       const std::vector<py::tuple>& transforms, std::int64_t batch_size,
                       bool shuffle, std::uint64_t seed, const std::string& last_batch,
                       int num_workers, bool pinned, bool numpy_style) {
             data::Dataset dataset = data::FashionMNIST(root, train);
             if (!transforms.empty()) dataset = dataset.transform_first(transform_of(transforms));
             data::DataLoaderOptions options{.shuffle = shuffle,
                                             .seed = seed,
                                             .last_batch = last_batch_of(last_batch),
                                             .num_workers = num_workers};
             // Pinned host memory: copies of the batches to GPUs start at once.
             if (pinned) options.context = cpu_pinned(0);
             return std::make_unique<NativeLoader>(std::move(dataset), batch_size, options,
                                                   numpy_style ? Flavor::kNumpy : Flavor::kClassic);
           }),
           py::arg("root"), py::arg("train"), py::arg("transforms"), py::arg("batch_size"),
           py::arg("shuffle"), py::arg("seed"), py::arg("last_batch"), py::arg("num_workers"),
           py::arg("pinned"), py::arg("numpy_style"))
      .def("start_epoch", &NativeLoader::start_epoch)
      .def("next", &NativeLoader::next)
      .def("__len__", &NativeLoader::size);
}

}  // namespace tagflow::python
