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
    with mx.autograd.record():
        v = (x * w).sum() + (x * 2).sum()
        v2 = v * 2
    only_x = mx.autograd.grad([v, v2], [x])
    return {"gx": gx.asnumpy().tolist(), "gw": gw.asnumpy().tolist(),
            "single": [g.asnumpy().tolist() for g in single],
            "w_grad_left": w.grad.asnumpy().tolist(),
            "two_heads_only_x": [g.asnumpy().tolist() for g in only_x],
            "grads_after_only_x": [x.grad.asnumpy().tolist(), w.grad.asnumpy().tolist()]}


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


# --- The crash course and D2L's MXNet chapters, as their readers write them ---


@case
def crash_course_ndarray(mx):
    nd = mx.nd
    x = nd.array([[1, 2, 3], [5, 6, 7]])
    y = nd.ones((2, 3)) * 2
    out = {"shape": list(x.shape), "size": x.size, "dtype": np.dtype(x.dtype).name,
           "sum": (x + y).asnumpy().tolist(), "mul": (x * y).asnumpy().tolist(),
           "exp": y.exp().asnumpy().tolist(), "dot_T": nd.dot(x, y.T).asnumpy().tolist(),
           "full": nd.full((2, 2), 7).asnumpy().tolist(),
           "arange": nd.arange(2, 11, 3).asnumpy().tolist(),
           "mean_axis": x.mean(axis=1).asnumpy().tolist(),
           "sum_keepdims": x.sum(axis=0, keepdims=True).asnumpy().tolist(),
           "max": x.max().asscalar().item(), "norm": nd.norm(x).asscalar().item(),
           "row": x[1].asnumpy().tolist(), "range": x[:, 1:3].asnumpy().tolist(),
           "astype": np.dtype(x.astype("int32").dtype).name,
           "compare": (x == nd.array([[1, 0, 3], [0, 6, 0]])).asnumpy().tolist(),
           "clip": nd.clip(x, 2, 6).asnumpy().tolist(),
           "transpose": nd.transpose(x).asnumpy().tolist(),
           "concat0": nd.concat(x, y, dim=0).asnumpy().tolist(),
           "concat1": list(nd.concat(x, y, dim=1).shape)}
    x[0, 1] = 9
    x[1] = 0
    out["assigned"] = x.asnumpy().tolist()
    z = nd.zeros_like(x)
    before = id(z)
    z[:] = x + y
    out["in_place_keeps_the_array"] = id(z) == before
    out["in_place"] = z.asnumpy().tolist()
    return out


@case
def nd_slicing_with_steps_and_new_axes(mx):
    x = mx.nd.arange(60).reshape((3, 4, 5))
    out = {"every_second": x[::2].asnumpy().tolist(),
           "strided_middle": x[:, 1::2, ::3].asnumpy().tolist(),
           "strided_to_the_end": x[..., 1::3].asnumpy().tolist(),
           "new_axis": list(x[:, None].shape), "new_axis_first": list(x[None].shape),
           "new_axis_last": list(x[..., None].shape),
           "int_then_new_axis": x[1, None, 2:4].asnumpy().tolist()}
    w = mx.nd.arange(6)
    w.attach_grad()
    with mx.autograd.record():
        y = (w[::2] * w[1::2]).sum()
    y.backward()
    out["strided_grad"] = w.grad.asnumpy().tolist()
    z = mx.nd.zeros((4, 6))
    z[::2, 1::2] = 5
    out["strided_assign"] = z.asnumpy().tolist()
    return out


@case
def nd_save_and_load(mx):
    import os
    import tempfile
    nd = mx.nd
    x = nd.arange(4)
    y = nd.ones((2, 3))
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "x-file")
        nd.save(path, x)
        one = nd.load(path)
        nd.save(path, [x, y])
        x2, y2 = nd.load(path)
        nd.save(path, {"x": x, "y": y})
        mydict = nd.load(path)
    return {"one": [a.asnumpy().tolist() for a in one], "list": [x2.asnumpy().tolist(),
                                                                  y2.asnumpy().tolist()],
            "dict_keys": sorted(mydict), "dict_y": mydict["y"].asnumpy().tolist(),
            "types": [type(one).__name__, type(mydict).__name__]}


@case
def gluon_dense_without_flattening(mx):
    nd = mx.nd
    layer = mx.gluon.nn.Dense(3, flatten=False, in_units=4)
    layer.initialize()
    layer.weight.set_data(nd.array(_scores(20, 3, 4) - 0.5))
    layer.bias.set_data(nd.array([0.1, 0.2, -0.3]))
    x = nd.array(_scores(21, 10, 4).reshape(2, 5, 4))
    x.attach_grad()
    with mx.autograd.record():
        y = layer(x)
    y.backward()
    flat = mx.gluon.nn.Dense(3, in_units=20)
    flat.initialize(mx.init.Constant(0.1))
    return {"shape": list(y.shape), "y": y.asnumpy().tolist(),
            "weight_grad": layer.weight.grad().asnumpy().tolist(),
            "x_grad": x.grad.asnumpy().tolist(), "flattening": list(flat(x).shape)}


@case
def gluon_conv1d(mx):
    nd = mx.nd
    conv = mx.gluon.nn.Conv1D(4, kernel_size=3, padding=1, in_channels=2)
    conv.initialize()
    conv.weight.set_data(nd.array(_scores(22, 8, 3).reshape(4, 2, 3) - 0.5))
    conv.bias.set_data(nd.array([0.0, 0.1, -0.1, 0.2]))
    strided = mx.gluon.nn.Conv1D(2, 2, strides=2, in_channels=2, use_bias=False)
    strided.initialize(mx.init.Constant(0.5))
    x = nd.array(_scores(23, 4, 7).reshape(2, 2, 7))
    x.attach_grad()
    with mx.autograd.record():
        y = conv(x)
        z = (y * y).sum()
    z.backward()
    return {"y": y.asnumpy().tolist(), "x_grad": x.grad.asnumpy().tolist(),
            "weight_grad": conv.weight.grad().asnumpy().tolist(),
            "strided": strided(x).asnumpy().tolist(), "weight_shape": list(conv.weight.shape)}


@case
def gluon_collect_params_by_pattern(mx):
    net = mx.gluon.nn.Sequential()
    net.add(mx.gluon.nn.Dense(4, in_units=3), mx.gluon.nn.Dense(2, in_units=4))
    net.initialize()

    def kinds(params):
        return [name.rsplit("_", 1)[-1] for name in params.keys()]

    weights = net.collect_params(".*weight")
    trainer = mx.gluon.Trainer(weights, "sgd", {"learning_rate": 0.5})
    x = mx.nd.ones((2, 3))
    bias_before = net[0].bias.data().asnumpy().tolist()
    with mx.autograd.record():
        y = net(x).sum()
    y.backward()
    trainer.step(2)
    return {"all": kinds(net.collect_params()), "weights": kinds(weights),
            "biases": kinds(net.collect_params(".*bias")), "none": list(net.collect_params("x.*").keys()),
            "either": kinds(net.collect_params(".*weight|.*bias")),
            "bias_untouched": net[0].bias.data().asnumpy().tolist() == bias_before}


@case
def gluon_batchnorm_running_statistics(mx):
    nd = mx.nd
    norm = mx.gluon.nn.BatchNorm(in_channels=3)
    norm.initialize()
    rng = np.random.RandomState(24)
    outputs = []
    for scale in (1.0, 3.0):
        x = nd.array(rng.uniform(-1, 2, size=(4, 3, 2, 2)).astype("float32") * scale)
        with mx.autograd.record():
            y = norm(x)
        y.backward()
        outputs.append(y.asnumpy().ravel()[:6].tolist())
    predicting = norm(nd.ones((1, 3, 2, 2))).asnumpy().ravel().tolist()
    return {"running_mean": norm.running_mean.data().asnumpy().tolist(),
            "running_var": norm.running_var.data().asnumpy().tolist(),
            "training_outputs": outputs, "predicting": predicting}


def _synthetic_regression(seed, n):
    rng = np.random.RandomState(seed)
    X = rng.normal(0, 1, size=(n, 2)).astype("float32")
    y = (X @ np.array([2, -3.4], dtype="float32") + 4.2
         + rng.normal(0, 0.01, size=(n,)).astype("float32"))
    return X, y.astype("float32")


@case
def d2l_linear_regression_concise(mx):
    gluon, nd, autograd = mx.gluon, mx.nd, mx.autograd
    features, labels = _synthetic_regression(25, 100)
    dataset = gluon.data.ArrayDataset(nd.array(features), nd.array(labels))
    data_iter = gluon.data.DataLoader(dataset, batch_size=10, shuffle=False)
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Dense(1))
    net.initialize(mx.init.Constant(0.01))
    loss = gluon.loss.L2Loss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.03})
    epoch_losses = []
    for _ in range(3):
        for X, y in data_iter:
            with autograd.record():
                l = loss(net(X), y)
            l.backward()
            trainer.step(10)
        epoch_losses.append(loss(net(nd.array(features)), nd.array(labels)).mean().asscalar()
                            .item())
    return {"w": net[0].weight.data().asnumpy().tolist(),
            "b": net[0].bias.data().asnumpy().tolist(), "losses": epoch_losses}


@case
def d2l_softmax_regression_and_accuracy(mx):
    gluon, nd, autograd = mx.gluon, mx.nd, mx.autograd
    rng = np.random.RandomState(26)
    X = nd.array(rng.uniform(0, 1, size=(30, 1, 2, 3)).astype("float32"))
    y = nd.array(rng.randint(0, 4, size=(30,)).astype("float32"))
    net = gluon.nn.Sequential()
    net.add(gluon.nn.Flatten(), gluon.nn.Dense(4))
    net.initialize(mx.init.Constant(0.02))
    loss = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.5, "wd": 0.001})
    losses = []
    for i in range(0, 30, 10):
        with autograd.record():
            l = loss(net(X[i:i + 10]), y[i:i + 10])
        l.backward()
        trainer.step(10)
        losses.append(l.mean().asscalar().item())
    accuracy = (net(X).argmax(axis=1) == y).mean().asscalar().item()
    metric = mx.metric.Accuracy()
    metric.update(labels=[y], preds=[net(X)])
    return {"losses": losses, "accuracy": accuracy, "metric": list(metric.get()),
            "weight_sum": net[1].weight.data().sum().asscalar().item()}


@case
def d2l_custom_blocks_and_parameter_access(mx):
    nn, nd = mx.gluon.nn, mx.nd

    class MLP(nn.Block):
        def __init__(self, **kwargs):
            super(MLP, self).__init__(**kwargs)
            self.hidden = nn.Dense(4, activation="relu")
            self.output = nn.Dense(2)

        def forward(self, x):
            return self.output(self.hidden(x))

    class CenteredLayer(nn.Block):
        def forward(self, x):
            return x - x.mean()

    class MyDense(nn.Block):
        def __init__(self, units, in_units, **kwargs):
            super(MyDense, self).__init__(**kwargs)
            self.weight = self.params.get("weight", shape=(in_units, units))
            self.bias = self.params.get("bias", shape=(units,))

        def forward(self, x):
            linear = nd.dot(x, self.weight.data()) + self.bias.data()
            return nd.relu(linear)

    net = MLP()
    net.initialize(mx.init.Constant(0.1))
    x = nd.array(_scores(27, 2, 3))
    centered = CenteredLayer()
    dense = MyDense(units=3, in_units=2)
    dense.initialize(mx.init.Constant(0.5))
    seq = nn.Sequential()
    seq.add(nn.Dense(3, in_units=2), CenteredLayer())
    seq.initialize(mx.init.Constant(1.0))
    return {"mlp": net(x).asnumpy().tolist(),
            "hidden_weight": net.hidden.weight.data().asnumpy().tolist(),
            "centered": centered(nd.array([1, 2, 3, 4, 5])).asnumpy().tolist(),
            "mydense": dense(nd.array([[1, -2], [3, 4]])).asnumpy().tolist(),
            "mydense_weight_shape": list(dense.weight.data().shape),
            "seq_mean": seq(nd.array([[1, 2]])).mean().asscalar().item(),
            "seq_first_bias": seq[0].bias.data().asnumpy().tolist()}


@case
def autograd_basics_and_head_gradients(mx):
    nd, autograd = mx.nd, mx.autograd
    x = nd.arange(4).reshape((4, 1))
    x.attach_grad()
    with autograd.record():
        y = 2 * nd.dot(x.T, x)
    y.backward()
    out = {"dot_grad": x.grad.asnumpy().tolist()}
    with autograd.record():
        y = x * x
    y.backward(nd.array([[1], [0.5], [0.1], [2]]))
    out["head_grad"] = x.grad.asnumpy().tolist()
    with autograd.record():
        y = x * x
        u = y.detach()
        z = u * x
    z.backward()
    out["detach"] = x.grad.asnumpy().tolist()

    def f(a):
        b = a * 2
        while b.norm().asscalar() < 1000:
            b = b * 2
        if b.sum().asscalar() > 0:
            c = b
        else:
            c = 100 * b
        return c

    a = nd.array([0.7, -0.3])
    a.attach_grad()
    with autograd.record():
        c = f(a)
    c.backward()
    out["control_flow"] = (a.grad / c * a).asnumpy().tolist()
    out["is_recording"] = [autograd.is_recording(), autograd.is_training()]
    with autograd.record():
        out["inside"] = [autograd.is_recording(), autograd.is_training()]
    with autograd.record(train_mode=False):
        out["predict_mode"] = [autograd.is_recording(), autograd.is_training()]
    return out


@case
def gluon_losses(mx):
    nd, loss = mx.nd, mx.gluon.loss
    pred = nd.array(_scores(28, 4, 3) * 2 - 1)
    label = nd.array(_scores(29, 4, 3))
    binary = nd.array([[1, 0, 1], [0, 0, 1], [1, 1, 0], [0, 1, 0]])
    weight = nd.array([[1], [2], [0.5], [1]])
    return {"l2": loss.L2Loss()(pred, label).asnumpy().tolist(),
            "l1": loss.L1Loss()(pred, label).asnumpy().tolist(),
            "l2_weighted": loss.L2Loss()(pred, label, weight).asnumpy().tolist(),
            "sigmoid_bce": loss.SigmoidBinaryCrossEntropyLoss()(pred, binary).asnumpy().tolist(),
            "sigmoid_bce_probs": loss.SigmoidBinaryCrossEntropyLoss(from_sigmoid=True)(
                nd.sigmoid(pred), binary).asnumpy().tolist(),
            "softmax_ce": loss.SoftmaxCrossEntropyLoss()(
                pred, nd.array([0, 2, 1, 1])).asnumpy().tolist()}


@case
def nd_reductions_and_math(mx):
    nd = mx.nd
    x = nd.array(_scores(30, 3, 4) * 4 - 2)
    return {"sum_axes": x.sum(axis=(0, 1)).asscalar().item(),
            "mean_0": nd.mean(x, axis=0).asnumpy().tolist(),
            "max_1": nd.max(x, axis=1).asnumpy().tolist(),
            "min": x.min().asscalar().item(),
            "abs": nd.abs(x).asnumpy().tolist(), "square": nd.square(x).asnumpy().tolist(),
            "sqrt": nd.sqrt(nd.abs(x)).asnumpy().tolist(),
            "power": (nd.abs(x) ** 1.5).asnumpy().tolist(),
            "tanh": nd.tanh(x).asnumpy().tolist(), "sigmoid": nd.sigmoid(x).asnumpy().tolist(),
            "relu": nd.relu(x).asnumpy().tolist(),
            "softmax": nd.softmax(x).asnumpy().tolist(),
            "softmax_axis0": nd.softmax(x, axis=0).asnumpy().tolist(),
            "log_softmax": nd.log_softmax(x).asnumpy().tolist(),
            "maximum": nd.maximum(x, 0.5).asnumpy().tolist(),
            "minimum": nd.minimum(x, nd.zeros((3, 4))).asnumpy().tolist(),
            "one_hot": nd.one_hot(nd.array([1, 0, 3]), 4).asnumpy().tolist(),
            "where": nd.where(x > 0, x, nd.zeros_like(x)).asnumpy().tolist(),
            "negative": (-x).asnumpy().tolist(), "rdiv": (1 / (nd.abs(x) + 1)).asnumpy().tolist(),
            "rsub": (3 - x).asnumpy().tolist()}


@case
def nd_matrix_products(mx):
    nd = mx.nd
    a = nd.array(_scores(31, 6, 4).reshape(2, 3, 4))
    b = nd.array(_scores(32, 8, 5).reshape(2, 4, 5))
    m = nd.array(_scores(33, 3, 4))
    return {"batch_dot": nd.batch_dot(a, b).asnumpy().tolist(),
            "batch_dot_T": nd.batch_dot(a, a, transpose_b=True).asnumpy().tolist(),
            "dot_transpose_a": nd.dot(m, m, transpose_a=True).asnumpy().tolist(),
            "dot_vector": nd.dot(m, nd.array([1, 2, 3, 4])).asnumpy().tolist(),
            "transpose_axes": list(nd.transpose(a, axes=(2, 0, 1)).shape),
            "swap": nd.transpose(a, axes=(0, 2, 1)).asnumpy().tolist()}


@case
def gluon_trainer_rates_and_weight_decay(mx):
    nd = mx.nd
    net = mx.gluon.nn.Dense(1, in_units=2)
    net.initialize(mx.init.Constant(1.0))
    trainer = mx.gluon.Trainer(net.collect_params(), "sgd",
                               {"learning_rate": 0.1, "wd": 0.1, "momentum": 0.5})
    x = nd.array([[1, 2], [3, -1]])
    y = nd.array([1, 0])
    loss = mx.gluon.loss.L2Loss()
    rates, weights = [], []
    for step in range(4):
        if step == 2:
            trainer.set_learning_rate(0.05)
        with mx.autograd.record():
            l = loss(net(x), y)
        l.backward()
        trainer.step(2)
        rates.append(trainer.learning_rate)
        weights.append(net.weight.data().asnumpy().ravel().tolist()
                       + net.bias.data().asnumpy().tolist())
    return {"rates": rates, "weights": weights}


@case
def gluon_hybrid_blocks_run_as_written(mx):
    nn, nd = mx.gluon.nn, mx.nd

    class Net(nn.HybridBlock):
        def __init__(self, **kwargs):
            super(Net, self).__init__(**kwargs)
            self.hidden = nn.Dense(3, in_units=2)

        def hybrid_forward(self, F, x):
            return F.relu(self.hidden(x)) + 1

    import warnings
    net = Net()
    net.initialize(mx.init.Constant(0.3))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        net.hybridize()
    seq = nn.HybridSequential()
    seq.add(nn.Dense(2, in_units=3, activation="tanh"), nn.Dense(1, in_units=2))
    seq.initialize(mx.init.Constant(0.2))
    x = nd.array([[1, -2], [0.5, 0.25]])
    return {"net": net(x).asnumpy().tolist(), "seq": seq(net(x)).asnumpy().tolist(),
            "slice": len(seq[:1]), "length": len(seq)}


@case
def gluon_data_pipeline(mx):
    gluon, nd = mx.gluon, mx.nd
    X = np.arange(20, dtype="float32").reshape(10, 2)
    y = np.arange(10, dtype="float32")
    dataset = gluon.data.ArrayDataset(X, y)
    first = dataset[3]
    loader = gluon.data.DataLoader(dataset, batch_size=4, shuffle=False)
    batches = [(list(a.shape), b.asnumpy().tolist()) for a, b in loader]
    dropping = gluon.data.DataLoader(dataset, batch_size=4, last_batch="discard")
    transformed = gluon.data.ArrayDataset(nd.array(X), nd.array(y)).transform_first(
        lambda a: a * 2)
    return {"len": len(dataset), "first": [np.asarray(first[0]).tolist(), float(first[1])],
            "batches": batches, "discard": len(list(dropping)),
            "transformed": transformed[1][0].asnumpy().tolist(), "loader_len": len(loader)}


@case
def gluon_split_and_load_across_contexts(mx):
    nd = mx.nd
    ctx = [mx.cpu(0), mx.cpu(1)]
    data = nd.arange(12).reshape((6, 2))
    parts = mx.gluon.utils.split_and_load(data, ctx)
    net = mx.gluon.nn.Dense(1, in_units=2)
    net.initialize(mx.init.Constant(0.5), ctx=ctx)
    outs = [net(part) for part in parts]
    return {"parts": [p.asnumpy().tolist() for p in parts],
            "contexts": [str(p.context) for p in parts],
            "outs": [o.asnumpy().tolist() for o in outs],
            "copies": len(net.weight.list_data())}


@case
def nd_contexts_and_copies(mx):
    nd = mx.nd
    x = nd.ones((2, 3), ctx=mx.cpu(0))
    y = x.copyto(mx.cpu(1))
    z = x.as_in_context(mx.cpu(1))
    w = x.copy()
    w[0, 0] = 5
    return {"ctx": [str(x.context), str(y.context), str(z.context)],
            "same": x.as_in_context(mx.cpu(0)) is x, "copy_independent": x[0, 0].asscalar().item(),
            "y": (y * 2).asnumpy().tolist(), "cpu_ctx": str(mx.cpu())}


@case
def np_interface_d2l_style(mx):
    np_, npx = mx.np, mx.npx
    npx.set_np()
    try:
        x = np_.arange(12).reshape(3, 4)
        y = np_.array([[2.0, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])
        out = {"add": (x + y).asnumpy().tolist(), "exp_sum": float(np_.exp(y).sum()),
               "concat": np_.concatenate([x, y], axis=0).shape,
               "eq": (x == y).asnumpy().tolist(), "sum": float(x.sum()),
               "broadcast": (np_.arange(3).reshape(3, 1) + np_.arange(2).reshape(1, 2))
               .asnumpy().tolist(),
               "slice": x[1:3].asnumpy().tolist(), "dot": float(np_.dot(y[0], y[1])),
               "matmul": np_.dot(x, y.T).asnumpy().tolist(),
               "mean_axis": x.mean(axis=0).asnumpy().tolist(),
               "relu": npx.relu(np_.array([-1.0, 2.0])).asnumpy().tolist()}
        out["concat"] = list(out["concat"])
        a = np_.arange(4.0)
        a.attach_grad()
        with mx.autograd.record():
            b = 2 * np_.dot(a, a)
        b.backward()
        out["grad"] = a.grad.asnumpy().tolist()
    finally:
        npx.reset_np()
    return out
