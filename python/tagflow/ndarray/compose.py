"""The functions of MXNet 1.x's ``nd`` that are compositions of the library's
operators (so autograd follows them): the ``broadcast_*`` and ``elemwise_*``
families, ``broadcast_to`` / ``_like`` / ``_axis``, shape functions, ``sign``,
``argmax`` / ``argmin`` (float32 indices, as MXNet's classic interface gives
them; ``tagflow.np`` keeps NumPy's int64), ``stack(*data)``, ``linspace``,
``pick``, ``Dropout``."""

import numpy as _np

from .. import _core
from .._core import NDArray

_nd = _core.nd

__all__ = [
    "broadcast_add", "broadcast_sub", "broadcast_minus", "broadcast_plus", "broadcast_mul",
    "broadcast_div", "broadcast_power", "broadcast_maximum", "broadcast_minimum",
    "broadcast_equal", "broadcast_not_equal", "broadcast_greater", "broadcast_greater_equal",
    "broadcast_lesser", "broadcast_lesser_equal", "elemwise_add", "elemwise_sub", "elemwise_mul",
    "elemwise_div", "broadcast_to", "broadcast_like", "broadcast_axis", "broadcast_axes",
    "expand_dims", "squeeze", "flatten", "reshape", "sign", "argmax", "argmin", "stack",
    "linspace", "pick", "Dropout",
]


def _binary(name, operation):
    def function(lhs, rhs):
        return operation(lhs, rhs)
    function.__name__ = name
    function.__doc__ = f"``{name}(lhs, rhs)``: elementwise, the shapes broadcast."
    return function


broadcast_add = broadcast_plus = _binary("broadcast_add", lambda a, b: a + b)
broadcast_sub = broadcast_minus = _binary("broadcast_sub", lambda a, b: a - b)
broadcast_mul = _binary("broadcast_mul", lambda a, b: a * b)
broadcast_div = _binary("broadcast_div", lambda a, b: a / b)
broadcast_power = _binary("broadcast_power", lambda a, b: a ** b)
broadcast_maximum = _binary("broadcast_maximum", _nd.maximum)
broadcast_minimum = _binary("broadcast_minimum", _nd.minimum)
broadcast_equal = _binary("broadcast_equal", lambda a, b: a == b)
broadcast_not_equal = _binary("broadcast_not_equal", lambda a, b: a != b)
broadcast_greater = _binary("broadcast_greater", lambda a, b: a > b)
broadcast_greater_equal = _binary("broadcast_greater_equal", lambda a, b: a >= b)
broadcast_lesser = _binary("broadcast_lesser", lambda a, b: a < b)
broadcast_lesser_equal = _binary("broadcast_lesser_equal", lambda a, b: a <= b)


def _elemwise(name, operation):
    def function(lhs, rhs):
        if lhs.shape != rhs.shape:
            raise ValueError(f"{name}: expected operands of one shape, got {lhs.shape} and "
                             f"{rhs.shape}; the broadcast_* functions broadcast")
        return operation(lhs, rhs)
    function.__name__ = name
    function.__doc__ = f"``{name}(lhs, rhs)``: elementwise, on operands of one shape."
    return function


elemwise_add = _elemwise("elemwise_add", lambda a, b: a + b)
elemwise_sub = _elemwise("elemwise_sub", lambda a, b: a - b)
elemwise_mul = _elemwise("elemwise_mul", lambda a, b: a * b)
elemwise_div = _elemwise("elemwise_div", lambda a, b: a / b)


def broadcast_to(data, shape):
    """`data` repeated along its axes of extent 1 to `shape` (0 in `shape`
    keeps the axis's extent)."""
    shape = tuple(shape)
    if len(shape) != data.ndim:
        raise ValueError(f"broadcast_to: {data.shape} has {data.ndim} axes, the shape asked "
                         f"for {shape} has {len(shape)}")
    target = tuple(have if want == 0 else want for have, want in zip(data.shape, shape))
    for have, want in zip(data.shape, target):
        if have != want and have != 1:
            raise ValueError(f"broadcast_to: cannot broadcast {data.shape} to {target}: only "
                             "axes of extent 1 repeat")
    return data + _nd.zeros(target, ctx=data.context, dtype=data.dtype)


def broadcast_like(lhs, rhs, lhs_axes=None, rhs_axes=None):
    """`lhs` broadcast to the shape of `rhs` (or of its `rhs_axes` at
    `lhs_axes`)."""
    if lhs_axes is None and rhs_axes is None:
        return broadcast_to(lhs, rhs.shape)
    if lhs_axes is None or rhs_axes is None or len(lhs_axes) != len(rhs_axes):
        raise ValueError("broadcast_like: lhs_axes and rhs_axes go together, of one length")
    shape = list(lhs.shape)
    for l, r in zip(lhs_axes, rhs_axes):
        shape[l] = rhs.shape[r]
    return broadcast_to(lhs, shape)


def broadcast_axis(data, axis=(), size=()):
    """`data` repeated `size[i]` times along each axis `axis[i]` of extent 1."""
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    sizes = (size,) if isinstance(size, int) else tuple(size)
    if len(axes) != len(sizes):
        raise ValueError(f"broadcast_axis: {len(axes)} axes and {len(sizes)} sizes")
    shape = list(data.shape)
    for a, s in zip(axes, sizes):
        shape[a] = s
    return broadcast_to(data, shape)


broadcast_axes = broadcast_axis


def expand_dims(data, axis):
    return data.expand_dims(axis)


def squeeze(data, axis=None):
    return data.squeeze(axis) if axis is not None else data.squeeze()


def flatten(data):
    """(N, everything else)."""
    return data.flatten()


def reshape(data, shape, reverse=False):
    """`data` in `shape`, with MXNet's special values (see NDArray.reshape)."""
    return data.reshape(shape, reverse=reverse)


def _special_shape(source, spec):
    """MXNet's reshape codes, left to right: 0 copies the input's extent, -1
    is inferred (one at most), -2 copies the remaining extents, -3 merges two
    extents, -4 splits one into the next two values (one of them may be -1)."""
    out, i, j = [], 0, 0
    while j < len(spec):
        code = spec[j]
        if code == 0:
            out.append(source[i])
            i += 1
        elif code == -1:
            out.append(-1)
            i += 1
        elif code == -2:
            out.extend(source[i:])
            i = len(source)
        elif code == -3:
            if i + 1 >= len(source):
                raise ValueError(f"reshape: -3 at {j} merges two extents, {source} has no more")
            out.append(source[i] * source[i + 1])
            i += 2
        elif code == -4:
            if j + 2 >= len(spec) or i >= len(source):
                raise ValueError(f"reshape: -4 at {j} splits an extent into the two values that "
                                 f"follow it, in {spec}")
            first, second = spec[j + 1], spec[j + 2]
            extent = source[i]
            if first == -1:
                first = extent // second
            if second == -1:
                second = extent // first
            if first * second != extent:
                raise ValueError(f"reshape: -4 splits {extent} into {spec[j + 1]} x "
                                 f"{spec[j + 2]}, which does not multiply to it")
            out.extend([first, second])
            i += 1
            j += 2
        elif code < -4:
            raise ValueError(f"reshape: {code} is no extent and no special value (0, -1 to -4)")
        else:
            out.append(code)
            i += 1
        j += 1
    if out.count(-1) > 1:
        raise ValueError(f"reshape: more than one extent to infer in {spec}")
    if -1 in out:
        total = int(_np.prod(source))
        known = int(_np.prod([d for d in out if d != -1]))
        if known == 0 or total % known != 0:
            raise ValueError(f"reshape: cannot infer an extent of {spec} from {source}")
        out[out.index(-1)] = total // known
    return tuple(out)


_plain_reshape = NDArray.reshape


def _reshape_method(self, *shape, **kwargs):
    """As MXNet's NDArray.reshape: a shape (a tuple or the extents as
    arguments) that may hold 0, -1, -2, -3 and -4; ``reverse=True`` reads
    the special values from the right. tagflow.np's ndarray keeps NumPy's
    rules."""
    if isinstance(self, _core.ndarray):
        return _plain_reshape(self, *shape, **kwargs)
    reverse = kwargs.pop("reverse", False)
    if "shape" in kwargs:
        spec = kwargs.pop("shape")
    else:
        spec = shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape
    if kwargs:
        raise TypeError(f"reshape: unexpected argument(s) {', '.join(sorted(kwargs))}")
    spec = (spec,) if isinstance(spec, int) else tuple(int(d) for d in spec)
    if reverse:
        target = tuple(reversed(_special_shape(tuple(reversed(self.shape)),
                                               tuple(reversed(spec)))))
    else:
        target = _special_shape(tuple(self.shape), spec)
    return _plain_reshape(self, target)


NDArray.reshape = _reshape_method


def sign(data):
    """-1, 0 or 1 by the sign of each element."""
    return (data > 0) - (data < 0)


_indices_of_max = NDArray.argmax


def argmax(data, axis=None, keepdims=False):
    """Indices of the largest elements along `axis` (of all with None), as
    float32 as MXNet's classic interface gives them."""
    return _indices_of_max(data, axis=axis, keepdims=keepdims).astype("float32")


def argmin(data, axis=None, keepdims=False):
    """Indices of the smallest elements along `axis`, as float32."""
    return argmax(-data, axis=axis, keepdims=keepdims)


def _argmax_method(self, axis=None, keepdims=False):
    indices = _indices_of_max(self, axis=axis, keepdims=keepdims)
    # tagflow.np's ndarray keeps NumPy's int64 indices.
    return indices if isinstance(self, _core.ndarray) else indices.astype("float32")


def _argmin_method(self, axis=None, keepdims=False):
    return _argmax_method(-self, axis=axis, keepdims=keepdims)


NDArray.argmax = _argmax_method
NDArray.argmin = _argmin_method


def stack(*data, axis=0, num_args=None):
    """The arrays joined along a new axis: ``stack(a, b)`` as MXNet, or a list."""
    arrays = list(data[0]) if len(data) == 1 and isinstance(data[0], (list, tuple)) else list(data)
    if num_args is not None and num_args != len(arrays):
        raise ValueError(f"stack: num_args is {num_args}, but {len(arrays)} arrays came")
    return _nd.stack(arrays, axis=axis)


def linspace(start, stop, num, endpoint=True, ctx=None, dtype="float32"):
    """`num` evenly spaced values from `start` to `stop` (without it unless
    `endpoint`)."""
    values = _np.linspace(start, stop, num, endpoint=endpoint, dtype=_np.float64)
    return _nd.array(values.astype(dtype), ctx=ctx, dtype=dtype)


def pick(data, index, axis=-1, keepdims=False, mode="clip"):
    """The element of `data` at position `index` along `axis` (one index per
    position of the other axes); out-of-range indices clipped (`mode` 'clip')
    or wrapped ('wrap')."""
    axis = axis % data.ndim
    extent = data.shape[axis]
    index = index.astype("float32")
    if mode == "clip":
        index = _nd.clip(index, 0, extent - 1)
    elif mode == "wrap":
        index = index - (index / extent).astype("int32").astype("float32") * extent
        index = _nd.where(index < 0, index + extent, index)
    else:
        raise ValueError(f"pick: mode must be 'clip' or 'wrap', got {mode!r}")
    order = [a for a in range(data.ndim) if a != axis] + [axis]
    last = _nd.transpose(data, axes=tuple(order)) if axis != data.ndim - 1 else data
    picked = (last * _nd.one_hot(index.reshape(last.shape[:-1]), extent, dtype=data.dtype)).sum(
        axis=-1)
    return picked.expand_dims(axis) if keepdims else picked


def Dropout(data, p=0.5, mode="training", axes=(), cudnn_off=False):  # noqa: N802 (MXNet's name)
    """Zeroes each element with probability `p` and scales the rest by
    1 / (1 - p), while training (autograd.record(train_mode=True)); the
    identity otherwise."""
    del cudnn_off
    if mode != "training":
        raise ValueError(f"Dropout: only mode='training' is available here, got {mode!r}")
    if axes:
        raise ValueError("Dropout: axes (the same mask along them) are not available here")
    return _core.gluon.Dropout(p)(data)


_plain_asscalar = NDArray.asscalar


def _asscalar_method(self):
    """The value of a one-element array, as a NumPy scalar of its dtype
    (numpy.float32 ...), as MXNet's; tagflow.np's ndarray keeps Python's."""
    value = _plain_asscalar(self)
    return value if isinstance(self, _core.ndarray) else _np.dtype(self.dtype).type(value)


NDArray.asscalar = _asscalar_method
