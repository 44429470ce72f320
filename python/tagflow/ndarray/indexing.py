"""Indexing on any axis, as MXNet's and NumPy's basic indexing: ``x[:, 1]``,
``x[..., 1:3]``, ``X[:, :, :, 1:3] = 0``. The library's own indexing makes
views along the first axis (ints, then a slice); a key that reaches further
is taken here: each axis it names is brought first, indexed there and put
back (a copy, as MXNet's ``x[:, 1]`` is). Assigning a number goes through
the engine; assigning an array or values reads the array's values on the
host (it waits for them), writes them and copies them back."""

import numpy as _np

from .. import _core
from .._core import NDArray


def _normalize(shape, key):
    """The key as one int or slice per axis, or None when the library's own
    indexing serves it (a tuple of ints)."""
    if not isinstance(key, tuple):
        return None
    items = list(key)
    if any(item is None for item in items):
        raise IndexError("indexing with None (a new axis) is not available here; use "
                         "expand_dims")
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(shape) - len(items) + 1)
    if len(items) > len(shape):
        raise IndexError(f"too many indices: {len(items)} for an array of {len(shape)} axes")
    for item in items:
        if not isinstance(item, (int, slice)) and not hasattr(item, "__index__"):
            raise IndexError("index with ints and slices, got "
                             f"{type(item).__name__}")
    if not any(isinstance(item, slice) for item in items):
        return None  # ints only: the library's views
    return items


def _take(x, axis, item, plain):
    """x indexed by `item` along `axis`: that axis moved first, indexed, put back."""
    if isinstance(item, slice):
        start, stop, step = item.indices(x.shape[axis])
        if step != 1:
            raise IndexError(f"a slice with a step other than 1 is not available here, got "
                             f"step {step}")
        if (start, stop) == (0, x.shape[axis]):
            return x
    if axis == 0:
        return plain(x, item)
    order = [axis] + [a for a in range(x.ndim) if a != axis]
    picked = plain(x.transpose(tuple(order)), item)
    if isinstance(item, slice):
        back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, x.ndim))
        return picked.transpose(tuple(back))
    return picked  # the axis is gone, the others are in their order


_plain_getitem = NDArray.__getitem__
_plain_setitem = NDArray.__setitem__
_plain_np_getitem = _core.ndarray.__getitem__
_plain_np_setitem = _core.ndarray.__setitem__


def _getitem(self, key, plain):
    items = _normalize(self.shape, key)
    if items is None:
        return plain(self, key)
    result = self
    for axis in reversed(range(len(items))):  # the last first: removing it renumbers none before
        result = _take(result, axis, items[axis], plain)
    return result


def _setitem(self, key, value, plain):
    items = _normalize(self.shape, key)
    if items is None:
        return plain(self, key, value)
    mask = _np.zeros(self.shape, dtype=bool)
    mask[tuple(items)] = True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        selected = _core.nd.array(mask.astype("float32"), ctx=self.context)
        updated = _core.nd.where(selected > 0, _core.nd.full(self.shape, value, ctx=self.context,
                                                             dtype=self.dtype), self)
    else:
        values = self.asnumpy()
        values[tuple(items)] = value.asnumpy() if hasattr(value, "asnumpy") else value
        updated = _core.nd.array(values, ctx=self.context, dtype=self.dtype)
    return plain(self, slice(None), updated)


NDArray.__getitem__ = lambda self, key: _getitem(self, key, _plain_getitem)
NDArray.__setitem__ = lambda self, key, value: _setitem(self, key, value, _plain_setitem)
_core.ndarray.__getitem__ = lambda self, key: _getitem(self, key, _plain_np_getitem)
_core.ndarray.__setitem__ = lambda self, key, value: _setitem(self, key, value, _plain_np_setitem)
