// tagflow's errors as Python exceptions: one class per C++ error type, under
// tagflow.Error (which the package also names MXNetError, the class the
// tutorials catch), with the C++ message unchanged.

#include <Python.h>

#include "bindings.h"

namespace tagflow::python {
namespace {

// The classes live as long as the interpreter: made once, never freed.
PyObject* error_class = nullptr;
PyObject* operation_error_class = nullptr;
PyObject* device_error_class = nullptr;
PyObject* out_of_memory_class = nullptr;
PyObject* file_error_class = nullptr;
PyObject* communication_error_class = nullptr;
PyObject* stale_variable_class = nullptr;
PyObject* fork_error_class = nullptr;
PyObject* not_computed_class = nullptr;
PyObject* wait_inside_class = nullptr;

PyObject* make_class(py::module_& m, const char* name, PyObject* bases, const char* doc) {
  const std::string qualified = std::string("tagflow.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, bases, nullptr);
  if (cls == nullptr) throw py::error_already_set();
  m.add_object(name, py::handle(cls));
  return cls;
}

PyObject* tuple_of(PyObject* a, PyObject* b) {
  PyObject* bases = PyTuple_Pack(2, a, b);
  if (bases == nullptr) throw py::error_already_set();
  return bases;
}

// Note [Errors from operations]
// An operation that fails stores OperationError (the operation's name and
// context, and the exception it threw) on what it writes; a wait rethrows it.
// Python gets the class of the exception the operation threw, so that
// `except tagflow.OutOfMemoryError` catches an allocation that failed inside
// an operation as well as one that failed when called, with the
// OperationError's message, which names the operation. An exception of
// another kind inside an operation gives tagflow.OperationError; a Python
// exception raised by Python code an operation ran is raised again as it was.
PyObject* class_of(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const OperationError& e) {
    return e.cause() ? class_of(e.cause()) : operation_error_class;
  } catch (const DeviceError&) {
    return device_error_class;
  } catch (const OutOfMemoryError&) {
    return out_of_memory_class;
  } catch (const io::FileError&) {
    return file_error_class;
  } catch (const dist::CommunicationError&) {
    return communication_error_class;
  } catch (const StaleVariableError&) {
    return stale_variable_class;
  } catch (const ForkError&) {
    return fork_error_class;
  } catch (const NotComputedError&) {
    return not_computed_class;
  } catch (const WaitInsideOperationError&) {
    return wait_inside_class;
  } catch (const Error&) {
    return error_class;
  } catch (...) {
    return operation_error_class;
  }
}

/// The Python exception an operation's own Python code raised, if that is
/// what `error` holds (directly or as an OperationError's cause).
const py::error_already_set* python_cause(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const OperationError& e) {
    return e.cause() ? python_cause(e.cause()) : nullptr;
  } catch (const py::error_already_set& e) {
    return &e;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

void bind_errors(py::module_& m) {
  error_class = make_class(m, "Error", PyExc_Exception,
                           "Base of every error tagflow raises (also named MXNetError).");
  operation_error_class =
      make_class(m, "OperationError", error_class,
                 "An operation failed on the engine with an exception of no tagflow class.");
  device_error_class = make_class(m, "DeviceError", error_class,
                                  "A device that does not exist was named (gpu(10) with two).");
  out_of_memory_class = make_class(m, "OutOfMemoryError", tuple_of(error_class, PyExc_MemoryError),
                                   "A device could not give the memory asked of it.");
  file_error_class = make_class(m, "FileError", tuple_of(error_class, PyExc_OSError),
                                "A file could not be read or written, or is malformed.");
  communication_error_class = make_class(m, "CommunicationError", error_class,
                                         "A collective between devices or processes failed.");
  stale_variable_class =
      make_class(m, "StaleVariableError", error_class, "An engine variable used after deletion.");
  fork_error_class = make_class(m, "ForkError", error_class,
                                "The engine of the parent process was used in a forked child.");
  not_computed_class =
      make_class(m, "NotComputedError", error_class,
                 "Values asked of an array that a timing-only simulated GPU never computed.");
  wait_inside_class =
      make_class(m, "WaitInsideOperationError", error_class,
                 "A wait from inside an engine operation, where it would deadlock.");

  py::register_exception_translator([](std::exception_ptr error) {
    if (!error) return;
    try {
      std::rethrow_exception(error);
    } catch (const Error& e) {
      // Restored as it was raised (its traceback included), when the
      // failure was Python code's own.
      if (const py::error_already_set* cause = python_cause(error)) {
        py::error_already_set copy = *cause;
        copy.restore();
        return;
      }
      PyErr_SetString(class_of(error), e.what());
    }
  });
}

}  // namespace tagflow::python
