#pragma once
// Parameter files in the safetensors format (huggingface/safetensors): an
// 8-byte little-endian header length N, N bytes of JSON header, then the raw
// little-endian tensor data. Files written here are byte for byte what the
// reference writer (`safetensors.numpy.save_file`) writes for the same
// tensors and metadata (up to the order of metadata keys, which the
// reference leaves to a hash map and tagflow sorts); files from any
// conforming writer load.
//
//   save_safetensors("model.safetensors", {{"dense0.weight", w}, {"dense0.bias", b}},
//                    {{"format", "tagflow"}});
//   for (auto& [name, value] : load_safetensors("model.safetensors", gpu(0))) { ... }
//
// Threads: safe to call concurrently. Loads and saves may run at once, on
// one file too: each save writes a temporary file of its own and renames it,
// so a reader sees a whole file and the last rename wins. Saving copies the
// arrays in engine operations first, so a write another thread pushes
// meanwhile comes after the copy (Note [Host reads] in ops/ndarray.cc).
//
// Note [safetensors layout]
// - Tensor order in the file: by dtype alignment, largest first (I64, F32,
//   I32, U8), then by name, byte-wise, exactly as the reference writer
//   orders them, so every tensor's data is aligned to its element size.
// - Header: compact JSON (no spaces), "__metadata__" first when there is
//   metadata (an empty map writes none, as the reference writes none for
//   `metadata=None`), then one entry per tensor in file order, each
//   {"dtype", "shape", "data_offsets"} in that order; padded with spaces to
//   a multiple of 8 bytes.
// - Shapes: tagflow arrays have at least one dimension, so a 0-d tensor
//   (shape [], e.g. PyTorch's `num_batches_tracked`) loads as shape {1};
//   saving it again writes [1].
//
// Note [Validating a safetensors file]
// A file is trusted for nothing. Before a single tensor byte is allocated,
// the loader checks: the header length (at most 100 MB, as the reference
// allows, and within the file); the header (valid JSON, starting with '{',
// an object, nested no deeper than the format, no duplicate key at any
// level, no unknown key in a tensor entry); every tensor (a non-empty name,
// one of F32/I32/I64/U8, at most 8 non-negative integer extents whose byte
// size does not overflow and whose product, zero extents left out, is at
// most 2^63 - 1 even for an empty tensor, data_offsets two integers
// [begin, end] with begin <= end <= the data section and end - begin equal
// to the byte size); and the layout: as the reference implementation
// requires, the tensors tile the data section exactly, from its first byte
// to the end of the file, without overlap, hole or trailing byte. What is
// then allocated is at most the size of the file. Any violation is a
// FileError.

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "nn/io/file_error.h"
#include "ops/ndarray.h"

namespace tagflow::io {

/// Writes `tensors` (named arrays on any devices; device arrays are copied
/// to the host, and the call waits for their values) and `metadata` to
/// `path` in the safetensors format (Note [safetensors layout]).
///
/// The file is written under a temporary name in the same directory, flushed
/// to disk and renamed over `path`, so `path` holds either its previous
/// contents or the complete new file, never a part. Throws
/// FileError for an empty, duplicate or reserved ("__metadata__")
/// name, an undefined array, a name or metadata string that is not UTF-8,
/// or a failed write (naming the file and the system's reason); rethrows,
/// as wait_to_read does, the error of a failed operation that was to
/// produce one of the arrays.
///
///   save_safetensors("net.safetensors", {{"w", w}, {"b", b}}, {{"epoch", "3"}});
void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, NDArray>>& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads every tensor of the safetensors file `path` onto `ctx`, sorted by
/// name (byte-wise). The whole file is validated before anything is
/// allocated (Note [Validating a safetensors file]); the host reads end
/// before the call returns, copies to a GPU are pushed (lazy, as copyto).
/// Throws FileError for a file that cannot be read or is not a
/// valid safetensors file of supported dtypes, DeviceError for a `ctx` that
/// does not exist.
///
///   auto params = load_safetensors("net.safetensors", gpu(0));
///   NDArray w = params[0].second;
std::vector<std::pair<std::string, NDArray>> load_safetensors(const std::filesystem::path& path,
                                                              Context ctx = cpu());

/// The "__metadata__" map of the safetensors file `path` (empty when it has
/// none). Reads and validates the header only, as load_safetensors does,
/// not the tensor data.
///
///   std::string epoch = safetensors_metadata("net.safetensors").at("epoch");
std::map<std::string, std::string> safetensors_metadata(const std::filesystem::path& path);

}  // namespace tagflow::io
