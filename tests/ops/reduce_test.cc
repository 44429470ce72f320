// Reductions against plain double-precision loops, on every device: sum,
// mean, max, min and norm over first, middle, last, several and all axes of
// 1-D to 4-D arrays (with and without keepdims), integer dtypes and their
// wrap-around, argmax ties and NaN, empty axes, views as inputs, identical
// bits on every device, and the errors for bad input.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;

using testing::all_devices;
using testing::expect_close;
using testing::random_floats;
using testing::random_ints;

struct Case {
  Shape shape;
  std::vector<int> axes;
};

std::string describe(const Case& c) {
  std::string s = "shape (" + c.shape.str() + ") axes {";
  for (int a : c.axes) s += std::to_string(a) + ",";
  return s + "}";
}

/// The cases every reduction runs: first, middle, last, several (adjacent
/// or not, given in any order, negative) and all axes; extent-1 axes; and
/// long or many reductions that take the kernels' blocked and parallel paths.
std::vector<Case> cases() {
  return {
      {{7}, {0}},
      {{5, 6}, {0}},
      {{5, 6}, {1}},
      {{5, 6}, {-1}},
      {{5, 6}, {0, 1}},
      {{3, 4, 5}, {0}},
      {{3, 4, 5}, {1}},
      {{3, 4, 5}, {2}},
      {{3, 4, 5}, {2, 0}},
      {{3, 4, 5}, {-3, -2}},
      {{3, 4, 5}, {1, 2}},
      {{3, 4, 5}, {0, 1, 2}},
      {{2, 3, 4, 5}, {1, 3}},
      {{2, 3, 4, 5}, {0, 2}},
      {{2, 3, 4, 5}, {1, 2}},
      {{2, 3, 4, 5}, {0}},
      {{2, 3, 4, 5}, {3}},
      {{2, 3, 4, 5}, {0, 1, 2, 3}},
      {{3, 1, 4}, {1}},
      {{3, 1, 4}, {0, 1}},
      {{1, 6}, {0}},
      {{3, 70001}, {1}},
      {{70001, 3}, {0}},
      {{5, 2500}, {0}},
      {{100000, 3}, {1}},
      {{2, 33000, 2}, {1}},
  };
}

/// The result shape NumPy gives (with MXNet's (1) for no axis left).
Shape expected_shape(const Case& c, bool keepdims) {
  Shape out;
  for (int axis = 0; axis < c.shape.ndim(); ++axis) {
    const bool reduced = std::count(c.axes.begin(), c.axes.end(), axis) > 0 ||
                         std::count(c.axes.begin(), c.axes.end(), axis - c.shape.ndim()) > 0;
    if (!reduced) out.push_back(c.shape[axis]);
    if (reduced && keepdims) out.push_back(1);
  }
  if (out.ndim() == 0) out.push_back(1);
  return out;
}

/// For every output, the row-major indices of the inputs it reduces, ascending.
std::vector<std::vector<std::int64_t>> groups_of(const Case& c) {
  const Shape out = expected_shape(c, /*keepdims=*/true);
  std::vector<std::vector<std::int64_t>> groups(static_cast<std::size_t>(out.size()));
  for (std::int64_t i = 0; i < c.shape.size(); ++i) {
    std::int64_t rest = i;
    std::int64_t output = 0;
    std::int64_t scale = 1;
    for (int axis = c.shape.ndim() - 1; axis >= 0; --axis) {
      const std::int64_t index = rest % c.shape[axis];
      rest /= c.shape[axis];
      if (out[axis] != 1) {
        output += index * scale;
        scale *= out[axis];
      }
    }
    groups[static_cast<std::size_t>(output)].push_back(i);
  }
  return groups;
}

using Reduction = std::function<NDArray(const NDArray&, std::span<const int>, bool)>;
using Reference = std::function<double(const std::vector<double>&)>;

struct FloatOp {
  const char* name;
  Reduction run;
  Reference reference;
  double rel;  // relative tolerance
};

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}

// The kernels accumulate in double and round once to float: the result is
// within an ulp or so of the double reference (2^-23 = 1.2e-7 relative);
// max and min pick an input and must match exactly.
std::vector<FloatOp> float_ops() {
  return {
      {"sum", [](const NDArray& x, std::span<const int> a, bool k) { return sum(x, a, k); }, sum_of,
       3e-7},
      {"mean", [](const NDArray& x, std::span<const int> a, bool k) { return mean(x, a, k); },
       [](const std::vector<double>& v) { return sum_of(v) / static_cast<double>(v.size()); },
       3e-7},
      {"max", [](const NDArray& x, std::span<const int> a, bool k) { return max(x, a, k); },
       [](const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }, 0},
      {"min", [](const NDArray& x, std::span<const int> a, bool k) { return min(x, a, k); },
       [](const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }, 0},
      {"norm", [](const NDArray& x, std::span<const int> a, bool k) { return norm(x, a, k); },
       [](const std::vector<double>& v) {
         double s = 0;
         for (double x : v) s += x * x;
         return std::sqrt(s);
       },
       3e-7},
  };
}

TEST(ReduceTest, FloatReductionsMatchDoubleLoopsOnEveryDevice) {
  std::uint32_t seed = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(describe(c));
    const std::vector<float> x =
        random_floats(static_cast<std::size_t>(c.shape.size()), -1, 1, ++seed);
    const auto groups = groups_of(c);
    for (const FloatOp& op : float_ops()) {
      std::vector<double> expected;
      for (const auto& group : groups) {
        std::vector<double> values;
        for (std::int64_t i : group) values.push_back(x[static_cast<std::size_t>(i)]);
        expected.push_back(op.reference(values));
      }
      for (bool keepdims : {false, true}) {
        std::vector<float> on_first_device;
        for (Context ctx : all_devices()) {
          const NDArray y = op.run(array(x, c.shape, ctx), c.axes, keepdims);
          ASSERT_EQ(y.shape(), expected_shape(c, keepdims)) << op.name;
          ASSERT_EQ(y.dtype(), DType::kFloat32);
          ASSERT_EQ(y.context(), ctx);
          const std::vector<float> got = y.to_vector<float>();
          expect_close(got, expected, op.rel, 0, std::string(op.name) + " on " + ctx.str());
          // Note [Deterministic reductions]: every device runs the same CPU
          // kernel here, so the bits must agree, not just the values.
          if (on_first_device.empty()) on_first_device = got;
          EXPECT_EQ(got, on_first_device) << op.name << " on " << ctx.str();
        }
      }
    }
  }
}

template <typename T>
void check_integer_reductions(std::int64_t low, std::int64_t high) {
  std::uint32_t seed = 100;
  for (const Case& c : cases()) {
    if (c.shape.size() > 10000) continue;
    SCOPED_TRACE(describe(c) + " " + std::string(dtype_name(dtype_of<T>)));
    const std::vector<T> x =
        random_ints<T>(static_cast<std::size_t>(c.shape.size()), low, high, ++seed);
    std::vector<T> sums, maxima, minima;
    for (const auto& group : groups_of(c)) {
      // The exact sum modulo 2^64; converting it to T keeps it modulo 2^bits.
      std::uint64_t s = 0;
      T hi = x[static_cast<std::size_t>(group[0])], lo = hi;
      for (std::int64_t i : group) {
        const T v = x[static_cast<std::size_t>(i)];
        s += static_cast<std::uint64_t>(static_cast<std::int64_t>(v));
        hi = std::max(hi, v);
        lo = std::min(lo, v);
      }
      sums.push_back(static_cast<T>(s));
      maxima.push_back(hi);
      minima.push_back(lo);
    }
    for (Context ctx : all_devices()) {
      const NDArray a = array(x, c.shape, ctx);
      const NDArray s = sum(a, c.axes);
      ASSERT_EQ(s.dtype(), dtype_of<T>);
      EXPECT_EQ(s.to_vector<T>(), sums) << "sum on " << ctx.str();
      EXPECT_EQ(max(a, c.axes).to_vector<T>(), maxima) << "max on " << ctx.str();
      EXPECT_EQ(min(a, c.axes).to_vector<T>(), minima) << "min on " << ctx.str();
    }
  }
}

TEST(ReduceTest, IntegerSumsWrapAndExtremaAreExact) {
  // int32 values up to 1e9: sums of a few of them already wrap.
  check_integer_reductions<std::int32_t>(-1'000'000'000, 1'000'000'000);
  check_integer_reductions<std::int64_t>(std::numeric_limits<std::int64_t>::min() / 2,
                                         std::numeric_limits<std::int64_t>::max() / 2);
  check_integer_reductions<std::uint8_t>(0, 255);
  for (Context ctx : all_devices()) {
    using I32 = std::numeric_limits<std::int32_t>;
    using I64 = std::numeric_limits<std::int64_t>;
    const auto i32 = [&](std::vector<std::int32_t> v) { return array(v, {std::ssize(v)}, ctx); };
    EXPECT_EQ(sum(i32({I32::max(), 1})).to_vector<std::int32_t>()[0], I32::min());
    EXPECT_EQ(sum(i32({I32::min(), -1})).to_vector<std::int32_t>()[0], I32::max());
    EXPECT_EQ(max(i32({I32::min(), I32::min()})).to_vector<std::int32_t>()[0], I32::min());
    EXPECT_EQ(min(i32({I32::max()})).to_vector<std::int32_t>()[0], I32::max());
    EXPECT_EQ(
        sum(array(std::vector<std::int64_t>{I64::max(), 1}, {2}, ctx)).to_vector<std::int64_t>()[0],
        I64::min());
    const NDArray bytes = array(std::vector<std::uint8_t>{200, 100, 255}, {3}, ctx);
    EXPECT_EQ(sum(bytes).to_vector<std::uint8_t>()[0], 43);  // 555 mod 256
    EXPECT_EQ(max(bytes).to_vector<std::uint8_t>()[0], 255);
    EXPECT_EQ(min(bytes).to_vector<std::uint8_t>()[0], 100);
  }
}

TEST(ReduceTest, OverloadsAndKeepdimsShapes) {
  for (Context ctx : all_devices()) {
    const NDArray x = arange(0, 24, 1, DType::kFloat32, ctx).reshape({2, 3, 4});
    EXPECT_EQ(sum(x).shape(), Shape({1}));  // every axis: (1), as MXNet
    EXPECT_EQ(sum(x).to_vector<float>(), std::vector<float>{276});
    EXPECT_EQ(sum(x, /*keepdims=*/true).shape(), Shape({1, 1, 1}));
    EXPECT_EQ(sum(x, 1).shape(), Shape({2, 4}));
    EXPECT_EQ(sum(x, 1, true).shape(), Shape({2, 1, 4}));
    EXPECT_EQ(sum(x, -1).to_vector<float>(), (std::vector<float>{6, 22, 38, 54, 70, 86}));
    EXPECT_EQ(mean(x, {0, 2}, true).shape(), Shape({1, 3, 1}));
    EXPECT_EQ(mean(x, {0, 2}).to_vector<float>(), (std::vector<float>{7.5f, 11.5f, 15.5f}));
    EXPECT_EQ(max(x, {0}).shape(), Shape({3, 4}));
    EXPECT_EQ(norm(array({3, -4}, ctx)).to_vector<float>(), std::vector<float>{5});
    EXPECT_EQ(argmax(x, 1, true).shape(), Shape({2, 1, 4}));
    const std::vector<int> axes{0, 1};  // the span overload, as from a std::vector
    EXPECT_EQ(min(x, axes).to_vector<float>(), (std::vector<float>{0, 1, 2, 3}));
    // An empty axis list reduces nothing (NumPy's axis=()): a copy.
    const NDArray copy = sum(x, {});
    EXPECT_EQ(copy.shape(), x.shape());
    EXPECT_FALSE(copy.same_as(x));
    EXPECT_EQ(copy.to_vector<float>(), x.to_vector<float>());
    EXPECT_EQ(norm(array({-2, 3}, ctx), {}).to_vector<float>(), (std::vector<float>{2, 3}));
  }
}

/// Index of the first maximum of `values` (NaN the largest), by a plain loop.
template <typename T>
std::int64_t first_maximum(const std::vector<T>& values) {
  std::int64_t best = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const T v = values[i];
    const T b = values[static_cast<std::size_t>(best)];
    if (std::isnan(static_cast<double>(b))) break;
    if (std::isnan(static_cast<double>(v)) || v > b) best = static_cast<std::int64_t>(i);
  }
  return best;
}

template <typename T>
void check_argmax(const std::vector<T>& x, const Shape& shape, std::uint32_t seed) {
  for (int axis = -shape.ndim(); axis < shape.ndim(); ++axis) {
    const Case c{shape, {axis}};
    SCOPED_TRACE(describe(c) + " seed " + std::to_string(seed));
    std::vector<std::int64_t> expected;
    for (const auto& group : groups_of(c)) {
      std::vector<T> values;
      for (std::int64_t i : group) values.push_back(x[static_cast<std::size_t>(i)]);
      expected.push_back(first_maximum(values));
    }
    for (Context ctx : all_devices()) {
      const NDArray index = argmax(array(x, shape, ctx), axis);
      ASSERT_EQ(index.dtype(), DType::kInt64);
      ASSERT_EQ(index.shape(), expected_shape(c, false));
      EXPECT_EQ(index.to_vector<std::int64_t>(), expected) << "on " << ctx.str();
    }
  }
}

TEST(ReduceTest, ArgmaxFindsTheFirstMaximumAlongEveryAxis) {
  std::uint32_t seed = 200;
  for (const Shape& shape : {Shape{9}, Shape{4, 7}, Shape{3, 4, 5}, Shape{2, 3, 2, 5}}) {
    const auto n = static_cast<std::size_t>(shape.size());
    seed += 3;
    check_argmax(random_floats(n, -1, 1, seed), shape, seed);
    check_argmax(random_ints<std::int32_t>(n, 0, 3, seed + 1), shape, seed + 1);  // many ties
    check_argmax(random_ints<std::uint8_t>(n, 250, 255, seed + 2), shape, seed + 2);
  }
  // Ties across the kernel's blocks of 32768 (Note [Deterministic
  // reductions]): the first maximum wins, and a later NaN beats it.
  std::vector<float> long_row(70001, 0.f);
  long_row[40000] = 5;
  long_row[3] = 5;
  long_row[69999] = 5;
  check_argmax(long_row, Shape{70001}, 0);
  long_row[66000] = NAN;
  check_argmax(long_row, Shape{70001}, 1);
}

TEST(ReduceTest, ArgmaxTiesNanAndInfinities) {
  for (Context ctx : all_devices()) {
    const auto first = [&](std::initializer_list<float> v) {
      return argmax(array(v, ctx), 0).to_vector<std::int64_t>()[0];
    };
    EXPECT_EQ(first({1, 3, 3, 2}), 1);
    EXPECT_EQ(first({1, NAN, 5, NAN}), 1);  // NaN counts as the maximum, as in NumPy
    EXPECT_EQ(first({NAN, 1}), 0);
    EXPECT_EQ(first({-INFINITY, -INFINITY}), 0);
    EXPECT_EQ(first({-INFINITY, INFINITY, INFINITY}), 1);
    const NDArray ties = array(std::vector<float>{5, 5, 1, 7}, {2, 2}, ctx);
    EXPECT_EQ(argmax(ties, 0).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1}));
    EXPECT_EQ(argmax(ties, -1).to_vector<std::int64_t>(), (std::vector<std::int64_t>{0, 1}));
    // max and min propagate NaN; infinities are ordinary values.
    const NDArray with_nan = array({1, NAN, -INFINITY}, ctx);
    EXPECT_TRUE(std::isnan(max(with_nan).to_vector<float>()[0]));
    EXPECT_TRUE(std::isnan(min(with_nan).to_vector<float>()[0]));
    EXPECT_EQ(max(array({-INFINITY, -INFINITY}, ctx)).to_vector<float>()[0], -INFINITY);
    EXPECT_EQ(min(array({INFINITY}, ctx)).to_vector<float>()[0], INFINITY);
  }
}

TEST(ReduceTest, ViewsAsInputs) {
  const std::vector<float> values = random_floats(4 * 5 * 6, -1, 1, 300);
  for (Context ctx : all_devices()) {
    const NDArray x = array(values, {4, 5, 6}, ctx);
    const NDArray rows = x.slice(1, 3);  // (2x5x6), starting 30 elements in
    std::vector<double> expected(12, 0.0);
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 5; ++j)
        for (int k = 0; k < 6; ++k) expected[i * 6 + k] += values[(i + 1) * 30 + j * 6 + k];
    expect_close(sum(rows, {1}).to_vector<float>(), expected, 3e-7, 0, "slice on " + ctx.str());
    const NDArray last = x[3].reshape({30});
    std::vector<double> tail(values.begin() + 90, values.end());
    EXPECT_EQ(max(last).to_vector<float>()[0], *std::max_element(tail.begin(), tail.end()));
    EXPECT_EQ(argmax(last, 0).to_vector<std::int64_t>()[0],
              std::max_element(tail.begin(), tail.end()) - tail.begin());
  }
}

TEST(ReduceTest, EmptyAxes) {
  for (Context ctx : all_devices()) {
    const NDArray none = zeros({2, 0, 3}, DType::kFloat32, ctx);
    EXPECT_EQ(sum(none, {1}).shape(), Shape({2, 3}));
    EXPECT_EQ(sum(none, {1}).to_vector<float>(), std::vector<float>(6, 0.f));
    EXPECT_EQ(norm(none, {1}, true).to_vector<float>(), std::vector<float>(6, 0.f));
    EXPECT_EQ(sum(none).to_vector<float>(), std::vector<float>{0.f});
    EXPECT_EQ(sum(zeros({0, 4}, DType::kInt32, ctx), 0).to_vector<std::int32_t>(),
              std::vector<std::int32_t>(4, 0));
    // Nothing to reduce and nothing to compute: an empty result, no error.
    EXPECT_EQ(max(none, {2}).shape(), Shape({2, 0}));
    EXPECT_EQ(argmax(none, 0).shape(), Shape({0, 3}));
  }
}

TEST(ReduceTest, BadInputGetsTypedErrorsAndLeavesTheEngineUsable) {
  const NDArray x = zeros({2, 3, 4});
  const NDArray ints = zeros({2, 3}, DType::kInt32);
  const NDArray none = zeros({2, 0, 3});
  EXPECT_EQ(error_of([&] { (void)sum(x, {3}); }),
            "sum: axis 3 is out of range for an array of shape (2x3x4), which has 3 dimension(s)");
  EXPECT_EQ(
      error_of([&] {
        (void)mean(x, {0, -4});
      }),
      "mean: axis -4 is out of range for an array of shape (2x3x4), which has 3 dimension(s)");
  EXPECT_EQ(error_of([&] { (void)argmax(x, 3); }),
            "argmax: axis 3 is out of range for an array of shape (2x3x4), which has 3 "
            "dimension(s)");
  EXPECT_EQ(error_of([&] {
              (void)max(x, {1, -2});
            }),
            "max: axis -2 repeats axis 1 of an array of shape (2x3x4): each axis may be reduced "
            "only once");
  EXPECT_EQ(error_of([&] {
              (void)sum(x, {0, 0});
            }),
            "sum: axis 0 repeats axis 0 of an array of shape (2x3x4): each axis may be reduced "
            "only once");
  EXPECT_EQ(error_of([&] { (void)mean(ints); }),
            "mean: expected a floating-point array (float32, float16 or bfloat16) as the first "
            "argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] { (void)norm(ints, 0); }),
            "norm: expected a floating-point array (float32, float16 or bfloat16) as the first "
            "argument, got int32. Convert it with astype(DType::kFloat32)");
  for (const char* op : {"max", "min", "mean", "argmax"}) {
    const std::string name = op;
    EXPECT_EQ(error_of([&] {
                if (name == "max") (void)max(none, {1});
                if (name == "min") (void)min(none);
                if (name == "mean") (void)mean(none, {0, 1});
                if (name == "argmax") (void)argmax(none, -2);
              }),
              name +
                  ": cannot reduce axis 1 of an array of shape (2x0x3): it has extent 0, and "
                  "the " +
                  name +
                  " of no elements is undefined (only sum and norm reduce "
                  "empty axes, to 0)");
  }
  EXPECT_EQ(error_of([&] { (void)sum(NDArray()); }),
            "sum: the first argument is an empty array (default-constructed)");
  EXPECT_EQ(sum(x + 1.f, {0, 2}).to_vector<float>(), std::vector<float>(3, 8.f));  // still usable
}

}  // namespace
}  // namespace tagflow
