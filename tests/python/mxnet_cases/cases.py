"""Short pieces of ordinary MXNet 1.x code, each a function of the module it
runs on (`mx`: ``import mxnet as mx`` or ``import tagflow as mx``) returning
what it computed as plain numbers.

generate_expected.py runs them on MXNet 1.9.1 and writes mxnet_1_9_1.json;
test_mxnet_cases.py runs them on tagflow and compares. Written as MXNet
users write them: nothing here may depend on which module it runs on."""

import numpy as np

CASES = {}


def case(function):
    CASES[function.__name__] = function
    return function


def _scores(seed, rows, classes):
    rng = np.random.RandomState(seed)
    return rng.uniform(0.01, 1, size=(rows, classes)).astype("float32")


@case
def metric_accuracy(mx):
    acc = mx.metric.Accuracy()
    preds = [mx.nd.array(_scores(1, 8, 3)), mx.nd.array(_scores(2, 8, 3))]
    labels = [mx.nd.array([0, 1, 2, 0, 1, 2, 0, 1]), mx.nd.array([2, 2, 1, 1, 0, 0, 1, 2])]
    acc.update(labels=labels[0], preds=preds[0])
    first = acc.get()[1]
    acc.update(labels=labels[1:], preds=preds[1:])
    name, value = acc.get()
    acc.reset()
    return {"name": name, "first": first, "value": value, "num_inst": 16,
            "after_reset_is_nan": bool(np.isnan(acc.get()[1]))}


@case
def metric_top_k_and_composite(mx):
    composite = mx.metric.CompositeEvalMetric()
    composite.add(mx.metric.Accuracy())
    composite.add(mx.metric.TopKAccuracy(top_k=2))
    composite.add(mx.metric.create("ce"))
    scores = _scores(3, 10, 4)
    probs = scores / scores.sum(axis=1, keepdims=True)
    label = mx.nd.array([0, 1, 2, 3, 0, 1, 2, 3, 3, 3])
    composite.update([label], [mx.nd.array(probs)])
    names, values = composite.get()
    return {"names": names, "values": values,
            "name_value": [list(p) for p in composite.get_name_value()]}


@case
def metric_regression(mx):
    rng = np.random.RandomState(4)
    out = {}
    for name in ("mae", "mse", "rmse"):
        metric = mx.metric.create(name)
        for _ in range(3):
            label = rng.uniform(-1, 1, size=(6,)).astype("float32")
            pred = rng.uniform(-1, 1, size=(6, 1)).astype("float32")
            metric.update([mx.nd.array(label)], [mx.nd.array(pred)])
        out[name] = list(metric.get())
    return out


@case
def metric_f1_perplexity_loss_pearson(mx):
    rng = np.random.RandomState(5)
    out = {}
    for average in ("macro", "micro"):
        f1 = mx.metric.F1(average=average)
        for _ in range(3):
            pred = mx.nd.array(rng.uniform(0, 1, size=(12, 2)).astype("float32"))
            label = mx.nd.array(rng.randint(0, 2, size=(12,)).astype("float32"))
            f1.update([label], [pred])
        out["f1_" + average] = list(f1.get())
    perplexity = mx.metric.Perplexity(ignore_label=None)
    scores = _scores(6, 7, 5)
    perplexity.update([mx.nd.array([0, 1, 2, 3, 4, 0, 1])],
                      [mx.nd.array(scores / scores.sum(axis=1, keepdims=True))])
    out["perplexity"] = list(perplexity.get())
    ignoring = mx.metric.Perplexity(ignore_label=1)
    ignoring.update([mx.nd.array([0, 1, 2, 3, 4, 0, 1])],
                    [mx.nd.array(scores / scores.sum(axis=1, keepdims=True))])
    out["perplexity_ignoring"] = list(ignoring.get())
    loss = mx.metric.Loss()
    loss.update(None, [mx.nd.array([0.5, 1.5, 2.0]), mx.nd.array([1.0])])
    out["loss"] = list(loss.get())
    pearson = mx.metric.PearsonCorrelation()
    pearson.update([mx.nd.array(rng.uniform(size=(9,)).astype("float32"))],
                   [mx.nd.array(rng.uniform(size=(9,)).astype("float32"))])
    out["pearsonr"] = list(pearson.get())

    def absolute_error(label, pred):
        return float(np.abs(label - pred).sum()), label.size

    custom = mx.metric.np(absolute_error)
    custom.update([mx.nd.array([1, 2, 3])], [mx.nd.array([1.5, 2, 2])])
    out["custom"] = list(custom.get())
    return out


@case
def lr_schedulers(mx):
    s = mx.lr_scheduler
    schedules = {
        "factor": s.FactorScheduler(step=3, factor=0.5, base_lr=1.0),
        "factor_floor": s.FactorScheduler(step=2, factor=0.1, stop_factor_lr=1e-3, base_lr=1.0),
        "factor_warmup": s.FactorScheduler(step=4, factor=0.9, base_lr=0.5, warmup_steps=3,
                                           warmup_begin_lr=0.1),
        "multifactor": s.MultiFactorScheduler(step=[2, 5, 9], factor=0.3, base_lr=2.0),
        "poly": s.PolyScheduler(max_update=12, base_lr=1.0, pwr=2, final_lr=0.1),
        "poly_warmup": s.PolyScheduler(max_update=12, base_lr=1.0, pwr=1, warmup_steps=4,
                                       warmup_begin_lr=0.2, warmup_mode="constant"),
        "cosine": s.CosineScheduler(max_update=10, base_lr=0.8, final_lr=0.05),
        "cosine_warmup": s.CosineScheduler(max_update=10, base_lr=0.8, warmup_steps=2),
    }
    return {name: [schedule(i) for i in range(1, 16)] for name, schedule in schedules.items()}


def _train(mx, optimizer, optimizer_params, steps=6):
    """A Dense layer of known weights trained on a fixed batch; its weights
    after each step."""
    rng = np.random.RandomState(7)
    x = mx.nd.array(rng.uniform(-1, 1, size=(4, 3)).astype("float32"))
    y = mx.nd.array(np.array([0, 1, 1, 0], dtype="float32"))
    net = mx.gluon.nn.Dense(2, in_units=3)
    net.initialize()
    net.weight.set_data(mx.nd.array(rng.uniform(-0.5, 0.5, size=(2, 3)).astype("float32")))
    net.bias.set_data(mx.nd.array(np.array([0.1, -0.1], dtype="float32")))
    loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = mx.gluon.Trainer(net.collect_params(), optimizer, optimizer_params)
    weights, rates = [], []
    for _ in range(steps):
        with mx.autograd.record():
            l = loss(net(x), y)
        l.backward()
        trainer.step(4)
        weights.append(net.weight.data().asnumpy().ravel().tolist())
        rates.append(trainer.learning_rate)
    return {"weights": weights, "rates": rates}


@case
def trainer_with_schedule(mx):
    schedule = mx.lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=0.4)
    return _train(mx, "sgd", {"learning_rate": 0.4, "lr_scheduler": schedule})


@case
def trainer_with_optimizer_objects(mx):
    out = {}
    out["sgd_momentum"] = _train(mx, mx.optimizer.SGD(learning_rate=0.2, momentum=0.9, wd=0.01),
                                 None)
    out["nag"] = _train(mx, "nag", {"learning_rate": 0.2, "momentum": 0.9})
    out["adam"] = _train(mx, mx.optimizer.create("adam", learning_rate=0.05), None)
    out["sgd_momentum_schedule"] = _train(
        mx, mx.optimizer.SGD(learning_rate=0.3, momentum=0.8,
                             lr_scheduler=mx.lr_scheduler.CosineScheduler(max_update=6,
                                                                          base_lr=0.3)), None)
    return out


@case
def nd_broadcast_elemwise_and_shapes(mx):
    nd = mx.nd
    a = nd.array([[1, 2, 3], [4, 5, 6]])
    b = nd.array([[10], [20]])
    c = nd.array([2, 0.5, 4])
    out = {}
    for name in ("broadcast_add", "broadcast_sub", "broadcast_minus", "broadcast_plus",
                 "broadcast_mul", "broadcast_div", "broadcast_maximum", "broadcast_minimum",
                 "broadcast_equal", "broadcast_not_equal", "broadcast_greater",
                 "broadcast_greater_equal", "broadcast_lesser", "broadcast_lesser_equal"):
        out[name] = getattr(nd, name)(a, b).asnumpy().tolist()
    out["broadcast_power"] = nd.broadcast_power(a, c).asnumpy().tolist()
    out["broadcast_equal_row"] = nd.broadcast_equal(a, nd.array([1, 5, 0])).asnumpy().tolist()
    for name in ("elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div"):
        out[name] = getattr(nd, name)(a, a * 2 + 1).asnumpy().tolist()
    out["broadcast_to"] = nd.broadcast_to(b, shape=(2, 4)).asnumpy().tolist()
    out["broadcast_to_zero"] = nd.broadcast_to(c.reshape((1, 3)), shape=(2, 0)).asnumpy().tolist()
    out["broadcast_like"] = nd.broadcast_like(b, a).asnumpy().tolist()
    out["broadcast_axis"] = nd.broadcast_axis(b, axis=1, size=3).asnumpy().tolist()
    out["expand_dims"] = list(nd.expand_dims(c, axis=0).shape)
    out["squeeze"] = list(nd.squeeze(nd.ones((1, 3, 1))).shape)
    out["flatten"] = list(nd.flatten(nd.ones((2, 3, 4))).shape)
    out["sign"] = nd.sign(nd.array([-2, 0, 3.5])).asnumpy().tolist()
    out["stack"] = nd.stack(a, a * 10, axis=1).asnumpy().tolist()
    out["linspace"] = nd.linspace(0, 1, 5).asnumpy().tolist()
    out["linspace_open"] = nd.linspace(-1, 1, 4, endpoint=False).asnumpy().tolist()
    x = nd.array([[1], [2]])
    x.attach_grad()
    with mx.autograd.record():
        y = nd.broadcast_to(x, shape=(2, 3)) * a
    y.backward()
    out["broadcast_to_grad"] = x.grad.asnumpy().tolist()
    return out


@case
def nd_argmax_is_float32_as_the_crash_course_uses_it(mx):
    nd = mx.nd
    output = nd.array(_scores(8, 6, 4))
    label = nd.array([0, 1, 2, 3, 0, 1], dtype="int32")
    accuracy = (output.argmax(axis=1) == label.astype("float32")).mean().asscalar()
    indices = nd.argmax(output, axis=1)
    smallest = nd.argmin(output, axis=0)
    return {"accuracy": float(accuracy), "argmax": indices.asnumpy().tolist(),
            "argmax_dtype": np.dtype(indices.dtype).name,
            "argmin": smallest.asnumpy().tolist(),
            "argmin_dtype": np.dtype(smallest.dtype).name,
            "method_dtype": np.dtype(output.argmax(axis=0).dtype).name,
            "keepdims": list(nd.argmax(output, axis=1, keepdims=True).shape)}


@case
def gluon_from_logits_and_leaky_relu(mx):
    nd = mx.nd
    scores = _scores(9, 5, 4)
    log_probs = nd.log_softmax(nd.array(scores))
    label = nd.array([0, 3, 1, 2, 3])
    loss = mx.gluon.loss.SoftmaxCrossEntropyLoss(from_logits=True)
    plain = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    dense_label = nd.one_hot(label, 4) * 0.8 + 0.05
    dense = mx.gluon.loss.SoftmaxCrossEntropyLoss(from_logits=True, sparse_label=False)
    leaky = mx.gluon.nn.LeakyReLU(0.1)
    x = nd.array([[-2, -0.5, 0.5, 3]])
    x.attach_grad()
    with mx.autograd.record():
        y = leaky(x)
    y.backward()
    net = mx.gluon.nn.Sequential()
    net.add(mx.gluon.nn.Dense(3, in_units=4), mx.gluon.nn.LeakyReLU(0.2))
    net.initialize()
    net[0].weight.set_data(nd.array(_scores(10, 3, 4) - 0.5))
    net[0].bias.set_data(nd.array([0.1, -0.2, 0.3]))
    return {"from_logits": loss(log_probs, label).asnumpy().tolist(),
            "same_as_scores": plain(nd.array(scores), label).asnumpy().tolist(),
            "dense_label": dense(log_probs, dense_label).asnumpy().tolist(),
            "leaky": y.asnumpy().tolist(), "leaky_grad": x.grad.asnumpy().tolist(),
            "in_sequential": net(nd.array(_scores(11, 2, 4))).asnumpy().tolist()}


@case
def nd_pick_and_dropout(mx):
    nd = mx.nd
    data = nd.array(_scores(12, 4, 3))
    index = nd.array([0, 2, 1, 2])
    x = nd.array(_scores(13, 2, 3))
    x.attach_grad()
    with mx.autograd.record():
        y = nd.pick(x, nd.array([1, 0, 2]), axis=0)
    y.backward()
    dropped = nd.Dropout(nd.ones((3, 4)), p=0.5)  # not training: the identity
    return {"pick": nd.pick(data, index).asnumpy().tolist(),
            "pick_keepdims": nd.pick(data, index, axis=1, keepdims=True).asnumpy().tolist(),
            "pick_axis0": nd.pick(data, nd.array([3, 0, 1]), axis=0).asnumpy().tolist(),
            "pick_clip": nd.pick(data, nd.array([-1, 5, 1, 0])).asnumpy().tolist(),
            "pick_wrap": nd.pick(data, nd.array([-1, 5, 1, 4]), mode="wrap").asnumpy().tolist(),
            "pick_grad": x.grad.asnumpy().tolist(),
            "dropout_predicting": dropped.asnumpy().tolist()}


@case
def nd_reshape_special_values(mx):
    x = mx.nd.arange(24).reshape((2, 3, 4))
    out = {}
    for spec in [(4, -1), (0, -1), (-2,), (-3, 4), (0, -3), (-4, 1, 2, -2), (-4, -1, 1, 0, 0),
                 (2, -4, 3, 1, 4), (6, -1), (-1,), (0, 0, -1)]:
        out[str(spec)] = list(x.reshape(spec).shape)
    out["arguments"] = list(x.reshape(4, 6).shape)
    out["keyword"] = list(x.reshape(shape=(0, 12)).shape)
    out["reverse"] = list(mx.nd.ones((10, 5, 4)).reshape((-1, 0), reverse=True).shape)
    out["function"] = list(mx.nd.reshape(x, shape=(-3, -2)).shape)
    out["values"] = x.reshape((-3, 0)).asnumpy().tolist()
    return out


@case
def nd_indexing_on_any_axis(mx):
    nd = mx.nd
    x = nd.arange(24).reshape((2, 3, 4))
    out = {"column": x[:, 1].asnumpy().tolist(),
           "last_axis": x[:, :, 2].asnumpy().tolist(),
           "mixed": x[1, :, 1:3].asnumpy().tolist(),
           "ellipsis": x[..., 3].asnumpy().tolist(),
           "first_axis_view": x[1].asnumpy().tolist(),
           "range_middle": x[:, 1:3].asnumpy().tolist()}
    X = nd.ones((2, 2, 3, 4))
    X[:, :, :, 1:3] = 0
    out["assign_number"] = X.asnumpy().tolist()
    Y = nd.zeros((3, 4))
    Y[:, 2] = nd.array([1, 2, 3])
    Y[1:, 0] = 7
    out["assign_array"] = Y.asnumpy().tolist()
    return out


@case
def autograd_grad_leaves_the_grads(mx):
    nd = mx.nd
    x = nd.array([1.0, 2.0, 3.0])
    w = nd.array([0.5, -1.0, 2.0])
    x.attach_grad()
    w.attach_grad()
    with mx.autograd.record():
        y = (x * x * w).sum()
    gx, gw = mx.autograd.grad(y, [x, w], retain_graph=True)
    with mx.autograd.record():
        z = (x * w).sum() * 3
    single = mx.autograd.grad(z, w)
    return {"gx": gx.asnumpy().tolist(), "gw": gw.asnumpy().tolist(),
            "single": [g.asnumpy().tolist() for g in single],
            "w_grad_left": w.grad.asnumpy().tolist()}


@case
def nd_asscalar_is_a_numpy_scalar(mx):
    values = [mx.nd.array([1.5]).asscalar(), mx.nd.array([1, 2]).sum().asscalar(),
              mx.nd.array([3], dtype="int32").asscalar()]
    return {"types": [type(v).__name__ for v in values], "values": [float(v) for v in values]}


@case
def gluon_init_constant(mx):
    net = mx.gluon.nn.Dense(3, in_units=2)
    net.initialize(mx.init.Constant(0.25))
    layer = mx.gluon.nn.Dense(2, in_units=2)
    layer.initialize(init=mx.init.Constant(-1.5))
    return {"weight": net.weight.data().asnumpy().tolist(),
            "out": layer(mx.nd.array([[1.0, 2.0]])).asnumpy().tolist()}
