// max_pool2d and avg_pool2d against direct double-precision loops on every
// device (strides, padding with and without counting it, non-square
// windows, windows that leave the tail uncovered, global pooling); the
// gradients against finite differences on distinct values; the tie rule
// of max pooling; NaNs; empty batches, views, and the errors.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::error_of;
using Values = std::vector<double>;

struct PoolCase {
  std::string name;
  Shape x;
  Pool2DOptions options;
};

Shape output_shape(const Shape& x, const Pool2DOptions& o) {
  return Shape{x[0], x[1], (x[2] + 2 * o.padding[0] - o.kernel[0]) / o.stride[0] + 1,
               (x[3] + 2 * o.padding[1] - o.kernel[1]) / o.stride[1] + 1};
}

/// The pooling in double: each window's maximum, or its sum divided by the
/// window's size (padding counted) or by its input elements.
Values reference_pool(const Values& x, const Shape& xs, PoolType type, const Pool2DOptions& o) {
  const Shape ys = output_shape(xs, o);
  Values y;
  for (std::int64_t plane = 0; plane < xs[0] * xs[1]; ++plane) {
    for (std::int64_t oh = 0; oh < ys[2]; ++oh) {
      for (std::int64_t ow = 0; ow < ys[3]; ++ow) {
        double best = -INFINITY, total = 0;
        int inside = 0;
        for (std::int64_t i = 0; i < o.kernel[0]; ++i) {
          for (std::int64_t j = 0; j < o.kernel[1]; ++j) {
            const std::int64_t h = oh * o.stride[0] - o.padding[0] + i;
            const std::int64_t w = ow * o.stride[1] - o.padding[1] + j;
            if (h < 0 || h >= xs[2] || w < 0 || w >= xs[3]) continue;
            const double v = x[static_cast<std::size_t>((plane * xs[2] + h) * xs[3] + w)];
            best = std::max(best, v);
            total += v;
            ++inside;
          }
        }
        const int count = o.count_include_pad ? o.kernel[0] * o.kernel[1] : inside;
        y.push_back(type == PoolType::kMax ? best : total / count);
      }
    }
  }
  return y;
}

/// Distinct values, at least 0.01 apart, in a random order: no ties in any
/// window, even after a finite-difference step.
std::vector<float> distinct_values(std::int64_t n, std::uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  std::iota(v.begin(), v.end(), 0.f);
  std::shuffle(v.begin(), v.end(), std::mt19937(seed));
  for (float& x : v) x = (x - static_cast<float>(n) / 2) * 0.01f;
  return v;
}

std::vector<PoolCase> cases() {
  return {
      {"2x2 stride 2", {2, 3, 8, 8}, {}},
      {"odd extents leave the tail", {1, 2, 7, 9}, {}},
      {"3x3 stride 1 pad 1", {2, 2, 6, 5}, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
      {"3x3 stride 2 pad 1, pad not counted",
       {3, 2, 7, 7},
       {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}, .count_include_pad = false}},
      {"non-square", {2, 3, 9, 10}, {.kernel = {2, 3}, .stride = {1, 2}, .padding = {1, 1}}},
      {"non-square, pad not counted",
       {1, 2, 5, 8},
       {.kernel = {4, 2}, .stride = {3, 1}, .padding = {2, 1}, .count_include_pad = false}},
      {"1x1", {2, 2, 3, 4}, {.kernel = {1, 1}, .stride = {1, 1}}},
      {"global", {3, 4, 5, 6}, {.kernel = {5, 6}, .stride = {1, 1}}},
      {"all extents 1", {1, 1, 1, 1}, {.kernel = {1, 1}, .stride = {1, 1}}},
  };
}

TEST(PoolTest, ForwardMatchesDirectLoopsOnEveryDevice) {
  std::uint32_t seed = 20;
  for (const PoolCase& c : cases()) {
    for (PoolType type : {PoolType::kMax, PoolType::kAverage}) {
      SCOPED_TRACE(c.name + (type == PoolType::kMax ? " max" : " average"));
      const std::vector<float> xh =
          testing::random_floats(static_cast<std::size_t>(c.x.size()), -2, 2, ++seed);
      const Values expected = reference_pool(Values(xh.begin(), xh.end()), c.x, type, c.options);
      std::vector<float> first;
      for (Context ctx : all_devices()) {
        const NDArray y = pool2d(array(xh, c.x, ctx), type, c.options);
        ASSERT_EQ(y.shape(), output_shape(c.x, c.options));
        const std::vector<float> got = y.to_vector<float>();
        // A maximum is one of the inputs: exact. A mean is a float32 sum of
        // at most k = kh kw terms |x| <= 2, divided once: within
        // (k + 1) u 2k / count of the exact value, u = 2^-24.
        const double k = c.options.kernel[0] * c.options.kernel[1];
        const double bound = type == PoolType::kMax ? 0 : (k + 1) * std::ldexp(2 * k, -24);
        testing::expect_close(got, expected, 0, bound, ctx.str());
        if (first.empty()) first = got;
        EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)), 0) << ctx;
      }
    }
  }
}

/// d sum(pool(x) * r) / dx against central differences of the reference
/// (step 1e-6 on values 0.01 apart: no window changes its maximum).
void check_pool_gradient(const PoolCase& c, PoolType type, Context ctx) {
  SCOPED_TRACE(c.name + (type == PoolType::kMax ? " max on " : " average on ") + ctx.str());
  const std::vector<float> xh = distinct_values(c.x.size(), 5);
  NDArray x = array(xh, c.x, ctx);
  x.attach_grad();
  const Shape ys = output_shape(c.x, c.options);
  const std::vector<float> r =
      testing::random_floats(static_cast<std::size_t>(ys.size()), -1, 1, 7);
  {
    auto recording = autograd::record();
    sum(pool2d(x, type, c.options) * array(r, ys, ctx)).backward();
  }
  const std::vector<float> grad = x.grad().to_vector<float>();
  Values xd(xh.begin(), xh.end());
  const auto loss = [&] {
    return testing::weighted_sum(reference_pool(xd, c.x, type, c.options), r);
  };
  testing::expect_gradient_matches_finite_differences(xd, grad, loss, "pool2d input",
                                                      /*samples=*/grad.size(), /*tolerance=*/1e-4);
}

TEST(PoolTest, GradientsMatchFiniteDifferences) {
  for (const PoolCase& c : cases()) {
    for (Context ctx : all_devices()) {
      check_pool_gradient(c, PoolType::kMax, ctx);
      check_pool_gradient(c, PoolType::kAverage, ctx);
    }
  }
}

TEST(PoolTest, MaxSendsTheGradientToTheFirstMaximumOfEachWindow) {
  for (Context ctx : all_devices()) {
    // One 2x2 window holding 5 twice, at (0,1) and (1,0): (0,1) comes first.
    NDArray x = array(std::vector<float>{1, 5, 5, 2}, {1, 1, 2, 2}, ctx);
    x.attach_grad();
    {
      auto recording = autograd::record();
      max_pool2d(x).backward();
    }
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 1, 0, 0})) << ctx;
    // All equal, overlapping 2x2 windows at stride 1: each window's
    // top-left element, which is also where the windows overlap.
    NDArray flat = ones({1, 1, 3, 3}, DType::kFloat32, ctx);
    flat.attach_grad();
    {
      auto recording = autograd::record();
      max_pool2d(flat, {2, 2}, {1, 1}).backward();
    }
    EXPECT_EQ(flat.grad().to_vector<float>(), (std::vector<float>{1, 1, 0, 1, 1, 0, 0, 0, 0}))
        << ctx;
  }
}

TEST(PoolTest, PaddingCountsOnlyWhenAskedAndNaNsPropagate) {
  for (Context ctx : all_devices()) {
    const NDArray x = ones({1, 1, 2, 2}, DType::kFloat32, ctx);
    const Pool2DOptions padded{.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}};
    EXPECT_EQ(pool2d(x, PoolType::kAverage, padded).to_vector<float>(),
              std::vector<float>(4, 4.f / 9.f));
    EXPECT_EQ(avg_pool2d(x, {3, 3}, {1, 1}, {1, 1}, false).to_vector<float>(),
              std::vector<float>(4, 1.f));
    EXPECT_EQ(max_pool2d(x - 5, {3, 3}, {1, 1}, {1, 1}).to_vector<float>(),
              std::vector<float>(4, -4.f));  // padding is no candidate for the maximum
    const std::vector<float> got =
        max_pool2d(array(std::vector<float>{1, NAN, 2, 3, 4, 5, 6, 7}, {1, 1, 2, 4}, ctx))
            .to_vector<float>();
    ASSERT_EQ(got.size(), 2u);
    EXPECT_TRUE(std::isnan(got[0])) << ctx;
    EXPECT_EQ(got[1], 7.f) << ctx;
    // Backward, the NaN is the window's maximum and takes its gradient.
    NDArray with_nan = array(std::vector<float>{1, 9, 2, 3, 4, NAN, 6, 7}, {1, 1, 2, 4}, ctx);
    with_nan.attach_grad();
    {
      auto recording = autograd::record();
      max_pool2d(with_nan).backward();
    }
    EXPECT_EQ(with_nan.grad().to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 0, 1, 0, 1}))
        << ctx;
  }
}

TEST(PoolTest, EmptyBatchesAndViewsAsInputs) {
  for (Context ctx : all_devices()) {
    NDArray empty_batch = zeros({0, 3, 4, 4}, DType::kFloat32, ctx);
    empty_batch.attach_grad();
    {
      auto recording = autograd::record();
      const NDArray y = max_pool2d(empty_batch);
      EXPECT_EQ(y.shape(), (Shape{0, 3, 2, 2}));
      sum(y).backward();
    }
    EXPECT_EQ(empty_batch.grad().size(), 0);
    const NDArray big = array(testing::random_floats(4 * 2 * 6 * 6, -1, 1, 3), {4, 2, 6, 6}, ctx);
    const NDArray view = big.slice(2, 4);
    EXPECT_EQ(avg_pool2d(view, {3, 3}, {3, 3}).to_vector<float>(),
              avg_pool2d(view.copyto(ctx), {3, 3}, {3, 3}).to_vector<float>());
  }
}

TEST(PoolTest, BadInputGetsClearErrorsAndLeavesTheEngineUsable) {
  const NDArray x = zeros({2, 3, 5, 5});
  EXPECT_EQ(error_of([&] {
              (void)max_pool2d(zeros({3, 5, 5}));
            }),
            "max_pool2d: expected the input as a 4-D (batch, channels, height, width) array, got "
            "(3x5x5)");
  EXPECT_EQ(error_of([&] {
              (void)avg_pool2d(x, {0, 2});
            }),
            "avg_pool2d: expected a positive kernel and stride, got kernel (0, 2) and stride "
            "(2, 2)");
  EXPECT_EQ(error_of([&] {
              (void)max_pool2d(x, {2, 2}, {2, -1});
            }),
            "max_pool2d: expected a positive kernel and stride, got kernel (2, 2) and stride "
            "(2, -1)");
  EXPECT_EQ(error_of([&] {
              (void)max_pool2d(x, {3, 3}, {1, 1}, {2, 1});
            }),
            "max_pool2d: expected padding between 0 and half the kernel, got padding (2, 1) for "
            "kernel (3, 3)");
  EXPECT_EQ(error_of([&] {
              (void)avg_pool2d(x, {2, 2}, {1, 1}, {0, -1});
            }),
            "avg_pool2d: expected padding between 0 and half the kernel, got padding (0, -1) for "
            "kernel (2, 2)");
  EXPECT_EQ(error_of([&] {
              (void)max_pool2d(x, {6, 2});
            }),
            "max_pool2d: the kernel (6x2) is larger than the padded input (5x5: input "
            "(2x3x5x5) with padding (0, 0))");
  EXPECT_EQ(error_of([&] { (void)max_pool2d(x.astype(DType::kInt32)); }),
            "max_pool2d: expected a float32 array as the first argument, got int32. Convert it "
            "with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] { (void)pool2d(NDArray(), PoolType::kAverage, {}); }),
            "avg_pool2d: the first argument is an empty array (default-constructed)");
  // Still usable.
  EXPECT_EQ(max_pool2d(arange(0, 16).reshape({1, 1, 4, 4})).to_vector<float>(),
            (std::vector<float>{5, 7, 13, 15}));
}

}  // namespace
}  // namespace tagflow
