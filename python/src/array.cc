// tagflow.nd.NDArray and tagflow.np.ndarray: one C++ NDArray, two Python
// classes that differ in how they print and in the class their results take.

#include <cmath>
#include <string>
#include <vector>

#include "array_access.h"
#include "array_support.h"
#include "bindings.h"

namespace tagflow::python {
namespace {

template <typename A, typename Class>
void bind_methods(Class& cls, Flavor flavor) {
  const auto out = [flavor](NDArray result) { return wrap(std::move(result), flavor); };
  using R = A;  // the class of results
  (void)out;

  // Arithmetic: one overload each, which takes any right-hand side and
  // sorts it itself (Note [One overload per operator] in array_support.h).
  cls.def("__add__", &binary<R, Op::kAdd>, py::is_operator())
      .def("__radd__", &reflected<R, Op::kAdd>, py::is_operator())
      .def("__sub__", &binary<R, Op::kSub>, py::is_operator())
      .def("__rsub__", &reflected<R, Op::kSub>, py::is_operator())
      .def("__mul__", &binary<R, Op::kMul>, py::is_operator())
      .def("__rmul__", &reflected<R, Op::kMul>, py::is_operator())
      .def("__truediv__", &binary<R, Op::kDiv>, py::is_operator())
      .def("__rtruediv__", &reflected<R, Op::kDiv>, py::is_operator())
      .def("__pow__", &binary<R, Op::kPow>, py::is_operator())
      .def("__rpow__", &reflected<R, Op::kPow>, py::is_operator())
      .def("__eq__", &binary<R, Op::kEqual>, py::is_operator())
      .def("__ne__", &binary<R, Op::kNotEqual>, py::is_operator())
      .def("__lt__", &binary<R, Op::kLess>, py::is_operator())
      .def("__le__", &binary<R, Op::kLessEqual>, py::is_operator())
      .def("__gt__", &binary<R, Op::kGreater>, py::is_operator())
      .def("__ge__", &binary<R, Op::kGreaterEqual>, py::is_operator())
      .def("__iadd__", &in_place<Op::kAdd>, py::is_operator())
      .def("__isub__", &in_place<Op::kSub>, py::is_operator())
      .def("__imul__", &in_place<Op::kMul>, py::is_operator())
      .def("__itruediv__", &in_place<Op::kDiv>, py::is_operator())
      .def(
          "__matmul__",
          [](const A& a, const NDArray& b) { return R(run([&] { return matmul(a, b); })); },
          py::is_operator())
      .def("__neg__", [](const A& a) { return R(run([&] { return -a; })); })
      .def("__pos__", [](const py::object& self) { return self; })
      .def("__abs__", [](const A& a) { return R(run([&] { return tagflow::abs(a); })); })
      // Identity, as MXNet's arrays hash: `==` gives an array.
      .def("__hash__", [](const py::object& self) {
        return py::hash(py::int_(reinterpret_cast<std::uintptr_t>(self.ptr())));
      });

  // The value of a one-element array as a Python number (waits).
  const auto value_of = [](const A& a) {
    if (a.size() != 1) {
      throw py::value_error("expected an array of one element, got shape (" + a.shape().str() +
                            ")");
    }
    return to_numpy(a).attr("reshape")(py::tuple()).attr("item")();
  };
  // This very array when it is on `ctx`, else a copy there.
  const auto as_in = [](const py::object& self, const Context& ctx) -> py::object {
    const auto& a = self.cast<const A&>();
    if (a.context() == ctx) return self;
    return py::cast(R(run([&] { return a.copyto(ctx); })));
  };

  // Conversions to Python numbers (one element), NumPy, other devices.
  cls.def("__float__",
          [](const A& a) {
            wait_to_read(a);
            return a.template asscalar<double>();
          })
      .def("__int__",
           [](const A& a) {
             wait_to_read(a);
             return a.template asscalar<std::int64_t>();
           })
      .def("__bool__",
           [](const A& a) {
             if (a.size() != 1) {
               throw py::value_error("the truth value of an array of " + std::to_string(a.size()) +
                                     " elements is ambiguous");
             }
             wait_to_read(a);
             return a.template asscalar<double>() != 0;
           })
      .def("__len__",
           [](const A& a) {
             if (a.ndim() == 0) throw py::type_error("len() of an array with no axis");
             return a.shape()[0];
           })
      .def("__getitem__", [](const A& a, const py::handle& key) { return R(index(a, key)); })
      .def("__setitem__", [](const A& a, const py::handle& key,
                             const py::handle& value) { assign(a, key, value); })
      .def(
          "__array__",
          [](const A& a, const py::handle& dtype) {
            py::object values = to_numpy(a);
            return dtype.is_none() ? values : values.attr("astype")(dtype);
          },
          py::arg("dtype") = py::none())
      .def("asnumpy", &to_numpy, "The values as a new NumPy array (waits).")
      .def("asscalar", value_of, "The value of a one-element array as a Python number (waits).")
      .def("item", value_of, "The value of a one-element array as a Python number (waits).")
      .def(
          "wait_to_read", [](const A& a) { wait_to_read(a); },
          "Blocks until the pending writes of the array complete; raises their error.")
      .def(
          "copyto",
          [](const A& a, const py::handle& other) -> py::object {
            if (auto dst = as_array(other)) {
              run_void([&] { a.copyto(*dst); });
              return py::reinterpret_borrow<py::object>(other);
            }
            const auto ctx = other.cast<Context>();
            return py::cast(R(run([&] { return a.copyto(ctx); })));
          },
          py::arg("other"), "A copy on a context (always new memory), or into another array.")
      .def("as_in_context", as_in, py::arg("context"),
           "This very array when it is on `context`, else a copy there.")
      .def("as_in_ctx", as_in, py::arg("ctx"),
           "This very array when it is on `ctx`, else a copy there.")
      .def(
          "as_nd_ndarray", [](const A& a) { return NDArray(a); },
          "The same array (same memory) as a classic NDArray.")
      .def(
          "as_np_ndarray", [](const A& a) { return NumpyArray(a); },
          "The same array (same memory) as a NumPy-style ndarray.")
      .def(
          "astype",
          [](const py::object& self, const py::handle& dtype, bool copy) -> py::object {
            const auto& a = self.cast<const A&>();
            const DType to = to_dtype(dtype);
            if (!copy && to == a.dtype()) return self;
            return py::cast(R(run([&] { return a.astype(to); })));
          },
          py::arg("dtype"), py::arg("copy") = true)
      .def("copy", [](const A& a) { return R(run([&] { return a.copyto(a.context()); })); });

  // Properties.
  cls.def_property_readonly("shape",
                            [](const A& a) {
                              py::tuple dims(a.ndim());
                              for (int i = 0; i < a.ndim(); ++i) dims[i] = py::int_(a.shape()[i]);
                              return dims;
                            })
      .def_property_readonly("ndim", &A::ndim)
      .def_property_readonly("size", &A::size)
      .def_property_readonly("context", &A::context)
      .def_property_readonly("ctx", &A::context)
      .def_property_readonly("T", [](const A& a) { return R(run([&] { return a.transpose(); })); })
      .def_property_readonly("grad", [](const A& a) -> py::object {
        try {
          return py::cast(R(a.grad()));
        } catch (const Error&) {
          return py::none();  // no gradient attached, as MXNet answers
        }
      });
  if (flavor == Flavor::kNumpy) {
    cls.def_property_readonly("dtype", [](const A& a) { return numpy_dtype(a.dtype()); });
    cls.def("__repr__", [](const A& a) { return numpy_repr(a); });
    cls.def("__str__", [](const A& a) { return numpy_str(a); });
  } else {
    cls.def_property_readonly("dtype",
                              [](const A& a) { return numpy_dtype(a.dtype()).attr("type"); });
    cls.def("__repr__", &classic_repr);
    cls.def("__str__", &classic_repr);
  }

  // Shape changes: views.
  cls.def("reshape",
          [](const A& a, const py::args& args, const py::kwargs& kwargs) {
            py::object shape;
            if (kwargs.contains("shape")) {
              shape = kwargs["shape"];
            } else if (args.size() == 1) {
              shape = args[0];
            } else {
              shape = args;
            }
            const std::vector<std::int64_t> dims = to_dims(shape, "reshape");  // before run()
            return R(run([&] { return a.reshape(std::span<const std::int64_t>(dims)); }));
          })
      .def("flatten",
           [](const A& a) {
             const std::int64_t rows = a.ndim() == 0 ? 1 : a.shape()[0];
             return R(run([&] { return a.reshape({rows, -1}); }));
           })
      .def(
          "expand_dims",
          [](const A& a, int axis) { return R(run([&] { return a.expand_dims(axis); })); },
          py::arg("axis"))
      .def(
          "squeeze",
          [](const A& a, const py::handle& axis) {
            const std::optional<int> along =
                axis.is_none() ? std::nullopt : std::optional(axis.cast<int>());
            return R(run([&] { return along ? a.squeeze(*along) : a.squeeze(); }));
          },
          py::arg("axis") = py::none())
      .def("transpose", [](const A& a, const py::args& axes) {
        if (axes.size() == 0) return R(run([&] { return a.transpose(); }));
        std::vector<int> order;
        const py::sequence items = axes.size() == 1 && !py::isinstance<py::int_>(axes[0])
                                       ? axes[0].cast<py::sequence>()
                                       : py::sequence(axes);
        for (const py::handle item : items) order.push_back(item.cast<int>());
        return R(run([&] { return tagflow::transpose(a, std::span<const int>(order)); }));
      });

  // Elementwise and reductions, as methods.
  const auto unary = [&cls](const char* name, NDArray (*fn)(const NDArray&)) {
    cls.def(name, [fn](const A& a) { return R(run([&] { return fn(a); })); });
  };
  unary("exp", [](const NDArray& x) { return tagflow::exp(x); });
  unary("log", [](const NDArray& x) { return tagflow::log(x); });
  unary("sqrt", [](const NDArray& x) { return tagflow::sqrt(x); });
  unary("square", [](const NDArray& x) { return tagflow::square(x); });
  unary("abs", [](const NDArray& x) { return tagflow::abs(x); });
  unary("relu", [](const NDArray& x) { return tagflow::relu(x); });
  unary("sigmoid", [](const NDArray& x) { return tagflow::sigmoid(x); });
  unary("tanh", [](const NDArray& x) { return tagflow::tanh(x); });
  unary("zeros_like", [](const NDArray& x) { return tagflow::zeros_like(x); });
  unary("ones_like", [](const NDArray& x) { return tagflow::ones_like(x); });
  cls.def(
      "clip",
      [](const A& a, double low, double high) { return R(run([&] { return a.clip(low, high); })); },
      py::arg("a_min"), py::arg("a_max"));

  const auto reduction = [&cls](const char* name, AllReduction all, AxesReduction some) {
    cls.def(
        name,
        [all, some](const A& a, const py::handle& axis, bool keepdims) {
          const auto axes = axes_of(axis);
          return R(run([&] { return reduce(a, axes, keepdims, all, some); }));
        },
        py::arg("axis") = py::none(), py::arg("keepdims") = false);
  };
  for (const Reduction& r : kNumpyReductions) reduction(r.name, r.all, r.some);
  cls.def(
      "norm",
      [](const A& a, int ord, const py::handle& axis, bool keepdims) {
        if (ord != 2)
          throw py::value_error("norm: tagflow computes the 2-norm (ord=2), got ord=" +
                                std::to_string(ord));
        const auto axes = axes_of(axis);
        const Reduction& norm = kReductions[4];
        return R(run([&] { return reduce(a, axes, keepdims, norm.all, norm.some); }));
      },
      py::arg("ord") = 2, py::arg("axis") = py::none(), py::arg("keepdims") = false);
  cls.def(
      "argmax",
      [](const A& a, const py::handle& axis, bool keepdims) {
        const std::optional<int> along =
            axis.is_none() ? std::nullopt : std::optional(axis.cast<int>());
        return R(run([&] {
          if (!along) return tagflow::argmax(a.reshape({-1}), 0, false);
          return tagflow::argmax(a, *along, keepdims);
        }));
      },
      py::arg("axis") = py::none(), py::arg("keepdims") = false);
  cls.def(
         "softmax", [](const A& a, int axis) { return R(run([&] { return a.softmax(axis); })); },
         py::arg("axis") = -1)
      .def(
          "log_softmax",
          [](const A& a, int axis) { return R(run([&] { return a.log_softmax(axis); })); },
          py::arg("axis") = -1)
      .def("dot", [](const A& a, const NDArray& b) { return R(run([&] { return dot(a, b); })); });

  // Autograd.
  cls.def(
         "attach_grad",
         [](A& a, const std::string& grad_req) { a.attach_grad(to_grad_req(grad_req)); },
         py::arg("grad_req") = "write",
         "Gives the array a gradient buffer (zeros) that backward() fills: 'write', 'add' or "
         "'null'.")
      .def(
          "backward",
          [](const A& a, const py::handle& out_grad, bool retain_graph, bool train_mode) {
            (void)train_mode;  // the recorded graph already knows its mode
            const NDArray head_grad =
                out_grad.is_none() ? NDArray() : out_grad.cast<const NDArray&>();
            py::gil_scoped_release released;
            a.backward(head_grad, retain_graph);
          },
          py::arg("out_grad") = py::none(), py::arg("retain_graph") = false,
          py::arg("train_mode") = true, "Computes the gradients of this array's leaves.")
      .def("detach", [](const A& a) { return R(a.detach()); });
}

}  // namespace

ArrayClasses array_classes;

void bind_arrays(py::module_& m) {
  py::class_<NDArray, std::unique_ptr<NDArray>> classic(m, "NDArray", R"doc(
An n-dimensional array on one device, as MXNet's mx.nd.NDArray. Operations
return at once; the values are computed by the engine, and reading them
(printing, asnumpy(), asscalar(), float()) waits.)doc");
  bind_methods<NDArray>(classic, Flavor::kClassic);

  py::class_<NumpyArray, std::unique_ptr<NumpyArray>, NDArray> numpy(m, "ndarray", R"doc(
The same array with NumPy's behaviour where it differs from MXNet's classic
NDArray, as mx.np.ndarray: prints as `array([...], ctx=gpu(0))`.)doc");
  bind_methods<NumpyArray>(numpy, Flavor::kNumpy);

  array_classes.classic = reinterpret_cast<PyTypeObject*>(classic.ptr());
  array_classes.numpy = reinterpret_cast<PyTypeObject*>(numpy.ptr());
  array_classes.classic_info = py::detail::get_type_info(typeid(NDArray));
  array_classes.numpy_info = py::detail::get_type_info(typeid(NumpyArray));
}

}  // namespace tagflow::python
