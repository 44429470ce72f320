// float16 and bfloat16 (ops/half.h): the conversions against references
// computed independently in double precision (and against the processor's
// own F16C instructions where it has them) over every 16-bit value, every
// tie and sweeps of floats; astype on every device; creation, filling,
// random draws and printing of half arrays; operators refusing them.

#include <cpuid.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

std::uint32_t bits_of(float value) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

float float_of(std::uint32_t bits) {
  float value = 0;
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

/// The value of float16 `bits` by its definition: (-1)^s 2^(e-15) (1 + m/1024),
/// subnormals 2^-14 (m/1024); NaN for a NaN (checked apart).
double half_value(std::uint16_t bits) {
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  const double sign = (bits & 0x8000) != 0 ? -1.0 : 1.0;
  if (exponent == 0x1f) {
    return mantissa == 0 ? sign * std::numeric_limits<double>::infinity()
                         : std::numeric_limits<double>::quiet_NaN();
  }
  if (exponent == 0) return sign * std::ldexp(mantissa, -24);
  return sign * std::ldexp(1024 + mantissa, exponent - 25);
}

/// The float16 nearest to finite `x` (ties to the even mantissa), found
/// among all finite positive float16 values by bisection in double
/// precision; beyond the largest, by IEEE 754's overflow rule (what rounds
/// past 65504 + half a step goes to infinity).
std::uint16_t nearest_half(double x) {
  static const std::vector<double> values = [] {
    std::vector<double> v;
    for (std::uint32_t b = 0; b <= 0x7bff; ++b)
      v.push_back(half_value(static_cast<std::uint16_t>(b)));
    v.push_back(65536.0);  // where infinity starts, one step past 65504
    return v;
  }();
  const std::uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(x);
  if (magnitude >= 65536.0) return sign | 0x7c00;
  const auto above = std::lower_bound(values.begin(), values.end(), magnitude);
  auto index = static_cast<std::uint16_t>(above - values.begin());
  if (values[index] != magnitude) {
    const auto below = static_cast<std::uint16_t>(index - 1);
    const double down = magnitude - values[below], up = values[index] - magnitude;
    if (down < up || (down == up && (below & 1) == 0)) index = below;
  }
  return sign | index;  // index 0x7c00 is infinity
}

/// The bfloat16 nearest to finite `x`: of the two floats with their low 16
/// bits clear around it, the nearer in double precision, ties to even.
std::uint16_t nearest_bfloat16(float x) {
  const std::uint32_t bits = bits_of(x);
  const std::uint32_t down = bits & 0xffff0000u;
  const std::uint32_t up = down + 0x10000u;
  const double magnitude = std::fabs(static_cast<double>(x));
  const double below = std::fabs(static_cast<double>(float_of(down)));
  // Past the largest finite bfloat16 the next step is 2^128, as IEEE 754 rounds.
  const double above = (up & 0x7fffffffu) == 0x7f800000u
                           ? std::ldexp(1.0, 128)
                           : std::fabs(static_cast<double>(float_of(up)));
  const double to_down = magnitude - below, to_up = above - magnitude;
  const bool keep_down = to_down < to_up || (to_down == to_up && ((down >> 16) & 1) == 0);
  return static_cast<std::uint16_t>((keep_down ? down : up) >> 16);
}

/// Whether the processor has F16C (CPUID leaf 1, ECX bit 29).
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) != 0 && (c & (1u << 29)) != 0;
}

__attribute__((target("f16c"))) std::uint16_t f16c_from_float(float x) {
  return static_cast<std::uint16_t>(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float f16c_to_float(std::uint16_t h) { return _cvtsh_ss(h); }

/// Floats around every place a float16 conversion decides something: every
/// float16 value and every midpoint between neighbours, each with its two
/// neighbouring floats; the subnormal range swept; random floats of every
/// magnitude a float16 covers.
std::vector<float> float16_probes() {
  std::vector<float> probes;
  const auto add_with_neighbours = [&](float f) {
    probes.push_back(f);
    probes.push_back(std::nextafter(f, -INFINITY));
    probes.push_back(std::nextafter(f, INFINITY));
  };
  for (std::uint32_t b = 0; b < 0x7c00; ++b) {
    for (const double sign : {1.0, -1.0}) {
      const double here = sign * half_value(static_cast<std::uint16_t>(b));
      const double next =
          sign * (b == 0x7bff ? 65536.0 : half_value(static_cast<std::uint16_t>(b + 1)));
      add_with_neighbours(static_cast<float>(here));
      add_with_neighbours(static_cast<float>((here + next) / 2));  // exact in a float
    }
  }
  for (std::uint32_t b = 0; b < 0x38800000u; b += 4099) add_with_neighbours(float_of(b));
  std::mt19937 rng(16);
  for (int i = 0; i < 200000; ++i) {
    const float f = std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng),
                               std::uniform_int_distribution<int>(-30, 17)(rng));
    probes.push_back(i % 2 == 0 ? f : -f);
  }
  for (const float f :
       {0.f, -0.f, 65504.f, 65519.99f, 65520.f, 1e30f, -1e30f, INFINITY, -INFINITY,
        std::numeric_limits<float>::max(), std::numeric_limits<float>::denorm_min()}) {
    add_with_neighbours(f);
  }
  return probes;
}

TEST(HalfTest, EveryFloat16ConvertsToItsExactValueAndBack) {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(Half::from_bits(bits));
    const double expected = half_value(bits);
    if (std::isnan(expected)) {
      ASSERT_TRUE(std::isnan(f)) << b;
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << b;
    } else {
      ASSERT_EQ(static_cast<double>(f), expected) << b;
      ASSERT_EQ(std::signbit(f), (b & 0x8000) != 0) << b;
    }
    // Back to the same bits, NaN payloads included (NumPy keeps them too).
    ASSERT_EQ(Half(f).bits, bits) << b;
  }
}

TEST(HalfTest, FloatToFloat16RoundsToNearestEvenAsTheDoubleReferenceAndF16c) {
  const bool f16c = has_f16c();
  std::size_t checked = 0;
  for (const float f : float16_probes()) {
    const std::uint16_t got = Half(f).bits;
    if (std::isfinite(f)) {
      ASSERT_EQ(got, nearest_half(f))
          << "float " << f << " (bits " << std::hex << bits_of(f) << ")";
    } else {
      ASSERT_EQ(got, (std::signbit(f) ? 0xfc00 : 0x7c00)) << f;
    }
    if (f16c) {
      ASSERT_EQ(got, f16c_from_float(f)) << "F16C on float " << f;
    }
    ++checked;
  }
  if (f16c) {
    for (std::uint32_t b = 0; b <= 0xffff; ++b) {
      const float mine = static_cast<float>(Half::from_bits(static_cast<std::uint16_t>(b)));
      const float theirs = f16c_to_float(static_cast<std::uint16_t>(b));
      if (std::isnan(theirs)) {
        ASSERT_TRUE(std::isnan(mine)) << b;
      } else {
        ASSERT_EQ(bits_of(mine), bits_of(theirs)) << b;
      }
    }
  } else {
    std::printf("no F16C on this processor: checked against the double reference only\n");
  }
  EXPECT_GT(checked, 700000u);
  // The figures NumPy gives (np.float32 -> np.float16, as bits).
  const std::vector<std::pair<float, std::uint16_t>> numpy = {
      {0.1f, 11878}, {65504.f, 31743},     {1e-7f, 2},         {6.1e-5f, 1023},  {0x1p-24f, 1},
      {0x1p-25f, 0}, {0x1.000002p-25f, 1}, {65519.99f, 31743}, {65520.f, 31744}, {INFINITY, 31744}};
  for (const auto& [f, bits] : numpy) EXPECT_EQ(Half(f).bits, bits) << f;
  EXPECT_EQ(Half(NAN).bits & 0x7c00, 0x7c00);
  EXPECT_NE(Half(NAN).bits & 0x3ff, 0) << "a NaN stays a NaN";
  EXPECT_EQ(Half(-NAN).bits & 0x8000, 0x8000) << "with its sign";
}

TEST(HalfTest, BFloat16RoundsToNearestEvenAsTheReference) {
  // Every bfloat16 to its float (the upper half of one) and back.
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(BFloat16::from_bits(bits));
    ASSERT_EQ(bits_of(f), b << 16) << b;
    if (std::isnan(f)) {
      const std::uint16_t back = BFloat16(f).bits;
      ASSERT_EQ(back, (b & 0x8000) | 0x7fc0) << "a NaN becomes the quiet NaN, sign kept: " << b;
    } else {
      ASSERT_EQ(BFloat16(f).bits, bits) << b;
    }
    // The midpoint to the next one (and its neighbours): ties to even.
    if ((b & 0x7fff) < 0x7f80) {
      const float mid = float_of((b << 16) | 0x8000u);
      for (const float probe :
           {mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) {
        ASSERT_EQ(BFloat16(probe).bits, nearest_bfloat16(probe))
            << "float bits " << std::hex << bits_of(probe);
      }
    }
  }
  // Random floats of every magnitude, subnormals included.
  std::mt19937 rng(17);
  for (int i = 0; i < 1000000; ++i) {
    const float f = float_of(static_cast<std::uint32_t>(rng()));
    if (!std::isfinite(f)) continue;
    ASSERT_EQ(BFloat16(f).bits, nearest_bfloat16(f)) << "float bits " << std::hex << bits_of(f);
  }
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80) << "rounds to infinity";
  EXPECT_EQ(BFloat16(-INFINITY).bits, 0xff80);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::denorm_min()).bits, 0) << "ties to even: 0";
  EXPECT_EQ(BFloat16(float_of(0x00018000u)).bits, 0x0002) << "a subnormal tie to even";
  // The figures PyTorch gives (torch.tensor(x, dtype=torch.bfloat16), as bits).
  EXPECT_EQ(BFloat16(0.1f).bits, 15821);
  EXPECT_EQ(BFloat16(3.14159f).bits, 16457);
  EXPECT_EQ(BFloat16(-2.5f).bits, 0xc020);
  EXPECT_EQ(BFloat16(1e10f).bits, 20501);
}

TEST(HalfTest, DoublesRoundOnceThroughAFloatRoundedToOdd) {
  // 1 + 2^-11 + 2^-30 lies just above the midpoint of 1 and the next float16:
  // through the nearest float (1 + 2^-11, a tie) it would round down to 1.
  EXPECT_EQ(Half(round_to_odd(1 + 0x1p-11 + 0x1p-30)).bits, 0x3c01);
  EXPECT_EQ(BFloat16(round_to_odd(1 + 0x1p-8 + 0x1p-30)).bits, 0x3f81);
  EXPECT_EQ(full({1}, 1 + 0x1p-11 + 0x1p-30, DType::kFloat16, cpu(0)).asscalar<Half>().bits,
            0x3c01);
  std::mt19937_64 rng(18);
  for (int i = 0; i < 300000; ++i) {
    const double d = std::ldexp(std::uniform_real_distribution<double>(1, 2)(rng),
                                std::uniform_int_distribution<int>(-27, 16)(rng));
    ASSERT_EQ(Half(round_to_odd(d)).bits, nearest_half(d)) << d;
    ASSERT_EQ(Half(round_to_odd(-d)).bits, nearest_half(-d)) << -d;
  }
  EXPECT_TRUE(std::isnan(round_to_odd(std::nan(""))));
  EXPECT_EQ(Half(round_to_odd(1e300)).bits, 0x7c00);
  EXPECT_EQ(BFloat16(round_to_odd(-1e300)).bits, 0xff80);
  EXPECT_EQ(Half(round_to_odd(1e-300)).bits, 0);
}

TEST(HalfTest, AstypeGivesTheSameBitsOnEveryDevice) {
  const std::vector<float> probes = float16_probes();
  const std::vector<float> values(probes.begin(), probes.begin() + 100000);
  for (const Context ctx : testing::all_devices()) {
    SCOPED_TRACE(ctx.str());
    const NDArray x = array(values, {static_cast<std::int64_t>(values.size())}, ctx);
    const std::vector<Half> h = x.astype(DType::kFloat16).to_vector<Half>();
    const std::vector<BFloat16> b = x.astype(DType::kBFloat16).to_vector<BFloat16>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      ASSERT_EQ(h[i].bits, Half(values[i]).bits) << i;
      ASSERT_EQ(b[i].bits, BFloat16(values[i]).bits) << i;
    }
    // Back to float32 exactly, and between the half types through float.
    const std::vector<float> back =
        x.astype(DType::kFloat16).astype(DType::kFloat32).to_vector<float>();
    const std::vector<BFloat16> across =
        x.astype(DType::kFloat16).astype(DType::kBFloat16).to_vector<BFloat16>();
    for (std::size_t i = 0; i < values.size(); ++i) {
      const float exact = static_cast<float>(Half(values[i]));
      ASSERT_TRUE(bits_of(back[i]) == bits_of(exact) || (std::isnan(back[i]) && std::isnan(exact)))
          << i;
      ASSERT_EQ(across[i].bits, BFloat16(exact).bits) << i;
    }
    // Integers: through the nearest float; a float16 to an integer saturates.
    const NDArray ints = array(std::vector<std::int32_t>{-3, 0, 2049, 70000}, {4}, ctx);
    const std::vector<Half> ih = ints.astype(DType::kFloat16).to_vector<Half>();
    EXPECT_EQ(ih[2].bits, Half(2048.f).bits) << "2049 ties to the even 2048";
    EXPECT_EQ(ih[3].bits, 0x7c00) << "70000 overflows to infinity";
    const std::vector<std::uint8_t> bytes =
        array(std::vector<float>{-1.5f, 2.7f, 300.f, NAN}, {4}, ctx)
            .astype(DType::kFloat16)
            .astype(DType::kUInt8)
            .to_vector<std::uint8_t>();
    EXPECT_EQ(bytes, (std::vector<std::uint8_t>{0, 2, 255, 0}));
  }
}

TEST(HalfTest, HalfArraysAreMadeFilledDrawnAndPrinted) {
  for (const Context ctx : testing::all_devices()) {
    SCOPED_TRACE(ctx.str());
    const NDArray ones_h = ones({2, 3}, DType::kFloat16, ctx);
    EXPECT_EQ(ones_h.dtype(), DType::kFloat16);
    EXPECT_EQ(ones_h.nbytes(), 12u);
    for (const Half h : ones_h.to_vector<Half>()) EXPECT_EQ(h.bits, 0x3c00);
    const NDArray tenth = full({3}, 0.1, DType::kBFloat16, ctx);
    for (const BFloat16 b : tenth.to_vector<BFloat16>()) EXPECT_EQ(b.bits, 15821);
    EXPECT_EQ(full({1}, 0.1, DType::kBFloat16, ctx).asscalar<float>(), 0.10009765625f);
    EXPECT_EQ(full({1}, 0.1, DType::kFloat16, ctx).asscalar<Half>().bits, 11878);
    const NDArray counted = arange(0, 5, 1, DType::kFloat16, ctx);
    EXPECT_EQ(counted.to_vector<float>(), (std::vector<float>{0, 1, 2, 3, 4}));
    EXPECT_EQ(zeros_like(counted).to_vector<float>(), std::vector<float>(5, 0.f));

    // Draws: the float32 draw of the same key, rounded, and never `high`.
    for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
      const NDArray drawn = random::uniform(0, 1, {20000}, 11, ctx, dtype);
      const NDArray wide = random::uniform(0, 1, {20000}, 11, ctx, DType::kFloat32);
      const std::vector<float> got = drawn.astype(DType::kFloat32).to_vector<float>();
      const std::vector<float> expected =
          wide.astype(dtype).astype(DType::kFloat32).to_vector<float>();
      const float below_one = dtype == DType::kFloat16 ? 0.99951171875f : 0.99609375f;
      for (std::size_t i = 0; i < got.size(); ++i) {
        ASSERT_LT(got[i], 1.f);
        ASSERT_GE(got[i], 0.f);
        ASSERT_EQ(got[i], expected[i] < 1.f ? expected[i] : below_one) << i;
      }
      const NDArray z = random::normal(0, 1, {5}, 12, ctx, dtype);
      EXPECT_EQ(z.dtype(), dtype);
      const std::vector<float> zw = random::normal(0, 1, {5}, 12, ctx)
                                        .astype(dtype)
                                        .astype(DType::kFloat32)
                                        .to_vector<float>();
      EXPECT_EQ(z.astype(DType::kFloat32).to_vector<float>(), zw);
    }
  }
  EXPECT_THROW((void)random::uniform(0.5001, 0.5002, {1}, cpu(0), DType::kFloat16), Error)
      << "no float16 in [0.5001, 0.5002): they are 2^-11 apart there";
  EXPECT_EQ(random::uniform(0.5, 0.5001, {1}, cpu(0), DType::kFloat16).asscalar<float>(), 0.5f)
      << "[0.5, 0.5001) holds one float16: 0.5";
  EXPECT_THROW((void)random::uniform(0, 1, {1}, cpu(0), DType::kInt32), Error);
}

/// `values` (float32) as a float16 (or bfloat16) array, printed.
std::string printed(const std::vector<float>& values, const std::vector<std::int64_t>& shape,
                    DType dtype = DType::kFloat16) {
  const std::string text = array(values, Shape(shape), cpu(0)).astype(dtype).str();
  return text.substr(0, text.rfind("\n<NDArray"));
}

TEST(HalfTest, Float16PrintsAsNumPyPrintsIt) {
  // Each expected text is NumPy's str() of the same float16 array (NumPy 2.4
  // with legacy='1.25', the 1.2x rules the float32 printing follows).
  EXPECT_EQ(printed({65504, 100}, {2}), "[65504.   100.]");
  EXPECT_EQ(printed({2049, 1}, {2}), "[2.048e+03 1.000e+00]");
  EXPECT_EQ(printed({0.1f, 0.5f}, {2}), "[0.1 0.5]");
  EXPECT_EQ(printed({1.f / 3, 3.14159f}, {2}), "[0.3333 3.14  ]");
  EXPECT_EQ(printed({6.104e-05f, 0.001f}, {2}), "[6.104e-05 1.000e-03]");
  EXPECT_EQ(printed({6e-08f, 1}, {2}), "[6.e-08 1.e+00]");
  EXPECT_EQ(printed({NAN, -INFINITY, 2.5f}, {3}), "[ nan -inf  2.5]");
  EXPECT_EQ(printed({1000.5f, 2}, {2}), "[1000.5    2. ]");
  EXPECT_EQ(printed({-0.f, 0.f}, {2}), "[-0.  0.]");
  std::vector<float> sevenths;
  for (int i = 0; i < 12; ++i) sevenths.push_back(static_cast<float>(i) / 7.f);
  EXPECT_EQ(printed(sevenths, {3, 4}),
            "[[0.     0.1428 0.2856 0.4285]\n"
            " [0.5713 0.7144 0.857  1.    ]\n"
            " [1.143  1.286  1.429  1.571 ]]");
  // bfloat16 prints its float values (NumPy's float32 str() of them).
  EXPECT_EQ(printed({0.1f, 3.14159f, -2.5f, 1e10f}, {4}, DType::kBFloat16),
            "[ 1.00097656e-01  3.14062500e+00 -2.50000000e+00  9.99922074e+09]");
  EXPECT_NE(ones({2}, DType::kFloat16, cpu(0)).str().find("<NDArray 2 @cpu(0)>"),
            std::string::npos);
}

TEST(HalfTest, WhatTakesNoHalfArraysRefusesThemWithWhatToDo) {
  const NDArray h = ones({2}, DType::kFloat16, cpu(0));
  const auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  // The optimizers update float32 weights (master copies of half ones).
  const std::string update = message([&] { sgd_update(h, h, NDArray(), {.learning_rate = 0.1}); });
  EXPECT_NE(update.find("expected a float32 array"), std::string::npos) << update;
  EXPECT_NE(update.find("got float16"), std::string::npos) << update;
  // Nothing was lost: the array still reads.
  EXPECT_EQ(h.to_vector<float>(), (std::vector<float>{1, 1}));
  // Custom operators declare the dtypes of their kernels: not half ones yet.
  EXPECT_NE(message([&] {
              (void)CustomOp({.name = "halves",
                              .num_inputs = 1,
                              .dtypes = {DType::kBFloat16},
                              .cpu = [](const KernelArgs&) {}});
            }).find("bfloat16"),
            std::string::npos);
}

}  // namespace
}  // namespace tagflow
