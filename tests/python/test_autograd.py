"""tagflow.autograd against gradients worked out in NumPy (float64) and
finite differences."""

import numpy as onp
import pytest

import tagflow as mx
from tagflow import autograd, nd, np


@pytest.mark.parametrize("ctx", [mx.cpu(0), mx.gpu(1)], ids=str)
def test_gradient_of_a_small_network_matches_numpy(ctx):
    rng = onp.random.default_rng(0)
    x = rng.normal(size=(5, 4)).astype(onp.float32)
    w = rng.normal(size=(4, 3)).astype(onp.float32)
    W = nd.array(w, ctx=ctx)
    W.attach_grad()
    X = nd.array(x, ctx=ctx)
    with autograd.record():
        assert autograd.is_recording() and autograd.is_training()
        loss = (nd.dot(X, W).tanh() ** 2).sum()
    loss.backward()
    h = x.astype(onp.float64) @ w.astype(onp.float64)
    expected = x.astype(onp.float64).T @ (2 * onp.tanh(h) * (1 - onp.tanh(h) ** 2))
    onp.testing.assert_allclose(W.grad.asnumpy(), expected, rtol=1e-4, atol=1e-5)
    assert not autograd.is_recording()


def test_gradient_matches_finite_differences():
    rng = onp.random.default_rng(1)
    x0 = rng.uniform(0.5, 1.5, size=(6,))

    def f(v):
        return float(((v * v).exp() / (v + 1)).sum().asscalar())

    x = nd.array(x0)
    x.attach_grad()
    with autograd.record():
        y = ((x * x).exp() / (x + 1)).sum()
    y.backward()
    eps = 1e-2
    numeric = []
    for i in range(6):
        up, down = x0.copy(), x0.copy()
        up[i] += eps
        down[i] -= eps
        numeric.append((f(nd.array(up)) - f(nd.array(down))) / (2 * eps))
    onp.testing.assert_allclose(x.grad.asnumpy(), numeric, rtol=2e-3)


def test_grad_req_add_accumulates_and_pause_stops_recording():
    x = nd.array([1.0, 2.0, 3.0])
    x.attach_grad(grad_req="add")
    for _ in range(3):
        with autograd.record():
            y = (x * x).sum()
            with autograd.pause():
                assert not autograd.is_recording()
                ignored = x * 100  # not recorded
        y.backward()
    onp.testing.assert_allclose(x.grad.asnumpy(), 3 * 2 * onp.array([1.0, 2.0, 3.0]))
    assert ignored.asnumpy()[0] == 100


def test_backward_of_several_heads_sums_them():
    x = np.array([1.0, -2.0])
    x.attach_grad()
    with autograd.record():
        a = (x * 3).sum()
        b = (x * x).sum()
    autograd.backward([a, b])
    onp.testing.assert_allclose(x.grad.asnumpy(), 3 + 2 * onp.array([1.0, -2.0]))


def test_head_gradient_and_modes():
    x = nd.array([1.0, 2.0])
    x.attach_grad()
    with autograd.record():
        y = x * 5
    y.backward(nd.array([10.0, 0.5]))
    onp.testing.assert_allclose(x.grad.asnumpy(), [50.0, 2.5])
    with autograd.record(train_mode=False):
        assert autograd.is_recording() and not autograd.is_training()
    with autograd.train_mode():
        assert autograd.is_training() and not autograd.is_recording()
    with autograd.predict_mode():
        assert not autograd.is_training()
    assert nd.ones(2).grad is None
