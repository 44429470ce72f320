// one_hot against a plain loop: every index dtype and output dtype, indices
// of 0 to 3 dimensions including out-of-range ones (a row of off values) and
// fractional float indices (truncated), views as inputs, on every device;
// the errors.

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::expect_error;

constexpr DType kDTypes[] = {DType::kFloat32, DType::kInt32, DType::kInt64, DType::kUInt8};

/// The reference: index i (as a double) is on in column trunc(i) when that
/// lies in [0, depth), MXNet's rule; otherwise the whole row is off.
std::vector<double> one_hot_reference(const std::vector<double>& indices, std::int64_t depth,
                                      double on, double off) {
  std::vector<double> out;
  for (double index : indices) {
    for (std::int64_t j = 0; j < depth; ++j) {
      const bool hit = !std::isnan(index) && std::trunc(index) == static_cast<double>(j);
      out.push_back(hit ? on : off);
    }
  }
  return out;
}

NDArray make_indices(const std::vector<double>& values, const Shape& shape, DType dtype,
                     Context ctx) {
  NDArray result;
  TAGFLOW_DTYPE_SWITCH(dtype, T, {
    std::vector<T> typed;
    for (double v : values) typed.push_back(static_cast<T>(v));
    result = array(typed, shape, ctx);
  });
  return result;
}

/// Indices in [-2, depth + 2]: some out of range on both sides (uint8 keeps
/// only the non-negative ones).
std::vector<double> random_indices(std::int64_t n, std::int64_t depth, DType dtype,
                                   std::mt19937& rng) {
  const std::int64_t low = dtype == DType::kUInt8 ? 0 : -2;
  std::uniform_int_distribution<std::int64_t> dist(low, depth + 2);
  std::vector<double> values(static_cast<std::size_t>(n));
  for (double& v : values) v = static_cast<double>(dist(rng));
  return values;
}

TEST(OneHotTest, MatchesALoopForEveryDtypeShapeAndDevice) {
  std::mt19937 rng(21);
  const Shape shapes[] = {Shape{}, Shape{7}, Shape{3, 4}, Shape{2, 1, 5}};
  const std::int64_t depth = 5;
  for (const Shape& shape : shapes) {
    for (DType index_dtype : kDTypes) {
      const std::vector<double> indices = random_indices(shape.size(), depth, index_dtype, rng);
      for (DType dtype : kDTypes) {
        // on and off chosen to fit every dtype, and not 1 and 0.
        const double on = 7;
        const double off = dtype == DType::kUInt8 ? 2 : -3;
        const std::vector<double> expected = one_hot_reference(indices, depth, on, off);
        Shape out_shape = shape;
        out_shape.push_back(depth);
        for (Context ctx : all_devices()) {
          const NDArray out =
              one_hot(make_indices(indices, shape, index_dtype, ctx), depth, on, off, dtype);
          const std::string what = "indices (" + shape.str() + ") " +
                                   std::string(dtype_name(index_dtype)) + " to " +
                                   std::string(dtype_name(dtype)) + " on " + ctx.str();
          ASSERT_EQ(out.shape(), out_shape) << what;
          EXPECT_EQ(out.dtype(), dtype) << what;
          EXPECT_EQ(out.context(), ctx) << what;
          EXPECT_EQ(out.to_vector<double>(), expected) << what;
        }
      }
    }
  }
}

TEST(OneHotTest, DefaultsAndFloatIndicesAreTruncatedLikeMxnet) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  // -0.5 truncates to 0 (in range); -1 and below, depth and above, NaN and
  // infinities are out of range; huge values must not overflow a cast.
  const std::vector<double> indices = {1.7, 2.999,    -0.5,      -1.0, 3.0,
                                       nan, HUGE_VAL, -HUGE_VAL, 1e30, 0};
  const std::vector<double> expected = one_hot_reference(indices, 3, 1, 0);
  for (Context ctx : all_devices()) {
    const NDArray out = one_hot(make_indices(indices, Shape{10}, DType::kFloat32, ctx), 3);
    EXPECT_EQ(out.dtype(), DType::kFloat32);
    EXPECT_EQ(out.to_vector<double>(), expected) << ctx;
  }
  EXPECT_EQ(std::vector<double>(expected.begin(), expected.begin() + 9),
            (std::vector<double>{0, 1, 0, 0, 0, 1, 1, 0, 0}));
}

TEST(OneHotTest, LargeViewsAndEmptyCases) {
  std::mt19937 rng(22);
  // Many rows: the CPU kernel splits them over threads.
  const std::int64_t depth = 10;
  const std::vector<double> indices = random_indices(50000, depth, DType::kInt32, rng);
  const std::vector<double> tail(indices.begin() + 20000, indices.end());
  const std::vector<double> expected = one_hot_reference(tail, depth, 1, 0);
  for (Context ctx : all_devices()) {
    const NDArray all = make_indices(indices, Shape{500, 100}, DType::kInt32, ctx);
    const NDArray view = all.slice(200, 500).reshape({30, 1000});  // a view at an offset
    const NDArray out = one_hot(view, depth, 1, 0, DType::kUInt8);
    EXPECT_EQ(out.shape(), (Shape{30, 1000, 10}));
    EXPECT_EQ(out.to_vector<double>(), expected) << ctx;
    EXPECT_EQ(one_hot(all, 0).shape(), (Shape{500, 100, 0}));
    EXPECT_EQ(one_hot(zeros({0, 2}, DType::kInt64, ctx), 4).shape(), (Shape{0, 2, 4}));
  }
}

TEST(OneHotTest, BadArgumentsAreErrors) {
  const NDArray indices = array({0, 1, 2});
  expect_error([] { (void)one_hot(NDArray(), 3); },
               "one_hot: the first argument is an empty array (default-constructed)");
  expect_error([&] { (void)one_hot(indices, -1); }, "one_hot: expected depth >= 0, got -1");
  expect_error([&] { (void)one_hot(indices, 3, 0.5, 0, DType::kInt32); },
               "one_hot: the scalar 0.5 cannot be used with a int32 array: expected an integer in "
               "[-2147483648, 2147483647]");
  expect_error([&] { (void)one_hot(indices, 3, 1, 256, DType::kUInt8); },
               "one_hot: the scalar 256 cannot be used with a uint8 array: expected an integer in "
               "[0, 255]");
  const NDArray eight = zeros({1, 1, 1, 1, 1, 1, 1, 1});
  expect_error([&] { (void)one_hot(eight, 2); },
               "one_hot: the result would have 9 dimensions, but arrays have at most 8");
  EXPECT_EQ(one_hot(indices, 3).to_vector<float>(),
            (std::vector<float>{1, 0, 0, 0, 1, 0, 0, 0, 1}));
}

}  // namespace
}  // namespace tagflow
