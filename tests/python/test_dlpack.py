"""DLPack: arrays to and from other libraries without a copy (NumPy here;
PyTorch too when it is importable)."""

import gc

import numpy as onp
import pytest

import tagflow as mx
from tagflow import nd, np


def test_numpy_memory_becomes_an_array_without_a_copy():
    owned = onp.arange(6, dtype=onp.float32).reshape(2, 3)
    a = nd.from_dlpack(owned)
    assert a.shape == (2, 3) and a.dtype is onp.float32 and a.context == mx.cpu(0)
    a *= 10  # into NumPy's memory
    a.wait_to_read()
    onp.testing.assert_array_equal(owned, onp.arange(6).reshape(2, 3) * 10)
    onp.testing.assert_array_equal((a + 1).asnumpy(), owned + 1)
    assert isinstance(np.from_dlpack(onp.ones(3, dtype=onp.int32)), np.ndarray)


def test_an_array_reaches_numpy_without_a_copy_after_its_pending_work():
    a = nd.ones((64, 64))
    b = nd.dot(a, a)  # pending when exported: the export waits for it
    view = onp.from_dlpack(b)
    onp.testing.assert_array_equal(view, onp.full((64, 64), 64.0, dtype=onp.float32))
    b += 1  # the same memory (NumPy makes its view read-only)
    b.wait_to_read()
    assert view[0, 0] == 65.0
    assert b.__dlpack_device__() == (1, 0)


def test_the_memory_lives_as_long_as_either_side_needs_it():
    a = nd.arange(8, dtype="int64")
    view = onp.from_dlpack(a)
    del a
    gc.collect()
    mx.nd.waitall()
    onp.testing.assert_array_equal(view, onp.arange(8))
    owned = onp.arange(4, dtype=onp.float32)
    b = nd.from_dlpack(owned)
    del owned
    gc.collect()
    onp.testing.assert_array_equal((b * 2).asnumpy(), [0, 2, 4, 6])


def test_what_cannot_be_shared_is_refused_clearly():
    with pytest.raises(BufferError, match="simulated GPU"):
        nd.ones(3, ctx=mx.gpu(0)).__dlpack__()
    with pytest.raises(BufferError, match="row-major"):
        nd.from_dlpack(onp.ones((3, 4), dtype=onp.float32).T)
    with pytest.raises(TypeError, match="float64"):
        nd.from_dlpack(onp.ones(3))  # float64: no such dtype here
    with pytest.raises(TypeError):
        nd.from_dlpack([1, 2, 3])


def test_pytorch_when_present():
    torch = pytest.importorskip("torch")
    t = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    a = nd.from_dlpack(t)
    a += 1
    a.wait_to_read()
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    back = torch.from_dlpack(nd.ones((2, 2)) * 3)
    assert back.tolist() == [[3.0, 3.0], [3.0, 3.0]]


def test_numpy_memory_released_while_the_pusher_is_held_back_does_not_deadlock():
    # NumPy's deleter takes the GIL. The one worker finishes a product of
    # the imported array, which frees it, while this thread, holding the GIL,
    # pushes beyond TAGFLOW_MAX_PENDING_OPS and waits for that worker (Note
    # [DLPack]): every array is released and every value right, in time.
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import numpy as onp
        from tagflow import nd
        total = 0.0
        for _ in range(3):
            a = nd.from_dlpack(onp.full((384, 384), 1.0 / 384, dtype=onp.float32))
            product = nd.dot(a, a)       # the worker is busy with this one
            del a                        # freed when the product is done
            b = nd.zeros(4)
            for _ in range(5000):        # beyond 256 pending: the pushes wait
                b = b + 1
            total += float(product.sum().asscalar()) + float(b.sum().asscalar())
        print(total)
    """)
    env = dict(os.environ, TAGFLOW_MAX_PENDING_OPS="256", TAGFLOW_CPU_WORKERS="1")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    assert float(run.stdout) == pytest.approx(3 * (384.0 + 20000.0), rel=1e-5)
