"""Activation layers of MXNet's gluon.nn written from the library's
operators (autograd follows them)."""

from ... import _core
from ..block import Block

_nd = _core.nd


class LeakyReLU(Block):
    """x where x > 0, alpha x elsewhere."""

    def __init__(self, alpha, prefix=None, params=None):
        if alpha < 0:
            raise ValueError(f"LeakyReLU: slope must be no less than 0, got {alpha}")
        super().__init__(prefix or "leakyrelu_", params)
        self._alpha = float(alpha)

    def forward(self, x):
        return _nd.maximum(x, 0) + self._alpha * _nd.minimum(x, 0)

    def __repr__(self):
        return f"LeakyReLU({self._alpha})"
