#pragma once
// What the fuzz targets share: the file each input is written to (the
// readers fuzzed here take a path), and how a target reports a finding that
// is not a crash (an exception of the wrong type, results that disagree).
//
//   static FuzzInputFile file("input.safetensors");
//   file.write(data, size);
//   try { io::load_safetensors(file.path()); }
//   catch (const io::FileError&) {}                 // the documented refusal
//   catch (...) { report_unexpected_exception("load_safetensors"); }

#include <cxxabi.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <typeinfo>

#include <fmt/format.h>

namespace tagflow::fuzz {

/// Prints `problem` and aborts, which libFuzzer reports as a crash and saves
/// the input that caused it.
[[noreturn]] inline void report_finding(const std::string& problem) {
  std::fprintf(stderr, "\n*** fuzz finding: %s\n", problem.c_str());
  std::fflush(stderr);
  std::abort();
}

/// The readable name of the dynamic type of `e`.
inline std::string type_name(const std::exception& e) {
  int status = 0;
  char* name = abi::__cxa_demangle(typeid(e).name(), nullptr, nullptr, &status);
  std::string result = status == 0 ? name : typeid(e).name();
  std::free(name);
  return result;
}

/// Reports the exception being handled (call from a catch block): any type
/// but the reader's documented error is a finding.
[[noreturn]] inline void report_unexpected_exception(const char* call) {
  try {
    throw;
  } catch (const std::exception& e) {
    report_finding(
        fmt::format("{} threw {} (expected success or the reader's documented error): {}", call,
                    type_name(e), e.what()));
  } catch (...) {
    report_finding(fmt::format("{} threw an exception not derived from std::exception", call));
  }
}

/// One file per process in $TMPDIR (scripts/fuzz.sh points it at a scratch
/// directory), rewritten for every input and removed at exit.
class FuzzInputFile {
 public:
  /// `name` ends the file name; its extension matters to no reader here.
  explicit FuzzInputFile(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              fmt::format("tagflow-fuzz-{}-{}", ::getpid(), name)) {}
  ~FuzzInputFile() { ::unlink(path_.c_str()); }
  FuzzInputFile(const FuzzInputFile&) = delete;
  FuzzInputFile& operator=(const FuzzInputFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

  /// Replaces the file's contents with `size` bytes at `data`; a failure is
  /// the machine's, not the reader's, and ends the run.
  void write(const void* data, std::size_t size) const {
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) fail("open");
    for (auto* p = static_cast<const char*>(data); size > 0;) {
      const ssize_t n = ::write(fd, p, size);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) fail("write");
      p += n;
      size -= static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0) fail("close");
  }

 private:
  [[noreturn]] void fail(const char* step) const {
    std::fprintf(stderr, "fuzz: cannot %s %s: %s\n", step, path_.c_str(), std::strerror(errno));
    std::exit(2);
  }

  std::filesystem::path path_;
};

}  // namespace tagflow::fuzz
