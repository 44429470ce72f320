"""Indexing on any axis, as MXNet's and NumPy's basic indexing: ``x[:, 1]``,
``x[..., 1:3]``, ``x[::2]``, ``x[:, None]``, ``X[:, :, :, 1:3] = 0``. The
library's own indexing makes views along the first axis (ints, then a slice
of step 1); a key that reaches further is taken here, from operations that
autograd follows:

- each axis the key names is brought first, indexed there and put back (a
  copy, as MXNet's ``x[:, 1]`` is);
- a slice with a step ``s > 1`` takes rows ``start, start + s, ...`` as the
  first of each group of ``s`` rows (a reshape, then an index);
- ``None`` adds an axis of extent 1 (a reshape of the result).

A negative step and advanced (array or list) indices are refused with an
IndexError. Assigning a number goes through the engine; assigning an array
or values reads the array's values on the host (it waits for them), writes
them and copies them back."""

import numpy as _np

from .. import _core
from .._core import NDArray


def _is_int(item):
    return isinstance(item, int) or (not isinstance(item, slice) and hasattr(item, "__index__"))


def _check_item(item):
    if item is None or item is Ellipsis or isinstance(item, slice) or _is_int(item):
        return
    raise IndexError("index with ints, slices, None and '...', got "
                     f"{type(item).__name__}: advanced (array or list) indices are not "
                     "available here")


def _expand(shape, key):
    """The key as a list of one item per axis (int, slice or None), its
    ellipsis expanded; None when the library's own indexing serves it."""
    if not isinstance(key, tuple):
        if isinstance(key, slice) and key.step in (None, 1):
            return None
        key = (key,)
    items = list(key)
    for item in items:
        _check_item(item)
    if sum(item is Ellipsis for item in items) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    named = sum(1 for item in items if item is not None and item is not Ellipsis)
    if named > len(shape):
        raise IndexError(f"too many indices: {named} for an array of {len(shape)} axes")
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items[at:at + 1] = [slice(None)] * (len(shape) - named)
    if all(_is_int(item) for item in items):
        return None  # ints only: the library's views
    for item in items:
        if isinstance(item, slice) and item.step is not None and item.step < 0:
            raise IndexError(f"a slice with a negative step is not available here, got "
                             f"step {item.step}")
    return items


def _rows(x, item, plain):
    """x indexed by `item` (an int, or a slice of any positive step) along its
    first axis."""
    if not isinstance(item, slice):
        return plain(x, item)
    start, stop, step = item.indices(x.shape[0])
    if step == 1:
        return plain(x, slice(start, stop))
    count = len(range(start, stop, step))
    if count <= 1:
        return plain(x, slice(start, start + count))
    rest = tuple(x.shape[1:])
    # Whole groups of `step` rows, the first of each; the last row alone when
    # its group would run past the end.
    whole = count if start + count * step <= x.shape[0] else count - 1
    groups = plain(x, slice(start, start + whole * step)).reshape((whole, step) + rest)
    picked = _getitem(groups, (slice(None), 0), plain)
    if whole == count:
        return picked
    last = start + (count - 1) * step
    return _core.nd.concat(picked, plain(x, slice(last, last + 1)), dim=0)


def _take(x, axis, item, plain):
    """x indexed by `item` along `axis`: that axis moved first, indexed, put back."""
    if isinstance(item, slice) and item.indices(x.shape[axis]) == (0, x.shape[axis], 1):
        return x
    if axis == 0:
        return _rows(x, item, plain)
    order = [axis] + [a for a in range(x.ndim) if a != axis]
    picked = _rows(x.transpose(tuple(order)), item, plain)
    if isinstance(item, slice):
        back = list(range(1, axis + 1)) + [0] + list(range(axis + 1, x.ndim))
        return picked.transpose(tuple(back))
    return picked  # the axis is gone, the others are in their order


_plain_getitem = NDArray.__getitem__
_plain_setitem = NDArray.__setitem__
_plain_np_getitem = _core.ndarray.__getitem__
_plain_np_setitem = _core.ndarray.__setitem__


def _getitem(self, key, plain):
    items = _expand(self.shape, key)
    if items is None:
        return plain(self, key)
    named = [item for item in items if item is not None]
    result = self
    for axis in reversed(range(len(named))):  # the last first: removing it renumbers none before
        result = _take(result, axis, named[axis], plain)
    if len(named) == len(items):
        return result
    # New axes: walk the key, each slice keeping one axis of the result.
    shape, kept = [], 0
    for item in items:
        if item is None:
            shape.append(1)
        elif isinstance(item, slice):
            shape.append(result.shape[kept])
            kept += 1
    shape.extend(result.shape[kept:])
    return result.reshape(tuple(shape))


def _setitem(self, key, value, plain):
    items = _expand(self.shape, key)
    if items is None:
        return plain(self, key, value)
    where = tuple(items)
    mask = _np.zeros(self.shape, dtype=bool)
    mask[where] = True
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        selected = _core.nd.array(mask.astype("float32"), ctx=self.context)
        updated = _core.nd.where(selected > 0, _core.nd.full(self.shape, value, ctx=self.context,
                                                             dtype=self.dtype), self)
    else:
        values = self.asnumpy()
        values[where] = value.asnumpy() if hasattr(value, "asnumpy") else value
        updated = _core.nd.array(values, ctx=self.context, dtype=self.dtype)
    return plain(self, slice(None), updated)


NDArray.__getitem__ = lambda self, key: _getitem(self, key, _plain_getitem)
NDArray.__setitem__ = lambda self, key, value: _setitem(self, key, value, _plain_setitem)
_core.ndarray.__getitem__ = lambda self, key: _getitem(self, key, _plain_np_getitem)
_core.ndarray.__setitem__ = lambda self, key, value: _setitem(self, key, value, _plain_np_setitem)
