#pragma once
// Fashion-MNIST: 70000 grey 28x28 images of clothing in 10 classes (60000 to
// train, 10000 to test), the data set of the tutorials. Read from the four
// IDX files that the Debian package dataset-fashion-mnist installs:
//
//   FashionMnist train = load_fashion_mnist();                  // 60000
//   FashionMnist test = load_fashion_mnist(default_fashion_mnist_dir(), false);
//   std::cout << fashion_mnist_labels()[test.labels[0].asscalar<std::int32_t>()];
//   // ankle boot
//
// Threads: safe to call concurrently. load_fashion_mnist() reads the files
// anew on each call.
// Threads: concurrent reads, exclusive writes. A FashionMnist is a value of
// two array handles (ops/ndarray.h).

#include <filesystem>
#include <span>
#include <string_view>

#include "nn/io/file_error.h"
#include "ops/ndarray.h"

namespace tagflow::data {

/// One split of Fashion-MNIST, on cpu(0).
struct FashionMnist {
  /// (N, 28, 28, 1) uint8 pixels, 0 (background) to 255: height, width,
  /// channel, as gluon's dataset gives them.
  NDArray images;
  /// (N) int32 class indices in 0..9; fashion_mnist_labels() names them.
  NDArray labels;
};

/// /usr/share/datasets/fashion-mnist, where `apt-get install
/// dataset-fashion-mnist` puts the files.
std::filesystem::path default_fashion_mnist_dir();

/// The training split (`train`) or the test split from `dir`, which holds
/// train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-... and
/// t10k-labels-... (each may also be uncompressed, without ".gz"). Throws
/// io::FileError for a missing directory or file (saying how to install it), a
/// malformed file, images that are not 28x28 uint8, a label outside 0..9, or
/// image and label counts that disagree.
///
///   FashionMnist train = load_fashion_mnist("/data/fashion-mnist");
///   NDArray x = train.images.astype(DType::kFloat32) / 255.f;
FashionMnist load_fashion_mnist(const std::filesystem::path& dir = default_fashion_mnist_dir(),
                                bool train = true);

/// The names of the 10 classes, indexed by label, as the tutorials print
/// them: "t-shirt", "trouser", "pullover", "dress", "coat", "sandal",
/// "shirt", "sneaker", "bag", "ankle boot".
std::span<const std::string_view> fashion_mnist_labels();

}  // namespace tagflow::data
