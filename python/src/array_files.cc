// tagflow.nd.save and tagflow.nd.load: arrays to a file and back, as MXNet's
// `nd.save(fname, data)` and `nd.load(fname)` (D2L's "File I/O").
//
// Note [Array files]
// The file is a safetensors file (nn/io/safetensors.h), not MXNet's binary
// format: what it holds is readable by any safetensors reader, and writing
// it is atomic (the file holds its old contents or the new ones). MXNet's
// three shapes of `data` come back as they went in:
// - one array, or a list of arrays: tensors named "0", "1", ... and the
//   metadata "tagflow.nd" = "list"; load gives a list, in order;
// - a dict of names to arrays: the names as they are and "tagflow.nd" =
//   "dict"; load gives a dict (in name order, as safetensors keeps them).
// Any other safetensors file loads as a dict. load puts the arrays on `ctx`
// (cpu(0) by default, as MXNet's load does); a file whose "list" names are
// not 0..n-1 is refused as not written by save.

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <pybind11/stl/filesystem.h>

#include "array_support.h"
#include "bindings.h"

namespace tagflow::python {
namespace {

constexpr const char* kShapeKey = "tagflow.nd";

using Named = std::vector<std::pair<std::string, NDArray>>;

void save(const std::filesystem::path& fname, const py::handle& data) {
  Named tensors;
  std::string shape = "list";
  if (py::isinstance<NDArray>(data)) {
    tensors.emplace_back("0", data.cast<NDArray>());
  } else if (py::isinstance<py::dict>(data)) {
    shape = "dict";
    for (const auto& [key, value] : data.cast<py::dict>()) {
      if (!py::isinstance<py::str>(key) || !py::isinstance<NDArray>(value)) {
        throw py::type_error("nd.save: expected a dict of str to NDArray, got an item " +
                             py::repr(key).cast<std::string>() + ": " +
                             py::str(py::type::of(value)).cast<std::string>());
      }
      tensors.emplace_back(key.cast<std::string>(), value.cast<NDArray>());
    }
  } else if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
    for (const py::handle item : data.cast<py::sequence>()) {
      if (!py::isinstance<NDArray>(item)) {
        throw py::type_error("nd.save: expected a list of NDArray, got an item of type " +
                             py::str(py::type::of(item)).cast<std::string>());
      }
      tensors.emplace_back(std::to_string(tensors.size()), item.cast<NDArray>());
    }
  } else {
    throw py::type_error(
        "nd.save: expected an NDArray, a list of NDArray or a dict of str to NDArray, got " +
        py::str(py::type::of(data)).cast<std::string>());
  }
  const std::map<std::string, std::string> metadata{{kShapeKey, shape}};
  py::gil_scoped_release released;
  io::save_safetensors(fname, tensors, metadata);
}

py::object load(const std::filesystem::path& fname, const py::handle& ctx) {
  const Context at = ctx.is_none() ? cpu() : ctx.cast<Context>();
  Named tensors;
  std::map<std::string, std::string> metadata;
  {
    py::gil_scoped_release released;
    metadata = io::safetensors_metadata(fname);
    tensors = io::load_safetensors(fname, at);
  }
  const auto shape = metadata.find(kShapeKey);
  if (shape == metadata.end() || shape->second != "list") {
    py::dict out;
    for (auto& [name, array] : tensors)
      out[py::str(name)] = wrap(std::move(array), Flavor::kClassic);
    return out;
  }
  std::vector<NDArray> ordered(tensors.size());
  std::vector<bool> seen(tensors.size(), false);
  for (auto& [name, array] : tensors) {
    std::size_t used = 0;
    std::size_t index = tensors.size();
    try {
      index = std::stoul(name, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != name.size() || index >= tensors.size() || seen[index]) {
      throw io::FileError(fname, "expected the tensors of a list saved by nd.save, named 0.." +
                                     std::to_string(tensors.size() - 1) + ", got a tensor named '" +
                                     name + "'");
    }
    seen[index] = true;
    ordered[index] = std::move(array);
  }
  py::list out;
  for (NDArray& array : ordered) out.append(wrap(std::move(array), Flavor::kClassic));
  return out;
}

}  // namespace

void bind_array_files(py::module_& nd) {
  nd.def("save", &save, py::arg("fname"), py::arg("data"),
         "Writes an NDArray, a list of them or a dict of str to NDArray to `fname` (a "
         "safetensors file: Note [Array files]).");
  nd.def("load", &load, py::arg("fname"), py::arg("ctx") = py::none(),
         "Reads what nd.save wrote: a list, or a dict for a dict (and for any other "
         "safetensors file), the arrays on `ctx` (cpu(0) by default).");
}

}  // namespace tagflow::python
