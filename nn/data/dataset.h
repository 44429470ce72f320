#pragma once
// Data sets, as Gluon's gluon.data: a number of samples, each a pair (data,
// label) of host arrays, read by index. The tutorials' pipeline:
//
//   namespace T = data::transforms;
//   data::Dataset train = data::FashionMNIST(default_fashion_mnist_dir(), true)
//                             .transform_first(T::Compose({T::ToTensor(),
//                                                          T::Normalize(0.13f, 0.31f)}));
//   data::Sample s = train.get(0);   // s.data: 1x28x28 float32, s.label: int32 ()
//
// Names live in tagflow::data (gluon.data) and tagflow::data::transforms
// (gluon.data.vision.transforms), beside tagflow::nn (gluon.nn).
//
// Threads: concurrent reads, exclusive writes. A Dataset is a small handle:
// copies share the same samples, and `get` may be called from several
// threads at once (the DataLoader's workers do), so a data set of your own
// must be safe to read concurrently:
//
//   data::Dataset squares(100, [](std::int64_t i) {
//     return data::Sample{data::HostArray::scalar<float>(i * i),
//                         data::HostArray::scalar<std::int32_t>(i % 2)};
//   });
//
// Assigning to a Dataset object is a write. ArrayDataset and FashionMNIST
// read arrays that never change after construction; a Sample is a value.

#include <cstdint>
#include <filesystem>
#include <functional>

#include "nn/data/fashion_mnist.h"
#include "nn/data/host_array.h"
#include "ops/ndarray.h"

namespace tagflow::data {

/// One sample: Gluon's (data, label) pair, in host memory.
struct Sample {
  HostArray data;
  HostArray label;
};

/// A transform of a sample's data, e.g. transforms::ToTensor: any callable
/// from HostArray to HostArray. It must be safe to call from several threads.
using Transform = std::function<HostArray(HostArray)>;
/// A transform of a whole sample.
using SampleTransform = std::function<Sample(Sample)>;

class Dataset {
 public:
  /// Returns sample `index`, for 0 <= index < size. Called concurrently.
  using GetFunction = std::function<Sample(std::int64_t index)>;

  /// A data set of `size` samples, sample i being `get(i)`. Throws
  /// tagflow::Error for a negative size or an empty function.
  Dataset(std::int64_t size, GetFunction get);

  /// Number of samples.
  std::int64_t size() const { return size_; }
  /// Sample `index`; throws tagflow::Error when it is not in [0, size()).
  Sample get(std::int64_t index) const;

  /// The same samples with `transform` applied to their data and the labels
  /// untouched, lazily on each get (Gluon's transform_first):
  ///
  ///   data::Dataset tensors = images.transform_first(data::transforms::ToTensor());
  Dataset transform_first(Transform transform) const;
  /// The same samples with `transform` applied to each whole sample, lazily.
  Dataset transform(SampleTransform transform) const;

 private:
  std::int64_t size_;
  GetFunction get_;
};

/// Samples from two arrays of the same length: sample i is (data[i], label[i]),
/// a copy of row i of each (so labels of shape (N) give scalar labels).
///
///   data::ArrayDataset ds(images, labels);     // images (N,28,28,1), labels (N)
class ArrayDataset : public Dataset {
 public:
  /// Throws tagflow::Error when either array has no dimension or their first
  /// extents differ.
  ArrayDataset(HostArray data, HostArray label);
  /// Reads both arrays to the host once (waits for them).
  ArrayDataset(const NDArray& data, const NDArray& label);
};

/// Fashion-MNIST (Gluon's gluon.data.vision.datasets.FashionMNIST): samples
/// of (28, 28, 1) uint8 images and int32 scalar labels in 0..9, read once by
/// load_fashion_mnist (whose io::FileError it throws for missing or bad files).
///
///   data::FashionMNIST test(default_fashion_mnist_dir(), /*train=*/false);  // 10000
class FashionMNIST : public Dataset {
 public:
  explicit FashionMNIST(const std::filesystem::path& dir = default_fashion_mnist_dir(),
                        bool train = true);
};

}  // namespace tagflow::data
