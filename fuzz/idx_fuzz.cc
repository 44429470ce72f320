// Fuzzes the IDX reader (nn/io/idx.h), plain and gzip. The first byte of an
// input says how the rest becomes a file:
//   0  as is (an IDX file, or gzip bytes the fuzzer mutates directly);
//   1  gzip-compressed here, one member;
//   2  gzip-compressed here, then cut short by 1 + input[1] % 64 bytes
//      (the IDX bytes start at input[2]);
//   3  gzip-compressed here as two members, split at input[1] / 256 of the
//      IDX bytes (which start at input[2]); gzip readers take both.
// Every file must either be read or be refused with a io::FileError. When the
// IDX bytes are known (every mode but raw gzip bytes), an independent
// decoder below says what must happen: a valid file gives exactly its shape,
// dtype and values; an invalid or cut-short one is refused.

#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fuzz/fuzz_support.h"
#include "nn/io/idx.h"

namespace tagflow::fuzz {
namespace {

using Bytes = std::vector<std::uint8_t>;

/// `size` bytes at `data` as one gzip member.
Bytes gzip(const std::uint8_t* data, std::size_t size) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
      Z_OK) {
    report_finding("deflateInit2 failed");
  }
  Bytes out(deflateBound(&stream, size));
  stream.next_in = const_cast<std::uint8_t*>(data);  // zlib's API is not const-correct
  stream.avail_in = static_cast<uInt>(size);
  stream.next_out = out.data();
  stream.avail_out = static_cast<uInt>(out.size());
  if (deflate(&stream, Z_FINISH) != Z_STREAM_END) report_finding("deflate did not finish");
  out.resize(stream.total_out);
  deflateEnd(&stream);
  return out;
}

/// What an IDX file holds, decoded independently of the reader: its dtype,
/// shape and values (as the bytes of the array io::read_idx must give), or why
/// io::read_idx must refuse it.
struct Expected {
  std::optional<std::string> refusal;
  DType dtype = DType::kUInt8;
  Shape shape;
  Bytes values;
};

std::uint64_t big_endian(const std::uint8_t* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
  return v;
}

template <typename T>
void append(Bytes& out, T value) {
  const auto* p = reinterpret_cast<const std::uint8_t*>(&value);
  out.insert(out.end(), p, p + sizeof value);
}

struct ElementType {
  std::uint8_t code;
  std::size_t stored_size;
  DType dtype;
};
constexpr ElementType kElementTypes[] = {{0x08, 1, DType::kUInt8},   {0x09, 1, DType::kInt32},
                                         {0x0B, 2, DType::kInt32},   {0x0C, 4, DType::kInt32},
                                         {0x0D, 4, DType::kFloat32}, {0x0E, 8, DType::kFloat32}};

Expected decode(const Bytes& file) {
  Expected e;
  auto refuse = [&](std::string why) {
    e.refusal = std::move(why);
    return e;
  };
  if (file.size() < 4 || file[0] != 0 || file[1] != 0) return refuse("no IDX magic");
  const std::uint8_t type = file[2];
  const int ndim = file[3];
  const ElementType* element = nullptr;
  for (const ElementType& t : kElementTypes) {
    if (t.code == type) element = &t;
  }
  if (element == nullptr) return refuse("unknown element type");
  e.dtype = element->dtype;
  if (ndim < 1 || ndim > Shape::kMaxDims) return refuse("0 or more than 8 dimensions");
  const std::size_t header_bytes = 4 + 4 * static_cast<std::size_t>(ndim);
  if (file.size() < header_bytes) return refuse("truncated header");
  // Saturates above the limit: (2^32 + 1) * (2^31 - 1) < 2^64.
  constexpr std::uint64_t kSaturated = io::kIdxMaxDataBytes + 1;
  std::uint64_t elements = 1;
  // The extents are kept apart until checked: a Shape refuses a product
  // beyond 2^63 - 1 itself.
  std::vector<std::int64_t> dims;
  for (int axis = 0; axis < ndim; ++axis) {
    const auto extent = static_cast<std::int32_t>(big_endian(&file[4 + 4 * axis], 4));
    if (extent < 0) return refuse("negative extent");
    dims.push_back(extent);
    elements = std::min(elements * static_cast<std::uint64_t>(extent), kSaturated);
  }
  if (elements > io::kIdxMaxDataBytes / element->stored_size ||
      elements > io::kIdxMaxDataBytes / dtype_size(e.dtype)) {
    return refuse("more data than the limit");
  }
  // An empty array's other extents must still multiply within int64.
  std::uint64_t nonzero_product = 1;
  for (const std::int64_t extent : dims) {
    if (extent != 0 && __builtin_mul_overflow(nonzero_product, static_cast<std::uint64_t>(extent),
                                              &nonzero_product)) {
      return refuse("extents other than 0 overflow");
    }
  }
  if (nonzero_product > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
    return refuse("extents other than 0 beyond int64");
  }
  e.shape = Shape(dims);
  if (file.size() - header_bytes != elements * element->stored_size) {
    return refuse("data size differs from the header's");
  }
  const int stored_size = static_cast<int>(element->stored_size);
  const std::uint8_t* p = file.data() + header_bytes;
  for (std::uint64_t i = 0; i < elements; ++i, p += stored_size) {
    const std::uint64_t bits = big_endian(p, stored_size);
    switch (type) {
      case 0x08:
        append(e.values, static_cast<std::uint8_t>(bits));
        break;
      case 0x09:
        append(e.values, std::int32_t{static_cast<std::int8_t>(bits)});
        break;
      case 0x0B:
        append(e.values, std::int32_t{static_cast<std::int16_t>(bits)});
        break;
      case 0x0C:
        append(e.values, static_cast<std::int32_t>(bits));
        break;
      case 0x0D:
        append(e.values, std::bit_cast<float>(static_cast<std::uint32_t>(bits)));
        break;
      case 0x0E: {
        const double v = std::bit_cast<double>(bits);
        if (std::isfinite(v) && std::abs(v) > std::numeric_limits<float>::max()) {
          return refuse("float64 beyond float32's range");
        }
        append(e.values, static_cast<float>(v));
      } break;
    }
  }
  return e;
}

/// The file an input stands for, and the IDX bytes it holds when known,
/// with whether the file is cut short (mode 2).
struct Case {
  Bytes file;
  std::optional<Bytes> idx;
  bool cut_short = false;
};

Case make_case(const std::uint8_t* data, std::size_t size) {
  Case c;
  if (size == 0) return {{}, Bytes{}, false};
  const int mode = data[0] & 3;
  const std::uint8_t parameter = size > 1 ? data[1] : 0;
  const std::uint8_t* body = data + (mode >= 2 ? std::min<std::size_t>(size, 2) : 1);
  const std::size_t body_size = static_cast<std::size_t>(data + size - body);
  c.idx = Bytes(body, body + body_size);
  switch (mode) {
    case 0:
      c.file = *c.idx;
      if (body_size >= 2 && body[0] == 0x1f && body[1] == 0x8b) c.idx.reset();  // zlib inflates it
      break;
    case 1:
      c.file = gzip(body, body_size);
      break;
    case 2: {
      c.file = gzip(body, body_size);
      c.file.resize(c.file.size() - std::min<std::size_t>(c.file.size(), 1 + parameter % 64));
      c.cut_short = true;
    } break;
    case 3: {
      const std::size_t split = body_size * parameter / 256;
      c.file = gzip(body, split);
      const Bytes second = gzip(body + split, body_size - split);
      c.file.insert(c.file.end(), second.begin(), second.end());
    } break;
  }
  return c;
}

void check(const Case& c, const std::optional<NDArray>& read, const std::string& error) {
  if (!c.idx) return;  // raw gzip bytes: only the error's type is checked
  if (c.cut_short) {
    if (read) report_finding("a cut-short gzip file was read without error");
    return;
  }
  const Expected e = decode(*c.idx);
  if (e.refusal && read) {
    report_finding(fmt::format("read a file that must be refused ({})", *e.refusal));
  }
  if (!e.refusal && !read) report_finding("refused a valid file: " + error);
  if (!read) return;
  const NDArray& a = *read;
  if (a.dtype() != e.dtype || a.shape() != e.shape || a.context() != cpu(0)) {
    report_finding(fmt::format("expected {} {} on cpu(0), got {} {} on {}", e.shape.str(),
                               dtype_name(e.dtype), a.shape().str(), dtype_name(a.dtype()),
                               a.context().str()));
  }
  if (a.nbytes() != e.values.size() ||
      (a.nbytes() > 0 && std::memcmp(a.raw_data(), e.values.data(), e.values.size()) != 0)) {
    report_finding("the values read differ from the file's");
  }
}

}  // namespace
}  // namespace tagflow::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace tagflow::fuzz;
  static const FuzzInputFile input("input.idx");
  const Case c = make_case(data, size);
  input.write(c.file.data(), c.file.size());
  std::optional<tagflow::NDArray> read;
  std::string error;
  try {
    read = tagflow::io::read_idx(input.path());
  } catch (const tagflow::io::FileError& e) {
    error = e.what();
  } catch (...) {
    report_unexpected_exception("read_idx");
  }
  check(c, read, error);
  return 0;
}
