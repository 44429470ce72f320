#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/: small valid files and near misses.

    python3 fuzz/make_corpus.py

safetensors seeds are files as the reference writer lays them out (compact
JSON, padded with spaces to a multiple of 8 bytes). IDX seeds start with the
mode byte idx_fuzz.cc reads: 0 the file as is, 1 gzip here, 2 gzip cut
short, 3 gzip as two members. Files already there (inputs of past
findings, kept as regression seeds) are left alone.
"""
import gzip
import json
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def write(folder, name, data):
    path = os.path.join(ROOT, folder, name)
    with open(path, "wb") as f:
        f.write(data)


def folder_for(name):
    os.makedirs(os.path.join(ROOT, name), exist_ok=True)


# --- safetensors ------------------------------------------------------------

SIZES = {"F32": 4, "I32": 4, "I64": 8, "U8": 1}


def safetensors(tensors, metadata=None, pad=True, raw_header=None, ascii=True):
    """`tensors`: (name, dtype, shape) in file order; the data is 0, 1, 2, ... bytes."""
    header = {}
    if metadata is not None:
        header["__metadata__"] = metadata
    offset = 0
    for name, dtype, shape in tensors:
        n = SIZES.get(dtype, 2)
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":"), ensure_ascii=ascii)
    text = text.encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + bytes(i % 251 for i in range(offset))


def safetensors_seeds():
    folder_for("safetensors")
    w = lambda name, data: write("safetensors", name, data)
    # Valid.
    w("empty-header", safetensors([], raw_header="{}"))
    w("metadata-only", safetensors([], {"format": "pt"}))
    w("one-f32", safetensors([("dense0.weight", "F32", [2, 3])]))
    w("every-dtype", safetensors([("a.long", "I64", [2]), ("b.weight", "F32", [2, 2]),
                                  ("c.index", "I32", [3]), ("d.bytes", "U8", [5])],
                                 {"epoch": "3", "format": "tagflow"}))
    w("scalar-and-empty", safetensors([("num_batches_tracked", "I64", []),
                                       ("empty", "F32", [0, 4]), ("one", "U8", [1, 1, 1])]))
    unicode = ([("caf\u00e9", "U8", [2]), ("\u03b8.\U0001f600", "U8", [1])], {"n\u00e4me": "v"})
    w("unicode-names-escaped", safetensors(*unicode))
    w("unicode-names-utf8", safetensors(*unicode, ascii=False))
    w("eight-dims", safetensors([("t", "U8", [1, 2, 1, 2, 1, 2, 1, 1])]))
    w("unpadded", safetensors([("w", "F32", [1])], pad=False))
    # Near misses.
    good = safetensors([("w", "F32", [2])])
    w("truncated-data", good[:-1])
    w("trailing-byte", good + b"\0")
    w("header-too-long", struct.pack("<Q", 1 << 40) + good[8:])
    w("other-dtype", safetensors([("h", "F16", [2])]))
    w("overlap", safetensors([], raw_header='{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
                                            '"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}')
      + bytes(3))
    w("hole", safetensors([], raw_header='{"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}')
      + bytes(2))
    w("duplicate-key", safetensors([], raw_header='{"a":{"dtype":"U8","shape":[1],'
                                                  '"data_offsets":[0,1]},"a":{}}') + bytes(1))
    w("nested-metadata", safetensors([], {"k": {"nested": "x"}}))
    w("size-overflow", safetensors([], raw_header='{"x":{"dtype":"I64","shape":[4294967296,'
                                                  '4294967296],"data_offsets":[0,0]}}'))
    w("negative-and-float", safetensors([], raw_header='{"x":{"dtype":"U8","shape":[-1, 1.5],'
                                                       '"data_offsets":[0,0]}}'))


# --- IDX --------------------------------------------------------------------

def idx(type_code, dims, payload):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">i", d) for d in dims) + payload


def idx_seeds():
    folder_for("idx")
    w = lambda name, mode, data: write("idx", name, bytes([mode]) + data)
    images = idx(0x08, [2, 4, 4], bytes(range(32)))
    labels = idx(0x08, [5], bytes([9, 0, 0, 3, 0]))
    # Valid, plain.
    w("uint8-images", 0, images)
    w("uint8-labels", 0, labels)
    w("int8", 0, idx(0x09, [4], bytes([0, 1, 0x7F, 0x80])))
    w("int16", 0, idx(0x0B, [2, 2], struct.pack(">4h", 1, -1, 32767, -32768)))
    w("int32", 0, idx(0x0C, [3], struct.pack(">3i", 7, -7, -2**31)))
    w("float32", 0, idx(0x0D, [2, 2], struct.pack(">4f", 0.5, -1.0, float("inf"), float("nan"))))
    w("float64", 0, idx(0x0E, [3], struct.pack(">3d", 1e-3, -3.4e38, float("-inf"))))
    w("zero-extent", 0, idx(0x0C, [0, 5], b""))
    w("eight-dims", 0, idx(0x08, [1, 1, 2, 1, 1, 1, 1, 2], bytes(4)))
    # Valid, gzip: as is, compressed here, as two members.
    w("gzip-file", 0, gzip.compress(images, mtime=0))
    w("gzip-images", 1, images)
    w("gzip-float32", 1, idx(0x0D, [3], struct.pack(">3f", 1.0, 2.0, 3.0)))
    w("gzip-two-members", 3, bytes([128]) + labels)
    # Near misses.
    w("truncated", 0, images[:-1])
    w("trailing", 0, images + b"\0")
    w("negative-extent", 0, idx(0x08, [-1], b""))
    w("unknown-type", 0, bytes([0, 0, 0x0A, 1, 0, 0, 0, 1, 0]))
    w("no-dimensions", 0, bytes([0, 0, 0x08, 0]))
    w("too-large", 0, idx(0x0E, [65536, 65536], b""))
    w("float64-out-of-range", 0, idx(0x0E, [1], struct.pack(">d", 1e39)))
    w("gzip-cut-short", 2, bytes([3]) + images)
    gz = bytearray(gzip.compress(labels, mtime=0))
    gz[-5] ^= 0xFF  # the CRC-32
    w("gzip-bad-checksum", 0, bytes(gz))
    w("gzip-declares-more", 1, idx(0x08, [100], bytes(10)))


if __name__ == "__main__":
    safetensors_seeds()
    idx_seeds()
