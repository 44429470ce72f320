"""What MXNet's NumPy-style interface adds to NumPy's names, as ``mx.npx``:
devices, ``set_np()``, and the operators NumPy lacks."""

from ._core import cpu, cpu_pinned, current_context, gpu, num_gpus  # noqa: F401
from ._core import gluon as _gluon
from ._core.np import log_softmax, one_hot, relu, sigmoid, softmax, waitall  # noqa: F401

_np_mode = False


def set_np(shape=True, array=True, dtype=False):
    """Switches Gluon to the NumPy-style interface: networks take and give
    ``tagflow.np.ndarray``. Arrays made by ``tagflow.np`` are NumPy-style
    whatever this says; ``dtype=True`` (float64 by default) is not offered."""
    global _np_mode
    if dtype:
        raise ValueError("set_np: tagflow has no float64 arrays, so dtype=True is not offered")
    _np_mode = bool(shape and array)
    _gluon._set_numpy_mode(_np_mode)


def reset_np():
    """Switches Gluon back to the classic interface."""
    global _np_mode
    _np_mode = False
    _gluon._set_numpy_mode(False)


def is_np_array():
    """True after ``set_np()``."""
    return _np_mode
