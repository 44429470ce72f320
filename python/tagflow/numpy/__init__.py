"""The NumPy-style array interface, as ``mx.np``: ``ndarray`` and its functions.

Arrays print as MXNet's NumPy arrays do, with their device when it is not a
CPU::

    >>> tagflow.np.ones((2, 3), ctx=tagflow.gpu(0))
    array([[1., 1., 1.],
           [1., 1., 1.]], ctx=gpu(0))
"""

import numpy as _numpy

from .._core import ndarray  # noqa: F401
from .._core.np import (  # noqa: F401
    abs, add, arange, array, clip, concatenate, divide, dot, empty, exp, from_dlpack, full, log,
    matmul, max,
    maximum, mean, min, minimum, multiply, negative, ones, ones_like, power, sqrt, square, stack,
    subtract, sum, tanh, transpose, where, zeros, zeros_like,
)
from . import random  # noqa: F401

float16 = _numpy.float16
float32 = _numpy.float32
int32 = _numpy.int32
int64 = _numpy.int64
uint8 = _numpy.uint8
