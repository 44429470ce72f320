// tagflow._core: the extension module under the Python package `tagflow`
// (python/tagflow/), which gives it MXNet's names (nd, np, npx, autograd,
// gluon).
//
// Note [The Python front end]
// The C++ library is the product; Python is a thin layer over its public
// headers, built against libtagflow.so so that a process has one engine
// whatever else links tagflow. An array in Python is a C++ NDArray, a handle
// held by the Python object: operators push their work and return at once,
// as in C++, and only printing, asnumpy(), asscalar(), float() and the waits
// block. The classic interface's NDArray and the NumPy-style interface's
// ndarray are two Python classes of that one array (array.cc).
//
// Note [The GIL]
// Python code runs under the GIL; the engine's threads never touch Python
// objects, so they never need it. A call into C++ releases the GIL when it
// may block or run long: every wait and host copy (waits.cc), backward(),
// a network's forward, Trainer.step. An operator on the threaded engine only
// pushes work (about a microsecond) and keeps the GIL, which releasing and
// taking back would cost a tenth of; on the naive engine, which runs each
// operation where it is pushed, operators release it too (array_support.h,
// run()). C++ that calls back into Python (a Block subclass's forward)
// takes the GIL back for that call.

#include "bindings.h"

PYBIND11_MODULE(_core, m) {
  using namespace tagflow::python;
  m.doc() = "tagflow's C++ runtime (the package `tagflow` gives it MXNet's names)";
  m.attr("__version__") = TAGFLOW_VERSION_STRING;
  bind_errors(m);
  bind_context(m);
  bind_arrays(m);
  bind_waits(m);
  bind_array_functions(m);
  bind_dlpack(m);
  bind_autograd(m);
  bind_engine(m);
  bind_gluon(m);
}
