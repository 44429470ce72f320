#pragma once
// What the files of the Python module share: the two array classes, how a
// Python value becomes a shape, a dtype or a context, and one bind_* function
// per file, called in order by module.cc.

#include <cstdint>
#include <optional>
#include <vector>

#include <pybind11/pybind11.h>

#include <tagflow/tagflow.h>

namespace tagflow::python {

namespace py = pybind11;

/// The array class of the NumPy-style interface (`tagflow.np.ndarray`): the
/// same array as the classic `tagflow.nd.NDArray`, of which it is a Python
/// subclass, with NumPy's printing (`array([1., 2.], ctx=gpu(0))`). Every
/// operation on it gives this class again; one on an NDArray, NDArray.
struct NumpyArray : NDArray {
  NumpyArray() = default;
  explicit NumpyArray(NDArray array) : NDArray(std::move(array)) {}
};

/// Which interface made an array: the class the results are given.
enum class Flavor { kClassic, kNumpy };

/// `array` as a Python object of `flavor`'s class.
py::object wrap(NDArray array, Flavor flavor);

/// A shape from an int or a sequence of ints (`3`, `(2, 3)`, `[2, 3]`).
/// Throws TypeError or ValueError saying what came.
Shape to_shape(const py::handle& value, const char* what);
/// The same as a list of extents, which may hold -1 (reshape's "inferred").
std::vector<std::int64_t> to_dims(const py::handle& value, const char* what);
/// A dtype from None (float32), a name ("float32"), a NumPy dtype or type
/// (`numpy.float32`): TypeError for anything else.
DType to_dtype(const py::handle& value);
/// The NumPy dtype of `dtype` (bfloat16 has none: float32, whose values it
/// widens to exactly).
py::object numpy_dtype(DType dtype);

/// The context of `with tagflow.gpu(1):` blocks on this thread, else cpu(0).
Context current_context();
/// `ctx` when given, else current_context().
Context context_or_current(const std::optional<Context>& ctx);

/// Values of `source` (any NumPy-convertible value: a list, a NumPy array,
/// a scalar, another array) as a new array on `ctx` of `dtype` (None: the
/// source's own for arrays and NumPy arrays of a tagflow dtype, else float32,
/// as MXNet's `nd.array`).
NDArray array_from_python(const py::handle& source, Context ctx, const py::handle& dtype);
/// The values of `array` as a new NumPy array (waits, interruptibly).
py::object to_numpy(const NDArray& array);

/// Blocks until the array's pending writes have completed, with the GIL
/// released; Ctrl-C raises KeyboardInterrupt within 50 ms on the main
/// thread (Note [Waiting from Python] in waits.cc).
void wait_to_read(const NDArray& array);
/// Engine::wait_for_all, the same way.
void wait_for_all();

/// True when the engine runs operations where they are pushed (naive):
/// operators then release the GIL (Note [The GIL] in module.cc).
bool engine_runs_inline();

void bind_errors(py::module_& m);
void bind_context(py::module_& m);
void bind_arrays(py::module_& m);
void bind_waits(py::module_& m);
void bind_array_functions(py::module_& m);
/// nd.save and nd.load, on the `nd` submodule (array_files.cc).
void bind_array_files(py::module_& nd);
void bind_autograd(py::module_& m);
void bind_engine(py::module_& m);
void bind_gluon(py::module_& m);
void bind_data(py::module_& m);
void bind_dlpack(py::module_& m);

}  // namespace tagflow::python
