"""tagflow: a deep-learning runtime on an asynchronous dependency engine.

The Python face of the C++ library, with MXNet's names, so that code written
for MXNet runs with its import line changed::

    import tagflow as mx
    from tagflow import nd, autograd, gluon

    x = nd.array([1, 2, 3], ctx=mx.gpu(0))
    y = nd.exp(x + 2) * x          # pushed to the engine; returns at once
    print(y)                       # waits for the values

Operations return at once and run on the engine's workers; printing,
``asnumpy()``, ``asscalar()`` and the waits block (with the GIL released, and
Ctrl-C stops them).
"""

import sys as _sys

from . import _core
from ._core import Context, cpu, cpu_pinned, current_context, gpu, num_gpus
from .base import (  # every error tagflow raises, MXNetError among them
    CommunicationError,
    DeviceError,
    Error,
    FileError,
    ForkError,
    MXNetError,
    NotComputedError,
    OperationError,
    OutOfMemoryError,
    StaleVariableError,
    WaitInsideOperationError,
)

__version__ = _core.__version__

from . import context, engine, ndarray, numpy, numpy_extension, autograd, profiler  # noqa: E402
from . import init, random, gluon  # noqa: E402
from . import lr_scheduler, metric, optimizer  # noqa: E402

nd = ndarray
np = numpy
npx = numpy_extension
# `import tagflow.nd` and `from tagflow.nd import ...` as well as `tagflow.nd`.
_sys.modules[__name__ + ".nd"] = ndarray
_sys.modules[__name__ + ".np"] = numpy
_sys.modules[__name__ + ".npx"] = numpy_extension

__all__ = [
    "Context", "cpu", "gpu", "cpu_pinned", "current_context", "num_gpus",
    "Error", "MXNetError", "DeviceError", "OutOfMemoryError", "OperationError", "FileError",
    "CommunicationError", "StaleVariableError", "ForkError", "NotComputedError",
    "WaitInsideOperationError",
    "nd", "np", "npx", "ndarray", "numpy", "numpy_extension", "autograd", "context",
    "engine", "profiler", "init", "random", "gluon", "lr_scheduler", "metric", "optimizer", "info",
]


def info():
    """Prints what ``tagflow info`` prints: the devices (simulated ones said
    so), the configuration read from the environment, and the build."""
    print(_core.info(), end="")
