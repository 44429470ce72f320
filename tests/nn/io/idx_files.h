#pragma once
// IDX files written by a small writer of the tests' own, independent of
// tagflow's reader: for the tests of io::read_idx (idx_test.cc) and of the
// Fashion-MNIST loader (tests/nn/data/fashion_mnist_test.cc).

#include <zlib.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <ios>
#include <vector>

#include <gtest/gtest.h>

namespace tagflow::testing {

using Bytes = std::vector<unsigned char>;

/// Appends the `bytes` low bytes of `value` to `out`, most significant first.
inline void put_big_endian(Bytes& out, std::uint64_t value, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<unsigned char>(value >> (8 * i)));
}

/// The magic and dimensions of an IDX file (extents as raw 32-bit words).
inline Bytes idx_header(unsigned char type, const std::vector<std::uint32_t>& dims) {
  Bytes out = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (std::uint32_t d : dims) put_big_endian(out, d, 4);
  return out;
}

inline Bytes concat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

enum class Compression { kPlain, kGzip };

/// Writes `bytes` to `path`, plain or gzip-compressed (a failed write fails
/// the test).
inline void write_file(const std::filesystem::path& path, const Bytes& bytes,
                       Compression compression) {
  if (compression == Compression::kPlain) {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(bytes.data()),
              static_cast<std::streamsize>(bytes.size()));
    ASSERT_TRUE(out.good()) << path;
    return;
  }
  gzFile file = gzopen(path.c_str(), "wb");
  ASSERT_NE(file, nullptr) << path;
  if (!bytes.empty()) {
    ASSERT_EQ(gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())),
              static_cast<int>(bytes.size()));
  }
  ASSERT_EQ(gzclose(file), Z_OK);
}

}  // namespace tagflow::testing
