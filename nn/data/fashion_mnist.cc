#include "nn/data/fashion_mnist.h"

#include <array>
#include <cstdint>
#include <string>
#include <system_error>
#include <vector>

#include "nn/io/idx.h"
#include "ops/creation.h"

namespace tagflow::data {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kImageSide = 28;
constexpr int kNumClasses = 10;

constexpr std::array<std::string_view, kNumClasses> kClassNames = {
    "t-shirt", "trouser", "pullover", "dress", "coat",
    "sandal",  "shirt",   "sneaker",  "bag",   "ankle boot"};

constexpr std::string_view kInstallHint =
    "install it with `apt-get install dataset-fashion-mnist` (which puts it in "
    "/usr/share/datasets/fashion-mnist) or pass the directory that holds it";

/// `dir/name.gz`, else `dir/name` uncompressed; a io::FileError naming the
/// compressed file when neither exists.
fs::path find_split_file(const fs::path& dir, const std::string& name) {
  const fs::path compressed = dir / (name + ".gz");
  const fs::path plain = dir / name;
  std::error_code error;
  if (fs::exists(compressed, error)) return compressed;
  if (fs::exists(plain, error)) return plain;
  detail::throw_file_error(compressed, "missing (and so is {}): a Fashion-MNIST file; {}", name,
                           kInstallHint);
}

}  // namespace

fs::path default_fashion_mnist_dir() { return "/usr/share/datasets/fashion-mnist"; }

std::span<const std::string_view> fashion_mnist_labels() { return kClassNames; }

FashionMnist load_fashion_mnist(const fs::path& dir, bool train) {
  std::error_code error;
  if (!fs::is_directory(dir, error)) {
    detail::throw_file_error(dir, "no such directory: the Fashion-MNIST data set is missing; {}",
                             kInstallHint);
  }
  const std::string split = train ? "train" : "t10k";
  const fs::path images_file = find_split_file(dir, split + "-images-idx3-ubyte");
  const fs::path labels_file = find_split_file(dir, split + "-labels-idx1-ubyte");

  NDArray images = io::read_idx(images_file);
  const Shape& shape = images.shape();
  if (images.dtype() != DType::kUInt8 || shape.ndim() != 3 || shape[1] != kImageSide ||
      shape[2] != kImageSide) {
    detail::throw_file_error(images_file, "expected uint8 images of shape Nx28x28, got {} {}",
                             dtype_name(images.dtype()), shape.str());
  }
  const NDArray raw_labels = io::read_idx(labels_file);
  if (raw_labels.dtype() != DType::kUInt8 || raw_labels.ndim() != 1) {
    detail::throw_file_error(labels_file, "expected uint8 labels of shape N, got {} {}",
                             dtype_name(raw_labels.dtype()), raw_labels.shape().str());
  }
  if (raw_labels.size() != shape[0]) {
    detail::throw_file_error(labels_file, "holds {} labels for the {} images of {}",
                             raw_labels.size(), shape[0], images_file.filename().string());
  }

  // A fresh host array has no pending operation: reading it does not wait.
  const std::vector<std::uint8_t> label_bytes = raw_labels.to_vector<std::uint8_t>();
  std::vector<std::int32_t> labels(label_bytes.size());
  for (std::size_t i = 0; i < label_bytes.size(); ++i) {
    if (label_bytes[i] >= kNumClasses) {
      detail::throw_file_error(labels_file, "label {} is {}: expected a class in 0..{}", i,
                               label_bytes[i], kNumClasses - 1);
    }
    labels[i] = label_bytes[i];
  }
  return FashionMnist{
      .images = images.reshape({shape[0], kImageSide, kImageSide, 1}),
      .labels = array(labels, Shape{shape[0]}),
  };
}

}  // namespace tagflow::data
