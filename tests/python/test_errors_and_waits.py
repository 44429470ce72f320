"""Errors as Python exceptions of tagflow's classes; waits that release the
GIL and stop on Ctrl-C."""

import os
import signal
import threading
import time

import numpy as onp
import pytest

import tagflow as mx
from tagflow import nd


def test_a_gpu_that_does_not_exist_raises_mxnet_error():
    with pytest.raises(mx.MXNetError) as caught:
        nd.array([1, 2, 3], ctx=mx.gpu(10))
    assert isinstance(caught.value, mx.DeviceError)
    assert "gpu(10)" in str(caught.value) and "2 GPUs" in str(caught.value)
    assert mx.MXNetError is mx.Error and mx.base.MXNetError is mx.Error


def test_operands_on_different_devices_are_refused_naming_both():
    x = nd.array([1, 2, 3])
    y = x.copyto(mx.gpu(0))
    with pytest.raises(mx.MXNetError) as caught:
        x + y
    message = str(caught.value)
    assert "cpu(0)" in message and "gpu(0)" in message


def test_bad_shapes_and_arguments():
    with pytest.raises(mx.MXNetError):
        nd.ones((2, 3)) + nd.ones((4, 5))
    with pytest.raises(TypeError):
        nd.ones("two")
    with pytest.raises(TypeError):
        nd.ones(3, dtype="float64")
    with pytest.raises(ValueError):
        nd.ones(3).attach_grad(grad_req="sometimes")
    with pytest.raises(ValueError):
        bool(nd.ones(3))
    with pytest.raises(ValueError):
        mx.Context("tpu", 0)
    with pytest.raises(TypeError):
        nd.ones(2) + "text"


def test_out_of_memory_is_a_memory_error_that_says_how_much():
    with pytest.raises(mx.OutOfMemoryError) as caught:
        nd.zeros((1 << 42,))
    assert isinstance(caught.value, MemoryError)
    assert "cpu(0)" in str(caught.value) and "16384.00 GiB" in str(caught.value)
    # Nothing is lost: the device still works.
    assert nd.ones(2).sum().asscalar() == 2.0


def long_computation(ctx, seconds):
    """A chain of products that takes about `seconds` on this machine: its
    last two arrays (the last is the product of the one before by itself,
    plus 1e-4; the values stay near 1e-4)."""
    a = nd.random.uniform(shape=(384, 384), ctx=ctx) / 384
    timings = []
    for _ in range(5):  # the fastest of five: a loaded machine only lengthens the chain
        start = time.perf_counter()
        a.dot(a).wait_to_read()
        timings.append(time.perf_counter() - start)
    one = max(min(timings), 1e-5)
    previous = a
    for _ in range(int(seconds / one) + 1):
        previous, a = a, a.dot(a) + 1e-4
    return previous, a


def check_last_step(previous, last):
    p = previous.asnumpy().astype(onp.float64)
    onp.testing.assert_allclose(last.asnumpy(), p @ p + 1e-4, rtol=1e-4)


def test_a_wait_releases_the_gil():
    _, result = long_computation(mx.cpu(0), 1.0)
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    thread = threading.Thread(target=count)
    thread.start()
    before = counted[0]
    result.wait_to_read()
    during = counted[0] - before
    stop.set()
    thread.join()
    assert during > 1000


def seconds_until_ctrl_c_stops(wait):
    """Runs `wait` with Ctrl-C (SIGINT) sent 0.3 s in; the seconds until it
    raised KeyboardInterrupt. A wait that returns before the signal fails
    the test, not the run."""
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    start = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            wait()
    finally:
        timer.cancel()
        timer.join()
    return time.perf_counter() - start


def test_ctrl_c_interrupts_a_wait_and_loses_nothing():
    previous, result = long_computation(mx.cpu(0), 4.0)
    # Interrupted while the chain still ran (it takes about 4 s).
    assert seconds_until_ctrl_c_stops(result.wait_to_read) < 2.5
    check_last_step(previous, result)  # the work went on, and is right


def test_ctrl_c_interrupts_waitall():
    previous, result = long_computation(mx.cpu(0), 4.0)
    assert seconds_until_ctrl_c_stops(nd.waitall) < 2.5
    nd.waitall()
    check_last_step(previous, result)


def test_waits_from_other_threads():
    results = []

    def worker(ctx):
        a = nd.ones((64, 64), ctx=ctx)
        results.append(float(a.dot(a).sum().asscalar()))

    threads = [threading.Thread(target=worker, args=(ctx,))
               for ctx in (mx.cpu(0), mx.cpu(1), mx.gpu(0), mx.gpu(1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [64.0 * 64 * 64] * 4


def test_an_error_inside_an_operation_surfaces_as_its_own_class():
    # A timing-only modelled GPU times its kernels without running them: the
    # copy to the host fails inside the engine with NotComputedError, stored
    # on the array and raised where Python reads it.
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent("""
        import tagflow as mx
        from tagflow import nd
        x = nd.ones((4, 4), ctx=mx.gpu(0))
        y = nd.dot(x, x) + 1
        try:
            y.asnumpy()
        except mx.NotComputedError as err:
            print(type(err).__name__, isinstance(err, mx.MXNetError))
            print(err)
    """)
    env = dict(os.environ, TAGFLOW_SIM_GPUS="1:h100-sxm:timing")
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60, env=env)
    assert run.returncode == 0, run.stderr
    first, message = run.stdout.split("\n", 1)
    assert first == "NotComputedError True"
    assert "gpu(0)" in message
