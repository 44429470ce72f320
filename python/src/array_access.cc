// Printing and indexing of the array classes (array.cc binds them).

#include "array_access.h"

#include <string>

#include <fmt/format.h>

#include "array_support.h"

namespace tagflow::python {

// --- printing -----------------------------------------------------------------------

/// MXNet's NDArray printing: a newline, the values as NumPy prints them,
/// then "<NDArray 2x3 @gpu(0)>".
std::string classic_repr(const NDArray& a) {
  wait_to_read(a);
  py::gil_scoped_release released;
  return fmt::format("\n{}", a.str());
}

/// MXNet's mx.np.ndarray repr: NumPy's, with the dtype named when it is not
/// float32 and the context when it is not a CPU.
std::string numpy_repr(const NDArray& a) {
  std::string text = py::repr(to_numpy(a));
  if (a.dtype() == DType::kFloat32 || a.dtype() == DType::kBFloat16) {
    if (const auto at = text.find("dtype="); at != std::string::npos) {
      text = fmt::format("{})", text.substr(0, text.rfind(',')));
    }
  }
  if (a.dtype() != DType::kFloat32 && text.find("dtype=") == std::string::npos) {
    text = fmt::format("{}, dtype={})", text.substr(0, text.size() - 1), dtype_name(a.dtype()));
  }
  if (a.context().is_cpu()) return text;
  return fmt::format("{}, ctx={})", text.substr(0, text.size() - 1), a.context().str());
}

/// MXNet's mx.np.ndarray str: NumPy's, then " @gpu(0)" off the CPU.
std::string numpy_str(const NDArray& a) {
  std::string text = py::str(to_numpy(a));
  if (a.context().is_cpu() || a.ndim() == 0) return text;
  return fmt::format("{} @{}", text, a.context().str());
}

// --- indexing -----------------------------------------------------------------------

namespace {

std::int64_t checked_index(const NDArray& a, std::int64_t index) {
  if (a.ndim() == 0) throw py::index_error("too many indices: the array has no axis");
  const std::int64_t extent = a.shape()[0];
  const std::int64_t at = index < 0 ? index + extent : index;
  if (at < 0 || at >= extent) {
    throw py::index_error("index " + std::to_string(index) +
                          " is out of bounds for axis 0 of extent " + std::to_string(extent));
  }
  return at;
}

}  // namespace

/// a[key] for an int, a slice of step 1, or a tuple of ints: a view.
NDArray index(const NDArray& a, const py::handle& key) {
  if (py::isinstance<py::int_>(key) ||
      (py::hasattr(key, "__index__") && !py::isinstance<NDArray>(key))) {
    return a[checked_index(a, index_value(key))];
  }
  if (py::isinstance<py::slice>(key)) {
    if (a.ndim() == 0) throw py::index_error("too many indices: the array has no axis");
    py::ssize_t start = 0, stop = 0, step = 0, length = 0;
    if (!key.cast<py::slice>().compute(static_cast<py::ssize_t>(a.shape()[0]), &start, &stop, &step,
                                       &length)) {
      throw py::error_already_set();
    }
    if (step != 1) {
      throw py::index_error(
          "a slice with a step other than 1 is not a view tagflow makes, got step " +
          std::to_string(step));
    }
    return a.slice(start, start + length);
  }
  if (py::isinstance<py::tuple>(key)) {
    NDArray view = a;
    for (const py::handle item : key.cast<py::tuple>()) {
      if (!py::isinstance<py::int_>(item)) {
        throw py::index_error("a tuple index holds ints only, got " +
                              std::string(py::str(py::type::handle_of(item).attr("__name__"))));
      }
      view = view[checked_index(view, item.cast<std::int64_t>())];
    }
    return view;
  }
  if (key.is(py::ellipsis())) return a;
  throw py::index_error("index with an int, a slice or a tuple of ints, got " +
                        std::string(py::str(py::type::handle_of(key).attr("__name__"))));
}

/// a[key] = value: an array (same shape), a number, or values NumPy reads.
void assign(const NDArray& a, const py::handle& key, const py::handle& value) {
  const NDArray target = index(a, key);
  if (auto source = as_array(value)) {
    source->copyto(target);
  } else if (auto number = as_number(value)) {
    fill(target, *number);
  } else {
    array_from_python(value, target.context(), numpy_dtype(target.dtype())).copyto(target);
  }
}

}  // namespace tagflow::python
