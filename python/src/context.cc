// tagflow.Context: cpu(i), gpu(i), cpu_pinned(i), as MXNet's mx.Context,
// including `with tagflow.gpu(1):` to change where arrays are made.

#include <vector>

#include <pybind11/operators.h>

#include "bindings.h"

namespace tagflow::python {
namespace {

/// The contexts of the `with` blocks entered on this thread, innermost last.
thread_local std::vector<Context> context_stack;

std::string device_type_name(DeviceType type) {
  switch (type) {
    case DeviceType::kCPU:
      return "cpu";
    case DeviceType::kGPU:
      return "gpu";
    case DeviceType::kCPUPinned:
      return "cpu_pinned";
  }
  return "unknown";
}

Context make_context(const std::string& device_type, int device_id) {
  if (device_id < 0) {
    throw py::value_error("Context: device_id must be 0 or more, got " + std::to_string(device_id));
  }
  if (device_type == "cpu") return cpu(device_id);
  if (device_type == "gpu") return gpu(device_id);
  if (device_type == "cpu_pinned") return cpu_pinned(device_id);
  throw py::value_error("Context: device_type must be 'cpu', 'gpu' or 'cpu_pinned', got '" +
                        device_type + "'");
}

}  // namespace

Context current_context() { return context_stack.empty() ? cpu(0) : context_stack.back(); }

Context context_or_current(const std::optional<Context>& ctx) {
  return ctx ? *ctx : current_context();
}

void bind_context(py::module_& m) {
  py::class_<Context>(m, "Context", R"doc(
A device: `cpu(i)`, `gpu(i)` or `cpu_pinned(i)`. Compares, hashes and prints
as MXNet's (`gpu(1)`). Used in a `with` block, it is where arrays are made
when no `ctx` is given:

    with tagflow.gpu(1):
        x = tagflow.nd.ones((2, 3))     # on gpu(1)
)doc")
      .def(py::init(&make_context), py::arg("device_type"), py::arg("device_id") = 0)
      .def(py::init([](const Context& other) { return other; }), py::arg("device_type"))
      .def_property_readonly("device_type",
                             [](const Context& c) { return device_type_name(c.type); })
      .def_property_readonly("device_id", [](const Context& c) { return c.index; })
      .def_property_readonly("device_typeid",
                             [](const Context& c) {
                               // MXNet's numbering: cpu 1, gpu 2, cpu_pinned 3.
                               return static_cast<int>(c.type) + 1;
                             })
      .def("__repr__", &Context::str)
      .def("__str__", &Context::str)
      .def(py::self == py::self)
      .def(py::self != py::self)
      .def("__hash__", [](const Context& c) { return std::hash<Context>{}(c); })
      .def("__enter__",
           [](const Context& c) {
             context_stack.push_back(c);
             return c;
           })
      .def("__exit__", [](const Context&, const py::args&) {
        if (!context_stack.empty()) context_stack.pop_back();
      });

  m.def("cpu", &cpu, py::arg("device_id") = 0, "The i-th CPU device, with its own workers.");
  m.def("gpu", &gpu, py::arg("device_id") = 0, "The i-th GPU (real or simulated).");
  m.def("cpu_pinned", &cpu_pinned, py::arg("device_id") = 0,
        "Page-locked host memory that copies to GPUs start from.");
  m.def("current_context", &current_context,
        "Where arrays are made without a ctx: the innermost `with` context, else cpu(0).");
  m.def(
      "num_gpus", [] { return Engine::get().num_gpus(); },
      "The GPUs present, real or simulated (TAGFLOW_SIM_GPUS).");
}

}  // namespace tagflow::python
