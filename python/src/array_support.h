#pragma once
// Helpers of the array bindings: telling arrays from numbers, running an
// operator with the GIL released where that pays, and the arithmetic
// operators written once for both array classes.

#include <array>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.h"

namespace tagflow::python {

// Note [Calls without type lookups]
// pybind11 finds a class's type information by std::type_index, hashing the
// type's mangled name, for every argument it converts and every result it
// makes: about 700 of the 8,500 instructions of a `c = a + b` from Python
// (callgrind). The operators' hot path does without: an argument whose type
// is exactly one of the two array classes is read straight from its
// instance (each holds one C++ value, pybind11's "simple layout"), and a
// result is made with the class's type information found once. Anything
// else (a Python subclass of an array class) takes pybind11's general path.

/// The two array classes and their type information (array.cc sets them).
struct ArrayClasses {
  PyTypeObject* classic = nullptr;
  PyTypeObject* numpy = nullptr;
  const py::detail::type_info* classic_info = nullptr;
  const py::detail::type_info* numpy_info = nullptr;
};
extern ArrayClasses array_classes;

/// The array of an instance of exactly one of the two classes, else null.
inline NDArray* exact_array(PyObject* object) {
  PyTypeObject* type = Py_TYPE(object);
  if (type != array_classes.classic && type != array_classes.numpy) return nullptr;
  auto* instance = reinterpret_cast<py::detail::instance*>(object);
  // An instance never initialized (NDArray.__new__ alone) has no value: the
  // general path refuses it.
  if (!instance->simple_layout || !instance->simple_holder_constructed) return nullptr;
  void* value = instance->simple_value_holder[0];
  if (type == array_classes.numpy) return static_cast<NumpyArray*>(value);
  return static_cast<NDArray*>(value);
}

/// The array `value` holds (either class), or null for anything else.
inline const NDArray* as_array(const py::handle& value) {
  if (const NDArray* array = exact_array(value.ptr())) return array;
  py::detail::make_caster<NDArray> caster;
  if (!caster.load(value, /*convert=*/false)) return nullptr;
  return &py::detail::cast_op<const NDArray&>(caster);
}

/// `self` as an array; TypeError when it is none (a method called on
/// something else).
inline const NDArray& self_array(const py::handle& self) {
  if (const NDArray* array = as_array(self)) return *array;
  throw py::type_error("expected a tagflow array as self, got " +
                       std::string(py::str(py::type::handle_of(self).attr("__name__"))));
}

/// `value` as a new Python object of class A (NDArray or NumpyArray).
template <typename A>
py::object make_result(NDArray value) {
  const py::detail::type_info* info =
      std::is_same_v<A, NumpyArray> ? array_classes.numpy_info : array_classes.classic_info;
  A result(std::move(value));
  const auto move = [](const void* from) -> void* {
    return new A(std::move(*const_cast<A*>(static_cast<const A*>(from))));
  };
  return py::reinterpret_steal<py::object>(py::detail::type_caster_generic::cast(
      &result, py::return_value_policy::move, py::handle(), info, nullptr, move));
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

/// A reduction by name, over every axis or over some (reduce.h).
struct Reduction {
  const char* name;
  AllReduction all;
  AxesReduction some;
};
/// sum, mean, max, min and norm, in that order: methods and both
/// interfaces' functions bind them from here.
inline constexpr std::array<Reduction, 5> kReductions{{
    {"sum", [](const NDArray& x, bool k) { return tagflow::sum(x, k); },
     [](const NDArray& x, std::span<const int> a, bool k) { return tagflow::sum(x, a, k); }},
    {"mean", [](const NDArray& x, bool k) { return tagflow::mean(x, k); },
     [](const NDArray& x, std::span<const int> a, bool k) { return tagflow::mean(x, a, k); }},
    {"max", [](const NDArray& x, bool k) { return tagflow::max(x, k); },
     [](const NDArray& x, std::span<const int> a, bool k) { return tagflow::max(x, a, k); }},
    {"min", [](const NDArray& x, bool k) { return tagflow::min(x, k); },
     [](const NDArray& x, std::span<const int> a, bool k) { return tagflow::min(x, a, k); }},
    {"norm", [](const NDArray& x, bool k) { return tagflow::norm(x, k); },
     [](const NDArray& x, std::span<const int> a, bool k) { return tagflow::norm(x, a, k); }},
}};
/// The reductions NumPy names alike (its norm is numpy.linalg.norm).
inline constexpr std::span<const Reduction> kNumpyReductions(kReductions.data(), 4);

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

/// `a op b`, the result of a's class (Note [Calls without type lookups]).
template <typename A, Op op>
py::object binary(const py::handle& self, const py::handle& b) {
  const NDArray& a = self_array(self);
  if (const NDArray* other = as_array(b)) {
    return make_result<A>(run([&] { return apply<op>(a, *other); }));
  }
  if (const auto number = as_number(b)) {
    return make_result<A>(run([&] { return apply<op>(a, *number); }));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

/// `b op a` for a number b (Python calls a's reflected method).
template <typename A, Op op>
py::object reflected(const py::handle& self, const py::handle& b) {
  const NDArray& a = self_array(self);
  if (const auto number = as_number(b)) {
    return make_result<A>(run([&] { return apply<op>(*number, a); }));
  }
  return py::reinterpret_borrow<py::object>(Py_NotImplemented);
}

/// `a op= b`, into a's memory.
template <Op op>
py::object in_place(const py::object& self, const py::handle& b) {
  auto& a = const_cast<NDArray&>(self_array(self));
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
