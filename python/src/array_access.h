#pragma once
// Printing and indexing of the array classes, as MXNet's arrays do them.

#include <cstdint>
#include <string>

#include "bindings.h"

namespace tagflow::python {

/// MXNet's NDArray repr and str: a newline, the values as NumPy prints
/// them, then "<NDArray 2x3 @gpu(0)>" (waits).
std::string classic_repr(const NDArray& a);
/// mx.np.ndarray's repr: NumPy's, with the dtype named when it is not
/// float32 and the context when it is not a CPU (waits).
std::string numpy_repr(const NDArray& a);
/// mx.np.ndarray's str: NumPy's, then " @gpu(0)" off the CPU (waits).
std::string numpy_str(const NDArray& a);

/// a[key] for an int, a slice of step 1, a tuple of ints or `...`: a view.
/// IndexError for an index out of range or a key of another kind.
NDArray index(const NDArray& a, const py::handle& key);
/// a[key] = value: an array (same shape), a number, or values NumPy reads.
void assign(const NDArray& a, const py::handle& key, const py::handle& value);

}  // namespace tagflow::python
