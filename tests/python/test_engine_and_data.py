"""The engine from Python (info, profiler, exit) and the data pipelines
(the C++ one for Fashion-MNIST, Python threads for anything else)."""

import json
import subprocess
import sys
import textwrap
import threading

import numpy as onp
import pytest

import tagflow as mx
from tagflow import gluon, nd
from tagflow.gluon.data import ArrayDataset, DataLoader, SimpleDataset
from tagflow.gluon.data.vision import transforms


def test_info_prints_what_the_command_line_prints(capsys):
    mx.info()
    text = capsys.readouterr().out
    for section in ("Devices", "Configuration", "Build"):
        assert section in text
    assert "gpu(1)               simulated" in text
    assert "TAGFLOW_SIM_GPUS" in text
    assert mx.engine.kind() == "threaded"


def test_the_profiler_writes_a_chrome_trace_of_what_ran(tmp_path):
    path = tmp_path / "trace.json"
    mx.profiler.set_config(filename=str(path))
    mx.profiler.set_state("run")
    a = nd.ones((32, 32), ctx=mx.gpu(0))
    nd.dot(a, a).wait_to_read()
    nd.waitall()
    mx.profiler.set_state("stop")
    mx.profiler.dump()
    mx.profiler.clear()
    events = json.loads(path.read_text())["traceEvents"]
    names = {e.get("name") for e in events}
    assert any("dot" in str(n) for n in names), sorted(map(str, names))[:20]
    with pytest.raises(ValueError):
        mx.profiler.set_state("pause")


def test_fashion_mnist_with_the_tutorials_transforms_runs_in_cpp():
    transformer = transforms.Compose([transforms.ToTensor(), transforms.Normalize(0.13, 0.31)])
    dataset = gluon.data.vision.FashionMNIST(train=False)
    loader = DataLoader(dataset.transform_first(transformer), 1000, num_workers=2)
    assert loader.runs_natively and len(loader) == 10
    image, label = dataset[7]
    assert image.shape == (28, 28, 1) and image.dtype is onp.uint8
    data, labels = next(iter(loader))
    assert data.shape == (1000, 1, 28, 28) and labels.shape == (1000,)
    expected = (image.asnumpy().astype(onp.float64).transpose(2, 0, 1) / 255 - 0.13) / 0.31
    onp.testing.assert_allclose(data[7].asnumpy(), expected, rtol=1e-5, atol=1e-6)
    assert labels[7].asscalar() == label
    pinned = DataLoader(dataset.transform_first(transformer), 1000, pin_memory=True)
    pinned_data, _ = next(iter(pinned))
    assert pinned_data.context == mx.cpu_pinned(0)
    onp.testing.assert_array_equal(pinned_data.asnumpy(), data.asnumpy())
    # The same pipeline in Python (a transform it does not know) gives the same batch.
    python_loader = DataLoader(dataset.transform_first(lambda x: transformer(x)), 1000,
                               num_workers=2)
    assert not python_loader.runs_natively
    python_data, python_labels = next(iter(python_loader))
    onp.testing.assert_allclose(python_data.asnumpy(), data.asnumpy(), rtol=1e-6, atol=1e-6)
    onp.testing.assert_array_equal(python_labels.asnumpy(), labels.asnumpy())


def test_python_transforms_on_worker_threads_keep_the_order():
    seen = set()
    lock = threading.Lock()

    def slow_square(x):
        with lock:
            seen.add(threading.get_ident())
        return onp.float32(x) ** 2

    dataset = SimpleDataset(list(range(103))).transform(slow_square)
    loader = DataLoader(dataset, batch_size=10, num_workers=3, last_batch="keep")
    batches = [b.asnumpy() for b in loader]
    assert len(batches) == len(loader) == 11
    onp.testing.assert_array_equal(onp.concatenate(batches), onp.arange(103, dtype=onp.float32) ** 2)
    assert threading.get_ident() not in seen  # built on the workers
    discard = DataLoader(dataset, batch_size=10, last_batch="discard")
    assert len(discard) == 10 and sum(1 for _ in discard) == 10


def test_shuffled_epochs_are_new_orders_repeated_by_the_seed():
    data = onp.arange(50, dtype=onp.float32)
    labels = onp.arange(50, dtype=onp.int32)

    def epochs(seed):
        mx.random.seed(seed)
        loader = DataLoader(ArrayDataset(data, labels), batch_size=7, shuffle=True)
        return [onp.concatenate([d.asnumpy() for d, _ in loader]) for _ in range(2)]

    first, second = epochs(4)
    assert sorted(first.tolist()) == data.tolist() and first.tolist() != second.tolist()
    again = epochs(4)
    onp.testing.assert_array_equal(again[0], first)
    onp.testing.assert_array_equal(again[1], second)


def test_a_failing_transform_raises_in_the_loop():
    def broken(x):
        if x == 5:
            raise RuntimeError("sample 5 is broken")
        return onp.float32(x)

    loader = DataLoader(SimpleDataset(list(range(8))).transform(broken), 2, num_workers=2)
    with pytest.raises(RuntimeError, match="sample 5 is broken"):
        for _ in loader:
            pass


def test_the_interpreter_exits_with_work_and_loader_threads_in_flight(tmp_path):
    script = textwrap.dedent("""
        import tagflow as mx
        from tagflow import nd
        from tagflow.gluon.data import DataLoader, SimpleDataset
        a = nd.ones((256, 256))
        for _ in range(200):
            a = nd.dot(a, a) / 256           # pushed, never waited for
        loader = DataLoader(SimpleDataset(list(range(10000))), 10, num_workers=2)
        batches = iter(loader)
        next(batches)                         # workers busy ahead
        print("leaving")
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "leaving"
