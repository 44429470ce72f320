"""MXNet 1.x code run with its import changed: the cases of
mxnet_cases/cases.py on tagflow, against what MXNet 1.9.1 computed for them
(mxnet_cases/mxnet_1_9_1.json, written by mxnet_cases/generate_expected.py).

Schedules, computed in Python floats by both, agree to 1e-12. The rest
starts from float32 arrays, which MXNet reduces in float32 (its pick, log and
sum) and tagflow in float32 or float64: sums of at most 100 terms of float32
rounding (2^-24 each, so 100 * 6e-8 = 6e-6 at worst), and weights trained by
at most 30 steps of gradient descent whose rate keeps each step's error from
growing (the losses fall), agree to 1e-5 relative."""

import json
import math
import pathlib
import subprocess
import sys

import numpy as onp
import pytest

import tagflow as mx
from mxnet_cases.cases import CASES

EXPECTED = json.loads(
    (pathlib.Path(__file__).resolve().parent / "mxnet_cases" / "mxnet_1_9_1.json").read_text())


def compare(got, expected, tolerance, where):
    if isinstance(expected, dict):
        assert isinstance(got, dict) and sorted(got) == sorted(expected), where
        for key in expected:
            compare(got[key], expected[key], tolerance, f"{where}.{key}")
    elif isinstance(expected, list):
        assert isinstance(got, (list, tuple)) and len(got) == len(expected), \
            f"{where}: {got!r} against {expected!r}"
        for i, (g, e) in enumerate(zip(got, expected)):
            compare(g, e, tolerance, f"{where}[{i}]")
    elif isinstance(expected, float):
        assert isinstance(got, (int, float)), f"{where}: {got!r} against {expected!r}"
        if math.isnan(expected):
            assert math.isnan(got), f"{where}: {got!r} against NaN"
        else:
            assert abs(got - expected) <= tolerance * max(1.0, abs(expected)), \
                f"{where}: {got!r} against MXNet's {expected!r}"
    else:
        assert got == expected, f"{where}: {got!r} against MXNet's {expected!r}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_case_computes_what_mxnet_computes(name):
    tolerance = 1e-12 if name == "lr_schedulers" else 1e-5
    compare(CASES[name](mx), EXPECTED[name], tolerance, name)


def test_every_case_has_mxnets_values():
    assert EXPECTED["mxnet"] == "1.9.1"
    assert sorted(k for k in EXPECTED if k != "mxnet") == sorted(CASES)


def test_what_is_refused_says_so():
    with pytest.raises(mx.MXNetError, match="Cannot find optimizer 'rmsprop2'"):
        mx.optimizer.create("rmsprop2")
    with pytest.raises(ValueError, match="unknown parameter 'beta1'"):
        mx.optimizer.create("sgd", beta1=0.9)
    with pytest.raises(ValueError, match="multi_precision"):
        mx.optimizer.SGD(multi_precision=True)
    with pytest.raises(ValueError, match="Metric must be one of"):
        mx.metric.create("accuracyy")
    with pytest.raises(ValueError, match="increasing"):
        mx.lr_scheduler.MultiFactorScheduler(step=[3, 2])
    with pytest.raises(ValueError, match="does not match"):
        mx.metric.Accuracy().update([mx.nd.array([1, 2])], [])
    with pytest.raises(ValueError, match="Shape of labels 3 does not match shape of predictions 4"):
        mx.metric.TopKAccuracy(top_k=2).update([mx.nd.array([0, 1, 2])],
                                               [mx.nd.ones((4, 3))])
    with pytest.raises(ValueError, match="strictly positive"):
        mx.lr_scheduler.CosineScheduler(max_update=0)
    with pytest.raises(ValueError, match="one value per sample, of shape \\(2\\)"):
        mx.gluon.loss.L2Loss()(mx.nd.ones((2, 3)), mx.nd.ones((2, 3)), mx.nd.ones((2, 3)))
    with pytest.raises(ValueError, match="only layout 'NCW'"):
        mx.gluon.nn.Conv1D(2, 3, layout="NWC")
    with pytest.raises(TypeError, match="a list of NDArray"):
        mx.nd.save("unused", [mx.nd.ones(2), 3])


def test_randint_draws_in_range_from_the_seeded_generator():
    mx.random.seed(3)
    first = mx.nd.random.randint(-3, 4, shape=(2000,)).asnumpy()
    mx.random.seed(3)
    again = mx.nd.random.randint(-3, 4, shape=(2000,)).asnumpy()
    assert first.dtype.name == "int32"
    assert (first == again).all()
    assert first.min() == -3 and first.max() == 3
    # 2000 draws over 7 values: each about 286 times; 200 is 5 standard deviations below.
    counts = [(first == v).sum() for v in range(-3, 4)]
    assert min(counts) > 200, counts
    with pytest.raises(ValueError, match="low < high"):
        mx.nd.random.randint(4, 4)


def test_the_numpy_interface_keeps_int64_indices():
    x = mx.np.array([[1.0, 5.0], [7.0, 2.0]])
    assert onp.dtype(x.argmax(axis=1).dtype).name == "int64"
    assert onp.dtype(mx.nd.array([[1.0, 5.0]]).argmax(axis=1).dtype).name == "float32"
    with pytest.raises(ValueError, match="of one shape"):
        mx.nd.elemwise_add(mx.nd.ones((2, 3)), mx.nd.ones((3,)))


def test_what_has_no_effect_says_so_once_and_what_is_unknown_is_refused(tmp_path):
    # Said once per process (a case may have called hybridize already): in a fresh one.
    once = subprocess.run(
        [sys.executable, "-W", "always", "-c",
         "import tagflow as mx\n"
         "net = mx.gluon.nn.Dense(2)\n"
         "net.hybridize(static_alloc=True, static_shape=True)\n"
         "net.hybridize()\n"],
        capture_output=True, text=True, timeout=120, check=True)
    assert once.stderr.count("hybridize() has no effect") == 1, once.stderr
    with pytest.warns(UserWarning, match="aggregate_stats, profile_all change nothing"):
        mx.profiler.set_config(profile_all=True, aggregate_stats=True,
                               filename=str(tmp_path / "p.json"))
    with pytest.raises(ValueError, match="unknown option\\(s\\) profile_everything"):
        mx.profiler.set_config(profile_everything=True)


def test_profiler_dumps_counts_each_operation_recorded():
    mx.profiler.clear()
    mx.profiler.set_state("run")
    x = mx.nd.ones((64, 64))
    for _ in range(3):
        x = mx.nd.dot(x, x) * 0.01
    mx.nd.waitall()
    mx.profiler.set_state("stop")
    table = mx.profiler.dumps()
    dot_rows = [line.split() for line in table.splitlines() if line.startswith("dot ")]
    assert len(dot_rows) == 1 and dot_rows[0][1] == "3", table
    stats = json.loads(mx.profiler.dumps(format="json", reset=True))["operations"]
    assert stats["dot"]["count"] == 3
    assert stats["dot"]["min_ms"] <= stats["dot"]["avg_ms"] <= stats["dot"]["max_ms"]
    assert json.loads(mx.profiler.dumps(format="json"))["operations"] == {}


def test_d2l_walks_a_blocks_attributes_as_on_mxnet():
    # d2l's set_scratch_params_device (the 002 tutorial): every list attribute
    # of a module holds modules. A Block's own attributes must not break it.
    class Module(mx.gluon.Block):
        def __init__(self):
            super().__init__()
            self.hidden = mx.gluon.nn.Dense(4)
            self.layers = []
            self.w = mx.np.ones((2, 2))

        def set_scratch_params_device(self, device):
            for attr in dir(self):
                a = getattr(self, attr)
                if isinstance(a, mx.np.ndarray):
                    setattr(self, attr, a.as_in_ctx(device))
                if isinstance(a, Module):
                    a.set_scratch_params_device(device)
                if isinstance(a, list):
                    for elem in a:
                        elem.set_scratch_params_device(device)

    outer = Module()
    outer.layers.append(Module())
    outer.set_scratch_params_device(mx.gpu(1))
    assert outer.w.ctx == mx.gpu(1) and outer.layers[0].w.ctx == mx.gpu(1)
    sequential = mx.gluon.nn.Sequential()
    sequential.add(mx.gluon.nn.Dense(2), mx.gluon.nn.Dense(3))
    assert not [a for a in dir(sequential) if isinstance(getattr(sequential, a), list)]
    assert sequential[1] is list(sequential._children.values())[1]


def test_dropout_drops_while_training_and_scales_the_rest():
    mx.random.seed(1)
    with mx.autograd.record():
        y = mx.nd.Dropout(mx.nd.ones((100, 100)), p=0.3).asnumpy()
    kept = y != 0
    # 10,000 draws at 0.7: the kept fraction within 5 standard deviations (0.023).
    assert abs(kept.mean() - 0.7) < 0.023
    assert onp.allclose(y[kept], 1 / 0.7)


def test_indexing_on_any_axis_keeps_the_interface_and_refuses_what_it_lacks():
    x = mx.np.arange(12).reshape((3, 4))
    assert isinstance(x[:, 1], mx.np.ndarray)
    assert x[1, 0:2].asnumpy().tolist() == [4.0, 5.0]
    assert x[0:2, 3].asnumpy().tolist() == [3.0, 7.0]
    x[:, 0] = 9
    assert x.asnumpy()[:, 0].tolist() == [9.0, 9.0, 9.0]
    assert isinstance(x[:, ::2], mx.np.ndarray) and isinstance(x[None], mx.np.ndarray)
    with pytest.raises(IndexError, match="negative step"):
        x[:, ::-1]
    with pytest.raises(IndexError, match="too many indices"):
        x[:, 1, 2]
    with pytest.raises(IndexError, match="advanced \\(array or list\\) indices"):
        x[[0, 2]]
    with pytest.raises(IndexError, match="a single ellipsis"):
        x[..., 1, ...]
