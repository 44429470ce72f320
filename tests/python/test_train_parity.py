"""The tutorials' multi-GPU training loop, written in Python with
tagflow.gluon, against `tagflow train` with the same settings: one epoch of
Fashion-MNIST on two simulated GPUs, LeNet, Xavier, SGD 0.1, batch 256,
seed 1. Both shuffle the same order, start from the same weights and push
the same operations, so the epoch's mean loss agrees to float32 rounding (the
CPU products' sums do not depend on how many threads compute them: Note
[The CPU BLAS] in ops/kernels/gemm_cpu.cc)."""

import json
import os
import subprocess

import pytest

import tagflow as mx
from tagflow import autograd, gluon
from tagflow.gluon import nn

TAGFLOW = os.environ.get("TAGFLOW_CLI", "")


def python_epoch_loss(devices):
    mx.random.seed(1)
    transformer = gluon.data.vision.transforms.Compose([
        gluon.data.vision.transforms.ToTensor(),
        gluon.data.vision.transforms.Normalize(0.13, 0.31)])
    train_data = gluon.data.DataLoader(
        gluon.data.vision.datasets.FashionMNIST(train=True).transform_first(transformer),
        256, shuffle=True, num_workers=1)
    net = nn.Sequential()
    net.add(nn.Conv2D(channels=6, kernel_size=5, activation="relu"),
            nn.MaxPool2D(pool_size=2, strides=2),
            nn.Conv2D(channels=16, kernel_size=3, activation="relu"),
            nn.MaxPool2D(pool_size=2, strides=2),
            nn.Dense(120, activation="relu"),
            nn.Dense(84, activation="relu"),
            nn.Dense(10))
    net.initialize(init=mx.init.Xavier(), ctx=devices)
    softmax_cross_entropy = gluon.loss.SoftmaxCrossEntropyLoss()
    trainer = gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": 0.1})
    train_loss, samples = 0.0, 0
    for data, label in train_data:
        data_list = gluon.utils.split_and_load(data, devices)
        label_list = gluon.utils.split_and_load(label, devices)
        with autograd.record():
            losses = [softmax_cross_entropy(net(X), y) for X, y in zip(data_list, label_list)]
        for l in losses:
            l.backward()
        trainer.step(data.shape[0])
        train_loss += sum([float(l.sum().asscalar()) for l in losses])
        samples += data.shape[0]
    return train_loss / samples


def test_one_epoch_from_python_gives_tagflow_trains_loss():
    if not os.path.exists(TAGFLOW):
        pytest.skip("the tagflow command line is not here: TAGFLOW_CLI=%r" % TAGFLOW)
    run = subprocess.run([TAGFLOW, "train", "--epochs", "1", "--devices", "gpu:0,gpu:1", "--json",
                          "--no-progress", "--seed", "1", "--workers", "1"],
                         capture_output=True, text=True, check=True)
    epochs = [json.loads(line) for line in run.stdout.splitlines() if '"epoch"' in line]
    assert len(epochs) == 1
    expected = epochs[0]["loss"]
    got = python_epoch_loss([mx.gpu(0), mx.gpu(1)])
    assert 0.3 < got < 1.5  # it learned, from ln(10) = 2.3 at the start
    assert got == pytest.approx(expected, rel=1e-4)
