#pragma once
// Helpers of the array bindings: telling arrays from numbers, running an
// operator with the GIL released where that pays, and the arithmetic
// operators written once for both array classes.

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"

namespace tagflow::python {

/// The array `value` holds (either class), or null for anything else.
inline const NDArray* as_array(const py::handle& value) {
  py::detail::make_caster<NDArray> caster;
  if (!caster.load(value, /*convert=*/false)) return nullptr;
  return &py::detail::cast_op<const NDArray&>(caster);
}

/// An int from anything with __index__ (a Python int, a NumPy integer).
inline std::int64_t index_value(const py::handle& value) {
  auto index = py::reinterpret_steal<py::object>(PyNumber_Index(value.ptr()));
  if (!index) throw py::error_already_set();
  return index.cast<std::int64_t>();
}

/// `value` as a number when it is one (an int, a float, a NumPy scalar),
/// else nullopt. Arrays are not numbers here, even of one element.
inline std::optional<double> as_number(const py::handle& value) {
  PyObject* object = value.ptr();
  if (PyFloat_Check(object)) return PyFloat_AS_DOUBLE(object);
  if (PyLong_Check(object)) {
    const double number = PyLong_AsDouble(object);
    if (number == -1.0 && PyErr_Occurred()) throw py::error_already_set();
    return number;
  }
  if (as_array(value) != nullptr || !PyNumber_Check(object) || PySequence_Check(object)) {
    return std::nullopt;
  }
  const double number = PyFloat_AsDouble(object);
  if (number == -1.0 && PyErr_Occurred()) {
    PyErr_Clear();
    return std::nullopt;
  }
  return number;
}

/// Runs `fn` (which pushes operations and returns at once on the threaded
/// engine), with the GIL released when the engine runs operations where
/// they are pushed (Note [The GIL] in module.cc).
template <typename Fn>
auto run(Fn&& fn) {
  if (engine_runs_inline()) {
    py::gil_scoped_release released;
    return fn();
  }
  return fn();
}
template <typename Fn>
void run_void(Fn&& fn) {
  run([&] {
    fn();
    return 0;
  });
}

/// An `axis` argument: None (every axis), an int or a sequence of ints.
inline std::optional<std::vector<int>> axes_of(const py::handle& axis) {
  if (axis.is_none()) return std::nullopt;
  std::vector<int> axes;
  if (py::isinstance<py::int_>(axis)) {
    axes.push_back(axis.cast<int>());
  } else {
    for (const py::handle item : axis.cast<py::sequence>()) axes.push_back(item.cast<int>());
  }
  return axes;
}

using AxesReduction = NDArray (*)(const NDArray&, std::span<const int>, bool);
using AllReduction = NDArray (*)(const NDArray&, bool);

/// A reduction over `axes` (every axis when nullopt). Touches no Python
/// object, so it may run with the GIL released.
inline NDArray reduce(const NDArray& a, const std::optional<std::vector<int>>& axes, bool keepdims,
                      AllReduction all, AxesReduction some) {
  if (!axes) return all(a, keepdims);
  return some(a, *axes, keepdims);
}

inline GradReq to_grad_req(const std::string& name) {
  if (name == "write") return GradReq::kWrite;
  if (name == "add") return GradReq::kAdd;
  if (name == "null") return GradReq::kNull;
  throw py::value_error("grad_req: expected 'write', 'add' or 'null', got '" + name + "'");
}

// Note [One overload per operator]
// pybind11 tries a function's overloads in turn, twice (without, then with
// conversions), so `a + 2` would fail the array overload, then the float one
// (2 is an int), before a second pass accepts it. Each operator is instead one
// function taking any right-hand side, which tells arrays from numbers
// itself, and answers NotImplemented for anything else so that Python tries
// the other operand's method.

enum class Op {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual
};

template <Op op, typename L, typename R>
NDArray apply(const L& a, const R& b) {
  if constexpr (op == Op::kAdd) return a + b;
  if constexpr (op == Op::kSub) return a - b;
  if constexpr (op == Op::kMul) return a * b;
  if constexpr (op == Op::kDiv) return a / b;
  if constexpr (op == Op::kPow) return power(a, b);
  if constexpr (op == Op::kEqual) return equal(a, b);
  if constexpr (op == Op::kNotEqual) return not_equal(a, b);
  if constexpr (op == Op::kLess) return lesser(a, b);
  if constexpr (op == Op::kLessEqual) return lesser_equal(a, b);
  if constexpr (op == Op::kGreater) return greater(a, b);
  if constexpr (op == Op::kGreaterEqual) return greater_equal(a, b);
}

/// `a op b`, the result of a's class.
template <typename A, Op op>
py::object binary(const A& a, const py::handle& b) {
  if (const NDArray* other = as_array(b)) {
    return py::cast(A(run([&] { return apply<op>(static_cast<const NDArray&>(a), *other); })));
  }
  if (const auto number = as_number(b)) {
    return py::cast(A(run([&] { return apply<op>(static_cast<const NDArray&>(a), *number); })));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

/// `b op a` for a number b (Python calls a's reflected method).
template <typename A, Op op>
py::object reflected(const A& a, const py::handle& b) {
  if (const auto number = as_number(b)) {
    return py::cast(A(run([&] { return apply<op>(*number, static_cast<const NDArray&>(a)); })));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

/// `a op= b`, into a's memory.
template <Op op>
py::object in_place(const py::object& self, const py::handle& b) {
  auto& a = self.cast<NDArray&>();
  if (const NDArray* other = as_array(b)) {
    run_void([&] {
      if constexpr (op == Op::kAdd) a += *other;
      if constexpr (op == Op::kSub) a -= *other;
      if constexpr (op == Op::kMul) a *= *other;
      if constexpr (op == Op::kDiv) a /= *other;
    });
    return self;
  }
  if (const auto number = as_number(b)) {
    run_void([&] {
      if constexpr (op == Op::kAdd) a += *number;
      if constexpr (op == Op::kSub) a -= *number;
      if constexpr (op == Op::kMul) a *= *number;
      if constexpr (op == Op::kDiv) a /= *number;
    });
    return self;
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

}  // namespace tagflow::python
