"""Layers, as ``mx.gluon.nn``: the C++ library's, and ``Block`` for your own."""

import collections

from ..._core.gluon import (  # noqa: F401
    Activation, AvgPool2D, BatchNorm, Conv1D, Conv2D, Dense, Dropout, Flatten, GlobalAvgPool2D,
    GlobalMaxPool2D, MaxPool2D,
)
from ..._core.gluon import Sequential as _CoreSequential
from ..block import Block, HybridBlock  # noqa: F401
from .activations import LeakyReLU  # noqa: F401


class Sequential(_CoreSequential):
    """Children called one after the other::

        net = nn.Sequential()
        net.add(nn.Dense(256, activation="relu"), nn.Dense(10))
    """

    def __init__(self, prefix=None, params=None):
        del prefix, params
        _CoreSequential.__init__(self)
        # As MXNet's: a mapping of the children (Block keeps no lists).
        self._children = collections.OrderedDict()

    def add(self, *blocks):
        """Appends blocks; a block written in Python is kept alive with it."""
        for block in blocks:
            self._add(block)
            self._children[str(len(self._children))] = block

    def __getitem__(self, index):
        if isinstance(index, slice):
            part = Sequential()
            part.add(*list(self._children.values())[index])
            return part
        return list(self._children.values())[index]


HybridSequential = Sequential
