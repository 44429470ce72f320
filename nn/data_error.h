#pragma once
// DataError: a data or parameter file that is missing, malformed or does not
// hold what it should. The message starts with the file, then says what was
// expected and what came:
//
//   t10k-images-idx3-ubyte.gz: truncated: the header declares 7840000 bytes
//   of data, the file has 1000

#include <filesystem>
#include <string>
#include <utility>

#include "tagflow/engine/error.h"

namespace tagflow {

class DataError : public Error {
 public:
  /// `problem` is the text after "<file>: ".
  DataError(std::filesystem::path file, const std::string& problem)
      : Error(file.string() + ": " + problem), file_(std::move(file)) {}

  /// The file (or directory) the error is about.
  const std::filesystem::path& file() const { return file_; }

 private:
  std::filesystem::path file_;
};

namespace detail {
/// Throws DataError about `file` with a formatted problem:
///   throw_data_error(path, "expected {} dimensions, got {}", 3, ndim);
template <typename... Args>
[[noreturn]] void throw_data_error(const std::filesystem::path& file,
                                   fmt::format_string<Args...> format, Args&&... args) {
  throw DataError(file, fmt::format(format, std::forward<Args>(args)...));
}
}  // namespace detail

}  // namespace tagflow
