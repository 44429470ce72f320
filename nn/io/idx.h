#pragma once
// Reading IDX files, the format of MNIST and Fashion-MNIST: a 4-byte magic
// (00 00 <element type> <number of dimensions>), one big-endian int32 per
// dimension, then the elements in row-major order, big-endian. Plain and
// gzip-compressed files are read alike.
//
//   NDArray images = read_idx("/usr/share/datasets/fashion-mnist/"
//                             "t10k-images-idx3-ubyte.gz");
//   // images: 10000x28x28 uint8 on cpu(0)
//
// Element types and the dtype each becomes (tagflow has no int8, int16 or
// float64 dtype, so those are widened or narrowed as stated):
//
//   0x08 uint8   -> uint8
//   0x09 int8    -> int32    exact
//   0x0B int16   -> int32    exact
//   0x0C int32   -> int32
//   0x0D float32 -> float32
//   0x0E float64 -> float32  rounded to nearest; NaN and infinities kept;
//                            a finite value beyond float32's range
//                            (|v| > 3.4028235e38) is a FileError
//
// Every malformed file is a FileError naming the file, what was expected and
// what came: a missing file, a wrong magic, an unknown element type, 0 or more
// than 8 dimensions, a negative extent, data larger than kIdxMaxDataBytes,
// extents other than 0 whose product exceeds int64 (even in an empty array),
// truncated data, trailing bytes, a corrupt or cut gzip stream. Nothing is
// allocated before the header is found plausible: the declared data must fit
// the limit and, for a plain file, match the file's size exactly; for a gzip
// file, be no more than deflate's largest expansion (1032:1) of the file.
//
// Threads: safe to call concurrently. read_idx keeps no state: several
// threads may read files, the same file included, at once.

#include <cstdint>
#include <filesystem>

#include "nn/io/file_error.h"
#include "ops/ndarray.h"

namespace tagflow::io {

/// The most data an IDX file may declare, as stored and as decoded: 4 GiB.
inline constexpr std::uint64_t kIdxMaxDataBytes = std::uint64_t{4} << 30;

/// The array stored in the IDX file at `path` (plain or gzip), on `ctx`.
/// Reads the file before returning (Note [Data files are read eagerly] in
/// idx.cc), so every error is thrown here as a FileError; on a GPU the values
/// then travel by an engine copy, as with `array()`.
///
///   NDArray labels = read_idx(dir / "train-labels-idx1-ubyte.gz", gpu(0));
NDArray read_idx(const std::filesystem::path& path, Context ctx = cpu());

}  // namespace tagflow::io
