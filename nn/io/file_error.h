#pragma once
// FileError: a data or parameter file that is missing, malformed, truncated,
// of an unsupported kind, or could not be read or written. The message starts
// with the file, then says what was expected and what came:
//
//   t10k-images-idx3-ubyte.gz: truncated: the header declares 7840000 bytes
//   of data, the file has 1000
//   model.safetensors: tensor 'dense0.weight': expected data_offsets
//   [begin, end] with begin <= end, got [96, 64]
//
// Threads: safe to call concurrently. A FileError is immutable once thrown.

#include <filesystem>
#include <string>
#include <utility>

#include "engine/error.h"

namespace tagflow::io {

class FileError : public Error {
 public:
  /// `problem` is the text after "<file>: ".
  FileError(std::filesystem::path path, const std::string& problem)
      : Error(path.string() + ": " + problem), path_(std::move(path)) {}

  /// The file (or directory) the error is about.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace tagflow::io

namespace tagflow::detail {
/// Throws io::FileError about `path` with a formatted problem:
///   throw_file_error(path, "expected {} dimensions, got {}", 3, ndim);
template <typename... Args>
[[noreturn]] void throw_file_error(const std::filesystem::path& path,
                                   fmt::format_string<Args...> format, Args&&... args) {
  throw io::FileError(path, fmt::format(format, std::forward<Args>(args)...));
}
}  // namespace tagflow::detail
