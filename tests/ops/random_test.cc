// Random arrays: Philox against the Random123 known answers, the documented
// counter layout, uniform and normal statistics on every device, bit-identical
// values across devices, the global call sequence and seed(), explicit seeds,
// and the errors for bad arguments.

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/kernels/philox.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using detail::PhiloxBlock;
using detail::PhiloxKey;
using testing::all_devices;
using testing::expect_error;

std::vector<std::uint32_t> bits_of(const NDArray& a) {
  std::vector<std::uint32_t> bits;
  for (float v : a.to_vector<float>()) bits.push_back(std::bit_cast<std::uint32_t>(v));
  return bits;
}

/// How many positions hold the same bits.
std::size_t count_equal(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
  std::size_t equal = 0;
  for (std::size_t i = 0; i < a.size() && i < b.size(); ++i) equal += a[i] == b[i];
  return equal;
}

struct Moments {
  double mean = 0;
  double variance = 0;
};

Moments moments_of(const std::vector<float>& values) {
  double sum = 0;
  for (float v : values) sum += v;
  const double mean = sum / static_cast<double>(values.size());
  double squares = 0;
  for (float v : values) squares += (v - mean) * (v - mean);
  return {mean, squares / static_cast<double>(values.size() - 1)};
}

// --- Philox ------------------------------------------------------------------------

struct KnownAnswer {
  PhiloxBlock counter;
  PhiloxKey key;
  PhiloxBlock expected;
};

void expect_block(const PhiloxBlock& actual, const PhiloxBlock& expected, const char* what) {
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(actual.word[j], expected.word[j]) << what << ", word " << j;
  }
}

// Random123's kat_vectors (github.com/DEShawResearch/random123, tests/kat_vectors):
// counter words, key words, expected output.
TEST(PhiloxTest, MatchesTheRandom123KnownAnswers) {
  const KnownAnswer ten_rounds[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {{0xffffffff, 0xffffffff}},
       {{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {{0xa4093822, 0x299f31d0}},
       {{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}}},
  };
  for (const KnownAnswer& k : ten_rounds) {
    expect_block(detail::philox4x32_10(k.counter, k.key), k.expected, "philox4x32-10");
  }
  // Seven rounds pins the key schedule between rounds as well.
  const KnownAnswer seven_rounds[] = {
      {{{0, 0, 0, 0}}, {{0, 0}}, {{0x5f6fb709, 0x0d893f64, 0x4f121f81, 0x4f730a48}}},
      {{{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}},
       {{0xffffffff, 0xffffffff}},
       {{0x5207ddc2, 0x45165e59, 0x4d8ee751, 0x8c52f662}}},
      {{{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}},
       {{0xa4093822, 0x299f31d0}},
       {{0x4dfccaba, 0x190a87f0, 0xc47362ba, 0xb6b5242a}}},
  };
  for (const KnownAnswer& k : seven_rounds) {
    expect_block(detail::philox4x32<7>(k.counter, k.key), k.expected, "philox4x32-7");
  }
}

// Note [Counter-based random numbers]: element i of a call with key s and
// call number c is word i % 4 of Philox(counter = (c, i / 4), key = s).
TEST(RandomTest, ElementsFollowTheDocumentedCounterLayout) {
  const std::uint64_t seed = 0x0123456789abcdefULL;
  const std::int64_t n = 1030;
  const double low = -3;
  const double high = 5;
  const std::vector<float> values = random::uniform(low, high, {n}, seed).to_vector<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    const auto group = static_cast<std::uint64_t>(i / 4);
    const PhiloxBlock bits = detail::philox4x32_10(
        {{0, 0, static_cast<std::uint32_t>(group), static_cast<std::uint32_t>(group >> 32)}},
        {{0x89abcdef, 0x01234567}});
    const double u = (bits.word[i % 4] >> 8) / 16777216.0;
    // [-3, 5) has floats at every multiple of 2^-21 near 5: the clamp never bites here.
    const auto expected = static_cast<float>(std::fma(high - low, u, low));
    ASSERT_EQ(values[static_cast<std::size_t>(i)], expected) << "element " << i;
  }
}

// --- statistics -------------------------------------------------------------------------
// For n = 1e5 independent samples the sample mean and variance are within
// 6 standard errors of the true values except with probability ~2e-9 each
// (normal approximation, excellent at this n). A broken generator
// (correlated words, a wrong transform) misses by far more.

constexpr std::int64_t kSamples = 100000;

TEST(RandomTest, UniformHasTheMeanVarianceAndRangeOfUniformOnEveryDevice) {
  const double low = -2;
  const double high = 3;
  const double width = high - low;
  const double mean = (low + high) / 2;
  const double variance = width * width / 12;
  const double mean_error = std::sqrt(variance / kSamples);
  // Var(sample variance) = (mu4 - sigma^4) / n, mu4 = width^4 / 80 for a uniform.
  const double variance_error =
      std::sqrt((std::pow(width, 4) / 80 - variance * variance) / kSamples);
  random::seed(11);
  for (Context ctx : all_devices()) {
    const NDArray u = random::uniform(low, high, {kSamples}, ctx);
    EXPECT_EQ(u.shape(), Shape{kSamples});
    EXPECT_EQ(u.dtype(), DType::kFloat32);
    EXPECT_EQ(u.context(), ctx);
    const std::vector<float> values = u.to_vector<float>();
    const Moments m = moments_of(values);
    EXPECT_NEAR(m.mean, mean, 6 * mean_error) << ctx;
    EXPECT_NEAR(m.variance, variance, 6 * variance_error) << ctx;
    // Ten equal bins: each count is Binomial(n, 0.1), sd sqrt(n * 0.09).
    std::vector<std::int64_t> bins(10, 0);
    for (float v : values) {
      ASSERT_TRUE(v >= low && v < high) << v << " on " << ctx;
      ++bins[static_cast<std::size_t>((v - low) / width * 10)];
    }
    for (std::int64_t count : bins) {
      EXPECT_NEAR(static_cast<double>(count), kSamples * 0.1, 6 * std::sqrt(kSamples * 0.09))
          << ctx;
    }
  }
}

TEST(RandomTest, NormalHasTheMeanVarianceAndSpreadOfNormalOnEveryDevice) {
  const double mean = 1.5;
  const double stddev = 2;
  const double variance = stddev * stddev;
  random::seed(12);
  for (Context ctx : all_devices()) {
    const std::vector<float> values =
        random::normal(mean, stddev, {kSamples}, ctx).to_vector<float>();
    const Moments m = moments_of(values);
    EXPECT_NEAR(m.mean, mean, 6 * stddev / std::sqrt(kSamples)) << ctx;
    // Var(sample variance) = 2 sigma^4 / n for a normal.
    EXPECT_NEAR(m.variance, variance, 6 * std::sqrt(2 * variance * variance / kSamples)) << ctx;
    // P(|z| < 1) = 0.682689; the count is Binomial(n, p).
    const double p = 0.682689492137;
    std::int64_t within = 0;
    for (float v : values) within += std::abs(v - mean) < stddev;
    EXPECT_NEAR(static_cast<double>(within), kSamples * p, 6 * std::sqrt(kSamples * p * (1 - p)))
        << ctx;
  }
}

// --- reproducibility ----------------------------------------------------------------------

TEST(RandomTest, TheSameSeedGivesBitIdenticalValuesOnEveryDevice) {
  // Large and odd: the CPU kernels split it over threads, the last group is partial.
  const std::int64_t n = 300001;
  std::vector<std::vector<std::uint32_t>> uniforms;
  std::vector<std::vector<std::uint32_t>> normals;
  for (Context ctx : all_devices()) {
    random::seed(2024);
    const NDArray u = random::uniform(-1, 1, {n}, ctx);
    const NDArray z = random::normal(0, 1, {n / 7, 7}, ctx);
    uniforms.push_back(bits_of(u));
    normals.push_back(bits_of(z));
  }
  for (std::size_t d = 1; d < uniforms.size(); ++d) {
    EXPECT_EQ(uniforms[d], uniforms[0]) << all_devices()[d] << " against cpu(0)";
    EXPECT_EQ(normals[d], normals[0]) << all_devices()[d] << " against cpu(0)";
  }
}

TEST(RandomTest, SuccessiveCallsGiveDifferentValues) {
  random::seed(3);
  const auto a = bits_of(random::uniform(0, 1, {1000}));
  const auto b = bits_of(random::uniform(0, 1, {1000}));
  const auto c = bits_of(random::normal(0, 1, {1000}));
  const auto d = bits_of(random::normal(0, 1, {1000}));
  // Two independent values coincide with probability 2^-24 (uniform) or less.
  EXPECT_LE(count_equal(a, b), 2u);
  EXPECT_LE(count_equal(c, d), 2u);
  // And within one call the values are not a repeated block.
  EXPECT_NE(std::vector<std::uint32_t>(a.begin(), a.begin() + 4),
            std::vector<std::uint32_t>(a.begin() + 4, a.begin() + 8));
}

TEST(RandomTest, SeedRestartsTheSequence) {
  random::seed(77);
  const auto u1 = bits_of(random::uniform(0, 1, {257}, gpu(0)));
  const auto z1 = bits_of(random::normal(0, 1, {3, 5}, cpu(1)));
  random::seed(77);
  EXPECT_EQ(bits_of(random::uniform(0, 1, {257}, gpu(0))), u1);
  EXPECT_EQ(bits_of(random::normal(0, 1, {3, 5}, cpu(1))), z1);
  random::seed(78);
  EXPECT_LE(count_equal(bits_of(random::uniform(0, 1, {257}, gpu(0))), u1), 2u);
}

TEST(RandomTest, ExplicitSeedsLeaveTheGlobalSequenceAlone) {
  random::seed(5);
  const auto first = bits_of(random::uniform(0, 1, {100}));
  const auto second = bits_of(random::normal(0, 1, {100}));
  random::seed(5);
  EXPECT_EQ(bits_of(random::uniform(0, 1, {100})), first);
  const auto explicit_uniform = bits_of(random::uniform(0, 1, {100}, std::uint64_t{99}, gpu(1)));
  const auto explicit_normal = bits_of(random::normal(0, 1, {100}, std::uint64_t{99}));
  EXPECT_EQ(bits_of(random::normal(0, 1, {100})), second) << "explicit seeds advanced the sequence";
  // An explicit seed always gives the same values: those of the first call after seed(99).
  EXPECT_EQ(bits_of(random::uniform(0, 1, {100}, std::uint64_t{99})), explicit_uniform);
  EXPECT_EQ(bits_of(random::normal(0, 1, {100}, std::uint64_t{99}, gpu(0))), explicit_normal);
  random::seed(99);
  EXPECT_EQ(bits_of(random::uniform(0, 1, {100})), explicit_uniform);
  EXPECT_NE(bits_of(random::uniform(0, 1, {100}, std::uint64_t{98})), explicit_uniform);
}

// --- edges -------------------------------------------------------------------------------

TEST(RandomTest, UniformNeverReachesHighEvenWhenRoundingWould) {
  // [1, 1 + 2^-23) holds one float, 1. Without the clamp about half the
  // values (u > 1/2) would round up to 1 + 2^-23 = high.
  const double high = 1 + std::ldexp(1.0, -23);
  for (Context ctx : all_devices()) {
    for (float v : random::uniform(1, high, {1000}, ctx).to_vector<float>()) ASSERT_EQ(v, 1.f);
  }
  // Bounds that are not floats: values stay in the floats of [0.1, 0.3).
  for (float v : random::uniform(0.1, 0.3, {10000}).to_vector<float>()) {
    ASSERT_TRUE(v >= 0.1 && v < 0.3) << v;
  }
}

TEST(RandomTest, ZeroStddevGivesTheMeanAndEmptyShapesGiveEmptyArrays) {
  for (float v : random::normal(2.5, 0, {9}, gpu(1)).to_vector<float>()) EXPECT_EQ(v, 2.5f);
  EXPECT_EQ(random::uniform(0, 1, {2, 0}, gpu(0)).to_vector<float>().size(), 0u);
  EXPECT_EQ(random::normal(0, 1, {0}).shape(), Shape{0});
  const NDArray scalar = random::uniform(0, 1, Shape{});
  EXPECT_EQ(scalar.size(), 1);
  EXPECT_GE(scalar.asscalar<float>(), 0.f);
}

// --- errors ------------------------------------------------------------------------------

TEST(RandomTest, BadArgumentsAreErrorsThatLeaveTheSequenceAlone) {
  random::seed(31);
  const auto expected = bits_of(random::uniform(0, 1, {16}));
  random::seed(31);
  const double nan = std::nan("");
  const double inf = HUGE_VAL;
  expect_error([] { (void)random::uniform(1, 1, {2}); },
               "random_uniform: expected finite low < high, got low 1 and high 1");
  expect_error([] { (void)random::uniform(2, 1, {2}, gpu(0)); },
               "random_uniform: expected finite low < high, got low 2 and high 1");
  expect_error([&] { (void)random::uniform(nan, 1, {2}); },
               "random_uniform: expected finite low < high, got low nan and high 1");
  expect_error([&] { (void)random::uniform(0, inf, {2}); },
               "random_uniform: expected finite low < high, got low 0 and high inf");
  expect_error([] { (void)random::uniform(-1e308, 1e308, {2}); },
               "random_uniform: expected finite low < high, got low -1e+308 and high 1e+308");
  const double low = 1 + std::ldexp(1.0, -52);
  const double high = 1 + std::ldexp(1.0, -51);
  expect_error([&] { (void)random::uniform(low, high, {2}); },
               "random_uniform: [low, high) = [1.0000000000000002, 1.0000000000000004) "
               "contains no float32 value; widen the interval");
  expect_error([] { (void)random::uniform(0, 1, {2}, cpu(), DType::kInt32); },
               "random_uniform: expected dtype float32, float16 or bfloat16, got int32");
  expect_error([] { (void)random::normal(0, -1, {2}); },
               "random_normal: expected a finite mean and a finite stddev >= 0, got mean 0 and "
               "stddev -1");
  expect_error([&] { (void)random::normal(inf, 1, {2}, std::uint64_t{4}); },
               "random_normal: expected a finite mean and a finite stddev >= 0, got mean inf and "
               "stddev 1");
  expect_error([&] { (void)random::normal(0, nan, {2}); },
               "random_normal: expected a finite mean and a finite stddev >= 0, got mean 0 and "
               "stddev nan");
  EXPECT_THROW((void)random::uniform(0, 1, {2}, gpu(10)), DeviceError);
  EXPECT_THROW((void)random::normal(0, 1, {2}, cpu(99)), DeviceError);
  // None of the failed calls took a call number; the engine still runs.
  EXPECT_EQ(bits_of(random::uniform(0, 1, {16})), expected);
}

}  // namespace
}  // namespace tagflow
