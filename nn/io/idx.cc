#include "nn/io/idx.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "storage/storage.h"

// Note [Data files are read eagerly]
// read_idx reads and checks the whole file on the calling thread before it
// returns, instead of pushing an engine operation that would read it later.
// A bad file is then a FileError thrown at the call, where the caller can
// name the file and react, not an OperationError surfacing at some later
// wait; and a data loader that wants overlap runs read_idx on its own thread,
// as gluon's loaders do. Only the copy to a GPU goes through the engine.

namespace tagflow::io {
namespace {

namespace fs = std::filesystem;

/// An IDX element type: its code in the magic, its name, its bytes per
/// element in the file, and the dtype it becomes (the table in idx.h).
struct IdxElementType {
  std::uint8_t code;
  const char* name;
  std::uint64_t stored_size;
  DType dtype;
};

constexpr std::array<IdxElementType, 6> kIdxElementTypes = {{
    {0x08, "uint8", 1, DType::kUInt8},
    {0x09, "int8", 1, DType::kInt32},
    {0x0B, "int16", 2, DType::kInt32},
    {0x0C, "int32", 4, DType::kInt32},
    {0x0D, "float32", 4, DType::kFloat32},
    {0x0E, "float64", 8, DType::kFloat32},
}};

/// The most deflate can expand its input (zlib's technical details: a
/// 258-byte match in as little as 2 bits gives 1032:1). A gzip file of n
/// bytes cannot hold more than this times n bytes of data.
constexpr std::uint64_t kMaxDeflateExpansion = 1032;

/// Elements decoded per read of a multi-byte type (a 512 KiB buffer at most).
constexpr std::uint64_t kDecodeChunkElements = std::uint64_t{1} << 16;

/// A file read through zlib, which reads gzip and plain files alike.
class ZlibReader {
 public:
  explicit ZlibReader(const fs::path& path) : path_(path), file_(gzopen(path.c_str(), "rb")) {
    if (file_ == nullptr) {
      const int cause = errno;  // 0 when zlib itself failed (out of memory)
      detail::throw_file_error(path, "cannot open: {}",
                               cause == 0
                                   ? std::string("zlib could not allocate its state")
                                   : std::error_code(cause, std::generic_category()).message());
    }
    gzbuffer(file_, 1 << 18);  // before the first read: fewer, larger reads
  }
  ~ZlibReader() { gzclose(file_); }
  ZlibReader(const ZlibReader&) = delete;
  ZlibReader& operator=(const ZlibReader&) = delete;

  /// Reads up to `n` bytes into `dst`; fewer only at the end of the data.
  /// Throws FileError on a corrupt gzip stream or a failed read.
  std::uint64_t read(void* dst, std::uint64_t n) {
    auto* out = static_cast<unsigned char*>(dst);
    std::uint64_t done = 0;
    while (done < n) {
      const auto chunk = static_cast<unsigned>(std::min<std::uint64_t>(n - done, 1U << 30));
      const int got = gzread(file_, out + done, chunk);
      if (got < 0) {
        int errnum = Z_OK;
        // zlib's message is "<path>: <problem>"; FileError names the path.
        std::string_view message = gzerror(file_, &errnum);
        if (const std::string prefix = path_.string() + ": "; message.starts_with(prefix)) {
          message.remove_prefix(prefix.size());
        }
        if (errnum == Z_ERRNO) detail::throw_file_error(path_, "cannot read: {}", message);
        detail::throw_file_error(path_, "corrupt gzip data: {}", message);
      }
      if (got == 0) break;
      done += static_cast<std::uint64_t>(got);
    }
    if (done < n) {
      int errnum = Z_OK;
      gzerror(file_, &errnum);
      cut_short_ = errnum == Z_BUF_ERROR;  // zlib's "unexpected end of file"
    }
    return done;
  }

  /// Reads to the end and returns how many bytes were left.
  std::uint64_t count_rest() {
    std::array<unsigned char, 1 << 16> sink;
    std::uint64_t total = 0;
    while (const std::uint64_t got = read(sink.data(), sink.size())) total += got;
    return total;
  }

  /// True for a plain file, false for a gzip one (valid after a read).
  bool plain() const { return gzdirect(file_) == 1; }
  /// True when the gzip stream ended before its end marker and checksum.
  bool cut_short() const { return cut_short_; }

 private:
  fs::path path_;
  gzFile file_;
  bool cut_short_ = false;
};

struct IdxHeader {
  const IdxElementType* type = nullptr;
  Shape shape;
  std::uint64_t header_bytes = 0;
  std::uint64_t stored_bytes = 0;  ///< of data, in the file
};

std::uint32_t load_big_endian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::uint64_t load_big_endian64(const unsigned char* p) {
  return (std::uint64_t{load_big_endian32(p)} << 32) | load_big_endian32(p + 4);
}

const IdxElementType* find_element_type(std::uint8_t code) {
  for (const IdxElementType& type : kIdxElementTypes) {
    if (type.code == code) return &type;
  }
  return nullptr;
}

/// Reads and checks the magic and the dimensions, up to the first element.
IdxHeader read_header(ZlibReader& in, const fs::path& path) {
  std::array<unsigned char, 4> magic{};
  const std::uint64_t got = in.read(magic.data(), magic.size());
  if (got < magic.size()) {
    detail::throw_file_error(path,
                             "too short for an IDX file: expected a 4-byte magic (00 00 type "
                             "ndim), the file has {} byte{}",
                             got, got == 1 ? "" : "s");
  }
  if (magic[0] != 0 || magic[1] != 0) {
    detail::throw_file_error(path,
                             "not an IDX file: expected the magic 00 00 <type> <ndim>, got "
                             "{:02x} {:02x} {:02x} {:02x}",
                             magic[0], magic[1], magic[2], magic[3]);
  }
  IdxHeader header;
  header.type = find_element_type(magic[2]);
  if (header.type == nullptr) {
    detail::throw_file_error(path,
                             "unknown IDX element type 0x{:02x}: expected 0x08 (uint8), 0x09 "
                             "(int8), 0x0b (int16), 0x0c (int32), 0x0d (float32) or 0x0e (float64)",
                             magic[2]);
  }
  const int ndim = magic[3];
  if (ndim < 1 || ndim > Shape::kMaxDims) {
    detail::throw_file_error(path, "expected 1 to {} dimensions, the header declares {}",
                             Shape::kMaxDims, ndim);
  }
  std::array<unsigned char, 4 * Shape::kMaxDims> raw_dims{};
  const std::uint64_t dims_bytes = 4 * static_cast<std::uint64_t>(ndim);
  const std::uint64_t got_dims = in.read(raw_dims.data(), dims_bytes);
  if (got_dims < dims_bytes) {
    detail::throw_file_error(path,
                             "truncated: the header declares {} dimensions ({} bytes), the file "
                             "has {} bytes after the magic",
                             ndim, dims_bytes, got_dims);
  }
  // The extents become a Shape only once their product is known to fit.
  std::vector<std::int64_t> dims;
  for (int axis = 0; axis < ndim; ++axis) {
    const auto extent = static_cast<std::int32_t>(load_big_endian32(&raw_dims[4 * axis]));
    if (extent < 0) {
      detail::throw_file_error(path, "dimension {} is {}: expected a non-negative extent", axis,
                               extent);
    }
    dims.push_back(extent);
  }
  header.header_bytes = 4 + dims_bytes;

  // Elements, saturating: up to 8 extents of 2^31 overflow any integer type.
  std::uint64_t elements = 1;
  for (const std::int64_t extent : dims) {
    if (extent == 0) elements = 0;
  }
  for (const std::int64_t extent : dims) {
    if (__builtin_mul_overflow(elements, static_cast<std::uint64_t>(extent), &elements)) {
      elements = std::numeric_limits<std::uint64_t>::max();
    }
  }
  const std::uint64_t decoded_size = dtype_size(header.type->dtype);
  const bool stored_too_large = elements > kIdxMaxDataBytes / header.type->stored_size;
  const bool decoded_too_large = elements > kIdxMaxDataBytes / decoded_size;
  if (stored_too_large || decoded_too_large) {
    detail::throw_file_error(
        path, "too large: the header declares {} {} elements, more than the limit of {} bytes{}",
        fmt::format("{}", fmt::join(dims, "x")), header.type->name, kIdxMaxDataBytes,
        stored_too_large ? "" : fmt::format(" once widened to {}", dtype_name(header.type->dtype)));
  }
  // With a zero extent the data is empty, but the array still computes with
  // its other extents (Shape::size() multiplies them all, in order), so
  // those must multiply within int64.
  std::uint64_t nonzero_product = 1;
  bool overflow = false;
  for (const std::int64_t extent : dims) {
    if (extent != 0) {
      overflow |= __builtin_mul_overflow(nonzero_product, static_cast<std::uint64_t>(extent),
                                         &nonzero_product);
    }
  }
  constexpr auto kMaxElements =
      static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (overflow || nonzero_product > kMaxElements) {
    detail::throw_file_error(path,
                             "too large: the header declares {} {} elements: expected the extents "
                             "other than 0 to multiply to at most {}, the most elements an array "
                             "can have, even when a zero extent leaves it empty",
                             fmt::format("{}", fmt::join(dims, "x")), header.type->name,
                             kMaxElements);
  }
  header.shape = Shape(dims);
  header.stored_bytes = elements * header.type->stored_size;
  return header;
}

[[noreturn]] void throw_truncated(const fs::path& path, const ZlibReader& in,
                                  std::uint64_t declared, std::uint64_t found) {
  detail::throw_file_error(
      path, "truncated: the header declares {} bytes of data, the file has {}{}", declared, found,
      in.cut_short() ? " (the gzip stream is cut short)" : "");
}

[[noreturn]] void throw_trailing(const fs::path& path, std::uint64_t declared,
                                 std::uint64_t found) {
  detail::throw_file_error(path,
                           "trailing data: the header declares {} bytes of data, the file has {}",
                           declared, found);
}

/// Checks, before anything is allocated, that the file can hold the data
/// the header declares: exactly, for a plain file; within deflate's largest
/// expansion, for a gzip one.
void check_plausible(const fs::path& path, const ZlibReader& in, const IdxHeader& header) {
  std::error_code error;
  const std::uint64_t file_bytes = fs::file_size(path, error);
  if (error) detail::throw_file_error(path, "cannot read its size: {}", error.message());
  if (in.plain()) {
    const std::uint64_t found = file_bytes - std::min(file_bytes, header.header_bytes);
    if (found < header.stored_bytes) throw_truncated(path, in, header.stored_bytes, found);
    if (found > header.stored_bytes) throw_trailing(path, header.stored_bytes, found);
  } else if (header.stored_bytes / kMaxDeflateExpansion > file_bytes) {
    detail::throw_file_error(path,
                             "truncated: the header declares {} bytes of data, more than a "
                             "{}-byte gzip file can hold (deflate expands at most {}:1)",
                             header.stored_bytes, file_bytes, kMaxDeflateExpansion);
  }
}

/// Converts `count` big-endian elements of `type` at `src` to `dst` (of the
/// type's dtype); `first` is the index of the first, for messages.
void decode(const fs::path& path, const IdxElementType& type, const unsigned char* src,
            std::uint64_t count, void* dst, std::uint64_t first) {
  switch (type.code) {
    case 0x09: {
      auto* out = static_cast<std::int32_t*>(dst);
      for (std::uint64_t i = 0; i < count; ++i) out[i] = static_cast<std::int8_t>(src[i]);
    } break;
    case 0x0B: {
      auto* out = static_cast<std::int32_t*>(dst);
      for (std::uint64_t i = 0; i < count; ++i) {
        const auto bits = static_cast<std::uint16_t>((src[2 * i] << 8) | src[2 * i + 1]);
        out[i] = static_cast<std::int16_t>(bits);
      }
    } break;
    case 0x0C: {
      auto* out = static_cast<std::int32_t*>(dst);
      for (std::uint64_t i = 0; i < count; ++i) {
        out[i] = static_cast<std::int32_t>(load_big_endian32(src + 4 * i));
      }
    } break;
    case 0x0D: {
      auto* out = static_cast<float*>(dst);
      for (std::uint64_t i = 0; i < count; ++i) {
        out[i] = std::bit_cast<float>(load_big_endian32(src + 4 * i));
      }
    } break;
    case 0x0E: {
      auto* out = static_cast<float*>(dst);
      constexpr double kFloatMax = std::numeric_limits<float>::max();
      for (std::uint64_t i = 0; i < count; ++i) {
        const double value = std::bit_cast<double>(load_big_endian64(src + 8 * i));
        if (std::isfinite(value) && std::abs(value) > kFloatMax) {
          detail::throw_file_error(path,
                                   "float64 element {} is {}: expected a value within float32's "
                                   "range (magnitude at most {})",
                                   first + i, value, kFloatMax);
        }
        out[i] = static_cast<float>(value);
      }
    } break;
    default:  // uint8 is read in place, never decoded
      break;
  }
}

/// Reads the data into `out` (host memory), converting as it goes.
void read_data(ZlibReader& in, const fs::path& path, const IdxHeader& header, void* out) {
  const IdxElementType& type = *header.type;
  if (type.code == 0x08) {
    const std::uint64_t got = in.read(out, header.stored_bytes);
    if (got < header.stored_bytes) throw_truncated(path, in, header.stored_bytes, got);
    return;
  }
  const std::uint64_t elements = header.stored_bytes / type.stored_size;
  std::vector<unsigned char> buffer(std::min(elements, kDecodeChunkElements) * type.stored_size);
  auto* dst = static_cast<unsigned char*>(out);
  const std::uint64_t out_size = dtype_size(type.dtype);
  for (std::uint64_t first = 0; first < elements; first += kDecodeChunkElements) {
    const std::uint64_t count = std::min(kDecodeChunkElements, elements - first);
    const std::uint64_t bytes = count * type.stored_size;
    const std::uint64_t got = in.read(buffer.data(), bytes);
    if (got < bytes) {
      throw_truncated(path, in, header.stored_bytes, first * type.stored_size + got);
    }
    decode(path, type, buffer.data(), count, dst + first * out_size, first);
  }
}

}  // namespace

NDArray read_idx(const fs::path& path, Context ctx) {
  check_device(ctx);
  std::error_code error;
  const fs::file_status status = fs::status(path, error);
  // status() reports "not found" as a type, and as an error too.
  if (status.type() == fs::file_type::not_found) detail::throw_file_error(path, "no such file");
  if (error) detail::throw_file_error(path, "cannot access: {}", error.message());
  if (!fs::is_regular_file(status)) detail::throw_file_error(path, "not a regular file");

  ZlibReader in(path);
  const IdxHeader header = read_header(in, path);
  check_plausible(path, in, header);

  NDArray host(header.shape, header.type->dtype, ctx.is_host() ? ctx : cpu(0));
  // A new array has no pending operation: its memory is ours to fill.
  read_data(in, path, header, host.raw_data());
  if (const std::uint64_t rest = in.count_rest(); rest > 0) {
    throw_trailing(path, header.stored_bytes, header.stored_bytes + rest);
  }
  if (in.cut_short()) {
    detail::throw_file_error(path,
                             "truncated: the gzip stream is cut short after all {} bytes of data, "
                             "before its checksum",
                             header.stored_bytes);
  }
  return ctx.is_host() ? host : host.copyto(ctx);
}

}  // namespace tagflow::io
