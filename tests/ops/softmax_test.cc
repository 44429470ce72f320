// softmax and log_softmax against plain double-precision loops, on every
// device: every axis of 1-D to 4-D arrays, long rows and wide inner axes,
// large magnitudes, infinities, extent-1 and empty axes, views as inputs,
// identical bits on every device, and the errors for bad input.

#include <cmath>
#include <cstdint>
#include <functional>
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

struct Reference {
  std::vector<double> softmax;
  std::vector<double> log_softmax;
};

/// softmax and log_softmax of `x` (of `shape`) along `axis`, in double.
Reference reference(const std::vector<float>& x, const Shape& shape, int axis) {
  if (axis < 0) axis += shape.ndim();
  std::int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= shape[a];
  for (int a = axis + 1; a < shape.ndim(); ++a) inner *= shape[a];
  const std::int64_t extent = shape[axis];
  Reference r{std::vector<double>(x.size()), std::vector<double>(x.size())};
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      const auto at = [&](std::int64_t j) {
        return static_cast<std::size_t>((o * extent + j) * inner + i);
      };
      double m = -INFINITY;
      for (std::int64_t j = 0; j < extent; ++j) m = std::max(m, double{x[at(j)]});
      double s = 0;
      for (std::int64_t j = 0; j < extent; ++j) s += std::exp(x[at(j)] - m);
      for (std::int64_t j = 0; j < extent; ++j) {
        r.softmax[at(j)] = std::exp(x[at(j)] - m) / s;
        r.log_softmax[at(j)] = x[at(j)] - m - std::log(s);
      }
    }
  }
  return r;
}

// Tolerances. softmax: the kernel's float exp of the float difference x - max
// is within a few ulps, plus |x - max| * 2^-24 from rounding the difference
// (|x - max| < 10 here): 2e-6 relative. log_softmax is computed in double from
// exact inputs and rounded once: 1e-6 relative, plus 1e-6 absolute where the
// result is near 0 (the float sum of exps then dominates).
constexpr double kSoftmaxRel = 2e-6;
constexpr double kLogRel = 1e-6;
constexpr double kLogAbs = 1e-6;

void check_against_reference(const std::vector<float>& x, const Shape& shape, int axis,
                             double log_rel) {
  SCOPED_TRACE("shape (" + shape.str() + ") axis " + std::to_string(axis));
  const Reference expected = reference(x, shape, axis);
  std::vector<float> first_softmax, first_log;
  for (Context ctx : all_devices()) {
    const NDArray a = array(x, shape, ctx);
    const NDArray p = softmax(a, axis);
    const NDArray lp = log_softmax(a, axis);
    ASSERT_EQ(p.shape(), shape);
    ASSERT_EQ(lp.shape(), shape);
    ASSERT_EQ(p.context(), ctx);
    const std::vector<float> got = p.to_vector<float>();
    const std::vector<float> got_log = lp.to_vector<float>();
    expect_close(got, expected.softmax, kSoftmaxRel, 1e-30, "softmax on " + ctx.str());
    expect_close(got_log, expected.log_softmax, log_rel, kLogAbs, "log_softmax on " + ctx.str());
    // The same CPU kernel runs on every device here: the same bits.
    if (first_softmax.empty()) {
      first_softmax = got;
      first_log = got_log;
    }
    EXPECT_EQ(got, first_softmax) << ctx.str();
    EXPECT_EQ(got_log, first_log) << ctx.str();
  }
}

TEST(SoftmaxTest, MatchesDoubleLoopsAlongEveryAxisOnEveryDevice) {
  std::uint32_t seed = 0;
  // Short and long rows, rows along the last axis (inner 1) and along outer
  // axes, inner extents above the CPU kernel's 1024 lanes.
  for (const Shape& shape : {Shape{7}, Shape{4, 9}, Shape{3, 4, 5}, Shape{2, 3, 4, 5},
                             Shape{3, 5000}, Shape{2, 30, 1500}, Shape{1, 6}}) {
    const std::vector<float> x =
        random_floats(static_cast<std::size_t>(shape.size()), -5, 5, ++seed);
    for (int axis = -shape.ndim(); axis < shape.ndim(); ++axis) {
      check_against_reference(x, shape, axis, kLogRel);
    }
  }
}

TEST(SoftmaxTest, RowsSumToOne) {
  const Shape shape{6, 7, 300};
  const std::vector<float> x = random_floats(static_cast<std::size_t>(shape.size()), -20, 20, 9);
  for (Context ctx : all_devices()) {
    for (int axis : {0, 1, 2}) {
      const std::vector<float> p = softmax(array(x, shape, ctx), axis).to_vector<float>();
      const NDArray sums = sum(array(p, shape, ctx), {axis});
      // Each of up to 300 terms carries a relative error of a few 1e-7.
      expect_close(sums.to_vector<float>(),
                   std::vector<double>(static_cast<std::size_t>(sums.size()), 1.0), 0, 1e-5,
                   "sums along axis " + std::to_string(axis) + " on " + ctx.str());
    }
  }
}

TEST(SoftmaxTest, LargeMagnitudesStayFiniteAndExact) {
  const Shape shape{6, 10};
  const std::vector<float> x = random_floats(60, -1e4f, 1e4f, 11);
  for (Context ctx : all_devices()) {
    for (float v : softmax(array(x, shape, ctx)).to_vector<float>()) EXPECT_TRUE(std::isfinite(v));
    for (float v : log_softmax(array(x, shape, ctx), 0).to_vector<float>()) {
      EXPECT_TRUE(std::isfinite(v));
    }
  }
  // softmax is one-hot to float precision; log_softmax keeps every digit
  // (results down to -2e4, rounded once: 1e-6 relative is 0.02 there).
  for (int axis : {0, 1}) check_against_reference(x, shape, axis, kLogRel);
}

TEST(SoftmaxTest, InfinitiesExtentOneAndEmptyAxes) {
  for (Context ctx : all_devices()) {
    const NDArray x =
        array(std::vector<float>{0, -INFINITY, 1, -INFINITY, -INFINITY, -INFINITY, 2, INFINITY, 0},
              {3, 3}, ctx);
    const std::vector<float> p = softmax(x).to_vector<float>();
    const std::vector<float> lp = log_softmax(x).to_vector<float>();
    // A -inf element of a row with a finite maximum: probability 0, log -inf.
    const double e = std::exp(1.0);
    expect_close({p[0], p[1], p[2]}, {1 / (1 + e), 0, e / (1 + e)}, 1e-6, 0,
                 "row 0 on " + ctx.str());
    expect_close({lp[0], lp[1], lp[2]}, {-std::log1p(e), -INFINITY, 1 - std::log1p(e)}, 1e-6, 0,
                 "log row 0 on " + ctx.str());
    // All -inf, or +inf present: NaN, as NumPy and PyTorch give.
    for (int i = 3; i < 9; ++i) {
      EXPECT_TRUE(std::isnan(p[i])) << i << " on " << ctx.str();
      EXPECT_TRUE(std::isnan(lp[i])) << i << " on " << ctx.str();
    }
    const NDArray column = array(std::vector<float>{3, -1e4f, 7}, {3, 1}, ctx);
    EXPECT_EQ(softmax(column).to_vector<float>(), std::vector<float>(3, 1.f));
    EXPECT_EQ(log_softmax(column, 1).to_vector<float>(), std::vector<float>(3, 0.f));
    EXPECT_EQ(softmax(zeros({0, 4}, DType::kFloat32, ctx)).shape(), Shape({0, 4}));
    EXPECT_EQ(log_softmax(zeros({3, 0}, DType::kFloat32, ctx), 0).shape(), Shape({3, 0}));
  }
}

TEST(SoftmaxTest, ViewsAsInputs) {
  const std::vector<float> values = random_floats(4 * 8, -3, 3, 12);
  const std::vector<float> row2(values.begin() + 16, values.begin() + 24);
  const std::vector<float> rows12(values.begin() + 8, values.begin() + 24);
  for (Context ctx : all_devices()) {
    const NDArray x = array(values, {4, 8}, ctx);
    expect_close(softmax(x[2]).to_vector<float>(), reference(row2, {8}, 0).softmax, kSoftmaxRel, 0,
                 "row view on " + ctx.str());
    expect_close(log_softmax(x.slice(1, 3), 0).to_vector<float>(),
                 reference(rows12, {2, 8}, 0).log_softmax, kLogRel, kLogAbs,
                 "slice view on " + ctx.str());
  }
}

TEST(SoftmaxTest, BadInputGetsTypedErrorsAndLeavesTheEngineUsable) {
  const NDArray x = zeros({2, 3});
  EXPECT_EQ(error_of([&] {
              (void)softmax(zeros({2, 3}, DType::kInt32));
            }),
            "softmax: expected a floating-point array (float32, float16 or bfloat16) as the first "
            "argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] { (void)log_softmax(x, 2); }),
            "log_softmax: axis 2 is out of range for an array of shape (2x3), which has 2 "
            "dimension(s)");
  EXPECT_EQ(error_of([&] { (void)softmax(x, -3); }),
            "softmax: axis -3 is out of range for an array of shape (2x3), which has 2 "
            "dimension(s)");
  EXPECT_EQ(error_of([&] { (void)log_softmax(NDArray()); }),
            "log_softmax: the first argument is an empty array (default-constructed)");
  expect_close(softmax(x).to_vector<float>(), std::vector<double>(6, 1.0 / 3), 1e-6, 0,
               "still usable");
}

}  // namespace
}  // namespace tagflow
