// data::load_fashion_mnist on small data sets written here (shapes, values, every
// error), then on the installed Fashion-MNIST, checked against known facts
// and against an independent decoder of its files.

#include "nn/data/fashion_mnist.h"

#include <zlib.h>

#include <cstdio>
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
using testing::Bytes;
using testing::error_of;

/// An IDX file of `type` with `dims` and `payload`, gzip-compressed.
void write_gzip_idx(const fs::path& path, unsigned char type,
                    const std::vector<std::uint32_t>& dims, const Bytes& payload) {
  testing::write_file(path, testing::concat(testing::idx_header(type, dims), payload),
                      testing::Compression::kGzip);
}

/// The decompressed bytes of a gzip file: the independent decoder of the
/// real-data tests (zlib's inflate, nothing of tagflow's reader).
Bytes gunzip(const fs::path& path) {
  gzFile file = gzopen(path.c_str(), "rb");
  Bytes out;
  if (file == nullptr) return out;
  unsigned char buffer[1 << 16];
  int got = 0;
  while ((got = gzread(file, buffer, sizeof buffer)) > 0)
    out.insert(out.end(), buffer, buffer + got);
  gzclose(file);
  return out;
}

const std::string kInstallHint =
    "install it with `apt-get install dataset-fashion-mnist` (which puts it in "
    "/usr/share/datasets/fashion-mnist) or pass the directory that holds it";

TEST(FashionMnistTest, ClassNamesAndDefaultDirectory) {
  const std::vector<std::string_view> expected = {"t-shirt", "trouser",   "pullover", "dress",
                                                  "coat",    "sandal",    "shirt",    "sneaker",
                                                  "bag",     "ankle boot"};
  const auto names = data::fashion_mnist_labels();
  EXPECT_EQ(std::vector<std::string_view>(names.begin(), names.end()), expected);
  EXPECT_EQ(data::default_fashion_mnist_dir(), fs::path("/usr/share/datasets/fashion-mnist"));
}

class SmallFashionMnistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_test_directory("tagflow_fmnist_test");
    std::mt19937 rng(3);
    pixels_.resize(3 * 28 * 28);
    for (unsigned char& p : pixels_) p = static_cast<unsigned char>(rng());
  }
  void TearDown() override { fs::remove_all(dir_); }

  void write_split(const std::string& split, const std::vector<std::uint32_t>& image_dims,
                   const Bytes& pixels, unsigned char label_type, const Bytes& labels) {
    write_gzip_idx(dir_ / (split + "-images-idx3-ubyte.gz"), 0x08, image_dims, pixels);
    const std::uint32_t label_size = label_type == 0x08 ? 1 : 4;
    write_gzip_idx(dir_ / (split + "-labels-idx1-ubyte.gz"), label_type,
                   {static_cast<std::uint32_t>(labels.size() / label_size)}, labels);
  }

  fs::path dir_;
  Bytes pixels_;
};

TEST_F(SmallFashionMnistTest, LoadsImagesAsNx28x28x1AndLabelsAsInt32) {
  write_split("train", {3, 28, 28}, pixels_, 0x08, {9, 0, 3});
  // The test split uncompressed: the loader falls back to the plain names.
  write_split("t10k", {1, 28, 28}, Bytes(pixels_.begin(), pixels_.begin() + 784), 0x08, {5});
  fs::path plain_images = dir_ / "t10k-images-idx3-ubyte";
  fs::path plain_labels = dir_ / "t10k-labels-idx1-ubyte";
  {
    const Bytes images = gunzip(dir_ / "t10k-images-idx3-ubyte.gz");
    const Bytes labels = gunzip(dir_ / "t10k-labels-idx1-ubyte.gz");
    std::FILE* f = std::fopen(plain_images.c_str(), "wb");
    std::fwrite(images.data(), 1, images.size(), f);
    std::fclose(f);
    f = std::fopen(plain_labels.c_str(), "wb");
    std::fwrite(labels.data(), 1, labels.size(), f);
    std::fclose(f);
    fs::remove(dir_ / "t10k-images-idx3-ubyte.gz");
    fs::remove(dir_ / "t10k-labels-idx1-ubyte.gz");
  }
  const data::FashionMnist train = data::load_fashion_mnist(dir_);
  EXPECT_EQ(train.images.shape(), Shape({3, 28, 28, 1}));
  EXPECT_EQ(train.images.dtype(), DType::kUInt8);
  EXPECT_EQ(train.images.context(), cpu(0));
  EXPECT_EQ(train.images.to_vector<std::uint8_t>(), pixels_);
  EXPECT_EQ(train.labels.dtype(), DType::kInt32);
  EXPECT_EQ(train.labels.shape(), Shape({3}));
  EXPECT_EQ(train.labels.to_vector<std::int32_t>(), (std::vector<std::int32_t>{9, 0, 3}));

  const data::FashionMnist test = data::load_fashion_mnist(dir_, /*train=*/false);
  EXPECT_EQ(test.images.shape(), Shape({1, 28, 28, 1}));
  EXPECT_EQ(test.images.to_vector<std::uint8_t>(), Bytes(pixels_.begin(), pixels_.begin() + 784));
  EXPECT_EQ(test.labels.to_vector<std::int32_t>(), (std::vector<std::int32_t>{5}));
}

TEST_F(SmallFashionMnistTest, MissingOrInconsistentFilesGiveDataErrors) {
  auto load_error = [&] {
    return error_of<io::FileError>([&] { (void)data::load_fashion_mnist(dir_); });
  };
  EXPECT_EQ(error_of<io::FileError>([&] { (void)data::load_fashion_mnist(dir_ / "nowhere"); }),
            (dir_ / "nowhere").string() +
                ": no such directory: the Fashion-MNIST data set is missing; " + kInstallHint);
  EXPECT_EQ(load_error(), (dir_ / "train-images-idx3-ubyte.gz").string() +
                              ": missing (and so is train-images-idx3-ubyte): a Fashion-MNIST "
                              "file; " +
                              kInstallHint);
  write_gzip_idx(dir_ / "train-images-idx3-ubyte.gz", 0x08, {3, 28, 28}, pixels_);
  EXPECT_EQ(load_error(), (dir_ / "train-labels-idx1-ubyte.gz").string() +
                              ": missing (and so is train-labels-idx1-ubyte): a Fashion-MNIST "
                              "file; " +
                              kInstallHint);
  const std::string labels_file = (dir_ / "train-labels-idx1-ubyte.gz").string();
  const std::string images_file = (dir_ / "train-images-idx3-ubyte.gz").string();

  write_split("train", {3, 28, 28}, pixels_, 0x08, {1, 2});
  EXPECT_EQ(load_error(),
            labels_file + ": holds 2 labels for the 3 images of train-images-idx3-ubyte.gz");
  write_split("train", {3, 28, 28}, pixels_, 0x08, {1, 10, 2});
  EXPECT_EQ(load_error(), labels_file + ": label 1 is 10: expected a class in 0..9");
  write_split("train", {3, 28, 28}, pixels_, 0x0C, Bytes(12, 0));
  EXPECT_EQ(load_error(), labels_file + ": expected uint8 labels of shape N, got int32 3");
  write_split("train", {3, 784}, pixels_, 0x08, {1, 2, 3});
  EXPECT_EQ(load_error(),
            images_file + ": expected uint8 images of shape Nx28x28, got uint8 3x784");
  write_split("train", {3, 28, 28}, Bytes(100, 0), 0x08, {1, 2, 3});
  EXPECT_EQ(load_error(), images_file +
                              ": truncated: the header declares 2352 bytes of data, the "
                              "file has 100");
  // Fixed, the same directory loads.
  write_split("train", {3, 28, 28}, pixels_, 0x08, {1, 2, 3});
  EXPECT_EQ(data::load_fashion_mnist(dir_).labels.to_vector<std::int32_t>(),
            (std::vector<std::int32_t>{1, 2, 3}));
}

/// The real data set, when the Debian package is installed.
class InstalledFashionMnistTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (!fs::is_directory(data::default_fashion_mnist_dir())) {
      GTEST_SKIP() << "Fashion-MNIST is not installed: apt-get install dataset-fashion-mnist";
    }
  }
};

TEST_P(InstalledFashionMnistTest, MatchesKnownFactsAndAnIndependentDecoder) {
  const bool train = GetParam();
  const std::int64_t n = train ? 60000 : 10000;
  const data::FashionMnist data =
      data::load_fashion_mnist(data::default_fashion_mnist_dir(), train);
  ASSERT_EQ(data.images.shape(), Shape({n, 28, 28, 1}));
  ASSERT_EQ(data.images.dtype(), DType::kUInt8);
  ASSERT_EQ(data.labels.shape(), Shape({n}));

  // Known: Fashion-MNIST is balanced, n / 10 images per class in each split.
  const std::vector<std::int32_t> labels = data.labels.to_vector<std::int32_t>();
  std::vector<std::int64_t> counts(10, 0);
  for (std::int32_t label : labels) {
    ASSERT_TRUE(label >= 0 && label <= 9) << label;
    ++counts[label];
  }
  EXPECT_EQ(counts, std::vector<std::int64_t>(10, n / 10));

  // The files decoded independently: a 16-byte header for the images, 8 for
  // the labels, then one byte per pixel or label.
  const std::string split = train ? "train" : "t10k";
  const Bytes raw_images =
      gunzip(data::default_fashion_mnist_dir() / (split + "-images-idx3-ubyte.gz"));
  const Bytes raw_labels =
      gunzip(data::default_fashion_mnist_dir() / (split + "-labels-idx1-ubyte.gz"));
  ASSERT_EQ(raw_images.size(), 16 + static_cast<std::size_t>(n) * 784);
  ASSERT_EQ(raw_labels.size(), 8 + static_cast<std::size_t>(n));
  EXPECT_EQ(Bytes(raw_images.begin(), raw_images.begin() + 4), (Bytes{0, 0, 8, 3}));
  EXPECT_EQ(data.images.to_vector<std::uint8_t>(),
            Bytes(raw_images.begin() + 16, raw_images.end()));
  for (std::int64_t i = 0; i < n; ++i) ASSERT_EQ(labels[i], raw_labels[8 + i]) << "label " << i;
  // Known: the first image of either split is an ankle boot.
  EXPECT_EQ(labels[0], 9);
  EXPECT_EQ(data::fashion_mnist_labels()[labels[0]], "ankle boot");
}

INSTANTIATE_TEST_SUITE_P(Splits, InstalledFashionMnistTest, ::testing::Values(true, false),
                         [](const auto& split) { return split.param ? "Train" : "Test"; });

}  // namespace
}  // namespace tagflow
