// dropout: the fraction kept against 1 - p on a large array, kept values
// exactly x / (1 - p), the mask of random::seed and of explicit seeds, the
// same bits on every device, the gradient against a reference built from
// the forward output, the identity outside training, and the errors.

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::error_of;
using testing::random_floats;

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits;
  bits.reserve(values.size());
  for (float v : values) bits.push_back(std::bit_cast<std::uint32_t>(v));
  return bits;
}

/// x / (1 - p) in double, rounded once: what a kept element must hold.
float scaled(float x, double p) { return static_cast<float>(static_cast<double>(x) / (1.0 - p)); }

// Inputs in [1, 2): no element is 0, so y[i] != 0 exactly where i is kept.
constexpr float kLow = 1;
constexpr float kHigh = 2;

TEST(DropoutTest, KeepsAboutOneMinusPAndScalesKeptValuesExactly) {
  constexpr std::size_t n = std::size_t{1} << 20;
  const std::vector<float> x = random_floats(n, kLow, kHigh, 3);
  for (Context ctx : all_devices()) {
    for (double p : {0.1, 0.3, 0.75}) {
      SCOPED_TRACE(ctx.str() + ", p " + std::to_string(p));
      const std::vector<float> y =
          dropout(array(x, {1024, 1024}, ctx), p, /*training=*/true, 11).to_vector<float>();
      ASSERT_EQ(y.size(), n);
      std::size_t kept = 0;
      int reported = 0;
      for (std::size_t i = 0; i < n; ++i) {
        if (y[i] == 0) continue;
        ++kept;
        if (y[i] != scaled(x[i], p) && reported++ < 5) {
          ADD_FAILURE() << "element " << i << " is " << y[i] << ", expected " << scaled(x[i], p);
        }
      }
      // The kept count is binomial(n, 1 - p): standard deviation
      // sqrt(n p (1 - p)) <= 512, i.e. 5e-4 of n. Six of them (3e-3) never
      // fail by chance, while a p off by 0.01 (or 1 - p for p) always does.
      const double fraction = static_cast<double>(kept) / static_cast<double>(n);
      EXPECT_NEAR(fraction, 1 - p, 6 * std::sqrt(p * (1 - p) / static_cast<double>(n)));
    }
  }
}

TEST(DropoutTest, TheMaskIsTheUniformStreamOfRandomSeed) {
  const Shape shape{3, 1000};
  const std::vector<float> x = random_floats(3000, kLow, kHigh, 4);
  constexpr double p = 0.4;
  random::seed(21);
  const std::vector<float> u = random::uniform(0, 1, shape).to_vector<float>();
  random::seed(21);
  const std::vector<float> y = dropout(array(x, shape), p, true).to_vector<float>();
  for (std::size_t i = 0; i < y.size(); ++i) {
    ASSERT_EQ(y[i] != 0, u[i] >= p) << "element " << i << " with draw " << u[i];
  }
}

TEST(DropoutTest, TheSameSeedGivesTheSameBitsOnEveryDevice) {
  const Shape shape{64, 257};  // not a multiple of the four values per Philox call
  const std::vector<float> x = random_floats(static_cast<std::size_t>(shape.size()), -3, 3, 5);
  constexpr double p = 0.5;
  random::seed(77);
  const std::vector<std::uint32_t> first =
      bits_of(dropout(array(x, shape), p, true).to_vector<float>());
  const std::vector<std::uint32_t> second =
      bits_of(dropout(array(x, shape), p, true).to_vector<float>());
  std::size_t same = 0;
  for (std::size_t i = 0; i < first.size(); ++i) same += first[i] == second[i];
  EXPECT_LT(same, first.size() * 3 / 4) << "the next call must draw a new mask";
  for (Context ctx : all_devices()) {
    random::seed(77);
    const NDArray a = array(x, shape, ctx);
    EXPECT_EQ(bits_of(dropout(a, p, true).to_vector<float>()), first) << ctx;
    EXPECT_EQ(bits_of(dropout(a, p, true).to_vector<float>()), second) << ctx;
    // An explicit seed is the first call after seed(that seed), and leaves
    // the global sequence alone.
    random::seed(1);
    EXPECT_EQ(bits_of(dropout(a, p, true, 77).to_vector<float>()), first) << ctx;
    EXPECT_EQ(bits_of(dropout(a, p, true, 77).to_vector<float>()), first) << ctx;
    const std::vector<float> after_seed = random::uniform(0, 1, {5}, ctx).to_vector<float>();
    EXPECT_EQ(after_seed, random::uniform(0, 1, {5}, 1, ctx).to_vector<float>()) << ctx;
  }
}

TEST(DropoutTest, GradientIsTheMaskTimesTheScale) {
  const Shape shape{40, 50};
  const std::vector<float> x = random_floats(2000, kLow, kHigh, 6);
  const std::vector<float> head = random_floats(2000, -1, 1, 7);
  constexpr double p = 0.35;
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    NDArray a = array(x, shape, ctx);
    a.attach_grad();
    NDArray y;
    {
      auto recording = autograd::record();  // training mode: the default of dropout
      y = dropout(a, p);
    }
    y.backward(array(head, shape, ctx));
    const std::vector<float> out = y.to_vector<float>();
    const std::vector<float> grad = a.grad().to_vector<float>();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < out.size(); ++i) {
      // The mask, read off the forward output.
      const bool is_kept = out[i] != 0;
      kept += is_kept;
      ASSERT_EQ(grad[i], is_kept ? scaled(head[i], p) : 0.f) << "element " << i;
    }
    EXPECT_GT(kept, 0u);
    EXPECT_LT(kept, out.size());
  }
}

TEST(DropoutTest, GradientFlowsThroughAChain) {
  // d sum(dropout(x * 3) * x) / dx = 3 mask scale x + dropout(3 x), for
  // inputs in [1, 2) where the mask is where dropout(3 x) is nonzero.
  const std::vector<float> x = random_floats(500, kLow, kHigh, 8);
  constexpr double p = 0.2;
  for (Context ctx : {cpu(0), gpu(0)}) {
    NDArray a = array(x, {500}, ctx);
    a.attach_grad();
    NDArray d;
    {
      auto recording = autograd::record();
      d = dropout(a * 3.f, p);
      sum(d * a).backward();
    }
    const std::vector<float> dv = d.to_vector<float>();
    std::vector<double> expected(500);
    for (std::size_t i = 0; i < 500; ++i) {
      expected[i] = (dv[i] != 0 ? 3.0 / (1 - p) * x[i] : 0.0) + dv[i];
    }
    testing::expect_close(a.grad().to_vector<float>(), expected, 1e-6, 0, "chain on " + ctx.str());
  }
}

TEST(DropoutTest, OutsideTrainingOrWithPZeroItIsTheIdentity) {
  const NDArray x = array(random_floats(12, -1, 1, 9), {3, 4}, gpu(1));
  random::seed(4);
  EXPECT_TRUE(dropout(x, 0.5).same_as(x)) << "not recording: not training";
  EXPECT_TRUE(dropout(x, 0.5, false).same_as(x));
  EXPECT_TRUE(dropout(x, 0.5, false, 3).same_as(x));
  EXPECT_TRUE(dropout(x, 0, true).same_as(x));
  {
    auto recording = autograd::record(/*train_mode=*/false);
    EXPECT_TRUE(dropout(x, 0.5).same_as(x)) << "recording for inference";
  }
  {
    auto recording = autograd::record();
    EXPECT_FALSE(dropout(x, 0.5).same_as(x)) << "recording for training";
  }
  {
    auto recording = autograd::record();
    auto paused = autograd::pause();
    EXPECT_TRUE(dropout(x, 0.5).same_as(x)) << "paused: not training";
  }
  // Only the dropout that dropped took a call number.
  const std::vector<float> next = random::uniform(0, 1, {8}).to_vector<float>();
  random::seed(4);
  (void)random::uniform(0, 1, {1});
  EXPECT_EQ(random::uniform(0, 1, {8}).to_vector<float>(), next);
}

TEST(DropoutTest, EmptyArraysAndViews) {
  for (Context ctx : all_devices()) {
    EXPECT_EQ(dropout(zeros({0, 3}, DType::kFloat32, ctx), 0.5, true).shape(), Shape({0, 3}));
    const std::vector<float> x = random_floats(40, kLow, kHigh, 10);
    const NDArray rows = array(x, {4, 10}, ctx).slice(1, 3);
    const std::vector<float> y = dropout(rows, 0.5, true, 2).to_vector<float>();
    ASSERT_EQ(y.size(), 20u);
    for (std::size_t i = 0; i < 20; ++i) {
      EXPECT_TRUE(y[i] == 0 || y[i] == scaled(x[10 + i], 0.5)) << i << " on " << ctx;
    }
  }
}

TEST(DropoutTest, BadArgumentsGetClearErrorsInEveryMode) {
  const NDArray x = zeros({2, 3});
  for (bool training : {true, false}) {
    EXPECT_EQ(error_of([&] { (void)dropout(x, 1, training); }),
              "dropout: expected a drop probability p in [0, 1), got 1");
    EXPECT_EQ(error_of([&] { (void)dropout(x, -0.1, training, 5); }),
              "dropout: expected a drop probability p in [0, 1), got -0.1");
    EXPECT_EQ(error_of([&] { (void)dropout(x, std::nan(""), training); }),
              "dropout: expected a drop probability p in [0, 1), got nan");
    EXPECT_EQ(error_of([&] { (void)dropout(zeros({2}, DType::kInt32), 0.5, training); }),
              "dropout: expected a floating-point array (float32, float16 or bfloat16) as the "
              "first argument, got int32. Convert it with astype(DType::kFloat32)");
    EXPECT_EQ(error_of([&] { (void)dropout(NDArray(), 0.5, training); }),
              "dropout: the first argument is an empty array (default-constructed)");
  }
  // A refused call takes no call number.
  random::seed(6);
  const std::vector<float> first = random::uniform(0, 1, {4}).to_vector<float>();
  random::seed(6);
  EXPECT_THROW((void)dropout(x, 2, true), Error);
  EXPECT_EQ(random::uniform(0, 1, {4}).to_vector<float>(), first);
}

}  // namespace
}  // namespace tagflow
