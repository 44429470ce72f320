#!/usr/bin/python3
"""The `gemm` case of `tagflow bench ops` in PyTorch, for comparison: `a @ b`
of two SIZE x SIZE matrices on the CPU, in float32, bfloat16 and float16.

    DIR/bin/python python/tagflow/references/pytorch_gemm.py [--size 2048] [--runs 5] [--threads 2]

Prints one JSON line per dtype with the median GFLOP/s over the runs (each
run one product, after a warm-up), as `tagflow bench ops --case gemm` does.
"""

import argparse
import json
import statistics
import time

import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if args.size < 1 or args.runs < 1 or args.threads < 1:
        parser.error("--size, --runs and --threads must be at least 1")
    torch.set_num_threads(args.threads)
    n = args.size
    generator = torch.Generator().manual_seed(1)
    a32 = torch.rand(n, n, generator=generator) * 2 - 1
    b32 = torch.rand(n, n, generator=generator) * 2 - 1
    flops = 2.0 * n * n * n
    for dtype in (torch.float32, torch.bfloat16, torch.float16):
        a, b = a32.to(dtype), b32.to(dtype)
        c = a @ b
        rates = []
        for _ in range(args.runs):
            start = time.perf_counter()
            c = a @ b
            rates.append(flops / (time.perf_counter() - start) / 1e9)
        # A check that the product was computed: against float32's, within
        # the dtype's rounding of n-term sums of terms of at most 1.
        error = (c.float() - a32 @ b32).abs().max().item()
        bound = n * (2.0 ** -7 if dtype == torch.bfloat16 else 2.0 ** -10 if dtype == torch.float16
                     else 2.0 ** -20)
        if not error <= bound:
            raise SystemExit(f"{dtype}: largest error {error}, expected at most {bound}")
        print(json.dumps({
            "bench": "ops", "case": "gemm", "framework": "pytorch", "version": torch.__version__,
            "dtype": str(dtype).removeprefix("torch."), "size": n, "runs": args.runs,
            "threads": args.threads, "gflops": round(statistics.median(rates), 1),
        }))


if __name__ == "__main__":
    main()
