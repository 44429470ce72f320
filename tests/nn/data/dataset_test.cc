// HostArray, Dataset, ArrayDataset, transform_first and FashionMNIST,
// checked against the arrays they were made from, read in plain loops.

#include "nn/data/dataset.h"

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow::data {
namespace {

using tagflow::testing::error_of;

template <typename T>
std::vector<T> values_of(const HostArray& a) {
  auto v = a.values<T>();
  return {v.begin(), v.end()};
}

TEST(HostArrayTest, ValuesShapesCopiesAndNDArrays) {
  HostArray a = HostArray::from<float>(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.shape(), (Shape{2, 3}));
  EXPECT_EQ(a.size(), 6);
  EXPECT_EQ(a.nbytes(), 24u);
  HostArray copy = a;
  copy.values<float>()[0] = 10;
  EXPECT_EQ(values_of<float>(a)[0], 1.f) << "a copy has its own values";
  HostArray moved = std::move(copy);
  EXPECT_EQ(copy.size(), 0) << "a moved-from array is empty";  // NOLINT(bugprone-use-after-move)
  EXPECT_EQ(values_of<float>(moved)[0], 10.f);
  EXPECT_EQ(HostArray().size(), 0);

  const HostArray label = HostArray::scalar<std::int32_t>(7);
  EXPECT_EQ(label.ndim(), 0);
  EXPECT_EQ(values_of<std::int32_t>(label), std::vector<std::int32_t>{7});

  for (Context ctx : {cpu(0), cpu_pinned(0), gpu(0)}) {
    const NDArray x = a.to_ndarray(ctx);
    EXPECT_EQ(x.context(), ctx);
    EXPECT_EQ(x.shape(), a.shape());
    EXPECT_EQ(x.to_vector<float>(), values_of<float>(a)) << ctx;
    EXPECT_EQ(values_of<float>(HostArray::from(x)), values_of<float>(a)) << ctx;
  }

  EXPECT_EQ(error_of([&] { a.values<std::int32_t>(); }),
            "HostArray::values<int32>: the array holds float32 (2x3)");
  EXPECT_EQ(error_of([] {
              HostArray::from<float>(std::vector<float>{1, 2}, {3});
            }),
            "HostArray::from: expected 3 values for shape (3), got 2");
}

TEST(DatasetTest, AFunctionDatasetAndItsChecks) {
  const Dataset squares(5, [](std::int64_t i) {
    return Sample{HostArray::scalar<float>(static_cast<float>(i * i)),
                  HostArray::scalar<std::int32_t>(static_cast<std::int32_t>(i % 2))};
  });
  EXPECT_EQ(squares.size(), 5);
  for (std::int64_t i = 0; i < 5; ++i) {
    const Sample s = squares.get(i);
    EXPECT_EQ(values_of<float>(s.data), std::vector<float>{static_cast<float>(i * i)});
    EXPECT_EQ(values_of<std::int32_t>(s.label), std::vector<std::int32_t>{static_cast<int>(i % 2)});
  }
  EXPECT_EQ(error_of([&] { squares.get(5); }), "Dataset::get: expected an index in [0, 5), got 5");
  EXPECT_EQ(error_of([&] { squares.get(-1); }),
            "Dataset::get: expected an index in [0, 5), got -1");
  EXPECT_EQ(error_of([] { Dataset(-1, [](std::int64_t) { return Sample{}; }); }),
            "Dataset: expected a size of at least 0, got -1");
  EXPECT_EQ(error_of([] { Dataset(3, nullptr); }),
            "Dataset: expected a function giving sample i, got an empty one");
}

TEST(ArrayDatasetTest, SampleIIsRowIOfEachArray) {
  const std::int64_t n = 6;
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(n * 2 * 3));
  for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>(i * 7);
  const std::vector<std::int32_t> labels = {5, 4, 3, 2, 1, 0};

  // From host arrays, and from NDArrays on a CPU and on a (simulated) GPU.
  std::vector<ArrayDataset> datasets = {
      ArrayDataset(HostArray::from<std::uint8_t>(pixels, {n, 2, 3}),
                   HostArray::from<std::int32_t>(labels, {n})),
      ArrayDataset(array<std::uint8_t>(pixels, {n, 2, 3}), array<std::int32_t>(labels, {n})),
      ArrayDataset(array<std::uint8_t>(pixels, {n, 2, 3}, gpu(0)),
                   array<std::int32_t>(labels, {n}, gpu(0)))};
  for (const ArrayDataset& ds : datasets) {
    ASSERT_EQ(ds.size(), n);
    for (std::int64_t i = 0; i < n; ++i) {
      const Sample s = ds.get(i);
      ASSERT_EQ(s.data.shape(), (Shape{2, 3}));
      ASSERT_EQ(s.label.shape(), Shape{});
      EXPECT_EQ(values_of<std::uint8_t>(s.data),
                std::vector<std::uint8_t>(pixels.begin() + i * 6, pixels.begin() + (i + 1) * 6));
      EXPECT_EQ(values_of<std::int32_t>(s.label), std::vector<std::int32_t>{labels[i]});
    }
  }

  EXPECT_EQ(error_of([] {
              ArrayDataset(HostArray({4, 2}, DType::kFloat32), HostArray({3}, DType::kInt32));
            }),
            "ArrayDataset: expected as many labels as data rows, got 4 rows of data (shape "
            "(4x2)) and 3 labels (shape (3))");
  EXPECT_EQ(error_of([] {
              ArrayDataset(HostArray::scalar<float>(1), HostArray::scalar<std::int32_t>(1));
            }),
            "ArrayDataset: expected data and label arrays with a first axis of samples, got "
            "shapes () and ()");
}

TEST(DatasetTest, TransformFirstChangesTheDataAndLeavesTheLabels) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};
  const std::vector<std::int32_t> labels = {7, 8, 9};
  const ArrayDataset base(HostArray::from<float>(values, {3, 2}),
                          HostArray::from<std::int32_t>(labels, {3}));
  int calls = 0;  // read only by this thread: get() is called here alone
  const Dataset negated = base.transform_first([&calls](HostArray x) {
    ++calls;
    for (float& v : x.values<float>()) v = -v;
    return x;
  });
  ASSERT_EQ(negated.size(), 3);
  for (std::int64_t i = 0; i < 3; ++i) {
    const Sample s = negated.get(i);
    EXPECT_EQ(values_of<float>(s.data), (std::vector<float>{-values[i * 2], -values[i * 2 + 1]}));
    EXPECT_EQ(values_of<std::int32_t>(s.label), std::vector<std::int32_t>{labels[i]});
    // The base data set is untouched: transforms are lazy and act on copies.
    EXPECT_EQ(values_of<float>(base.get(i).data),
              (std::vector<float>{values[i * 2], values[i * 2 + 1]}));
  }
  EXPECT_EQ(calls, 3);

  // transform: the whole sample.
  const Dataset swapped = base.transform([](Sample s) {
    s.label = HostArray::scalar<std::int32_t>(values_of<std::int32_t>(s.label)[0] + 100);
    return s;
  });
  EXPECT_EQ(values_of<std::int32_t>(swapped.get(2).label), std::vector<std::int32_t>{109});
  EXPECT_EQ(values_of<float>(swapped.get(2).data), (std::vector<float>{5, 6}));

  EXPECT_EQ(error_of([&] { base.transform_first(Transform{}); }),
            "transform_first: expected a transform, got an empty one");
}

TEST(FashionMnistDatasetTest, SamplesAreTheLoadedImagesAndLabels) {
  if (!std::filesystem::is_directory(data::default_fashion_mnist_dir())) {
    GTEST_SKIP() << data::default_fashion_mnist_dir() << " is missing";
  }
  const FashionMNIST test(data::default_fashion_mnist_dir(), /*train=*/false);
  const data::FashionMnist direct =
      data::load_fashion_mnist(data::default_fashion_mnist_dir(), false);
  ASSERT_EQ(test.size(), 10000);
  const std::vector<std::uint8_t> images = direct.images.to_vector<std::uint8_t>();
  const std::vector<std::int32_t> labels = direct.labels.to_vector<std::int32_t>();
  for (std::int64_t i : {0, 1, 4321, 9999}) {
    const Sample s = test.get(i);
    ASSERT_EQ(s.data.shape(), (Shape{28, 28, 1}));
    ASSERT_EQ(s.data.dtype(), DType::kUInt8);
    EXPECT_EQ(values_of<std::uint8_t>(s.data),
              std::vector<std::uint8_t>(images.begin() + i * 784, images.begin() + (i + 1) * 784))
        << "image " << i;
    EXPECT_EQ(values_of<std::int32_t>(s.label), std::vector<std::int32_t>{labels[i]});
  }

  EXPECT_THROW(FashionMNIST("/nonexistent/fashion-mnist"), io::FileError);
}

}  // namespace
}  // namespace tagflow::data
