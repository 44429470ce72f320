#!/usr/bin/env python3
"""float16 and bfloat16 safetensors files between tagflow and Python: a file
tagflow writes opens in Python with the bits PyTorch's own conversions give,
and a file Python writes loads in tagflow with the same bits.

The files are read and written by Python's `safetensors` package where the
interpreter has it (`pip install torch safetensors` in a virtual
environment, then TAGFLOW_TEST_PYTHON=DIR/bin/python). Debian packages
PyTorch (python3-torch) but not `safetensors`: with PyTorch alone, the test
reads and writes the files by the format's specification (an 8-byte
little-endian header length, a JSON header of dtype, shape and data offsets,
the raw little-endian bytes), and PyTorch gives the bits. Exits 77 (skipped)
without PyTorch.

Usage: safetensors_python_test.py HELPER
"""

import json
import math
import os
import struct
import subprocess
import sys
import tempfile

VALUES = [0.1, -2.5, 65504.0, 1e-7, 3.14159, math.inf, -math.inf, math.nan, 1e10, -0.0, 65520.0,
          6.1e-5]


def spec_load_file(path, torch):
    """A safetensors file read by the format's specification."""
    names = {"F16": torch.float16, "BF16": torch.bfloat16, "F32": torch.float32}
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + length])
    body = data[8 + length:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = bytearray(body[begin:end])  # frombuffer wants a writable buffer
        tensors[name] = torch.frombuffer(raw, dtype=names[entry["dtype"]]).reshape(entry["shape"])
    return tensors


def spec_save_file(tensors, path, metadata, torch):
    """A safetensors file written by the format's specification."""
    names = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32"}
    header = {"__metadata__": metadata}
    chunks = []
    offset = 0
    for name, t in tensors.items():
        raw = t.contiguous().flatten().view(torch.uint8).numpy().tobytes()  # x86: little-endian
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def main():
    helper = sys.argv[1]
    try:
        import torch
    except ImportError as e:
        print(f"skipped: {sys.executable} has no PyTorch ({e}); install python3-torch, or set "
              "TAGFLOW_TEST_PYTHON to a Python with torch (and safetensors)")
        return 77
    try:
        from safetensors.torch import load_file, save_file
        reader = "the safetensors package"
    except ImportError:
        def load_file(path):
            return spec_load_file(path, torch)

        def save_file(tensors, path, metadata):
            spec_save_file(tensors, path, metadata, torch)
        reader = "the format's specification (no safetensors package here)"
    print(f"files read and written by {reader}")
    failures = []

    def expect(condition, what):
        if not condition:
            failures.append(what)

    def bits(t):
        """Each element's bits; a NaN as "nan" (PyTorch's own conversions
        disagree on NaN bits: c10::BFloat16 gives 0x7fc0, its vectorised
        kernels 0xffff)."""
        width = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}
        mask = 0xffff if t.dtype != torch.float32 else 0xffffffff
        raw = [int(b) & mask for b in t.contiguous().view(width[t.dtype]).flatten().tolist()]
        nan = t.float().isnan().flatten().tolist()
        return ["nan" if n else b for b, n in zip(raw, nan)]

    def nan_marked(dumped_bits, dtype):
        """tagflow's bits of `dtype` with NaNs marked as bits() marks them."""
        if dtype == "float32":
            exponent, mantissa = 0x7f800000, 0x7fffff
        elif dtype == "float16":
            exponent, mantissa = 0x7c00, 0x3ff
        else:
            exponent, mantissa = 0x7f80, 0x7f
        return ["nan" if (b & exponent) == exponent and (b & mantissa) != 0 else b
                for b in dumped_bits]

    with tempfile.TemporaryDirectory() as work:
        # tagflow writes; Python reads.
        ours = os.path.join(work, "tagflow.safetensors")
        subprocess.run([helper, "write", ours], check=True)
        loaded = load_file(ours)
        single = torch.tensor(VALUES, dtype=torch.float32).reshape(3, 4)
        for name, dtype in (("half", torch.float16), ("brain", torch.bfloat16),
                            ("single", torch.float32)):
            t = loaded.get(name)
            expect(t is not None and t.dtype == dtype and list(t.shape) == [3, 4],
                   f"{name}: expected {dtype} of shape [3, 4], got {t if t is None else (t.dtype, list(t.shape))}")
            if t is not None and t.dtype == dtype:
                expect(bits(t) == bits(single.to(dtype)),
                       f"{name}: bits {bits(t)} where PyTorch's conversion gives {bits(single.to(dtype))}")

        # Python writes; tagflow reads.
        theirs = os.path.join(work, "python.safetensors")
        generator = torch.Generator().manual_seed(5)
        randoms = torch.randn(2, 5, generator=generator) * 1000
        tensors = {"h": randoms.to(torch.float16), "b": randoms.to(torch.bfloat16),
                   "specials": torch.tensor(VALUES[:6], dtype=torch.float16)}
        save_file(tensors, theirs, metadata={"from": "python"})
        dumped = json.loads(subprocess.run([helper, "dump", theirs], check=True,
                                           capture_output=True, text=True).stdout)
        for name, t in tensors.items():
            got = dumped.get(name)
            want_dtype = "float16" if t.dtype == torch.float16 else "bfloat16"
            expect(got is not None and got["dtype"] == want_dtype and got["shape"] == list(t.shape),
                   f"{name}: expected {want_dtype} {list(t.shape)}, got {got}")
            if got is not None:
                expect(got["bits"] == [int(b) & 0xffff for b in t.view(torch.int16).flatten().tolist()],
                       f"{name}: tagflow read {got['bits']}, Python wrote {bits(t)}")
                expect(nan_marked(got["bits"], got["dtype"]) == bits(t), f"{name}: NaNs differ")

    for f in failures:
        print("FAIL:", f)
    print(f"torch {torch.__version__}: {'ok' if not failures else f'{len(failures)} failures'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
