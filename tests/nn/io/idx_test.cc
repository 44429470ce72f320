// io::read_idx against files written here by a small independent writer: every
// element type, plain and gzip, on every device, value by value; and every
// kind of malformed file, with its message.

#include "nn/io/idx.h"

#include <zlib.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/common/test_directory.h"
#include "tests/nn/io/idx_files.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

namespace fs = std::filesystem;
using testing::all_devices;
using testing::Bytes;
using testing::Compression;
using testing::concat;
using testing::error_of;
using testing::idx_header;
using testing::put_big_endian;
using testing::write_file;

Bytes read_raw(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

/// An IDX payload of `n` random elements of one type, and the values
/// io::read_idx must give: integers exactly, floats bit for bit.
struct Sample {
  Bytes payload;
  DType dtype;
  std::vector<std::int64_t> ints;
  std::vector<float> floats;
};

Sample make_sample(unsigned char type, std::int64_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Sample s;
  auto ints_in = [&](std::int64_t low, std::int64_t high, int bytes) {
    std::uniform_int_distribution<std::int64_t> dist(low, high);
    for (std::int64_t i = 0; i < n; ++i) {
      // The extremes first, then random values.
      const std::int64_t v = i == 0 ? low : i == 1 ? high : dist(rng);
      s.ints.push_back(v);
      put_big_endian(s.payload, static_cast<std::uint64_t>(v), bytes);
    }
  };
  switch (type) {
    case 0x08:
      s.dtype = DType::kUInt8;
      ints_in(0, 255, 1);
      break;
    case 0x09:
      s.dtype = DType::kInt32;
      ints_in(-128, 127, 1);
      break;
    case 0x0B:
      s.dtype = DType::kInt32;
      ints_in(-32768, 32767, 2);
      break;
    case 0x0C:
      s.dtype = DType::kInt32;
      ints_in(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max(),
              4);
      break;
    case 0x0D: {
      s.dtype = DType::kFloat32;
      const float specials[] = {
          std::numeric_limits<float>::quiet_NaN(),  std::numeric_limits<float>::infinity(),
          -std::numeric_limits<float>::infinity(),  -0.f,
          std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
      std::uniform_real_distribution<float> dist(-1e6f, 1e6f);
      for (std::int64_t i = 0; i < n; ++i) {
        const float v = i < 6 ? specials[i] : dist(rng);
        s.floats.push_back(v);
        std::uint32_t bits;
        std::memcpy(&bits, &v, 4);
        put_big_endian(s.payload, bits, 4);
      }
    } break;
    case 0x0E: {
      s.dtype = DType::kFloat32;
      // float64 is rounded to the nearest float32 (idx.h): the C++ conversion.
      const double specials[] = {std::numeric_limits<double>::quiet_NaN(),
                                 -std::numeric_limits<double>::infinity(),
                                 0.1,
                                 -double{std::numeric_limits<float>::max()},
                                 1e-300,
                                 -0.0};
      std::uniform_real_distribution<double> dist(-1e30, 1e30);
      for (std::int64_t i = 0; i < n; ++i) {
        const double v = i < 6 ? specials[i] : dist(rng);
        s.floats.push_back(static_cast<float>(v));
        std::uint64_t bits;
        std::memcpy(&bits, &v, 8);
        put_big_endian(s.payload, bits, 8);
      }
    } break;
  }
  return s;
}

void expect_values(const NDArray& a, const Sample& s, const std::string& what) {
  ASSERT_EQ(a.dtype(), s.dtype) << what;
  if (s.dtype == DType::kFloat32) {
    const std::vector<float> got = a.to_vector<float>();
    ASSERT_EQ(got.size(), s.floats.size()) << what;
    for (std::size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(std::memcmp(&got[i], &s.floats[i], 4), 0)
          << what << ": element " << i << " is " << got[i] << ", expected " << s.floats[i];
    }
    return;
  }
  std::vector<std::int64_t> got;
  if (s.dtype == DType::kUInt8) {
    for (std::uint8_t v : a.to_vector<std::uint8_t>()) got.push_back(v);
  } else {
    for (std::int32_t v : a.to_vector<std::int32_t>()) got.push_back(v);
  }
  EXPECT_EQ(got, s.ints) << what;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_test_directory("tagflow_idx_test"); }
  void TearDown() override { fs::remove_all(dir_); }

  /// Writes `bytes` to a new file of the test directory and returns its path.
  fs::path file(const std::string& name, const Bytes& bytes,
                Compression compression = Compression::kPlain) {
    const fs::path path = dir_ / name;
    write_file(path, bytes, compression);
    return path;
  }

  fs::path dir_;
};

const unsigned char kTypes[] = {0x08, 0x09, 0x0B, 0x0C, 0x0D, 0x0E};

TEST_F(IdxTest, EveryTypePlainAndGzipRoundTripsOnEveryDevice) {
  const std::vector<std::vector<std::uint32_t>> shapes = {
      {7}, {3, 4, 5}, {1, 2, 1, 3, 1, 1, 1, 2}};  // 8-D with extent-1 axes
  std::uint32_t seed = 0;
  for (unsigned char type : kTypes) {
    for (const auto& dims : shapes) {
      std::int64_t n = 1;
      for (std::uint32_t d : dims) n *= d;
      const Sample sample = make_sample(type, n, ++seed);
      for (Compression compression : {Compression::kPlain, Compression::kGzip}) {
        const fs::path path =
            file("sample" + std::to_string(seed) + (compression == Compression::kGzip ? ".gz" : ""),
                 concat(idx_header(type, dims), sample.payload), compression);
        for (Context ctx : all_devices()) {
          const std::string what = path.filename().string() + " on " + ctx.str();
          const NDArray a = io::read_idx(path, ctx);
          EXPECT_EQ(a.context(), ctx) << what;
          EXPECT_EQ(a.shape(), Shape(std::vector<std::int64_t>(dims.begin(), dims.end()))) << what;
          expect_values(a, sample, what);
        }
      }
    }
  }
}

TEST_F(IdxTest, DataLargerThanOneDecodeChunkRoundTrips) {
  // 200003 elements cross the reader's 65536-element chunks unevenly.
  for (unsigned char type : {0x08, 0x0B, 0x0E}) {
    const Sample sample = make_sample(type, 200003, type);
    const fs::path path =
        file("big.gz", concat(idx_header(type, {200003}), sample.payload), Compression::kGzip);
    expect_values(io::read_idx(path), sample, "type " + std::to_string(type));
  }
}

TEST_F(IdxTest, ZeroExtentsGiveEmptyArrays) {
  for (Compression compression : {Compression::kPlain, Compression::kGzip}) {
    const NDArray images = io::read_idx(file("e8", idx_header(0x08, {0, 28, 28}), compression));
    EXPECT_EQ(images.shape(), Shape({0, 28, 28}));
    EXPECT_EQ(images.dtype(), DType::kUInt8);
    // A zero extent anywhere makes the data empty, however large the others.
    const NDArray wide =
        io::read_idx(file("e16", idx_header(0x0B, {0x7fffffff, 0}), compression), gpu(1));
    EXPECT_EQ(wide.shape(), Shape({0x7fffffff, 0}));
    EXPECT_EQ(wide.size(), 0);
    EXPECT_EQ(wide.dtype(), DType::kInt32);
  }
}

TEST_F(IdxTest, MalformedHeadersGiveDataErrorsNamingTheFile) {
  auto error_for = [&](const Bytes& bytes, Compression compression = Compression::kPlain) {
    const fs::path path = file("bad", bytes, compression);
    return error_of<io::FileError>([&] { (void)io::read_idx(path); });
  };
  const std::string bad = (dir_ / "bad").string() + ": ";
  EXPECT_EQ(error_of<io::FileError>([&] { (void)io::read_idx(dir_ / "none.gz"); }),
            (dir_ / "none.gz").string() + ": no such file");
  EXPECT_EQ(error_of<io::FileError>([&] { (void)io::read_idx(dir_); }),
            dir_.string() + ": not a regular file");
  for (Compression compression : {Compression::kPlain, Compression::kGzip}) {
    EXPECT_EQ(error_for({}, compression),
              bad +
                  "too short for an IDX file: expected a 4-byte magic (00 00 type ndim), the "
                  "file has 0 bytes");
    EXPECT_EQ(error_for({0, 0, 8}, compression),
              bad +
                  "too short for an IDX file: expected a 4-byte magic (00 00 type ndim), the "
                  "file has 3 bytes");
  }
  EXPECT_EQ(error_for({'P', '5', '\n', '2', '8'}),
            bad + "not an IDX file: expected the magic 00 00 <type> <ndim>, got 50 35 0a 32");
  EXPECT_EQ(error_for(idx_header(0x0A, {3})),
            bad +
                "unknown IDX element type 0x0a: expected 0x08 (uint8), 0x09 (int8), 0x0b "
                "(int16), 0x0c (int32), 0x0d (float32) or 0x0e (float64)");
  EXPECT_EQ(error_for(idx_header(0x08, {})),
            bad + "expected 1 to 8 dimensions, the header declares 0");
  EXPECT_EQ(error_for(idx_header(0x08, {1, 1, 1, 1, 1, 1, 1, 1, 1})),
            bad + "expected 1 to 8 dimensions, the header declares 9");
  Bytes cut_dims = idx_header(0x08, {10, 28, 28});
  cut_dims.resize(10);
  EXPECT_EQ(error_for(cut_dims, Compression::kGzip),
            bad +
                "truncated: the header declares 3 dimensions (12 bytes), the file has 6 bytes "
                "after the magic");
  EXPECT_EQ(error_for(idx_header(0x08, {5, 0xffffffff})),
            bad + "dimension 1 is -1: expected a non-negative extent");
}

TEST_F(IdxTest, HeadersDeclaringTooMuchDataAreRejectedBeforeAllocating) {
  auto error_for = [&](const Bytes& bytes, Compression compression = Compression::kPlain) {
    const fs::path path = file("huge", bytes, compression);
    return error_of<io::FileError>([&] { (void)io::read_idx(path); });
  };
  const std::string huge = (dir_ / "huge").string() + ": ";
  // 2^64 elements: a product that wraps to exactly 0 in 64 bits.
  EXPECT_EQ(error_for(idx_header(0x08, {65536, 65536, 65536, 65536})),
            huge +
                "too large: the header declares 65536x65536x65536x65536 uint8 elements, more "
                "than the limit of 4294967296 bytes");
  EXPECT_EQ(error_for(idx_header(0x0E, std::vector<std::uint32_t>(8, 0x7fffffff))),
            huge +
                "too large: the header declares 2147483647x2147483647x2147483647x2147483647x"
                "2147483647x2147483647x2147483647x2147483647 float64 elements, more than the "
                "limit of 4294967296 bytes");
  EXPECT_EQ(error_for(idx_header(0x08, {65536, 65537})),
            huge +
                "too large: the header declares 65536x65537 uint8 elements, more than the "
                "limit of 4294967296 bytes");
  // 4 GiB as stored, 8 or 16 GiB as int32.
  EXPECT_EQ(error_for(idx_header(0x0B, {32768, 65536})),
            huge +
                "too large: the header declares 32768x65536 int16 elements, more than the "
                "limit of 4294967296 bytes once widened to int32");
  EXPECT_EQ(error_for(idx_header(0x09, {65536, 65536})),
            huge +
                "too large: the header declares 65536x65536 int8 elements, more than the "
                "limit of 4294967296 bytes once widened to int32");
  // Exactly the limit is allowed by the header, but the file must hold it:
  // its size says no before 4 GiB are allocated.
  EXPECT_EQ(error_for(idx_header(0x08, {65536, 65536})),
            huge + "truncated: the header declares 4294967296 bytes of data, the file has 0");
  const Bytes gzip_claim = concat(idx_header(0x08, {65536, 65536}), Bytes(100, 7));
  const std::string message = error_for(gzip_claim, Compression::kGzip);
  const std::string gzip_size = std::to_string(fs::file_size(dir_ / "huge"));
  EXPECT_EQ(message, huge +
                         "truncated: the header declares 4294967296 bytes of data, more than "
                         "a " +
                         gzip_size +
                         "-byte gzip file can hold (deflate expands at "
                         "most 1032:1)");
}

TEST_F(IdxTest, ZeroExtentDoesNotAdmitOtherExtentsBeyondInt64) {
  // The data is empty, but 2^93 elements cannot be an array's size.
  const std::vector<std::uint32_t> dims = {0x7fffffff, 0x7fffffff, 0x7fffffff, 0};
  for (Compression compression : {Compression::kPlain, Compression::kGzip}) {
    const fs::path path = file("e", idx_header(0x08, dims), compression);
    EXPECT_EQ(error_of<io::FileError>([&] { (void)io::read_idx(path); }),
              path.string() +
                  ": too large: the header declares 2147483647x2147483647x2147483647x0 uint8 "
                  "elements: expected the extents other than 0 to multiply to at most "
                  "9223372036854775807, the most elements an array can have, even when a zero "
                  "extent leaves it empty");
  }
  // Up to int64's largest product, they are still an empty array.
  const NDArray a = io::read_idx(file("ok", idx_header(0x08, {0, 0x7fffffff, 0x7fffffff, 2})));
  EXPECT_EQ(a.shape(), Shape({0, 0x7fffffff, 0x7fffffff, 2}));
}

TEST_F(IdxTest, TruncatedOrOverlongDataGivesDataErrors) {
  auto error_for = [&](const Bytes& bytes, Compression compression) {
    const fs::path path = file("data", bytes, compression);
    return error_of<io::FileError>([&] { (void)io::read_idx(path); });
  };
  const std::string data = (dir_ / "data").string() + ": ";
  std::mt19937 rng(5);
  Bytes noise(300001);
  for (unsigned char& b : noise) b = static_cast<unsigned char>(rng());
  const Bytes thousand(noise.begin(), noise.begin() + 1000);
  EXPECT_EQ(error_for(concat(idx_header(0x08, {10000, 28, 28}), thousand), Compression::kPlain),
            data + "truncated: the header declares 7840000 bytes of data, the file has 1000");
  EXPECT_EQ(error_for(concat(idx_header(0x08, {100, 28, 28}), thousand), Compression::kGzip),
            data + "truncated: the header declares 78400 bytes of data, the file has 1000");
  // Cut in the middle of an element, past the first decode chunk.
  for (Compression compression : {Compression::kPlain, Compression::kGzip}) {
    EXPECT_EQ(error_for(concat(idx_header(0x0C, {100000}), noise), compression),
              data + "truncated: the header declares 400000 bytes of data, the file has 300001");
    EXPECT_EQ(error_for(concat(idx_header(0x08, {5}), {1, 2, 3, 4, 5, 6, 7, 8}), compression),
              data + "trailing data: the header declares 5 bytes of data, the file has 8");
    EXPECT_EQ(error_for(concat(idx_header(0x0E, {2}), Bytes(17, 0)), compression),
              data + "trailing data: the header declares 16 bytes of data, the file has 17");
  }
}

TEST_F(IdxTest, CorruptOrCutGzipStreamsGiveDataErrors) {
  const Bytes content = concat(idx_header(0x08, {4000}), make_sample(0x08, 4000, 9).payload);
  const Bytes gzip = read_raw(file("good.gz", content, Compression::kGzip));
  ASSERT_GT(gzip.size(), 100U);
  auto error_for = [&](const Bytes& bytes) {
    const fs::path path = file("bad.gz", bytes);  // already compressed
    return error_of<io::FileError>([&] { (void)io::read_idx(path); });
  };
  const std::string bad = (dir_ / "bad.gz").string() + ": ";
  Bytes wrong_checksum = gzip;
  wrong_checksum[gzip.size() - 8] ^= 0xff;  // the trailer's CRC-32
  EXPECT_EQ(error_for(wrong_checksum), bad + "corrupt gzip data: incorrect data check");
  Bytes wrong_length = gzip;
  wrong_length[gzip.size() - 4] ^= 0x01;  // the trailer's length
  EXPECT_EQ(error_for(wrong_length), bad + "corrupt gzip data: incorrect length check");
  const Bytes no_trailer(gzip.begin(), gzip.end() - 8);
  EXPECT_EQ(error_for(no_trailer), bad +
                                       "truncated: the gzip stream is cut short after all 4000 "
                                       "bytes of data, before its checksum");
  const Bytes half(gzip.begin(), gzip.begin() + static_cast<std::ptrdiff_t>(gzip.size() / 2));
  const std::string cut = error_for(half);
  EXPECT_EQ(cut.rfind(bad + "truncated: the header declares 4000 bytes of data, the file has ", 0),
            0U)
      << cut;
  EXPECT_TRUE(cut.ends_with(" (the gzip stream is cut short)")) << cut;
  // Noise in the deflate blocks: some io::FileError (which one depends on the bits).
  Bytes scrambled = gzip;
  for (std::size_t i = 20; i < gzip.size() - 20; i += 7) scrambled[i] ^= 0x5a;
  EXPECT_EQ(error_for(scrambled).rfind(bad, 0), 0U);
  // The good file still reads.
  EXPECT_EQ(io::read_idx(dir_ / "good.gz").size(), 4000);
}

TEST_F(IdxTest, Float64BeyondFloat32RangeIsRejected) {
  Bytes payload;
  for (double v : {1.0, -std::numeric_limits<double>::infinity(), 1e39}) {
    std::uint64_t bits;
    std::memcpy(&bits, &v, 8);
    put_big_endian(payload, bits, 8);
  }
  const fs::path path = file("wide", concat(idx_header(0x0E, {3}), payload));
  EXPECT_EQ(error_of<io::FileError>([&] { (void)io::read_idx(path); }),
            path.string() +
                ": float64 element 2 is 1e+39: expected a value within float32's "
                "range (magnitude at most 3.4028234663852886e+38)");
}

TEST_F(IdxTest, BadDeviceIsADeviceErrorAndTheEngineGoesOn) {
  const fs::path path = file("ok", concat(idx_header(0x08, {2}), {3, 4}));
  EXPECT_THROW((void)io::read_idx(path, gpu(10)), DeviceError);
  EXPECT_THROW((void)io::read_idx(dir_ / "missing"), io::FileError);
  // After the errors: the engine still computes, and the file still reads.
  EXPECT_EQ((ones({2}, DType::kFloat32, gpu(0)) + 1.f).to_vector<float>(),
            (std::vector<float>{2, 2}));
  EXPECT_EQ(io::read_idx(path, gpu(0)).to_vector<std::uint8_t>(),
            (std::vector<std::uint8_t>{3, 4}));
}

}  // namespace
}  // namespace tagflow
