"""The classic array interface, as ``mx.nd``: ``NDArray`` and its functions.

Arrays print as MXNet's do::

    >>> tagflow.nd.array([1, 2, 3])

    [1. 2. 3.]
    <NDArray 3 @cpu(0)>
"""

from .._core import NDArray  # noqa: F401
from .._core.nd import (  # noqa: F401
    abs, add, arange, array, batch_dot, clip, concat, divide, dot, empty, exp, from_dlpack, full, load,
    log, log_softmax, matmul, max, maximum, mean, min, minimum, multiply, negative, norm, one_hot,
    save,
    to_dlpack_for_read, to_dlpack_for_write,
    ones, ones_like, power, relu, sigmoid, softmax, sqrt, square, subtract, sum, tanh,
    transpose, waitall, where, zeros, zeros_like,
)
from .compose import *  # noqa: F401,F403  (broadcast_*, elemwise_*, argmax, stack(*data), ...)
from . import indexing as _indexing  # noqa: F401  (x[:, 1] on any axis)
from . import random  # noqa: F401
