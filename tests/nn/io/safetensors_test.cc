// safetensors parameter files: round trips of every dtype between every pair
// of devices, byte-exact output against an independent writer, metadata,
// atomic writes, every malformed-file error, and a deterministic fuzz loop
// that may only ever produce io::FileError.

#include "nn/io/safetensors.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/common/test_directory.h"

namespace tagflow {
namespace {

namespace fs = std::filesystem;
using Tensors = std::vector<std::pair<std::string, NDArray>>;

std::vector<Context> all_devices() { return {cpu(0), cpu(1), gpu(0), gpu(1)}; }

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string from_hex(const std::string& hex) {
  std::string bytes;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  }
  return bytes;
}

/// A file of `header` (unpadded) preceded by its length, then `data`.
std::string make_file(const std::string& header, const std::string& data = "") {
  std::string bytes(8, '\0');
  std::uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) bytes[static_cast<std::size_t>(i)] = static_cast<char>(n >> (8 * i));
  return bytes + header + data;
}

/// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = testing::make_test_directory("tagflow_safetensors"); }
  void TearDown() override {
    fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
    fs::remove_all(dir_);
  }
  fs::path file(const std::string& name) const { return dir_ / name; }
  std::vector<std::string> directory_listing() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.push_back(entry.path().filename());
    std::sort(names.begin(), names.end());
    return names;
  }
  /// Asserts that loading `bytes` (and reading its metadata) throws
  /// io::FileError naming the file and containing `expected`.
  void expect_rejected(const std::string& bytes, const std::string& expected) {
    const fs::path path = file("bad.safetensors");
    write_bytes(path, bytes);
    for (int reader = 0; reader < 2; ++reader) {
      try {
        if (reader == 0) (void)io::load_safetensors(path);
        if (reader == 1) (void)io::safetensors_metadata(path);
        ADD_FAILURE() << "accepted a file that should fail with: " << expected;
      } catch (const io::FileError& e) {
        EXPECT_EQ(e.path(), path);
        EXPECT_EQ(std::string(e.what()).rfind(path.string() + ": ", 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find(expected), std::string::npos)
            << "message: " << e.what() << "\nexpected to contain: " << expected;
      }
    }
  }

  fs::path dir_;
};

template <typename T>
NDArray random_array(Shape shape, Context ctx, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<T> values(static_cast<std::size_t>(shape.size()));
  for (T& v : values) {
    if constexpr (std::is_same_v<T, float>) {
      v = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng);
    } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      v = T::from_bits(static_cast<std::uint16_t>(rng()));  // every bit pattern, NaNs too
    } else {
      v = static_cast<T>(rng() ^ (static_cast<std::uint64_t>(rng()) << 32));  // every bit pattern
    }
  }
  return array(values, shape, ctx);
}

template <typename T>
void expect_same_values(const NDArray& actual, const NDArray& expected, const std::string& what) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    const auto bits = [](const std::vector<T>& values) {
      std::vector<std::uint16_t> out;
      for (const T& v : values) out.push_back(v.bits);
      return out;
    };
    EXPECT_EQ(bits(actual.to_vector<T>()), bits(expected.to_vector<T>())) << what;
  } else {
    EXPECT_EQ(actual.to_vector<T>(), expected.to_vector<T>()) << what;
  }
}

void expect_same(const NDArray& actual, const NDArray& expected, const std::string& what) {
  ASSERT_EQ(actual.dtype(), expected.dtype()) << what;
  ASSERT_EQ(actual.shape(), expected.shape()) << what;
  TAGFLOW_ANY_DTYPE_SWITCH(expected.dtype(), T, { expect_same_values<T>(actual, expected, what); });
}

TEST_F(SafetensorsTest, RoundTripsEveryDtypeBetweenEveryPairOfDevices) {
  for (Context source : all_devices()) {
    NDArray big = random_array<float>({4, 3}, source, 9);
    // Computed on the device, so the values are still pending when saved.
    const Tensors tensors = {
        {"dense0.weight", random_array<float>({2, 3}, source, 1) * 1.0},
        {"dense0.bias", random_array<float>({3}, source, 2)},
        {"labels", random_array<std::int32_t>({7}, source, 3) + 0.0},
        {"step", random_array<std::int64_t>({1}, source, 4)},
        {"pixels", random_array<std::uint8_t>({2, 1, 5}, source, 5)},
        {"halves", random_array<Half>({3, 2}, source, 7)},
        {"brains", random_array<BFloat16>({5}, source, 8)},
        {"eight_dims", random_array<std::int32_t>({1, 2, 1, 2, 1, 1, 2, 1}, source, 6)},
        {"empty_rows", zeros({0, 4}, DType::kFloat32, source)},
        {"empty_bytes", empty({0}, DType::kUInt8, source)},
        {"view", big.slice(1, 3)},
    };
    const fs::path path = file("params.safetensors");
    io::save_safetensors(path, tensors);
    for (Context target : all_devices()) {
      const std::string what = source.str() + " -> " + target.str();
      const Tensors loaded = io::load_safetensors(path, target);
      ASSERT_EQ(loaded.size(), tensors.size()) << what;
      std::vector<std::string> names;
      for (const auto& [name, value] : loaded) {
        names.push_back(name);
        EXPECT_EQ(value.context(), target) << what;
        const auto original = std::find_if(tensors.begin(), tensors.end(),
                                           [&](const auto& t) { return t.first == name; });
        ASSERT_NE(original, tensors.end()) << name;
        expect_same(value, original->second, what + " " + name);
      }
      EXPECT_TRUE(std::is_sorted(names.begin(), names.end())) << "loaded sorted by name";
    }
  }
  EXPECT_EQ(directory_listing(), std::vector<std::string>{"params.safetensors"});
}

// Produced once by an independent writer: a Python script using only the
// standard library (struct + json) and the format description, ordering the
// tensors as the reference writer does (dtype alignment I64, F32, I32, U8,
// then name), printing the file as hex:
//   tensors = {"weight": ("F32", "f", [2, 3], [0.5 * i - 1 for i in range(6)]),
//              "bias": ("F32", "f", [3], [0.25, -2.0, 3.5]),
//              "labels": ("I32", "i", [4], [-1, 0, 7, 2147483647]),
//              "step": ("I64", "q", [1], [-1234567890123]),
//              "mask": ("U8", "B", [5], [0, 1, 2, 254, 255]), "empty": ("F32", "f", [0, 4], [])}
//   rank = {"U8": 0, "I32": 1, "F32": 2, "I64": 3}
//   header, data = {"__metadata__": {"epoch": "3", "format": "tagflow"}}, b""
//   for n in sorted(tensors, key=lambda n: (-rank[tensors[n][0]], n.encode())):
//     dt, code, shape, values = tensors[n]
//     blob = struct.pack("<%d%s" % (len(values), code), *values)
//     header[n] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
//     data += blob
//   h = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
//   h += b" " * ((8 - len(h) % 8) % 8)
//   print((struct.pack("<Q", len(h)) + h + data).hex())
const char* const kIndependentFileHex =
    "98010000000000007b225f5f6d657461646174615f5f223a7b2265706f6368223a2233222c22666f726d6174"
    "223a22746167666c6f77227d2c2273746570223a7b226474797065223a22493634222c227368617065223a5b"
    "315d2c22646174615f6f666673657473223a5b302c385d7d2c2262696173223a7b226474797065223a224633"
    "32222c227368617065223a5b335d2c22646174615f6f666673657473223a5b382c32305d7d2c22656d707479"
    "223a7b226474797065223a22463332222c227368617065223a5b302c345d2c22646174615f6f666673657473"
    "223a5b32302c32305d7d2c22776569676874223a7b226474797065223a22463332222c227368617065223a5b"
    "322c335d2c22646174615f6f666673657473223a5b32302c34345d7d2c226c6162656c73223a7b2264747970"
    "65223a22493332222c227368617065223a5b345d2c22646174615f6f666673657473223a5b34342c36305d7d"
    "2c226d61736b223a7b226474797065223a225538222c227368617065223a5b355d2c22646174615f6f666673"
    "657473223a5b36302c36355d7d7d20202020202035fb048ee0feffff0000803e000000c00000604000008"
    "0bf000000bf000000000000003f0000803f0000c03fffffffff0000000007000000ffffff7f000102feff";

Tensors independent_file_tensors(Context ctx) {
  return {
      {"mask", array(std::vector<std::uint8_t>{0, 1, 2, 254, 255}, {5}, ctx)},
      {"weight", array(std::vector<float>{-1, -0.5f, 0, 0.5f, 1, 1.5f}, {2, 3}, ctx)},
      {"labels", array(std::vector<std::int32_t>{-1, 0, 7, 2147483647}, {4}, ctx)},
      {"empty", empty({0, 4}, DType::kFloat32, ctx)},
      {"bias", array(std::vector<float>{0.25f, -2, 3.5f}, {3}, ctx)},
      {"step", array(std::vector<std::int64_t>{-1234567890123}, {1}, ctx)},
  };
}

TEST_F(SafetensorsTest, WritesTheBytesOfAnIndependentWriter) {
  const std::string expected = from_hex(kIndependentFileHex);
  ASSERT_EQ(expected.size(), 481u);
  for (Context ctx : all_devices()) {
    const fs::path path = file("model.safetensors");
    io::save_safetensors(path, independent_file_tensors(ctx),
                         {{"format", "tagflow"}, {"epoch", "3"}});
    EXPECT_EQ(read_bytes(path), expected) << "written from " << ctx;
  }
  // And the independent file reads back to the same arrays.
  write_bytes(file("independent.safetensors"), expected);
  const Tensors loaded = io::load_safetensors(file("independent.safetensors"), gpu(1));
  Tensors original = independent_file_tensors(cpu(0));
  std::sort(original.begin(), original.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  ASSERT_EQ(loaded.size(), original.size());
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    EXPECT_EQ(loaded[i].first, original[i].first);
    expect_same(loaded[i].second, original[i].second, loaded[i].first);
  }
}

TEST_F(SafetensorsTest, WritesTheReferenceImplementationsOwnTestVectors) {
  // From the reference's unit tests (safetensors/src/tensor.rs: test_empty,
  // test_serialization_forced_alignement): the padding spaces and the layout.
  io::save_safetensors(file("empty.safetensors"), {});
  EXPECT_EQ(read_bytes(file("empty.safetensors")), make_file("{}      "));
  io::save_safetensors(file("meta.safetensors"), {}, {{"framework", "pt"}});
  EXPECT_EQ(read_bytes(file("meta.safetensors")),
            make_file("{\"__metadata__\":{\"framework\":\"pt\"}}     "));
  io::save_safetensors(file("attn0.safetensors"),
                       {{"attn0", array(std::vector<float>{0, 1, 2, 3, 4, 5}, {1, 1, 2, 3})}});
  EXPECT_EQ(read_bytes(file("attn0.safetensors")),
            make_file("{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],\"data_offsets\":[0,24]}}"
                      "       ",
                      from_hex("000000000000803f000000400000404000008040"
                               "0000a040")));
  EXPECT_TRUE(io::load_safetensors(file("empty.safetensors")).empty());
}

TEST_F(SafetensorsTest, MetadataRoundTrips) {
  const std::map<std::string, std::string> metadata = {
      {"format", "tagflow"},
      {"", "empty key"},
      {"quote\"back\\slash", "tab\tnewline\n\x01"},
      {"unicode", "\xc3\xa9t\xc3\xa9 \xe2\x82\xac"},
      {"empty", ""}};
  io::save_safetensors(file("m.safetensors"), {{"x", ones({2})}}, metadata);
  EXPECT_EQ(io::safetensors_metadata(file("m.safetensors")), metadata);
  EXPECT_EQ(io::load_safetensors(file("m.safetensors")).size(), 1u);
  io::save_safetensors(file("none.safetensors"), {{"x", ones({2})}});
  EXPECT_TRUE(io::safetensors_metadata(file("none.safetensors")).empty());
  EXPECT_EQ(read_bytes(file("none.safetensors")).find("__metadata__"), std::string::npos);
}

TEST_F(SafetensorsTest, RelativePathsWriteIntoTheWorkingDirectory) {
  const fs::path previous = fs::current_path();
  fs::current_path(dir_);
  io::save_safetensors("relative.safetensors", {{"x", arange(0, 4)}});
  const Tensors loaded = io::load_safetensors("relative.safetensors");
  fs::current_path(previous);
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].second.to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
  EXPECT_EQ(directory_listing(), std::vector<std::string>{"relative.safetensors"});
}

TEST_F(SafetensorsTest, ZeroDimensionalTensorsLoadAsOneElement) {
  write_bytes(file("scalar.safetensors"),
              make_file("{\"n\":{\"dtype\":\"I64\",\"shape\":[],\"data_offsets\":[0,8]}}",
                        std::string("\x2a\0\0\0\0\0\0\0", 8)));
  const Tensors loaded = io::load_safetensors(file("scalar.safetensors"), gpu(0));
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].second.shape(), Shape{1});
  EXPECT_EQ(loaded[0].second.asscalar<std::int64_t>(), 42);
}

TEST_F(SafetensorsTest, SaveRejectsBadArguments) {
  const fs::path path = file("out.safetensors");
  auto expect_save_error = [&](const Tensors& tensors, const std::string& expected) {
    try {
      io::save_safetensors(path, tensors);
      ADD_FAILURE() << "saved; expected: " << expected;
    } catch (const io::FileError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(path));
  };
  expect_save_error({{"", ones({1})}}, "expected non-empty tensor names");
  expect_save_error({{"w", ones({1})}, {"w", ones({2})}},
                    "expected distinct tensor names, got 'w'");
  expect_save_error({{"__metadata__", ones({1})}}, "reserved \"__metadata__\"");
  expect_save_error({{"w", NDArray()}}, "tensor 'w': expected an array, got an empty NDArray");
  expect_save_error({{"bad\xff", ones({1})}}, "expected tensor names in UTF-8");
  EXPECT_THROW(io::save_safetensors(path, {}, {{"k", "\xc3"}}), io::FileError);
  EXPECT_THROW((void)io::load_safetensors(path, gpu(7)), io::FileError) << "no file yet";
  io::save_safetensors(path, {{"w", ones({1})}});
  EXPECT_THROW((void)io::load_safetensors(path, gpu(7)), DeviceError);
  EXPECT_EQ(directory_listing(), std::vector<std::string>{"out.safetensors"});
}

TEST_F(SafetensorsTest, AFailedWriteLeavesThePreviousFileAndNoTemporary) {
  const fs::path path = file("model.safetensors");
  io::save_safetensors(path, {{"old", ones({4})}});
  const std::string previous = read_bytes(path);
  // Fail in the middle of the data: files may not grow past 4 KiB (EFBIG).
  struct sigaction ignore = {};
  struct sigaction saved = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &saved), 0);
  rlimit limit{}, saved_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved_limit), 0);
  limit = {4096, saved_limit.rlim_max};
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  std::string message;
  try {
    io::save_safetensors(path, {{"big", zeros({1 << 16}, DType::kFloat32, gpu(0))}});
  } catch (const io::FileError& e) {
    message = e.what();
  }
  ::setrlimit(RLIMIT_FSIZE, &saved_limit);
  ::sigaction(SIGXFSZ, &saved, nullptr);
  EXPECT_NE(message.find("cannot write the temporary file"), std::string::npos) << message;
  EXPECT_NE(message.find("File too large"), std::string::npos) << message;
  EXPECT_EQ(read_bytes(path), previous);
  EXPECT_EQ(directory_listing(), std::vector<std::string>{"model.safetensors"});

  // A directory that does not exist: nothing is created.
  const fs::path nowhere = dir_ / "missing" / "model.safetensors";
  try {
    io::save_safetensors(nowhere, {{"w", ones({1})}});
    ADD_FAILURE() << "saved into a missing directory";
  } catch (const io::FileError& e) {
    EXPECT_EQ(e.path(), nowhere);
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos);
  }
  // A directory in the way of the final name: the rename fails, the temporary goes.
  fs::create_directory(file("taken"));
  EXPECT_THROW(io::save_safetensors(file("taken"), {{"w", ones({1})}}), io::FileError);
  EXPECT_EQ(directory_listing(), (std::vector<std::string>{"model.safetensors", "taken"}));
}

TEST_F(SafetensorsTest, WritingIntoAReadOnlyDirectoryFails) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  fs::permissions(dir_, fs::perms::owner_read | fs::perms::owner_exec);
  const fs::path path = file("model.safetensors");
  try {
    io::save_safetensors(path, {{"w", ones({1})}});
    ADD_FAILURE() << "saved into a read-only directory";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("Permission denied"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(path));
}

/// A header of one tensor `w` with the given fields, and `data`.
std::string one_tensor(const std::string& fields, const std::string& data) {
  return make_file("{\"w\":{" + fields + "}}", data);
}

TEST_F(SafetensorsTest, MalformedFilesGiveParameterFileError) {
  const std::string f32x2 = "\"dtype\":\"F32\",\"shape\":[2],";
  const std::string data8(8, 'x');
  struct Case {
    std::string bytes;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"", "expected at least 8 bytes (the header length), got a file of 0 bytes"},
      {std::string("\x02\0\0\0", 4), "got a file of 4 bytes"},
      {make_file("{}").substr(0, 9), "expected a header of 2 bytes, got a file with only 1 bytes"},
      {std::string("\x00\xe1\xf5\x05\0\0\0\0{}", 10), "expected a header of 100000000 bytes"},
      {std::string("\x01\xe1\xf5\x05\0\0\0\0{}", 10),
       "expected a header of at most 100000000 bytes, got a header length of 100000001"},
      {std::string(8, '\xff') + "{}", "got a header length of 18446744073709551615"},
      {make_file(""), "expected the header to start with '{', got an empty header"},
      {make_file("[1]"), "expected the header to start with '{', got byte 0x5b"},
      {make_file(" {}"), "expected the header to start with '{', got byte 0x20"},
      {make_file("{\"w\":"), "the header is not valid JSON"},
      {make_file(std::string("{}\0\0", 4)), "the header is not valid JSON: a NUL byte at offset 2"},
      {make_file(std::string("{\"w\0\":{}}", 9)),
       "the header is not valid JSON: a NUL byte at offset 3"},
      {make_file("{\"w\xff\":{}}"), "the header is not valid JSON"},
      {make_file("{\"w\":3}"),
       "tensor 'w': expected an object {dtype, shape, data_offsets}, got "
       "the number 3"},
      {make_file("{\"\":{}}"), "expected non-empty tensor names, got \"\""},
      {make_file("{\"w\":{},\"w\":{}}"), "tensor 'w': missing \"dtype\""},
      {make_file("{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]},\"w\":{}}"),
       "duplicate tensor name 'w'"},
      {one_tensor(f32x2 + "\"dtype\":\"F32\"", ""), "tensor 'w': duplicate key \"dtype\""},
      {one_tensor(f32x2 + "\"offsets\":[0,8]", data8),
       "tensor 'w': unexpected key \"offsets\": expected dtype, shape and data_offsets"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[2]", data8),
       "tensor 'w': missing \"data_offsets\""},
      {one_tensor("\"dtype\":\"Q7\",\"shape\":[2],\"data_offsets\":[0,8]", data8),
       "tensor 'w': expected dtype F32, F16, BF16, I32, I64 or U8, got \"Q7\""},
      {one_tensor("\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,8]", data8),
       "got \"F64\" (a safetensors dtype tagflow does not hold)"},
      {one_tensor("\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,8]", data8),
       "tensor 'w': expected dtype to be a string, got the number 4"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]", data8),
       "tensor 'w': expected non-negative 64-bit integers in shape, got the number -2"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[2.0],\"data_offsets\":[0,8]", data8),
       "in shape, got the number 2.0"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,8]",
                  data8),
       "in shape, got the number 18446744073709551616"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[\"2\"],\"data_offsets\":[0,8]", data8),
       "in shape, got the string \"2\""},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[[2]],\"data_offsets\":[0,8]", data8),
       "in shape, got an array"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":2,\"data_offsets\":[0,8]", data8),
       "tensor 'w': expected shape to be an array of integers, got the number 2"},
      {one_tensor("\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,8],\"data_offsets\":[0,8]", data8),
       "tensor 'w': expected a shape of at most 8 dimensions, got more"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]",
                  data8),
       "tensor 'w': the size of shape [4294967296, 4294967296] overflows 64 bits"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[0,9223372036854775808],\"data_offsets\":[0,0]", ""),
       "overflows 64 bits"},
      {one_tensor("\"dtype\":\"I64\",\"shape\":[2305843009213693952],\"data_offsets\":[0,0]", ""),
       "overflows 64 bits"},
      {one_tensor(f32x2 + "\"data_offsets\":[0]", data8),
       "tensor 'w': expected data_offsets to be two integers [begin, end], got 1"},
      {one_tensor(f32x2 + "\"data_offsets\":[0,8,8]", data8),
       "expected data_offsets to be two integers [begin, end], got more"},
      {one_tensor(f32x2 + "\"data_offsets\":[0,-8]", data8), "got the number -8"},
      {one_tensor(f32x2 + "\"data_offsets\":[8,0]", data8),
       "tensor 'w': expected data_offsets [begin, end] with begin <= end, got [8, 0]"},
      {one_tensor(f32x2 + "\"data_offsets\":[0,400]", data8),
       "tensor 'w': expected data_offsets within the data section [0, 8], got [0, 400]"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[1000000000000],\"data_offsets\":[0,4000000000000]",
                  data8),
       "got [0, 4000000000000] (truncated file?)"},
      {one_tensor("\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]", data8),
       "tensor 'w': expected 12 bytes for shape [3] of F32, got data_offsets [0, 8]"},
      {make_file("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}",
                 std::string(12, 'x')),
       "tensors 'a' [0, 8] and 'b' [4, 12] overlap: expected disjoint data_offsets"},
      {make_file("{\"a\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[4,4]}}",
                 data8),
       "tensors 'a' [0, 8] and 'b' [4, 4] overlap"},
      {make_file("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[8,12]}}",
                 std::string(12, 'x')),
       "bytes [4, 8) of the data section belong to no tensor: expected the tensors to tile the "
       "data section without holes, as the reference implementation requires"},
      {one_tensor("\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[4,8]", data8),
       "bytes [0, 4) of the data section belong to no tensor"},
      {one_tensor(f32x2 + "\"data_offsets\":[0,8]", data8 + "zz"),
       "expected the tensors to end at the end of the file, as the reference implementation "
       "requires, got 2 trailing bytes after the last tensor"},
      {make_file("{\"__metadata__\":{\"epoch\":3}}"),
       "__metadata__: expected string values, got the number 3 for key 'epoch'"},
      {make_file("{\"__metadata__\":[\"a\"]}"),
       "expected \"__metadata__\" to be an object of strings, got an array"},
      {make_file("{\"__metadata__\":{\"k\":\"a\",\"k\":\"b\"}}"),
       "__metadata__: duplicate key 'k'"},
      {make_file("{\"__metadata__\":{},\"__metadata__\":{}}"), "duplicate key \"__metadata__\""},
      {make_file("{\"__metadata__\":{\"k\":{\"deep\":\"x\"}}}"), "got an object for key 'k'"},
      {make_file("{\"w\":{\"dtype\":" + std::string(100000, '[')), "expected dtype to be a string"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.expected);
    expect_rejected(c.bytes, c.expected);
  }
  try {
    (void)io::load_safetensors(file("absent.safetensors"));
    ADD_FAILURE() << "loaded a missing file";
  } catch (const io::FileError& e) {
    EXPECT_EQ(std::string(e.what()), file("absent.safetensors").string() +
                                         ": cannot open for reading: No such file or directory");
  }
  try {
    (void)io::load_safetensors(dir_);
    ADD_FAILURE() << "loaded a directory";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a regular file, got a directory"),
              std::string::npos);
  }
  ASSERT_EQ(::mkfifo(file("fifo").c_str(), 0600), 0);
  try {
    (void)io::load_safetensors(file("fifo"));  // must not block waiting for a writer
    ADD_FAILURE() << "loaded a FIFO";
  } catch (const io::FileError& e) {
    EXPECT_NE(std::string(e.what()).find("expected a regular file, got a FIFO"), std::string::npos);
  }
  // The engine still works after all these errors.
  EXPECT_EQ((ones({2}, DType::kFloat32, gpu(0)) + 1).to_vector<float>(),
            (std::vector<float>{2, 2}));
}

TEST_F(SafetensorsTest, EmptyTensorsWithOtherExtentsBeyondInt64AreRejected) {
  // The zero extent makes the byte size 0, but 4294967296 * 3221225472
  // elements (less than 2^64) are more than an array's size can hold.
  expect_rejected(one_tensor("\"dtype\":\"U8\",\"shape\":[4294967296,3221225472,0],"
                             "\"data_offsets\":[0,0]",
                             ""),
                  "tensor 'w': the size of shape [4294967296, 3221225472, 0] overflows 64 bits "
                  "once its zero extents are left out (expected at most 9223372036854775807 "
                  "elements, which an array needs even when empty)");
  // Up to int64's largest product, an empty tensor loads.
  write_bytes(file("empty.safetensors"),
              one_tensor("\"dtype\":\"U8\",\"shape\":[3037000499,0,3037000499],"
                         "\"data_offsets\":[0,0]",
                         ""));
  const Tensors loaded = io::load_safetensors(file("empty.safetensors"));
  ASSERT_EQ(loaded.size(), 1u);
  EXPECT_EQ(loaded[0].second.shape(), Shape({3037000499, 0, 3037000499}));
}

TEST_F(SafetensorsTest, FuzzedAndTruncatedFilesOnlyEverGiveParameterFileError) {
  const std::string valid = from_hex(kIndependentFileHex);
  const fs::path path = file("fuzz.safetensors");
  int accepted = 0;
  auto load_and_classify = [&](const std::string& bytes, Context ctx) {
    write_bytes(path, bytes);
    try {
      const Tensors loaded = io::load_safetensors(path, ctx);
      std::uint64_t total = 0;
      for (const auto& [name, value] : loaded) {
        total += value.nbytes();
        value.wait_to_read();
      }
      EXPECT_LE(total, bytes.size()) << "never more data than the file holds";
      ++accepted;
    } catch (const io::FileError&) {
      // The only acceptable failure.
    } catch (const std::exception& e) {
      ADD_FAILURE() << "unexpected exception: " << e.what();
    }
  };
  for (std::size_t length = 0; length < valid.size(); ++length) {
    load_and_classify(valid.substr(0, length), cpu(0));
  }
  EXPECT_EQ(accepted, 0) << "every truncation of a valid file is invalid";
  const std::string interesting = "{}[]\",:-0123456789eE. \\\xff\x80";
  std::mt19937 rng(2024);
  for (int iteration = 0; iteration < 2000; ++iteration) {
    std::string bytes = valid;
    const int mutations = 1 + static_cast<int>(rng() % 4);
    for (int m = 0; m < mutations; ++m) {
      const std::size_t at = rng() % bytes.size();
      bytes[at] = rng() % 2 ? static_cast<char>(rng()) : interesting[rng() % interesting.size()];
    }
    if (rng() % 8 == 0) bytes.resize(rng() % bytes.size());
    load_and_classify(bytes, iteration % 10 == 0 ? gpu(1) : cpu(0));
  }
  EXPECT_GT(accepted, 0) << "mutations of tensor data leave valid files";
}

}  // namespace
}  // namespace tagflow
