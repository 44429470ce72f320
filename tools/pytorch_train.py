#!/usr/bin/python3
"""The tutorials' LeNet (or the multi-GPU chapter's ResNet-18) on
Fashion-MNIST in PyTorch, for comparison with `tagflow train`: the same
network, initialisation (LeNet: Xavier uniform weights, zero biases;
ResNet-18: Normal(0.01)), data normalisation, batch size, optimiser and
learning rate.

    /usr/bin/python3 tools/pytorch_train.py --epochs 10   # Debian: python3-torch

Prints one JSON line per epoch (the fields of `tagflow train --json`) and a
last line with the peak resident memory. `tagflow bench train --pytorch
tools/pytorch_train.py` runs it next to tagflow and tabulates both.
"""

import argparse
import gzip
import json
import os
import resource
import sys
import time

import torch
from torch import nn


def read_idx(path):
    """An IDX file (plain or gzip) of unsigned bytes as a uint8 tensor."""
    if not os.path.exists(path) and os.path.exists(path + ".gz"):
        path += ".gz"
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit(f"{path}: not an IDX file of unsigned bytes")
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim)]
    body = bytearray(data[4 + 4 * ndim:])
    return torch.frombuffer(body, dtype=torch.uint8).reshape(dims)


def load(data_dir, train, limit):
    prefix = "train" if train else "t10k"
    images = read_idx(os.path.join(data_dir, f"{prefix}-images-idx3-ubyte"))
    labels = read_idx(os.path.join(data_dir, f"{prefix}-labels-idx1-ubyte"))
    if limit > 0:
        images, labels = images[:limit], labels[:limit]
    # ToTensor then Normalize(0.13, 0.31), as the tutorials (and tagflow).
    x = (images.float() / 255.0).unsqueeze(1)
    x = (x - 0.13) / 0.31
    return x, labels.long()


def lenet():
    net = nn.Sequential(
        nn.Conv2d(1, 6, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, 3), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Flatten(),
        nn.Linear(16 * 5 * 5, 120), nn.ReLU(),
        nn.Linear(120, 84), nn.ReLU(),
        nn.Linear(84, 10))
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
    return net


class Residual(nn.Module):
    """The tutorials' residual block, as models::Residual in tagflow."""

    def __init__(self, in_channels, channels, use_1x1conv=False, stride=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, padding=1, stride=stride)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1)
        self.conv3 = nn.Conv2d(in_channels, channels, 1, stride=stride) if use_1x1conv else None
        self.bn1 = nn.BatchNorm2d(channels, momentum=0.1, eps=1e-5)
        self.bn2 = nn.BatchNorm2d(channels, momentum=0.1, eps=1e-5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return torch.relu(y + (self.conv3(x) if self.conv3 is not None else x))


def resnet18(classes=10, in_channels=1):
    """models::resnet18: 3x3 conv 64, BN, ReLU; four stages of two residual
    blocks (64, 128, 256, 512; stages 2-4 halve with a projection); global
    average pooling; dense."""
    def stage(in_channels, channels, first):
        if first:
            return [Residual(in_channels, channels), Residual(channels, channels)]
        return [Residual(in_channels, channels, True, 2), Residual(channels, channels)]
    net = nn.Sequential(
        nn.Conv2d(in_channels, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(),
        *stage(64, 64, True), *stage(64, 128, False), *stage(128, 256, False),
        *stage(256, 512, False),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, classes))
    for m in net.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)):
            nn.init.normal_(m.weight, std=0.01)
            nn.init.zeros_(m.bias)
    return net


def accuracy(net, x, y, batch_size):
    net.eval()
    correct = 0
    with torch.no_grad():
        for i in range(0, len(x), batch_size):
            correct += (net(x[i:i + batch_size]).argmax(1) == y[i:i + batch_size]).sum().item()
    net.train()
    return correct / len(x)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=10)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--threads", type=int, default=os.cpu_count(),
                        help="intra-op threads (default: all cores)")
    parser.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--limit", type=int, default=0,
                        help="train on the first N images only (0: all)")
    parser.add_argument("--test-limit", type=int, default=0,
                        help="evaluate on the first N test images only (0: all)")
    parser.add_argument("--model", choices=["lenet", "resnet18"], default="lenet")
    args = parser.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    train_x, train_y = load(args.data, True, args.limit)
    test_x, test_y = load(args.data, False, args.test_limit)
    net = lenet() if args.model == "lenet" else resnet18()
    loss_function = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=args.lr)
    generator = torch.Generator().manual_seed(args.seed)
    print(json.dumps({"framework": "pytorch", "version": torch.__version__,
                      "threads": torch.get_num_threads(), "blas": blas_name()}), flush=True)
    for epoch in range(args.epochs):
        start = time.perf_counter()
        order = torch.randperm(len(train_x), generator=generator)
        total_loss = torch.zeros(())
        correct = torch.zeros((), dtype=torch.int64)
        for i in range(0, len(order), args.batch_size):
            index = order[i:i + args.batch_size]
            x, y = train_x[index], train_y[index]
            optimizer.zero_grad()
            scores = net(x)
            loss = loss_function(scores, y)
            loss.backward()
            optimizer.step()
            # Summed as tensors, read once per epoch (no wait per batch).
            total_loss += loss.detach() * len(index)
            correct += (scores.detach().argmax(1) == y).sum()
        seconds = time.perf_counter() - start
        print(json.dumps({
            "epoch": epoch + 1,
            "loss": total_loss.item() / len(order),
            "train_accuracy": correct.item() / len(order),
            "test_accuracy": accuracy(net, test_x, test_y, args.batch_size),
            "seconds": seconds,
            "images_per_second": len(order) / seconds,
        }), flush=True)
    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"peak_rss_mib": peak_kib / 1024}), flush=True)


def blas_name():
    """The BLAS behind Debian's libblas.so.3 alternative, which torch links."""
    path = os.path.realpath("/usr/lib/x86_64-linux-gnu/libblas.so.3")
    return os.path.basename(os.path.dirname(path)) if "blas" in path else path


if __name__ == "__main__":
    main()
