#!/usr/bin/python3
"""The `small-add` case of `tagflow bench ops` in PyTorch, for comparison:
a 4-element float32 `c = a + b` on the CPU, many in a row, each result
dropped when the next one is made.

    DIR/bin/python python/tagflow/references/pytorch_small_add.py [--ops 1000000] [--runs 5] [--threads 2]

(`python3 -m tagflow.bench small-add --torch-python DIR/bin/python` runs it
beside tagflow's own figure.)

Prints one JSON line with the median, lowest and highest microseconds per
operation over the runs (the fields of `tagflow bench ops`' line).
"""

import argparse
import json
import statistics
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.ops < 1 or args.runs < 1 or args.threads < 1:
        parser.error("--ops, --runs and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    a = torch.tensor([1.0, 2.0, 3.0, 4.0])
    b = torch.tensor([10.0, 20.0, 30.0, 40.0])
    c = a + b
    us_per_op = []
    for _ in range(args.runs):
        start = time.perf_counter()
        for _ in range(args.ops):
            c = a + b
        us_per_op.append((time.perf_counter() - start) / args.ops * 1e6)
    if c.tolist() != [11.0, 22.0, 33.0, 44.0]:
        raise SystemExit(f"wrong result: {c.tolist()}")
    print(json.dumps({
        "bench": "ops", "case": "small-add", "framework": "pytorch",
        "version": torch.__version__, "ops": args.ops, "runs": args.runs,
        "us_per_op": round(statistics.median(us_per_op), 3),
        "us_per_op_min": round(min(us_per_op), 3),
        "us_per_op_max": round(max(us_per_op), 3),
    }))


if __name__ == "__main__":
    main()
