"""The base of blocks written in Python, as ``gluon.Block``::

    class MLP(gluon.Block):
        def __init__(self):
            super().__init__()
            self.hidden = nn.Dense(64, activation="relu")   # a child, by assignment
            self.output = nn.Dense(10)

        def forward(self, x):
            return self.output(self.hidden(x))

A child or a parameter becomes the block's when assigned as an attribute; the
C++ side then calls ``forward`` wherever the block sits (inside a
``Sequential``, for instance) and saves its parameters under their place in
the network (``"hidden.weight"``).
"""

import collections
import contextlib

from .. import _core
from .. import numpy_extension as _npx
from .. import ndarray as _nd
from .. import numpy as _np

_CoreBlock = _core.gluon.Block
Parameter = _core.gluon.Parameter


class _Params:
    """``block.params.get(name, shape=...)``: MXNet 1.x's way to make a
    parameter of a block."""

    def __init__(self, block):
        self._block = block

    def get(self, name, shape=None, init=None, grad_req="write", **_ignored):
        parameter = Parameter(name, shape=shape, init=init, grad_req=grad_req)
        self._block._adopt(name, parameter)
        return parameter


class Block(_CoreBlock):
    """A block written in Python: assign children and parameters as
    attributes in ``__init__`` and define ``forward``."""

    def __init__(self, prefix=None, params=None):
        del params  # parameters are shared by sharing blocks
        kind = prefix.rstrip("_") if prefix else type(self).__name__.lower()
        _CoreBlock.__init__(self, kind)
        # The Python objects of the children, by name, as MXNet's `_children`
        # (a mapping: code that walks dir(block) calls methods on the
        # elements of its lists): the C++ side holds their C++ part, and a
        # Python subclass's methods live in the Python object.
        object.__setattr__(self, "_children", collections.OrderedDict())
        object.__setattr__(self, "_adopted", frozenset())

    def __setattr__(self, name, value):
        if isinstance(value, _CoreBlock):
            self.register_child(value, name)
        elif isinstance(value, Parameter) and id(value) not in self._adopted:
            self._adopt(name, value)
        object.__setattr__(self, name, value)

    def _adopt(self, name, parameter):
        self._adopt_parameter(name, parameter)
        object.__setattr__(self, "_adopted", self._adopted | {id(parameter)})

    def register_child(self, block, name=None):
        """Makes ``block`` a child of this block (done by attribute
        assignment as well)."""
        self._register_child(block)
        self._children[name if name is not None else str(len(self._children))] = block
        return block

    @property
    def params(self):
        return _Params(self)

    @contextlib.contextmanager
    def name_scope(self):
        """Accepted for MXNet 1.x's code: names come from the block."""
        yield


class HybridBlock(Block):
    """A block whose computation is ``hybrid_forward(F, x, *args, **params)``
    (``F`` the array functions: ``tagflow.nd``, or ``tagflow.np`` after
    ``npx.set_np()``), as MXNet 1.x's HybridBlock; it runs as written."""

    def forward(self, x, *args):
        if type(self).hybrid_forward is HybridBlock.hybrid_forward:
            raise NotImplementedError(
                "%s: a HybridBlock defines forward() or hybrid_forward()" % type(self).__name__)
        F = _np if _npx.is_np_array() else _nd
        params = {}
        for name in dir(self):
            value = self.__dict__.get(name)
            if isinstance(value, Parameter):
                params[name] = value.data(x.ctx)
        return self.hybrid_forward(F, x, *args, **params)

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError
