// Python values to shapes, dtypes and arrays, and arrays to NumPy.

#include <cstring>
#include <string>

#include <pybind11/numpy.h>

#include "array_support.h"
#include "bindings.h"

namespace tagflow::python {
namespace {

std::string type_name(const py::handle& value) {
  return py::str(py::type::handle_of(value).attr("__name__"));
}

/// The dtype NumPy calls by `name`, or nullopt for one tagflow has not.
std::optional<DType> dtype_named(const std::string& name) {
  if (name == "float32") return DType::kFloat32;
  if (name == "int32") return DType::kInt32;
  if (name == "int64") return DType::kInt64;
  if (name == "uint8") return DType::kUInt8;
  if (name == "float16") return DType::kFloat16;
  if (name == "bfloat16") return DType::kBFloat16;
  return std::nullopt;
}

template <typename T>
NDArray array_of(const py::array& values, const Shape& shape, Context ctx) {
  const auto* first = static_cast<const T*>(values.data());
  const std::span<const T> span(first, static_cast<std::size_t>(values.size()));
  return array<T>(span, shape, ctx);
}

template <typename T>
py::object numpy_of(const NDArray& array, const py::dtype& dtype) {
  std::vector<T> values;
  {
    py::gil_scoped_release released;
    values = array.to_vector<T>();
  }
  std::vector<py::ssize_t> dims(array.shape().dims().begin(), array.shape().dims().end());
  py::array out(dtype, dims);
  std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(T));
  return out;
}

}  // namespace

py::object wrap(NDArray array, Flavor flavor) {
  if (flavor == Flavor::kNumpy) return py::cast(NumpyArray(std::move(array)));
  return py::cast(std::move(array));
}

std::vector<std::int64_t> to_dims(const py::handle& value, const char* what) {
  if (py::isinstance<py::int_>(value)) return {value.cast<std::int64_t>()};
  if (!py::isinstance<py::sequence>(value) || py::isinstance<py::str>(value)) {
    throw py::type_error(std::string(what) +
                         ": expected a shape (an int or a tuple of ints), got " + type_name(value));
  }
  const auto items = value.cast<py::sequence>();
  if (items.size() > static_cast<std::size_t>(Shape::kMaxDims)) {
    throw py::value_error(std::string(what) + ": at most " + std::to_string(Shape::kMaxDims) +
                          " dimensions, got " + std::to_string(items.size()));
  }
  std::vector<std::int64_t> dims;
  for (const py::handle item : items) {
    if (!py::isinstance<py::int_>(item) && !py::hasattr(item, "__index__")) {
      throw py::type_error(std::string(what) + ": a shape's extents are ints, got " +
                           type_name(item));
    }
    dims.push_back(index_value(item));
  }
  return dims;
}

Shape to_shape(const py::handle& value, const char* what) {
  const std::vector<std::int64_t> dims = to_dims(value, what);
  return Shape(std::span<const std::int64_t>(dims));
}

DType to_dtype(const py::handle& value) {
  if (value.is_none()) return DType::kFloat32;
  std::string name;
  if (py::isinstance<py::str>(value)) {
    name = value.cast<std::string>();
  } else {
    // A NumPy dtype, or a type NumPy makes one of (numpy.float32).
    py::object numpy = py::module_::import("numpy");
    try {
      name = py::str(numpy.attr("dtype")(value).attr("name"));
    } catch (const py::error_already_set&) {
      throw py::type_error("dtype: expected a name or a NumPy dtype, got " + type_name(value));
    }
  }
  if (auto dtype = dtype_named(name)) return *dtype;
  throw py::type_error(
      "dtype: tagflow has float32, float16, bfloat16, int32, int64 and uint8, got " + name);
}

py::object numpy_dtype(DType dtype) {
  py::object numpy = py::module_::import("numpy");
  if (dtype == DType::kBFloat16) return numpy.attr("dtype")("float32");
  return numpy.attr("dtype")(std::string(dtype_name(dtype)));
}

NDArray array_from_python(const py::handle& source, Context ctx, const py::handle& dtype) {
  if (py::isinstance<NDArray>(source)) {
    const auto& from = source.cast<const NDArray&>();
    NDArray copy = from.copyto(ctx);
    return dtype.is_none() || to_dtype(dtype) == copy.dtype() ? copy : copy.astype(to_dtype(dtype));
  }
  py::object numpy = py::module_::import("numpy");
  DType target = DType::kFloat32;
  if (!dtype.is_none()) {
    target = to_dtype(dtype);
  } else if (py::isinstance<py::array>(source)) {
    // A NumPy array keeps its dtype when tagflow has it (float64 becomes
    // float32, as MXNet's default dtype).
    target = dtype_named(py::str(source.attr("dtype").attr("name"))).value_or(DType::kFloat32);
  }
  const DType stored = target == DType::kBFloat16 ? DType::kFloat32 : target;
  py::array values;
  try {
    values = numpy.attr("ascontiguousarray")(source, numpy_dtype(stored));
  } catch (const py::error_already_set& e) {
    throw py::type_error(
        "array: expected values NumPy can read (a list, a NumPy array, a number), got " +
        type_name(source) + ": " + e.what());
  }
  if (values.ndim() > Shape::kMaxDims) {
    throw py::value_error("array: at most " + std::to_string(Shape::kMaxDims) +
                          " dimensions, got " + std::to_string(values.ndim()));
  }
  std::vector<std::int64_t> dims(values.shape(), values.shape() + values.ndim());
  const Shape shape{std::span<const std::int64_t>(dims)};
  NDArray made;
  {
    py::gil_scoped_release released;
    switch (stored) {
      case DType::kFloat32:
        made = array_of<float>(values, shape, ctx);
        break;
      case DType::kInt32:
        made = array_of<std::int32_t>(values, shape, ctx);
        break;
      case DType::kInt64:
        made = array_of<std::int64_t>(values, shape, ctx);
        break;
      case DType::kUInt8:
        made = array_of<std::uint8_t>(values, shape, ctx);
        break;
      case DType::kFloat16:
        made = array_of<Half>(values, shape, ctx);
        break;
      case DType::kBFloat16:
        break;
    }
  }
  return target == stored ? made : made.astype(target);
}

py::object to_numpy(const NDArray& array) {
  wait_to_read(array);
  const py::dtype dtype = numpy_dtype(array.dtype());
  switch (array.dtype()) {
    case DType::kFloat32:
    case DType::kBFloat16:
      return numpy_of<float>(array, dtype);
    case DType::kInt32:
      return numpy_of<std::int32_t>(array, dtype);
    case DType::kInt64:
      return numpy_of<std::int64_t>(array, dtype);
    case DType::kUInt8:
      return numpy_of<std::uint8_t>(array, dtype);
    case DType::kFloat16:
      return numpy_of<Half>(array, dtype);
  }
  throw py::type_error("asnumpy: an array of unknown dtype");
}

}  // namespace tagflow::python
