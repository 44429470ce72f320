"""Benchmarks of the Python front end, as ``tagflow bench`` prints them (a
table, then one JSON line per result)::

    python3 -m tagflow.bench small-add      # a tiny c = a + b, per operation
    python3 -m tagflow.bench lenet          # LeNet training, images per second

``small-add`` times the Python call of a 4-element ``c = a + b`` on cpu(0),
pushed to the engine and never waited for, as ``tagflow bench ops
--case small-add`` times the C++ call: each run pushes ``--ops`` operations
and waits for them once; the figure is the run's time over its operations,
median and spread over ``--runs`` runs. With ``--torch-python PYTHON`` it
times PyTorch's ``x + y`` on 4-element CPU tensors the same way, in that
interpreter (a process of its own).

``lenet`` trains the LeNet of ``tagflow train`` (same layers, Xavier
initialization, SGD, seed 1, batch 256, shuffled Fashion-MNIST) written with
tagflow.gluon, and prints images per second per epoch, to compare with
``tagflow train --epochs N`` run on the same devices.
"""

import argparse
import json
import statistics
import time


def _median_spread(values):
    return statistics.median(values), min(values), max(values)


def _torch_small_add(args):
    """PyTorch's c = a + b the same way (references/pytorch_small_add.py), in
    its own interpreter: a process of its own, as PyTorch's wheels bring their
    own NCCL."""
    import os
    import subprocess

    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "references",
                          "pytorch_small_add.py")
    out = subprocess.run([args.torch_python, script, "--ops", str(args.ops), "--runs",
                          str(args.runs)], capture_output=True, text=True, check=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return ("torch " + result["version"],
            (result["us_per_op"], result["us_per_op_min"], result["us_per_op_max"]))


def small_add(args):
    from tagflow import nd

    a, b = nd.ones(4), nd.ones(4)
    c = a + b
    c.wait_to_read()
    per_op = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(args.ops):
            c = a + b
        nd.waitall()
        per_op.append((time.perf_counter() - start) / args.ops * 1e6)
    assert c.asnumpy().tolist() == [2.0] * 4
    results = [("tagflow", _median_spread(per_op))]
    if args.torch_python:
        results.append(_torch_small_add(args))
    print("%-24s %12s %12s %12s" % ("small-add (Python)", "median us", "min us", "max us"))
    for name, (median, low, high) in results:
        print("%-24s %12.3f %12.3f %12.3f" % (name, median, low, high))
    for name, (median, low, high) in results:
        print(json.dumps({"bench": "python", "case": "small-add", "framework": name,
                          "ops": args.ops, "runs": args.runs, "median_us": round(median, 4),
                          "min_us": round(low, 4), "max_us": round(high, 4)}))


def lenet(args):
    import tagflow as mx
    from tagflow import autograd, gluon

    devices = []
    for text in args.devices.split(","):
        kind, _, index = text.partition(":")
        devices.append(mx.Context(kind, int(index or 0)))
    mx.random.seed(1)
    transformer = gluon.data.vision.transforms.Compose([
        gluon.data.vision.transforms.ToTensor(),
        gluon.data.vision.transforms.Normalize(0.13, 0.31)])
    train_data = gluon.data.DataLoader(
        gluon.data.vision.FashionMNIST(train=True).transform_first(transformer),
        args.batch_size, shuffle=True, num_workers=args.workers)
    net = gluon.model_zoo.lenet()  # what tagflow train --model lenet trains
    net.initialize(init=mx.init.Xavier(), ctx=devices)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": args.lr})
    rates = []
    for epoch in range(args.epochs):
        start = time.perf_counter()
        images = 0
        total = None
        in_flight = []
        for data, label in train_data:
            parts = gluon.utils.split_and_load(data, devices)
            labels = gluon.utils.split_and_load(label, devices)
            with autograd.record():
                losses = [loss_fn(net(x), y) for x, y in zip(parts, labels)]
            for l in losses:
                l.backward()
            trainer.step(data.shape[0])
            sums = [l.sum() for l in losses]
            batch_total = sums[0].as_in_context(devices[0])
            for s in sums[1:]:
                batch_total = batch_total + s.as_in_context(devices[0])
            total = batch_total if total is None else total + batch_total
            images += data.shape[0]
            # Two batches in flight at most, as tagflow train keeps them
            # (Note [Batches in flight] in tools/train.cc): the host waits for
            # the loss of the batch before last instead of running ahead.
            in_flight.append(batch_total)
            if len(in_flight) > 2:
                in_flight.pop(0).wait_to_read()
        loss = float(total.asscalar()) / images
        seconds = time.perf_counter() - start
        rates.append(images / seconds)
        print("epoch %d: loss %.4f, %.0f images/s (%.1f s)" % (epoch + 1, loss, images / seconds,
                                                               seconds))
    print(json.dumps({"bench": "python", "case": "lenet", "devices": args.devices,
                      "batch_size": args.batch_size, "epochs": args.epochs,
                      "images_per_second": [round(r) for r in rates]}))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python3 -m tagflow.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    cases = parser.add_subparsers(dest="case", required=True)
    add = cases.add_parser("small-add", help="a tiny c = a + b from Python, per operation")
    add.add_argument("--ops", type=int, default=200000, help="operations per run")
    add.add_argument("--runs", type=int, default=5, help="runs (the median is reported)")
    add.add_argument("--torch-python", metavar="PYTHON",
                     help="an interpreter with PyTorch: time its c = a + b the same way too")
    net = cases.add_parser("lenet", help="LeNet training from Python, images per second")
    net.add_argument("--epochs", type=int, default=2)
    net.add_argument("--devices", default="cpu:0", help="as tagflow train's: cpu:0,cpu:1 or gpu:0,gpu:1")
    net.add_argument("--batch-size", type=int, default=256)
    net.add_argument("--lr", type=float, default=0.1)
    net.add_argument("--workers", type=int, default=1, help="data loader threads")
    args = parser.parse_args(argv)
    {"small-add": small_add, "lenet": lenet}[args.case](args)


if __name__ == "__main__":
    main()
