// max_pool2d and avg_pool2d against direct double-precision loops on every
// device (strides, padding with and without counting it, non-square
// windows, windows that leave the tail uncovered, global pooling); the
// gradients against finite differences on distinct values; the window rule
// of max pooling (ties, signed zeros, NaNs, infinities), forward and
// backward, bit for bit, on every device and in the CUDA kernels' bodies
// run on the host; empty batches, views, and the errors.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/kernels/pool_functors.h"
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

// --- the window rule of max pooling (Note [Gradient of max pooling]) ---------------

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Expects the same bits in `got` as in `expected`, naming the first few
/// elements that differ (NaN equals only NaN of the same bits, -0.0 only -0.0).
void expect_same_bits(const std::vector<float>& got, const std::vector<float>& expected,
                      const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(expected[i]) &&
        reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << " (bits 0x" << std::hex
                    << std::bit_cast<std::uint32_t>(got[i]) << "), expected " << expected[i]
                    << " (bits 0x" << std::bit_cast<std::uint32_t>(expected[i]) << std::dec << ")";
    }
  }
}

/// The flat index in x of the element the rule picks in the window of output
/// (plane, oh, ow), found another way than the kernels: the window's first
/// NaN in row-major order if it holds one, else the first element equal to
/// its largest value, compared in double.
std::size_t rule_choice(const std::vector<float>& x, const Shape& xs, const Pool2DOptions& o,
                        std::int64_t plane, std::int64_t oh, std::int64_t ow) {
  std::vector<std::size_t> window;  // the window's input elements, row-major
  for (std::int64_t i = 0; i < o.kernel[0]; ++i) {
    for (std::int64_t j = 0; j < o.kernel[1]; ++j) {
      const std::int64_t h = oh * o.stride[0] - o.padding[0] + i;
      const std::int64_t w = ow * o.stride[1] - o.padding[1] + j;
      if (h < 0 || h >= xs[2] || w < 0 || w >= xs[3]) continue;
      window.push_back(static_cast<std::size_t>((plane * xs[2] + h) * xs[3] + w));
    }
  }
  for (std::size_t k : window) {
    if (std::isnan(x[k])) return k;
  }
  double largest = -INFINITY;
  for (std::size_t k : window) largest = std::max(largest, double{x[k]});
  for (std::size_t k : window) {
    if (double{x[k]} == largest) return k;
  }
  ADD_FAILURE() << "no element equals the window's largest value";
  return window.front();
}

/// What the rule gives: each output is a copy of its window's chosen element
/// (the same bits, so -0.0 stays -0.0 and a NaN keeps its payload); each
/// input's gradient is the sum of dy over the windows that chose it, in
/// double from +0.0 (dy are multiples of 1/4: exact in float as well).
struct RuleResults {
  std::vector<float> y, dx;
};

RuleResults by_rule(const std::vector<float>& x, const Shape& xs, const Pool2DOptions& o,
                    const std::vector<float>& dy) {
  const Shape ys = output_shape(xs, o);
  RuleResults r;
  std::vector<double> dx(x.size(), 0.0);
  std::size_t out = 0;
  for (std::int64_t plane = 0; plane < xs[0] * xs[1]; ++plane) {
    for (std::int64_t oh = 0; oh < ys[2]; ++oh) {
      for (std::int64_t ow = 0; ow < ys[3]; ++ow, ++out) {
        const std::size_t k = rule_choice(x, xs, o, plane, oh, ow);
        r.y.push_back(x[k]);
        dx[k] += dy[out];
      }
    }
  }
  for (double d : dx) r.dx.push_back(static_cast<float>(d));
  return r;
}

detail::PoolGeometry max_geometry(const Shape& xs, const Pool2DOptions& o) {
  const Shape ys = output_shape(xs, o);
  detail::PoolGeometry g;
  g.batch = xs[0];
  g.channels = xs[1];
  g.in_h = xs[2];
  g.in_w = xs[3];
  g.out_h = ys[2];
  g.out_w = ys[3];
  g.kernel_h = o.kernel[0];
  g.kernel_w = o.kernel[1];
  g.stride_h = o.stride[0];
  g.stride_w = o.stride[1];
  g.pad_h = o.padding[0];
  g.pad_w = o.padding[1];
  g.mode = detail::PoolMode::kMax;
  return g;
}

/// max_pool2d's forward and its gradient for `dy`, computed on `ctx`.
RuleResults max_pool_on(Context ctx, const std::vector<float>& xh, const Shape& xs,
                        const Pool2DOptions& o, const std::vector<float>& dy) {
  NDArray x = array(xh, xs, ctx);
  x.attach_grad();
  NDArray y;
  {
    auto recording = autograd::record();
    y = max_pool2d(x, o.kernel, o.stride, o.padding);
    sum(y * array(dy, output_shape(xs, o), ctx)).backward();
  }
  return {y.to_vector<float>(), x.grad().to_vector<float>()};
}

/// The same, by the CUDA kernels' per-element bodies (pool_functors.h) run
/// on the host: what a real GPU's threads compute.
RuleResults max_pool_by_cuda_bodies(const std::vector<float>& xh, const Shape& xs,
                                    const Pool2DOptions& o, const std::vector<float>& dy) {
  const detail::PoolGeometry g = max_geometry(xs, o);
  RuleResults r{std::vector<float>(dy.size()), std::vector<float>(xh.size())};
  for (std::size_t i = 0; i < r.y.size(); ++i) {
    r.y[i] = detail::max_pool_output(g, xh.data(), static_cast<std::int64_t>(i));
  }
  for (std::size_t i = 0; i < r.dx.size(); ++i) {
    r.dx[i] =
        detail::max_pool_input_gradient(g, xh.data(), dy.data(), static_cast<std::int64_t>(i));
  }
  return r;
}

/// max_pool2d forward and backward (with dy) on every device, and the CUDA
/// kernels' bodies on the host, give the rule's results bit for bit.
void expect_max_pool_by_rule(const std::vector<float>& xh, const Shape& xs, const Pool2DOptions& o,
                             const std::vector<float>& dy) {
  ASSERT_EQ(dy.size(), static_cast<std::size_t>(output_shape(xs, o).size()));
  const RuleResults expected = by_rule(xh, xs, o, dy);
  for (Context ctx : all_devices()) {
    const RuleResults got = max_pool_on(ctx, xh, xs, o, dy);
    expect_same_bits(got.y, expected.y, "forward on " + ctx.str());
    expect_same_bits(got.dx, expected.dx, "backward on " + ctx.str());
  }
  const RuleResults cuda = max_pool_by_cuda_bodies(xh, xs, o, dy);
  expect_same_bits(cuda.y, expected.y, "the CUDA forward body on the host");
  expect_same_bits(cuda.dx, expected.dx, "the CUDA backward body on the host");
}

/// dy for `n` outputs: multiples of 1/4 in [-2, 2], -0.0 among them, so
/// that every sum of them is exact.
std::vector<float> quarter_steps(std::size_t n, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(-8, 8);
  std::vector<float> v(n);
  for (float& d : v) {
    const int k = pick(rng);
    d = k == 0 ? -0.f : static_cast<float>(k) / 4;
  }
  return v;
}

TEST(PoolTest, MaxPoolingPicksTheWrittenOutElementOfEachWindow) {
  // 2x2 windows at stride 2 (the CPU's fast path), each written as its
  // top-left, top-right, bottom-left, bottom-right values with the position
  // the rule picks. The first row of windows holds no NaN; the second does,
  // so its forward runs the fast path's NaN fallback.
  struct Window {
    std::array<float, 4> values;
    int picked;
  };
  const std::vector<Window> windows = {
      {{3, 3, 3, 3}, 0},                  // all equal: the first
      {{1, 5, 5, 2}, 1},                  // two maxima, different rows: the first
      {{1, 2, 7, 7}, 2},                  // two maxima in the bottom row
      {{-0.f, 0.f, -1, -2}, 0},           // -0.0 before +0.0: -0.0 (they compare equal)
      {{-3, 0.f, -0.f, -1}, 1},           // +0.0 before -0.0: +0.0
      {{-kInf, -kInf, -kInf, -kInf}, 0},  // all -inf: the first
      {{kInf, 1, kInf, 2}, 0},            // two +inf: the first
      {{kNaN, 9, 1, 2}, 0},               // NaN first
      {{9, 1, kNaN, 2}, 2},               // NaN after the maximum
      {{1, kNaN, 3, kNaN}, 1},            // two NaNs: the first
      {{kInf, 2, 1, kNaN}, 3},            // a NaN beats +inf
      {{-kInf, -5, -kInf, -5}, 1},        // -inf and a tie, in a row with NaNs
      {{0.f, -0.f, 0.f, -0.f}, 0},        // signed zeros, in a row with NaNs
      {{-kInf, kNaN, -kNaN, kInf}, 1},    // two NaNs of different signs: the first
  };
  const std::int64_t per_row = 7;
  const Shape xs{1, 1, 4, 2 * per_row};
  std::vector<float> x(static_cast<std::size_t>(xs.size()));
  std::vector<float> dy, y_expected, dx_expected(x.size(), 0.f);
  for (std::size_t k = 0; k < windows.size(); ++k) {
    const std::int64_t oh = static_cast<std::int64_t>(k) / per_row;
    const std::int64_t ow = static_cast<std::int64_t>(k) % per_row;
    std::size_t picked_at = 0;
    for (int e = 0; e < 4; ++e) {
      const auto at = static_cast<std::size_t>((2 * oh + e / 2) * xs[3] + 2 * ow + e % 2);
      x[at] = windows[k].values[static_cast<std::size_t>(e)];
      if (e == windows[k].picked) picked_at = at;
    }
    // dy: 1/4, 2/4, ..., and -0.0 for the fourth window: its element's
    // gradient is +0.0 (0 + -0.0), as everywhere else.
    dy.push_back(k == 3 ? -0.f : static_cast<float>(k + 1) / 4);
    y_expected.push_back(windows[k].values[static_cast<std::size_t>(windows[k].picked)]);
    dx_expected[picked_at] = dy.back() + 0.f;
  }
  // The reference agrees with the table, and the kernels with both.
  const RuleResults reference = by_rule(x, xs, {}, dy);
  expect_same_bits(reference.y, y_expected, "the reference's forward");
  expect_same_bits(reference.dx, dx_expected, "the reference's backward");
  expect_max_pool_by_rule(x, xs, {}, dy);
}

TEST(PoolTest, OverlappingWindowsAddTheirGradientsOnASharedMaximum) {
  for (Context ctx : all_devices()) {
    // 3x3 with 9 in the middle: every 2x2 window at stride 1 picks it.
    NDArray x = array(std::vector<float>{1, 1, 1, 1, 9, 1, 1, 1, 1}, {1, 1, 3, 3}, ctx);
    x.attach_grad();
    {
      auto recording = autograd::record();
      const NDArray y = max_pool2d(x, {2, 2}, {1, 1});
      sum(y * array(std::vector<float>{0.5f, 0.25f, 1, 2}, {1, 1, 2, 2}, ctx)).backward();
    }
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 0, 0, 0, 3.75f, 0, 0, 0, 0}))
        << ctx;
    // 3x3 windows, stride 1, padding 1, on a plane of equal values: each
    // window picks its first input element, so (0,0) collects the windows
    // of outputs (0,0), (0,1), (1,0), (1,1).
    NDArray flat = ones({1, 1, 3, 3}, DType::kFloat32, ctx);
    flat.attach_grad();
    {
      auto recording = autograd::record();
      max_pool2d(flat, {3, 3}, {1, 1}, {1, 1}).backward();
    }
    EXPECT_EQ(flat.grad().to_vector<float>(), (std::vector<float>{4, 2, 0, 2, 1, 0, 0, 0, 0}))
        << ctx;
  }
}

/// Values full of ties: a few small integers, both zeros, both infinities
/// and, unless `nans` is false, NaNs of both signs.
std::vector<float> tied_values(std::size_t n, std::uint32_t seed, bool nans) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> pick(0, 99);
  std::vector<float> v(n);
  for (float& x : v) {
    const int k = pick(rng);
    if (nans && k < 2) {
      x = kNaN;
    } else if (nans && k < 4) {
      x = -kNaN;
    } else if (k < 8) {
      x = kInf;
    } else if (k < 14) {
      x = -kInf;
    } else if (k < 34) {
      x = -0.f;
    } else if (k < 50) {
      x = 0.f;
    } else {
      x = static_cast<float>(k % 4 - 2);  // -2, -1, 0, 1
    }
  }
  return v;
}

TEST(PoolTest, MaxPoolingFollowsTheRuleOnTiesNaNsAndInfinitiesInEveryGeometry) {
  const std::vector<PoolCase> geometries = {
      {"2x2 stride 2", {2, 3, 8, 10}, {}},
      {"2x2 stride 2, odd extents", {1, 2, 7, 9}, {}},
      {"3x3 stride 1 pad 1", {2, 2, 6, 5}, {.kernel = {3, 3}, .stride = {1, 1}, .padding = {1, 1}}},
      {"3x2 stride (2, 1) pad 1",
       {1, 2, 7, 8},
       {.kernel = {3, 2}, .stride = {2, 1}, .padding = {1, 1}}},
      {"2x2 stride 1", {1, 2, 5, 6}, {.kernel = {2, 2}, .stride = {1, 1}}},
      {"1x3 stride (1, 2) pad (0, 1)",
       {1, 1, 3, 7},
       {.kernel = {1, 3}, .stride = {1, 2}, .padding = {0, 1}}},
      {"global", {2, 2, 4, 5}, {.kernel = {4, 5}, .stride = {1, 1}}},
  };
  std::uint32_t seed = 40;
  for (const PoolCase& c : geometries) {
    for (bool nans : {false, true}) {
      SCOPED_TRACE(c.name + (nans ? ", with NaNs" : ", no NaN"));
      const Shape ys = output_shape(c.x, c.options);
      const std::vector<float> x = tied_values(static_cast<std::size_t>(c.x.size()), ++seed, nans);
      const std::vector<float> dy = quarter_steps(static_cast<std::size_t>(ys.size()), ++seed);
      expect_max_pool_by_rule(x, c.x, c.options, dy);
      // With dy of any value, an element that is the maximum of several
      // windows gets a rounded sum: the CUDA backward body adds in the CPU
      // kernels' order (oh, then ow), so the bits still agree.
      const std::vector<float> any_dy =
          testing::random_floats(static_cast<std::size_t>(ys.size()), -1, 1, ++seed);
      expect_same_bits(max_pool_by_cuda_bodies(x, c.x, c.options, any_dy).dx,
                       max_pool_on(cpu(0), x, c.x, c.options, any_dy).dx,
                       "the CUDA backward body against cpu(0), any dy");
    }
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
            "max_pool2d: expected a floating-point array (float32, float16 or bfloat16) as the "
            "first argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] { (void)pool2d(NDArray(), PoolType::kAverage, {}); }),
            "avg_pool2d: the first argument is an empty array (default-constructed)");
  // Still usable.
  EXPECT_EQ(max_pool2d(arange(0, 16).reshape({1, 1, 4, 4})).to_vector<float>(),
            (std::vector<float>{5, 7, 13, 15}));
}

}  // namespace
}  // namespace tagflow
