// The functions of tagflow.nd and tagflow.np: creation, random draws and the
// operators as functions, each with the arguments MXNet's function of that
// name takes in that interface.

#include <string>
#include <vector>

#include "array_support.h"
#include "bindings.h"

namespace tagflow::python {
namespace {

std::optional<Context> optional_context(const py::handle& ctx) {
  if (ctx.is_none()) return std::nullopt;
  return ctx.cast<Context>();
}

/// Values of dtype `dtype` made as float32 by `make` (random draws of
/// integer dtypes are drawn as float32 and converted, as MXNet does).
template <typename Make>
NDArray drawn(DType dtype, Make&& make) {
  if (is_floating(dtype)) return make(dtype);
  return make(DType::kFloat32).astype(dtype);
}

std::vector<NDArray> arrays_of(const py::handle& sequence) {
  std::vector<NDArray> arrays;
  for (const py::handle item : sequence.cast<py::sequence>()) {
    arrays.push_back(item.cast<const NDArray&>());
  }
  return arrays;
}

/// What both interfaces name alike.
template <typename A>
void bind_common(py::module_& m) {
  const auto unary = [&m](const char* name, NDArray (*fn)(const NDArray&)) {
    m.def(
        name, [fn](const NDArray& x) { return A(run([&] { return fn(x); })); }, py::arg("data"));
  };
  unary("exp", [](const NDArray& x) { return tagflow::exp(x); });
  unary("log", [](const NDArray& x) { return tagflow::log(x); });
  unary("sqrt", [](const NDArray& x) { return tagflow::sqrt(x); });
  unary("square", [](const NDArray& x) { return tagflow::square(x); });
  unary("abs", [](const NDArray& x) { return tagflow::abs(x); });
  unary("negative", [](const NDArray& x) { return tagflow::negative(x); });
  unary("relu", [](const NDArray& x) { return tagflow::relu(x); });
  unary("sigmoid", [](const NDArray& x) { return tagflow::sigmoid(x); });
  unary("tanh", [](const NDArray& x) { return tagflow::tanh(x); });
  unary("zeros_like", [](const NDArray& x) { return tagflow::zeros_like(x); });
  unary("ones_like", [](const NDArray& x) { return tagflow::ones_like(x); });

  // Binary functions: array or number on either side.
  const auto binary_function =
      [&m](const char* name, NDArray (*both)(const NDArray&, const NDArray&),
           NDArray (*right)(const NDArray&, double), NDArray (*left)(double, const NDArray&)) {
        m.def(
            name,
            [both, right, left](const py::handle& a, const py::handle& b) -> py::object {
              const NDArray* x = as_array(a);
              const NDArray* y = as_array(b);
              if (x && y) return py::cast(A(run([&] { return both(*x, *y); })));
              if (x) {
                if (auto s = as_number(b)) return py::cast(A(run([&] { return right(*x, *s); })));
              } else if (y && left) {
                if (auto s = as_number(a)) return py::cast(A(run([&] { return left(*s, *y); })));
              }
              throw py::type_error("expected arrays, or an array and a number, got " +
                                   std::string(py::str(py::type::handle_of(a).attr("__name__"))) +
                                   " and " +
                                   std::string(py::str(py::type::handle_of(b).attr("__name__"))));
            },
            py::arg("lhs"), py::arg("rhs"));
      };
  binary_function(
      "add", [](const NDArray& a, const NDArray& b) { return a + b; },
      [](const NDArray& a, double s) { return a + s; },
      [](double s, const NDArray& a) { return s + a; });
  binary_function(
      "subtract", [](const NDArray& a, const NDArray& b) { return a - b; },
      [](const NDArray& a, double s) { return a - s; },
      [](double s, const NDArray& a) { return s - a; });
  binary_function(
      "multiply", [](const NDArray& a, const NDArray& b) { return a * b; },
      [](const NDArray& a, double s) { return a * s; },
      [](double s, const NDArray& a) { return s * a; });
  binary_function(
      "divide", [](const NDArray& a, const NDArray& b) { return a / b; },
      [](const NDArray& a, double s) { return a / s; },
      [](double s, const NDArray& a) { return s / a; });
  binary_function(
      "power", [](const NDArray& a, const NDArray& b) { return power(a, b); },
      [](const NDArray& a, double s) { return power(a, s); },
      [](double s, const NDArray& a) { return power(s, a); });
  binary_function(
      "maximum", [](const NDArray& a, const NDArray& b) { return maximum(a, b); },
      [](const NDArray& a, double s) { return maximum(a, s); },
      [](double s, const NDArray& a) { return maximum(a, s); });
  binary_function(
      "minimum", [](const NDArray& a, const NDArray& b) { return minimum(a, b); },
      [](const NDArray& a, double s) { return minimum(a, s); },
      [](double s, const NDArray& a) { return minimum(a, s); });

  m.def(
      "clip",
      [](const NDArray& x, double low, double high) {
        return A(run([&] { return clip(x, low, high); }));
      },
      py::arg("data"), py::arg("a_min"), py::arg("a_max"));
  m.def(
      "where",
      [](const NDArray& c, const NDArray& x, const NDArray& y) {
        return A(run([&] { return where(c, x, y); }));
      },
      py::arg("condition"), py::arg("x"), py::arg("y"));
  m.def(
      "dot",
      [](const NDArray& a, const NDArray& b, bool transpose_a, bool transpose_b) {
        return A(run([&] { return dot(a, b, transpose_a, transpose_b); }));
      },
      py::arg("lhs"), py::arg("rhs"), py::arg("transpose_a") = false,
      py::arg("transpose_b") = false);
  m.def(
      "batch_dot",
      [](const NDArray& a, const NDArray& b, bool transpose_a, bool transpose_b) {
        return A(run([&] { return batch_dot(a, b, transpose_a, transpose_b); }));
      },
      py::arg("lhs"), py::arg("rhs"), py::arg("transpose_a") = false,
      py::arg("transpose_b") = false);
  m.def(
      "matmul",
      [](const NDArray& a, const NDArray& b) { return A(run([&] { return matmul(a, b); })); },
      py::arg("a"), py::arg("b"));
  m.def(
      "softmax",
      [](const NDArray& x, int axis) { return A(run([&] { return softmax(x, axis); })); },
      py::arg("data"), py::arg("axis") = -1);
  m.def(
      "log_softmax",
      [](const NDArray& x, int axis) { return A(run([&] { return log_softmax(x, axis); })); },
      py::arg("data"), py::arg("axis") = -1);
  m.def(
      "one_hot",
      [](const NDArray& indices, std::int64_t depth, double on_value, double off_value,
         const py::handle& dtype) {
        const DType type = to_dtype(dtype);
        return A(run([&] { return one_hot(indices, depth, on_value, off_value, type); }));
      },
      py::arg("indices"), py::arg("depth"), py::arg("on_value") = 1.0, py::arg("off_value") = 0.0,
      py::arg("dtype") = py::none());
  m.def(
      "stack",
      [](const py::handle& arrays, int axis) {
        const std::vector<NDArray> list = arrays_of(arrays);
        return A(run([&] { return stack(std::span<const NDArray>(list), axis); }));
      },
      py::arg("arrays"), py::arg("axis") = 0);
  m.def(
      "transpose",
      [](const NDArray& x, const py::handle& axes) {
        if (axes.is_none()) return A(run([&] { return transpose(x); }));
        std::vector<int> order;
        for (const py::handle item : axes.cast<py::sequence>()) order.push_back(item.cast<int>());
        return A(run([&] { return transpose(x, std::span<const int>(order)); }));
      },
      py::arg("data"), py::arg("axes") = py::none());
  m.def(
      "waitall", [] { wait_for_all(); },
      "Waits for every operation pushed so far; raises the first error since the last waitall.");
}

void bind_classic(py::module_& m) {
  bind_common<NDArray>(m);
  m.def(
      "array",
      [](const py::handle& source, const py::handle& ctx, const py::handle& dtype) {
        return array_from_python(source, context_or_current(optional_context(ctx)), dtype);
      },
      py::arg("source_array"), py::arg("ctx") = py::none(), py::arg("dtype") = py::none(),
      "A new array of the values of a list, a NumPy array or another array (float32 by default).");
  // ones(shape, ctx=None, dtype=None), and zeros and empty alike.
  const auto creation = [&m](const char* name, NDArray (*make)(Shape, DType, Context)) {
    m.def(
        name,
        [make, name](const py::handle& shape, const py::handle& ctx, const py::handle& dtype) {
          const Context at = context_or_current(optional_context(ctx));
          const Shape dims = to_shape(shape, name);
          const DType type = to_dtype(dtype);
          return run([&] { return make(dims, type, at); });
        },
        py::arg("shape"), py::arg("ctx") = py::none(), py::arg("dtype") = py::none());
  };
  creation("ones", [](Shape s, DType d, Context c) { return ones(s, d, c); });
  creation("zeros", [](Shape s, DType d, Context c) { return zeros(s, d, c); });
  creation("empty", [](Shape s, DType d, Context c) { return empty(s, d, c); });
  m.def(
      "full",
      [](const py::handle& shape, double value, const py::handle& ctx, const py::handle& dtype) {
        const Context at = context_or_current(optional_context(ctx));
        const Shape dims = to_shape(shape, "full");
        const DType type = to_dtype(dtype);
        return run([&] { return full(dims, value, type, at); });
      },
      py::arg("shape"), py::arg("val"), py::arg("ctx") = py::none(), py::arg("dtype") = py::none());
  m.def(
      "arange",
      [](double start, const py::handle& stop, double step, const py::handle& ctx,
         const py::handle& dtype) {
        const Context at = context_or_current(optional_context(ctx));
        const double begin = stop.is_none() ? 0 : start;
        const double end = stop.is_none() ? start : stop.cast<double>();
        const DType type = to_dtype(dtype);
        return run([&] { return arange(begin, end, step, type, at); });
      },
      py::arg("start"), py::arg("stop") = py::none(), py::arg("step") = 1.0,
      py::arg("ctx") = py::none(), py::arg("dtype") = py::none());
  const auto reduction = [&m](const char* name, AllReduction all, AxesReduction some) {
    m.def(
        name,
        [all, some](const NDArray& x, const py::handle& axis, bool keepdims) {
          const auto axes = axes_of(axis);
          return run([&] { return reduce(x, axes, keepdims, all, some); });
        },
        py::arg("data"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  };
  for (const Reduction& r : kReductions) reduction(r.name, r.all, r.some);
  m.def(
      "concat",
      [](const py::args& arrays, int dim) {
        const std::vector<NDArray> list = arrays_of(arrays);
        return run([&] { return concat(std::span<const NDArray>(list), dim); });
      },
      py::arg("dim") = 1, "concat(a, b, ..., dim=1), as MXNet's nd.concat.");

  py::module_ random = m.def_submodule("random", "Random draws, as mx.nd.random.");
  random.def(
      "uniform",
      [](double low, double high, const py::handle& shape, const py::handle& dtype,
         const py::handle& ctx) {
        const Context at = context_or_current(optional_context(ctx));
        const Shape dims = shape.is_none() ? Shape{1} : to_shape(shape, "random.uniform");
        const DType type = to_dtype(dtype);
        return run([&] {
          return drawn(type, [&](DType d) { return random::uniform(low, high, dims, at, d); });
        });
      },
      py::arg("low") = 0.0, py::arg("high") = 1.0, py::arg("shape") = py::none(),
      py::arg("dtype") = py::none(), py::arg("ctx") = py::none());
  random.def(
      "normal",
      [](double loc, double scale, const py::handle& shape, const py::handle& dtype,
         const py::handle& ctx) {
        const Context at = context_or_current(optional_context(ctx));
        const Shape dims = shape.is_none() ? Shape{1} : to_shape(shape, "random.normal");
        const DType type = to_dtype(dtype);
        return run([&] {
          return drawn(type, [&](DType d) { return random::normal(loc, scale, dims, at, d); });
        });
      },
      py::arg("loc") = 0.0, py::arg("scale") = 1.0, py::arg("shape") = py::none(),
      py::arg("dtype") = py::none(), py::arg("ctx") = py::none());
  random.def(
      "seed", [](std::uint64_t value) { random::seed(value); }, py::arg("seed_state"),
      "Seeds the generator every draw without its own seed uses.");
}

void bind_numpy(py::module_& m) {
  bind_common<NumpyArray>(m);
  const auto to_np = [](NDArray a) { return NumpyArray(std::move(a)); };
  m.def(
      "array",
      [to_np](const py::handle& object, const py::handle& dtype, const py::handle& ctx) {
        return to_np(array_from_python(object, context_or_current(optional_context(ctx)), dtype));
      },
      py::arg("object"), py::arg("dtype") = py::none(), py::arg("ctx") = py::none());
  const auto creation = [&m, to_np](const char* name, NDArray (*make)(Shape, DType, Context)) {
    m.def(
        name,
        [to_np, make, name](const py::handle& shape, const py::handle& dtype,
                            const std::string& order, const py::handle& ctx) {
          if (order != "C") {
            throw py::value_error(std::string(name) + ": only order='C' is supported, got '" +
                                  order + "'");
          }
          const Context at = context_or_current(optional_context(ctx));
          const Shape dims = to_shape(shape, name);
          const DType type = to_dtype(dtype);
          return to_np(run([&] { return make(dims, type, at); }));
        },
        py::arg("shape"), py::arg("dtype") = py::none(), py::arg("order") = "C",
        py::arg("ctx") = py::none());
  };
  creation("ones", [](Shape s, DType d, Context c) { return ones(s, d, c); });
  creation("zeros", [](Shape s, DType d, Context c) { return zeros(s, d, c); });
  creation("empty", [](Shape s, DType d, Context c) { return empty(s, d, c); });
  m.def(
      "full",
      [to_np](const py::handle& shape, double value, const py::handle& dtype,
              const std::string& order, const py::handle& ctx) {
        if (order != "C") {
          throw py::value_error("full: only order='C' is supported, got '" + order + "'");
        }
        const Context at = context_or_current(optional_context(ctx));
        const Shape dims = to_shape(shape, "full");
        const DType type = to_dtype(dtype);
        return to_np(run([&] { return full(dims, value, type, at); }));
      },
      py::arg("shape"), py::arg("fill_value"), py::arg("dtype") = py::none(),
      py::arg("order") = "C", py::arg("ctx") = py::none());
  m.def(
      "arange",
      [to_np](double start, const py::handle& stop, double step, const py::handle& dtype,
              const py::handle& ctx) {
        const Context at = context_or_current(optional_context(ctx));
        const double begin = stop.is_none() ? 0 : start;
        const double end = stop.is_none() ? start : stop.cast<double>();
        const DType type = to_dtype(dtype);
        return to_np(run([&] { return arange(begin, end, step, type, at); }));
      },
      py::arg("start"), py::arg("stop") = py::none(), py::arg("step") = 1.0,
      py::arg("dtype") = py::none(), py::arg("ctx") = py::none());
  const auto reduction = [&m, to_np](const char* name, AllReduction all, AxesReduction some) {
    m.def(
        name,
        [to_np, all, some](const NDArray& x, const py::handle& axis, bool keepdims) {
          const auto axes = axes_of(axis);
          return to_np(run([&] { return reduce(x, axes, keepdims, all, some); }));
        },
        py::arg("a"), py::arg("axis") = py::none(), py::arg("keepdims") = false);
  };
  for (const Reduction& r : kNumpyReductions) reduction(r.name, r.all, r.some);
  m.def(
      "concatenate",
      [to_np](const py::handle& arrays, int axis) {
        const std::vector<NDArray> list = arrays_of(arrays);
        return to_np(run([&] { return concat(std::span<const NDArray>(list), axis); }));
      },
      py::arg("seq"), py::arg("axis") = 0);

  py::module_ random = m.def_submodule("random", "Random draws, as mx.np.random.");
  random.def(
      "uniform",
      [to_np](double low, double high, const py::handle& size, const py::handle& dtype,
              const py::handle& ctx) {
        const Context at = context_or_current(optional_context(ctx));
        const Shape dims = size.is_none() ? Shape{} : to_shape(size, "random.uniform");
        const DType type = to_dtype(dtype);
        return to_np(run([&] {
          return drawn(type, [&](DType d) { return random::uniform(low, high, dims, at, d); });
        }));
      },
      py::arg("low") = 0.0, py::arg("high") = 1.0, py::arg("size") = py::none(),
      py::arg("dtype") = py::none(), py::arg("ctx") = py::none());
  random.def(
      "normal",
      [to_np](double loc, double scale, const py::handle& size, const py::handle& dtype,
              const py::handle& ctx) {
        const Context at = context_or_current(optional_context(ctx));
        const Shape dims = size.is_none() ? Shape{} : to_shape(size, "random.normal");
        const DType type = to_dtype(dtype);
        return to_np(run([&] {
          return drawn(type, [&](DType d) { return random::normal(loc, scale, dims, at, d); });
        }));
      },
      py::arg("loc") = 0.0, py::arg("scale") = 1.0, py::arg("size") = py::none(),
      py::arg("dtype") = py::none(), py::arg("ctx") = py::none());
  random.def(
      "seed", [](std::uint64_t value) { random::seed(value); }, py::arg("seed"),
      "Seeds the generator every draw without its own seed uses.");
}

}  // namespace

void bind_array_functions(py::module_& m) {
  py::module_ nd = m.def_submodule("nd", "The classic interface's functions (tagflow.nd).");
  bind_classic(nd);
  bind_array_files(nd);
  py::module_ np = m.def_submodule("np", "The NumPy-style interface's functions (tagflow.np).");
  bind_numpy(np);
}

}  // namespace tagflow::python
