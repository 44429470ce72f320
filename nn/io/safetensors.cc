#include "nn/io/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <optional>
#include <set>
#include <string_view>
#include <system_error>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "ops/creation.h"

namespace tagflow::io {

namespace {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian and is copied as is");

using Path = std::filesystem::path;

constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;  // the reference implementation's limit
constexpr std::string_view kMetadataKey = "__metadata__";

template <typename... Args>
[[noreturn]] void fail(const Path& path, fmt::format_string<Args...> format, Args&&... args) {
  throw FileError(path, fmt::format(format, std::forward<Args>(args)...));
}

std::string errno_text(int error) { return std::system_category().message(error); }

// --- dtypes ---------------------------------------------------------------------------

struct DTypeCode {
  DType dtype;
  std::string_view code;
  int reference_rank;  ///< position in the reference's dtype enum, which its writer sorts by
};
constexpr DTypeCode kDTypeCodes[] = {{DType::kUInt8, "U8", 0},      {DType::kFloat16, "F16", 1},
                                     {DType::kBFloat16, "BF16", 2}, {DType::kInt32, "I32", 3},
                                     {DType::kFloat32, "F32", 4},   {DType::kInt64, "I64", 5}};

const DTypeCode& dtype_code(DType dtype) {
  return *std::find_if(std::begin(kDTypeCodes), std::end(kDTypeCodes),
                       [&](const DTypeCode& c) { return c.dtype == dtype; });
}

bool is_other_safetensors_dtype(std::string_view code) {
  for (std::string_view other : {"BOOL", "I8", "I16", "U16", "U32", "U64", "F64", "F8_E5M2",
                                 "F8_E4M3", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"}) {
    if (code == other) return true;
  }
  return false;
}

// --- the header, read event by event --------------------------------------------------

struct HeaderEntry {
  std::string name;
  std::optional<std::string> dtype;
  std::optional<std::vector<std::uint64_t>> shape;
  std::optional<std::vector<std::uint64_t>> data_offsets;
};

struct Header {
  std::vector<HeaderEntry> tensors;
  std::map<std::string, std::string> metadata;
};

/// One JSON value as the header reader sees it: its kind, and how an error
/// message names it ("the number -2", "an array").
struct JsonValue {
  enum Kind { kInteger, kString, kObject, kArray, kOther } kind;
  std::string description;
  std::uint64_t integer = 0;
  std::string text = {};  ///< a string's value
};

/// Reads the header JSON through nlohmann's SAX interface into a Header,
/// stopping at the first problem: nothing nested deeper than the format, no
/// array longer than it allows, no duplicate key at any level (nlohmann's
/// DOM parser would silently keep the last one), no unknown key in a tensor
/// entry. A hostile header thus costs at most its own size in memory. The
/// JSON parser itself checks the syntax and that strings are UTF-8.
class HeaderReader : public nlohmann::json_sax<nlohmann::json> {
 public:
  Header header;
  std::string problem;  ///< the first problem found; empty while none

  bool null() override { return value({JsonValue::kOther, "null"}); }
  bool boolean(bool) override { return value({JsonValue::kOther, "a boolean"}); }
  bool number_integer(std::int64_t v) override {  // only negative numbers ("-0" as 0) come here
    return value({JsonValue::kOther, v == 0 ? "the number -0" : fmt::format("the number {}", v)});
  }
  bool number_unsigned(std::uint64_t v) override {
    return value({JsonValue::kInteger, fmt::format("the number {}", v), v});
  }
  bool number_float(double, const std::string& text) override {
    return value({JsonValue::kOther, "the number " + text});
  }
  bool string(std::string& v) override {
    return value({JsonValue::kString, fmt::format("the string \"{}\"", v), 0, v});
  }
  bool binary(binary_t&) override { return reject("unexpected binary value"); }
  bool start_object(std::size_t) override { return value({JsonValue::kObject, "an object"}); }
  bool start_array(std::size_t) override { return value({JsonValue::kArray, "an array"}); }

  bool key(std::string& k) override {
    key_ = k;
    if (level_ == Level::kRoot) {
      if (k.empty()) return reject("expected non-empty tensor names, got \"\"");
      if (root_keys_.insert(k).second) return true;
      if (k == kMetadataKey) return reject("duplicate key \"{}\"", k);
      return reject("duplicate tensor name '{}'", k);
    }
    if (level_ == Level::kMetadata && header.metadata.contains(k)) {
      return reject("__metadata__: duplicate key '{}'", k);
    }
    if (level_ == Level::kTensor) {
      const HeaderEntry& e = header.tensors.back();
      if ((k == "dtype" && e.dtype) || (k == "shape" && e.shape) ||
          (k == "data_offsets" && e.data_offsets)) {
        return reject("tensor '{}': duplicate key \"{}\"", e.name, k);
      }
      if (k != "dtype" && k != "shape" && k != "data_offsets") {
        return reject("tensor '{}': unexpected key \"{}\": expected dtype, shape and data_offsets",
                      e.name, k);
      }
    }
    return true;
  }

  bool end_object() override {
    if (level_ == Level::kTensor) {
      const HeaderEntry& e = header.tensors.back();
      if (!e.dtype) return reject("tensor '{}': missing \"dtype\"", e.name);
      if (!e.shape) return reject("tensor '{}': missing \"shape\"", e.name);
      if (!e.data_offsets) return reject("tensor '{}': missing \"data_offsets\"", e.name);
    }
    level_ = level_ == Level::kRoot ? Level::kDone : Level::kRoot;
    return true;
  }

  bool end_array() override {  // only the arrays of a tensor entry get this far
    const HeaderEntry& e = header.tensors.back();
    if (field_ == "data_offsets" && e.data_offsets->size() != 2) {
      return reject("tensor '{}': expected data_offsets to be two integers [begin, end], got {}",
                    e.name, e.data_offsets->size());
    }
    level_ = Level::kTensor;
    return true;
  }

  bool parse_error(std::size_t, const std::string&,
                   const nlohmann::detail::exception& error) override {
    return reject("the header is not valid JSON: {}", error.what());
  }

 private:
  enum class Level { kTop, kRoot, kMetadata, kTensor, kArray, kDone };

  template <typename... Args>
  bool reject(fmt::format_string<Args...> format, Args&&... args) {
    if (problem.empty()) problem = fmt::format(format, std::forward<Args>(args)...);
    return false;
  }

  bool value(const JsonValue& v) {
    const bool is_object = v.kind == JsonValue::kObject;
    switch (level_) {
      case Level::kTop:
        if (!is_object) return reject("expected the header to be an object, got {}", v.description);
        level_ = Level::kRoot;
        return true;
      case Level::kRoot:
        if (key_ == kMetadataKey) {
          if (!is_object) {
            return reject("expected \"__metadata__\" to be an object of strings, got {}",
                          v.description);
          }
          level_ = Level::kMetadata;
          return true;
        }
        if (!is_object) {
          return reject("tensor '{}': expected an object {{dtype, shape, data_offsets}}, got {}",
                        key_, v.description);
        }
        header.tensors.push_back({.name = key_});
        level_ = Level::kTensor;
        return true;
      case Level::kMetadata:
        if (v.kind != JsonValue::kString) {
          return reject("__metadata__: expected string values, got {} for key '{}'", v.description,
                        key_);
        }
        header.metadata.emplace(key_, v.text);
        return true;
      case Level::kTensor:
        return tensor_field(v);
      case Level::kArray:
        return array_element(v);
      case Level::kDone:
        break;
    }
    return reject("unexpected {} after the header object", v.description);
  }

  bool tensor_field(const JsonValue& v) {
    HeaderEntry& e = header.tensors.back();
    field_ = key_;
    if (field_ == "dtype") {
      if (v.kind != JsonValue::kString) {
        return reject("tensor '{}': expected dtype to be a string, got {}", e.name, v.description);
      }
      e.dtype = v.text;
      return true;
    }
    if (v.kind != JsonValue::kArray) {
      return reject("tensor '{}': expected {} to be an array of integers, got {}", e.name, field_,
                    v.description);
    }
    (field_ == "shape" ? e.shape : e.data_offsets).emplace();
    level_ = Level::kArray;
    return true;
  }

  bool array_element(const JsonValue& v) {
    HeaderEntry& e = header.tensors.back();
    const bool is_shape = field_ == "shape";
    std::vector<std::uint64_t>& values = is_shape ? *e.shape : *e.data_offsets;
    if (v.kind != JsonValue::kInteger) {
      return reject("tensor '{}': expected non-negative 64-bit integers in {}, got {}", e.name,
                    field_, v.description);
    }
    if (is_shape && values.size() == static_cast<std::size_t>(Shape::kMaxDims)) {
      return reject("tensor '{}': expected a shape of at most {} dimensions, got more", e.name,
                    Shape::kMaxDims);
    }
    if (!is_shape && values.size() == 2) {
      return reject("tensor '{}': expected data_offsets to be two integers [begin, end], got more",
                    e.name);
    }
    values.push_back(v.integer);
    return true;
  }

  Level level_ = Level::kTop;
  std::string key_;    ///< the last key read
  std::string field_;  ///< the tensor field being read
  std::set<std::string> root_keys_;
};

// --- validation ---------------------------------------------------------------------------

/// One tensor of a validated file: where its bytes are in the data section.
struct TensorRecord {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin;
  std::uint64_t end;
};

TensorRecord validate_entry(const Path& path, const HeaderEntry& e, std::uint64_t data_bytes) {
  const auto code = std::find_if(std::begin(kDTypeCodes), std::end(kDTypeCodes),
                                 [&](const DTypeCode& c) { return c.code == *e.dtype; });
  if (code == std::end(kDTypeCodes)) {
    fail(
        path, "tensor '{}': expected dtype F32, F16, BF16, I32, I64 or U8, got \"{}\"{}", e.name,
        *e.dtype,
        is_other_safetensors_dtype(*e.dtype) ? " (a safetensors dtype tagflow does not hold)" : "");
  }
  const std::vector<std::uint64_t>& dims = *e.shape;
  constexpr auto kMaxExtent = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  // An empty tensor (a zero extent) still computes with its other extents
  // (Shape::size() multiplies them all, in order): their product must fit in
  // int64 too.
  std::uint64_t nonzero_product = 1;
  bool empty = false;
  bool overflow = false;
  for (std::uint64_t d : dims) {
    if (d == 0) {
      empty = true;
    } else {
      overflow |= __builtin_mul_overflow(nonzero_product, d, &nonzero_product);
    }
  }
  overflow |= nonzero_product > kMaxExtent;
  if (overflow && empty) {
    fail(path,
         "tensor '{}': the size of shape [{}] overflows 64 bits once its zero extents are left "
         "out (expected at most {} elements, which an array needs even when empty)",
         e.name, fmt::join(dims, ", "), kMaxExtent);
  }
  const std::uint64_t elements = empty ? 0 : nonzero_product;
  std::uint64_t bytes = 0;
  overflow |= __builtin_mul_overflow(elements, dtype_size(code->dtype), &bytes);
  if (overflow) {
    fail(path, "tensor '{}': the size of shape [{}] overflows 64 bits", e.name,
         fmt::join(dims, ", "));
  }
  const std::uint64_t begin = (*e.data_offsets)[0];
  const std::uint64_t end = (*e.data_offsets)[1];
  if (begin > end) {
    fail(path, "tensor '{}': expected data_offsets [begin, end] with begin <= end, got [{}, {}]",
         e.name, begin, end);
  }
  if (end > data_bytes) {
    fail(path,
         "tensor '{}': expected data_offsets within the data section [0, {}], got [{}, {}] "
         "(truncated file?)",
         e.name, data_bytes, begin, end);
  }
  if (end - begin != bytes) {
    fail(path, "tensor '{}': expected {} bytes for shape [{}] of {}, got data_offsets [{}, {}]",
         e.name, bytes, fmt::join(dims, ", "), *e.dtype, begin, end);
  }
  Shape shape(std::vector<std::int64_t>(dims.begin(), dims.end()));
  if (shape.ndim() == 0) shape.push_back(1);  // Note [safetensors layout]: 0-d loads as {1}
  return {e.name, code->dtype, shape, begin, end};
}

/// Every entry, then the layout: as the reference implementation requires,
/// the tensors tile the data section exactly. Returns them in file order.
std::vector<TensorRecord> validate(const Path& path, const Header& header,
                                   std::uint64_t data_bytes) {
  std::vector<TensorRecord> records;
  records.reserve(header.tensors.size());
  for (const HeaderEntry& e : header.tensors) {
    records.push_back(validate_entry(path, e, data_bytes));
  }
  std::sort(records.begin(), records.end(), [](const TensorRecord& a, const TensorRecord& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const TensorRecord& r = records[i];
    if (r.begin < covered) {
      const TensorRecord& p = records[i - 1];
      fail(path, "tensors '{}' [{}, {}] and '{}' [{}, {}] overlap: expected disjoint data_offsets",
           p.name, p.begin, p.end, r.name, r.begin, r.end);
    }
    if (r.begin > covered) {
      fail(path,
           "bytes [{}, {}) of the data section belong to no tensor: expected the tensors to tile "
           "the data section without holes, as the reference implementation requires",
           covered, r.begin);
    }
    covered = r.end;
  }
  if (covered != data_bytes) {
    fail(path,
         "expected the tensors to end at the end of the file, as the reference implementation "
         "requires, got {} trailing bytes after the last tensor",
         data_bytes - covered);
  }
  return records;
}

// --- files ------------------------------------------------------------------------------

/// A file descriptor, closed on scope exit.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  int get() const { return fd_; }
  /// Closes now; returns close()'s errno, 0 on success.
  int close() {
    const int result = ::close(std::exchange(fd_, -1));
    return result == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

FileDescriptor open_for_reading(const Path& path) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused
  // as not a regular file); reads of regular files ignore the flag.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail(path, "cannot open for reading: {}", errno_text(errno));
  return FileDescriptor(fd);
}

/// Reads exactly `bytes` at `offset`; a short read means the file shrank.
void read_exactly(const Path& path, int fd, std::uint64_t offset, void* out, std::uint64_t bytes) {
  auto* dst = static_cast<char*>(out);
  while (bytes > 0) {
    const ssize_t n = ::pread(fd, dst, bytes, static_cast<off_t>(offset));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0)
      fail(path, "cannot read {} bytes at offset {}: {}", bytes, offset, errno_text(errno));
    if (n == 0) fail(path, "the file ended at byte {} while being read: did it change?", offset);
    dst += n;
    offset += static_cast<std::uint64_t>(n);
    bytes -= static_cast<std::uint64_t>(n);
  }
}

/// A validated file: its tensors in file order, its metadata, where its data starts.
struct ValidatedFile {
  std::vector<TensorRecord> tensors;
  std::map<std::string, std::string> metadata;
  std::uint64_t data_start = 0;
};

/// Note [Validating a safetensors file]: everything but the tensor bytes.
ValidatedFile read_header(const Path& path, int fd) {
  struct stat info {};
  if (::fstat(fd, &info) != 0) fail(path, "cannot stat: {}", errno_text(errno));
  if (!S_ISREG(info.st_mode)) {
    fail(path, "expected a regular file, got {}",
         S_ISDIR(info.st_mode)    ? "a directory"
         : S_ISFIFO(info.st_mode) ? "a FIFO"
                                  : "a device");
  }
  const auto file_bytes = static_cast<std::uint64_t>(info.st_size);
  if (file_bytes < 8) {
    fail(path, "expected at least 8 bytes (the header length), got a file of {} bytes", file_bytes);
  }
  std::uint64_t header_bytes = 0;
  read_exactly(path, fd, 0, &header_bytes, 8);  // little-endian, like the host
  if (header_bytes > kMaxHeaderBytes) {
    fail(path,
         "expected a header of at most {} bytes, got a header length of {} (not safetensors?)",
         kMaxHeaderBytes, header_bytes);
  }
  if (header_bytes > file_bytes - 8) {
    fail(path, "expected a header of {} bytes, got a file with only {} bytes after the length",
         header_bytes, file_bytes - 8);
  }
  std::string text(header_bytes, '\0');
  read_exactly(path, fd, 8, text.data(), header_bytes);
  if (text.empty() || text[0] != '{') {  // as the reference checks
    fail(path, "expected the header to start with '{{', got {}",
         text.empty() ? std::string("an empty header")
                      : fmt::format("byte 0x{:02x}", static_cast<unsigned char>(text[0])));
  }
  // nlohmann's parser takes a NUL byte for the end of the input; JSON text has none.
  if (const auto nul = text.find('\0'); nul != std::string::npos) {
    fail(path, "the header is not valid JSON: a NUL byte at offset {}", nul);
  }
  HeaderReader reader;
  bool parsed = false;
  try {
    parsed = nlohmann::json::sax_parse(text, &reader);
  } catch (const nlohmann::json::exception& e) {
    fail(path, "the header is not valid JSON: {}", e.what());
  }
  if (!parsed) fail(path, "{}", reader.problem.empty() ? "invalid header" : reader.problem);
  const std::uint64_t data_start = 8 + header_bytes;
  return {validate(path, reader.header, file_bytes - data_start), std::move(reader.header.metadata),
          data_start};
}

/// `text` as a JSON string; throws for text that is not UTF-8.
std::string json_string(const Path& path, const std::string& text, std::string_view what) {
  try {
    return nlohmann::json(text).dump();
  } catch (const nlohmann::json::exception&) {
    fail(path, "expected {} in UTF-8, got invalid bytes in \"{}\"", what, text);
  }
}

/// Creates a file beside `path` under a name no other writer uses (the
/// process id and a counter; O_EXCL, so a stale one left by a crash is skipped).
FileDescriptor create_temporary(const Path& path, Path& temporary) {
  static std::atomic<std::uint64_t> counter{0};
  for (int attempt = 0;; ++attempt) {
    temporary = path.parent_path() / fmt::format(".{}.tmp.{}.{}", path.filename().string(),
                                                 ::getpid(), counter.fetch_add(1));
    const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd >= 0) return FileDescriptor(fd);
    if (errno != EEXIST || attempt == 100) {
      fail(path, "cannot create the temporary file '{}': {}", temporary.string(),
           errno_text(errno));
    }
  }
}

/// Writes `pieces` to a temporary file beside `path`, flushes it to disk and
/// renames it to `path`; on failure removes the temporary file.
void write_atomically(const Path& path,
                      const std::vector<std::pair<const void*, std::uint64_t>>& pieces) {
  Path temporary;
  FileDescriptor fd = create_temporary(path, temporary);
  auto fail_on = [&](const char* step, int error) {
    fail(path, "cannot {} the temporary file '{}': {}", step, temporary.string(),
         errno_text(error));
  };
  try {
    for (auto [data, bytes] : pieces) {
      for (auto* src = static_cast<const char*>(data); bytes > 0;) {
        const ssize_t n = ::write(fd.get(), src, bytes);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) fail_on("write", n < 0 ? errno : EIO);
        src += n;
        bytes -= static_cast<std::uint64_t>(n);
      }
    }
    if (::fsync(fd.get()) != 0) fail_on("flush", errno);
    if (const int error = fd.close(); error != 0) fail_on("close", error);
    if (::rename(temporary.c_str(), path.c_str()) != 0) fail_on("rename", errno);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
  // Make the rename itself durable; the file is complete either way.
  const Path directory = path.parent_path().empty() ? Path(".") : path.parent_path();
  FileDescriptor dir(::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) (void)::fsync(dir.get());
}

}  // namespace

void save_safetensors(const std::filesystem::path& path,
                      const std::vector<std::pair<std::string, NDArray>>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  if (!path.has_filename()) fail(path, "expected a file name, got a directory path");
  std::set<std::string_view> names;
  for (const auto& [name, array] : tensors) {
    if (name.empty()) fail(path, "expected non-empty tensor names, got \"\"");
    if (name == kMetadataKey)
      fail(path, "expected tensor names other than the reserved \"{}\"", name);
    if (!names.insert(name).second)
      fail(path, "expected distinct tensor names, got '{}' twice", name);
    if (!array.defined()) fail(path, "tensor '{}': expected an array, got an empty NDArray", name);
  }
  // File order and header: Note [safetensors layout].
  std::vector<const std::pair<std::string, NDArray>*> order;
  for (const auto& entry : tensors) order.push_back(&entry);
  std::sort(order.begin(), order.end(), [](const auto* a, const auto* b) {
    const int rank_a = dtype_code(a->second.dtype()).reference_rank;
    const int rank_b = dtype_code(b->second.dtype()).reference_rank;
    return rank_a != rank_b ? rank_a > rank_b : a->first < b->first;
  });
  std::string header = "{";
  if (!metadata.empty()) {
    header += fmt::format("\"{}\":{{", kMetadataKey);
    for (const auto& [key, text] : metadata) {
      if (header.back() != '{') header += ',';
      header += json_string(path, key, "metadata keys") + ':' +
                json_string(path, text, "metadata values");
    }
    header += '}';
  }
  std::uint64_t offset = 0;
  for (const auto* entry : order) {
    const NDArray& a = entry->second;
    if (header.size() > 1) header += ',';
    header +=
        fmt::format("{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                    json_string(path, entry->first, "tensor names"), dtype_code(a.dtype()).code,
                    fmt::join(a.shape().dims(), ","), offset, offset + a.nbytes());
    offset += a.nbytes();
  }
  header += '}';
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::uint64_t header_bytes = header.size();

  // Copies pushed all at once, then waited for: host arrays too, so that
  // a write another thread pushes meanwhile comes after the copy instead of
  // racing the file's write (Note [Host reads] in ops/ndarray.cc).
  std::vector<NDArray> host;
  for (const auto* entry : order) host.push_back(entry->second.copyto(cpu(0)));
  std::vector<std::pair<const void*, std::uint64_t>> pieces = {{&header_bytes, 8},
                                                               {header.data(), header.size()}};
  for (const NDArray& a : host) {
    a.wait_to_read();
    pieces.emplace_back(a.raw_data(), a.nbytes());
  }
  write_atomically(path, pieces);
}

std::vector<std::pair<std::string, NDArray>> load_safetensors(const std::filesystem::path& path,
                                                              Context ctx) {
  const FileDescriptor fd = open_for_reading(path);
  const ValidatedFile file = read_header(path, fd.get());
  (void)empty(Shape{0}, DType::kUInt8, ctx);  // DeviceError now for a ctx that does not exist
  const Context host = ctx.is_host() ? ctx : cpu(0);
  std::vector<std::pair<std::string, NDArray>> result;
  result.reserve(file.tensors.size());
  for (const TensorRecord& t : file.tensors) {
    NDArray values(t.shape, t.dtype, host);  // no pending operation: ours to fill
    read_exactly(path, fd.get(), file.data_start + t.begin, values.raw_data(), t.end - t.begin);
    result.emplace_back(t.name, ctx.is_host() ? values : values.copyto(ctx));
  }
  std::sort(result.begin(), result.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return result;
}

std::map<std::string, std::string> safetensors_metadata(const std::filesystem::path& path) {
  const FileDescriptor fd = open_for_reading(path);
  return read_header(path, fd.get()).metadata;
}

}  // namespace tagflow::io
