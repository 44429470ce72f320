#include "nn/data/dataset.h"

#include <cstring>
#include <memory>
#include <utility>

#include "engine/error.h"

namespace tagflow::data {
namespace {

/// `array` without its first axis: the shape of one row.
Shape row_shape(const HostArray& array) { return Shape(array.shape().dims().subspan(1)); }

/// A copy of row `index` of `array`.
HostArray copy_row(const HostArray& array, std::int64_t index) {
  HostArray row(row_shape(array), array.dtype());
  const std::uint64_t row_bytes = row.nbytes();
  if (row_bytes > 0) {
    std::memcpy(row.bytes(), array.bytes() + static_cast<std::uint64_t>(index) * row_bytes,
                row_bytes);
  }
  return row;
}

/// Sample i is (row i of `data`, row i of `label`).
Dataset array_dataset(HostArray data, HostArray label) {
  TAGFLOW_CHECK(data.ndim() >= 1 && label.ndim() >= 1,
                "ArrayDataset: expected data and label arrays with a first axis of samples, got "
                "shapes ({}) and ({})",
                data.shape().str(), label.shape().str());
  TAGFLOW_CHECK(data.shape()[0] == label.shape()[0],
                "ArrayDataset: expected as many labels as data rows, got {} rows of data (shape "
                "({})) and {} labels (shape ({}))",
                data.shape()[0], data.shape().str(), label.shape()[0], label.shape().str());
  auto shared_data = std::make_shared<const HostArray>(std::move(data));
  auto shared_label = std::make_shared<const HostArray>(std::move(label));
  const std::int64_t size = shared_data->shape()[0];
  return Dataset(size, [shared_data, shared_label](std::int64_t index) {
    return Sample{copy_row(*shared_data, index), copy_row(*shared_label, index)};
  });
}

Dataset fashion_mnist_dataset(const std::filesystem::path& dir, bool train) {
  FashionMnist split = load_fashion_mnist(dir, train);
  return array_dataset(HostArray::from(split.images), HostArray::from(split.labels));
}

}  // namespace

Dataset::Dataset(std::int64_t size, GetFunction get) : size_(size), get_(std::move(get)) {
  TAGFLOW_CHECK(size_ >= 0, "Dataset: expected a size of at least 0, got {}", size_);
  TAGFLOW_CHECK(get_ != nullptr, "Dataset: expected a function giving sample i, got an empty one");
}

Sample Dataset::get(std::int64_t index) const {
  TAGFLOW_CHECK(index >= 0 && index < size_, "Dataset::get: expected an index in [0, {}), got {}",
                size_, index);
  return get_(index);
}

Dataset Dataset::transform_first(Transform transform) const {
  TAGFLOW_CHECK(transform != nullptr, "transform_first: expected a transform, got an empty one");
  return Dataset(size_, [inner = get_, transform = std::move(transform)](std::int64_t index) {
    Sample sample = inner(index);
    sample.data = transform(std::move(sample.data));
    return sample;
  });
}

Dataset Dataset::transform(SampleTransform transform) const {
  TAGFLOW_CHECK(transform != nullptr, "transform: expected a transform, got an empty one");
  return Dataset(size_, [inner = get_, transform = std::move(transform)](std::int64_t index) {
    return transform(inner(index));
  });
}

ArrayDataset::ArrayDataset(HostArray data, HostArray label)
    : Dataset(array_dataset(std::move(data), std::move(label))) {}

ArrayDataset::ArrayDataset(const NDArray& data, const NDArray& label)
    : ArrayDataset(HostArray::from(data), HostArray::from(label)) {}

FashionMNIST::FashionMNIST(const std::filesystem::path& dir, bool train)
    : Dataset(fashion_mnist_dataset(dir, train)) {}

}  // namespace tagflow::data
