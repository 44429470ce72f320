"""tagflow.nd and tagflow.np arrays against NumPy computing in float64."""

import numpy as onp
import pytest

import tagflow as mx
from tagflow import nd, np

DEVICES = [mx.cpu(0), mx.cpu(1), mx.gpu(0), mx.gpu(1)]


def values(shape, seed, low=-2.0, high=2.0):
    return onp.random.default_rng(seed).uniform(low, high, size=shape).astype(onp.float32)


def close(array, expected, rtol=1e-5, atol=1e-6):
    got = array.asnumpy()
    assert got.shape == onp.shape(expected)
    onp.testing.assert_allclose(got.astype(onp.float64), expected, rtol=rtol, atol=atol)


@pytest.mark.parametrize("ctx", DEVICES, ids=str)
def test_creation_matches_numpy(ctx):
    source = values((2, 3), 1)
    a = nd.array(source, ctx=ctx)
    assert a.context == ctx and a.ctx == ctx
    assert a.shape == (2, 3) and a.size == 6 and a.ndim == 2
    assert a.dtype is onp.float32
    onp.testing.assert_array_equal(a.asnumpy(), source)
    close(nd.ones((2, 3), ctx=ctx), onp.ones((2, 3)))
    close(nd.zeros(4, ctx=ctx), onp.zeros(4))
    close(nd.full((2, 2), 7.5, ctx=ctx), onp.full((2, 2), 7.5))
    close(nd.arange(5, ctx=ctx), onp.arange(5.0))
    close(nd.arange(1, 4, 0.5, ctx=ctx), onp.arange(1, 4, 0.5))
    b = np.ones((2, 3), ctx=ctx)
    assert isinstance(b, np.ndarray) and isinstance(b, nd.NDArray)
    assert b.dtype == onp.dtype("float32")


def test_lists_become_float32_and_numpy_arrays_keep_their_dtype():
    assert nd.array([1, 2, 3]).dtype is onp.float32
    assert nd.array(onp.array([1, 2], dtype=onp.int32)).dtype is onp.int32
    assert nd.array(onp.array([1.5, 2.5])).dtype is onp.float32  # float64: no such dtype
    assert nd.array([1, 2], dtype="int64").dtype is onp.int64
    half = nd.array([1.0, 0.1], dtype="float16")
    onp.testing.assert_array_equal(half.asnumpy(), onp.array([1.0, 0.1], dtype=onp.float16))
    assert nd.array([1.0], dtype="bfloat16").asnumpy().dtype == onp.float32


@pytest.mark.parametrize("ctx", DEVICES, ids=str)
def test_arithmetic_with_broadcasting(ctx):
    x, y = values((3, 1), 2), values((4,), 3, 0.5, 2.0)
    a, b = nd.array(x, ctx=ctx), nd.array(y, ctx=ctx)
    x64, y64 = x.astype(onp.float64), y.astype(onp.float64)
    close(a + b, x64 + y64)
    close(a - b, x64 - y64)
    close(a * b, x64 * y64)
    close(a / b, x64 / y64, rtol=1e-5)
    close(b ** 2, y64 ** 2)
    close(a + 2, x64 + 2)
    close(2 - a, 2 - x64)
    close(3 * a, 3 * x64)
    close(1 / b, 1 / y64)
    close(2 ** b, 2 ** y64, rtol=1e-5)
    close(-a, -x64)
    close(a + onp.float32(1.5), x64 + 1.5)
    close(nd.exp(a + 2) * a, onp.exp(x64 + 2) * x64, rtol=1e-5)
    close((a > 0), (x64 > 0).astype(onp.float64))
    close((b <= 1), (y64 <= 1).astype(onp.float64))
    close(nd.maximum(a, 0.5), onp.maximum(x64, 0.5))
    close(nd.minimum(a, b), onp.minimum(x64, y64))
    close(nd.clip(a, -1, 1), onp.clip(x64, -1, 1))


@pytest.mark.parametrize("ctx", DEVICES, ids=str)
def test_in_place_operators_write_the_same_array(ctx):
    x = values((2, 3), 4)
    a = nd.array(x, ctx=ctx)
    view = a[1]
    before = id(a)
    a += 1
    a *= nd.full((2, 3), 2.0, ctx=ctx)
    a -= 0.5
    a /= 4
    assert id(a) == before
    expected = ((x.astype(onp.float64) + 1) * 2 - 0.5) / 4
    close(a, expected)
    close(view, expected[1])  # the view shares the memory


@pytest.mark.parametrize("ctx", DEVICES, ids=str)
def test_reductions_and_products(ctx):
    x, w = values((4, 5), 5), values((5, 3), 6)
    a, b = nd.array(x, ctx=ctx), nd.array(w, ctx=ctx)
    x64, w64 = x.astype(onp.float64), w.astype(onp.float64)
    close(a.sum(), onp.array([x64.sum()]).reshape(a.sum().shape), rtol=1e-5)
    close(a.sum(axis=1), x64.sum(axis=1), rtol=1e-5)
    close(a.sum(axis=(0, 1), keepdims=True), x64.sum(axis=(0, 1), keepdims=True), rtol=1e-5)
    close(a.mean(axis=0), x64.mean(axis=0), rtol=1e-5)
    close(a.max(axis=1), x64.max(axis=1))
    close(a.min(axis=0), x64.min(axis=0))
    close(nd.norm(a), onp.array([onp.linalg.norm(x64)]).reshape(nd.norm(a).shape), rtol=1e-5)
    close(a.argmax(axis=1), x64.argmax(axis=1).astype(onp.float64))
    close(nd.dot(a, b), x64 @ w64, rtol=1e-4, atol=1e-5)
    close(a @ b, x64 @ w64, rtol=1e-4, atol=1e-5)
    close(a.T, x64.T)
    close(a.softmax(axis=1), onp.exp(x64) / onp.exp(x64).sum(axis=1, keepdims=True), rtol=1e-5)
    assert float(a.sum()) == pytest.approx(x64.sum(), rel=1e-5)


def test_views_indexing_and_assignment():
    x = values((4, 3), 7)
    a = nd.array(x)
    close(a[1], x[1])
    close(a[-1], x[-1])
    close(a[1:3], x[1:3])
    close(a[2, 1], onp.array(x[2, 1]).reshape(a[2, 1].shape))
    close(a.reshape((3, 4)), x.reshape(3, 4))
    close(a.reshape(2, -1), x.reshape(2, -1))
    close(a.reshape(shape=(12,)), x.reshape(12))
    a[0] = 5
    a[1:3] = nd.ones((2, 3))
    a[3] = [7, 8, 9]
    expected = x.copy()
    expected[0] = 5
    expected[1:3] = 1
    expected[3] = [7, 8, 9]
    close(a, expected)
    a[:] = 0
    close(a, onp.zeros((4, 3)))
    assert len(a) == 4
    assert [row.shape for row in a] == [(3,)] * 4
    with pytest.raises(IndexError):
        a[4]
    close(a[::2], onp.zeros((2, 3)))  # a copy, not a view
    with pytest.raises(IndexError, match="negative step"):
        a[::-2]


def test_as_in_context_is_the_same_object_and_copyto_is_not():
    y = nd.array([1, 2, 3]).copyto(mx.gpu(0))
    assert y.as_in_context(mx.gpu(0)) is y
    assert y.copyto(mx.gpu(0)) is not y
    z = np.array([1, 2, 3], ctx=mx.gpu(1))
    assert z.as_in_ctx(mx.gpu(1)) is z
    moved = z.as_in_ctx(mx.gpu(0))
    assert moved is not z and moved.ctx == mx.gpu(0) and isinstance(moved, np.ndarray)
    target = nd.zeros(3, ctx=mx.cpu(1))
    assert y.copyto(target) is target
    close(target, onp.array([1.0, 2.0, 3.0]))


def test_results_keep_the_interface_of_their_operands():
    a, b = nd.ones(2), np.ones(2)
    assert type(a + 1) is nd.NDArray and type(nd.exp(a)) is nd.NDArray
    assert type(b + 1) is np.ndarray and type(np.exp(b)) is np.ndarray
    assert type(b.sum()) is np.ndarray and type(b.T) is np.ndarray
    assert type(b.as_nd_ndarray()) is nd.NDArray and type(a.as_np_ndarray()) is np.ndarray


def test_classic_printing_is_mxnets():
    assert repr(nd.array([1, 2, 3])) == "\n[1. 2. 3.]\n<NDArray 3 @cpu(0)>"
    x = nd.array([1, 2, 3]).copyto(mx.gpu(0))
    assert repr(nd.exp(x + 2) * x) == "\n[ 20.085537 109.1963   445.2395  ]\n<NDArray 3 @gpu(0)>"
    assert str(nd.zeros((3, 2), ctx=mx.gpu(0))) == (
        "\n[[0. 0.]\n [0. 0.]\n [0. 0.]]\n<NDArray 3x2 @gpu(0)>")


def test_numpy_style_printing_is_mxnets():
    assert repr(np.ones((2, 3), ctx=mx.gpu(0))) == (
        "array([[1., 1., 1.],\n       [1., 1., 1.]], ctx=gpu(0))")
    assert repr(np.array([1, 2, 3])) == "array([1., 2., 3.])"
    assert repr(np.array([1, 2], dtype="int32", ctx=mx.gpu(1))) == (
        "array([1, 2], dtype=int32, ctx=gpu(1))")
    assert repr(np.array([1, 2], dtype="int64")) == "array([1, 2], dtype=int64)"
    assert str(np.ones((2, 3), ctx=mx.gpu(0))) == "[[1. 1. 1.]\n [1. 1. 1.]] @gpu(0)"
    assert str(np.ones(2)) == "[1. 1.]"


def test_numpy_interop_both_ways():
    x = values((3, 4), 8)
    a = nd.array(x, ctx=mx.gpu(1))
    onp.testing.assert_array_equal(onp.asarray(a), x)
    onp.testing.assert_array_equal(onp.array(a, dtype=onp.float64), x.astype(onp.float64))
    assert nd.array(a).context == mx.cpu(0)  # from another array: a copy where asked
    onp.testing.assert_array_equal(nd.array(a, ctx=mx.gpu(0)).asnumpy(), x)
    assert nd.array([[1.5]]).asscalar() == 1.5
    assert np.array([3]).item() == 3.0
    assert int(nd.array([7.9])) == 7


def test_random_draws_are_in_range_and_seeded():
    mx.nd.random.seed(3)
    u = nd.random.uniform(-1, 1, shape=(1000,), ctx=mx.gpu(0)).asnumpy()
    assert u.min() >= -1 and u.max() < 1 and abs(u.mean()) < 0.1
    mx.nd.random.seed(3)
    again = nd.random.uniform(-1, 1, shape=(1000,), ctx=mx.gpu(0)).asnumpy()
    onp.testing.assert_array_equal(u, again)
    z = np.random.normal(2.0, 0.5, size=(4000,)).asnumpy()
    assert abs(z.mean() - 2.0) < 0.05 and abs(z.std() - 0.5) < 0.05
    assert np.random.uniform(size=(2, 3), ctx=mx.gpu(1)).shape == (2, 3)


def test_default_context_of_with_blocks():
    with mx.gpu(1):
        assert mx.current_context() == mx.gpu(1)
        assert nd.ones(2).context == mx.gpu(1)
        with mx.cpu(1):
            assert np.zeros(2).ctx == mx.cpu(1)
        assert nd.array([1]).context == mx.gpu(1)
    assert nd.ones(2).context == mx.cpu(0)
