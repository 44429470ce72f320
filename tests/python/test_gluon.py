"""tagflow.gluon: blocks (the library's and Python subclasses), parameters,
files, losses, Trainer and split_and_load, against NumPy references."""

import numpy as onp
import pytest

import tagflow as mx
from tagflow import autograd, gluon, nd, np, npx
from tagflow.gluon import nn


def dense_reference(x, w, b):
    return x.astype(onp.float64) @ w.astype(onp.float64).T + b


def test_dense_on_a_gpu_matches_numpy_and_names_its_parameters():
    net = nn.Sequential()
    net.add(nn.Dense(3, activation="relu"), nn.Dense(2))
    net.initialize(ctx=mx.gpu(0))
    x = onp.random.default_rng(0).normal(size=(4, 5)).astype(onp.float32)
    y = net(nd.array(x, ctx=mx.gpu(0)))
    assert y.context == mx.gpu(0) and y.shape == (4, 2)
    w0, b0 = net[0].weight.data().asnumpy(), net[0].bias.data().asnumpy()
    w1, b1 = net[1].weight.data().asnumpy(), net[1].bias.data().asnumpy()
    expected = dense_reference(onp.maximum(dense_reference(x, w0, b0), 0), w1, b1)
    onp.testing.assert_allclose(y.asnumpy(), expected, rtol=1e-5, atol=1e-6)
    names = net.collect_params().keys()
    assert len(names) == 4 and all(n.endswith(("_weight", "_bias")) for n in names)
    assert net[0].weight.data().context == mx.gpu(0)
    assert "Dense(5 -> 3, Activation(relu))" in repr(net)


class TwoLayers(gluon.Block):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Dense(8, activation="tanh")
        self.scale = gluon.Parameter("scale", shape=(1,), init=mx.init.One())
        self.output = nn.Dense(1)

    def forward(self, x):
        return self.output(self.hidden(x)) * self.scale.data(x.context)


def test_a_python_block_trains_inside_a_sequential_on_two_devices():
    devices = [mx.cpu(0), mx.gpu(1)]
    net = nn.Sequential()
    net.add(TwoLayers())          # held only by the Sequential from here on
    net.initialize(init=mx.init.Xavier(), ctx=devices)
    params = net.collect_params()
    assert any(name.endswith("_scale") for name in params.keys())
    rng = onp.random.default_rng(1)
    x = rng.uniform(-1, 1, size=(64, 3)).astype(onp.float32)
    target = (x.sum(axis=1, keepdims=True) * 0.5).astype(onp.float32)
    trainer = gluon.Trainer(params, "sgd", {"learning_rate": 0.1})
    loss_fn = gluon.loss.L2Loss()
    first = last = None
    for step in range(60):
        xs = gluon.utils.split_and_load(nd.array(x), devices)
        ts = gluon.utils.split_and_load(nd.array(target), devices)
        with autograd.record():
            losses = [loss_fn(net(a), t) for a, t in zip(xs, ts)]
        for l in losses:
            l.backward()
        trainer.step(64)
        total = sum(float(l.sum().asscalar()) for l in losses) / 64
        first = total if first is None else first
        last = total
    assert last < 0.2 * first
    # The copies on both devices stay equal.
    for p in params.values():
        a, b = [d.asnumpy() for d in p.list_data()]
        onp.testing.assert_allclose(a, b, rtol=1e-6)


def test_save_and_load_into_a_network_never_initialized(tmp_path):
    def lenet():
        net = nn.Sequential()
        net.add(nn.Conv2D(channels=6, kernel_size=5, activation="relu"),
                nn.MaxPool2D(pool_size=2, strides=2),
                nn.Flatten(), nn.Dense(10))
        return net

    net = lenet()
    net.initialize(ctx=mx.cpu(0))
    x = nd.random.uniform(shape=(2, 1, 28, 28))
    expected = net(x).asnumpy()
    net.save_parameters(str(tmp_path / "net.params"))
    fresh = lenet()
    fresh.load_parameters(str(tmp_path / "net.params"), ctx=mx.gpu(1))
    onp.testing.assert_allclose(fresh(x.copyto(mx.gpu(1))).asnumpy(), expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(mx.FileError):
        fresh.load_parameters(str(tmp_path / "missing.params"))
    other = nn.Sequential()
    other.add(nn.Dense(3))
    with pytest.raises(mx.FileError) as caught:
        other.load_parameters(str(tmp_path / "net.params"))
    # Another network: its counts and the names that differ, not a shape.
    assert "the file holds 4 tensors and the network has 2 parameters" in str(caught.value)
    assert "'3.weight'" in str(caught.value)


def test_softmax_cross_entropy_matches_numpy():
    rng = onp.random.default_rng(2)
    logits = rng.normal(size=(5, 4)).astype(onp.float32)
    labels = onp.array([0, 3, 1, 2, 3], dtype=onp.int32)
    loss = gluon.loss.SoftmaxCrossEntropyLoss()(nd.array(logits), nd.array(labels))
    z = logits.astype(onp.float64)
    log_p = z - onp.log(onp.exp(z).sum(axis=1, keepdims=True))
    onp.testing.assert_allclose(loss.asnumpy(), -log_p[onp.arange(5), labels], rtol=1e-5)


def test_numpy_mode_gives_numpy_arrays_and_reset_ctx_moves_parameters():
    npx.set_np()
    try:
        net = nn.Sequential()
        net.add(nn.Dense(1))
        net.initialize(ctx=mx.gpu(0))
        out = net(np.ones((2, 3), ctx=mx.gpu(0)))
        assert isinstance(out, np.ndarray)
        assert isinstance(net[0].weight.data(), np.ndarray)
        net.collect_params().reset_ctx(mx.gpu(1))
        assert net[0].weight.data().ctx == mx.gpu(1)
    finally:
        npx.reset_np()
    assert type(nn.Dense(1)) is nn.Dense


def test_trainer_refuses_unknown_options_and_blocks_refuse_bad_inputs():
    net = nn.Sequential()
    net.add(nn.Dense(1))
    net.initialize()
    with pytest.raises(ValueError):
        gluon.Trainer(net.collect_params(), "sgd", {"learning_rte": 0.1})
    with pytest.raises(TypeError):
        net("not an array")
    with pytest.raises(mx.MXNetError):
        gluon.Trainer(net.collect_params(), "rmsprop")


def test_losses_match_numpy_and_refuse_what_they_do_not_compute():
    rng = onp.random.default_rng(3)
    pred = rng.normal(size=(4, 3)).astype(onp.float32)
    label = rng.normal(size=(4, 3)).astype(onp.float32)
    d = pred.astype(onp.float64) - label
    l2 = gluon.loss.L2Loss(weight=3.0)(nd.array(pred), nd.array(label))
    onp.testing.assert_allclose(l2.asnumpy(), 3.0 * 0.5 * (d ** 2).mean(axis=1), rtol=1e-5)
    l1 = gluon.loss.L1Loss()(nd.array(pred), nd.array(label))
    onp.testing.assert_allclose(l1.asnumpy(), onp.abs(d).mean(axis=1), rtol=1e-5)
    with pytest.raises(ValueError, match="only axis=-1"):
        gluon.loss.SoftmaxCrossEntropyLoss(from_logits=True, axis=1)
    with pytest.raises(ValueError, match="only axis=-1"):
        gluon.loss.SoftmaxCrossEntropyLoss(axis=0)
    with pytest.raises(ValueError, match="batch_axis"):
        gluon.loss.L2Loss(batch_axis=1)
    with pytest.raises(TypeError):
        gluon.loss.L1Loss(wieght=2)
    net = nn.Sequential()
    net.add(nn.Dense(1))
    net.initialize()
    gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1}, kvstore="device")


def test_the_model_zoo_gives_the_networks_tagflow_train_trains():
    net = gluon.model_zoo.lenet()
    net.initialize(init=mx.init.Xavier(), ctx=mx.gpu(0))
    out = net(nd.zeros((2, 1, 28, 28), ctx=mx.gpu(0)))
    assert out.shape == (2, 10) and out.context == mx.gpu(0)
    assert len(net.collect_params().keys()) == 10  # 5 layers, weight and bias each
    mlp = gluon.model_zoo.mlp(classes=3)
    mlp.initialize()
    assert mlp(nd.zeros((4, 1, 28, 28))).shape == (4, 3)
