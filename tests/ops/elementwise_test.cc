// Elementwise operators against plain double-precision loops, on every
// device: unary functions, binary operators with NumPy broadcasting, scalar
// and in-place forms, comparisons, integer rules, clip and where, the
// conversions of astype (NaN, infinities and values out of range against a
// written-out table), and the errors for bad input.

#include <cmath>
#include <functional>
#include <limits>
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

// float32 results of correctly rounded (or 1-ulp) library functions on
// float32 inputs: a few ulps of relative error.
constexpr double kRel = 4e-7 * 4;
constexpr double kAbs = 1e-30;

struct UnaryCase {
  const char* name;
  NDArray (*op)(const NDArray&);
  double (*reference)(double);
  float low, high;
};

double square_ref(double x) { return x * x; }
double negative_ref(double x) { return -x; }
double relu_ref(double x) { return x > 0 ? x : 0; }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double exp_ref(double x) { return std::exp(x); }
double log_ref(double x) { return std::log(x); }
double sqrt_ref(double x) { return std::sqrt(x); }
double abs_ref(double x) { return std::abs(x); }
double tanh_ref(double x) { return std::tanh(x); }

TEST(ElementwiseTest, UnaryFunctionsMatchDoubleReferencesOnEveryDevice) {
  const UnaryCase cases[] = {
      {"exp", &exp, &exp_ref, -20, 20},    {"log", &log, &log_ref, 1e-3f, 1e3f},
      {"sqrt", &sqrt, &sqrt_ref, 0, 1e4f}, {"square", &square, &square_ref, -100, 100},
      {"abs", &abs, &abs_ref, -5, 5},      {"negative", &negative, &negative_ref, -5, 5},
      {"relu", &relu, &relu_ref, -5, 5},   {"sigmoid", &sigmoid, &sigmoid_ref, -30, 30},
      {"tanh", &tanh, &tanh_ref, -10, 10},
  };
  for (const UnaryCase& c : cases) {
    // Large enough for the parallel CPU path, odd so blocks are uneven.
    const std::vector<float> x = random_floats(70001, c.low, c.high);
    std::vector<double> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) expected[i] = c.reference(x[i]);
    for (Context ctx : all_devices()) {
      NDArray a = array(x, {70001}, ctx);
      NDArray y = c.op(a);
      EXPECT_EQ(y.context(), ctx);
      EXPECT_EQ(y.shape(), a.shape());
      expect_close(y.to_vector<float>(), expected, kRel, kAbs,
                   std::string(c.name) + " on " + ctx.str());
    }
  }
}

/// Independent broadcasting reference: each output index mapped to each
/// input by NumPy's rule (align right, extent 1 repeats).
std::vector<double> broadcast_reference(const std::vector<float>& a, const Shape& as,
                                        const std::vector<float>& b, const Shape& bs,
                                        const Shape& out,
                                        const std::function<double(double, double)>& f) {
  std::vector<double> result(static_cast<std::size_t>(out.size()));
  for (std::int64_t flat = 0; flat < out.size(); ++flat) {
    std::int64_t rest = flat;
    std::vector<std::int64_t> index(static_cast<std::size_t>(out.ndim()));
    for (int d = out.ndim() - 1; d >= 0; --d) {
      index[static_cast<std::size_t>(d)] = rest % out[d];
      rest /= out[d];
    }
    auto offset = [&](const Shape& s) {
      std::int64_t off = 0;
      for (int d = 0; d < s.ndim(); ++d) {
        const std::int64_t i = index[static_cast<std::size_t>(d + out.ndim() - s.ndim())];
        off = off * s[d] + (s[d] == 1 ? 0 : i);
      }
      return off;
    };
    result[static_cast<std::size_t>(flat)] =
        f(a[static_cast<std::size_t>(offset(as))], b[static_cast<std::size_t>(offset(bs))]);
  }
  return result;
}

TEST(ElementwiseTest, ReluGradientIsTheOutputGradientWhereTheInputIsPositive) {
  // One pass (relu_backward): dy where x > 0, else 0, so an infinite dy where
  // x <= 0 gives 0 (not inf * 0), and a NaN dy where x > 0 stays NaN.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> xh = testing::random_floats(1000, -1, 1, 5);
  std::vector<float> dyh = testing::random_floats(1000, -2, 2, 6);
  xh[0] = 0;
  xh[1] = -0.f;
  xh[2] = -1, dyh[2] = inf;
  xh[3] = 0, dyh[3] = -inf;
  xh[4] = 1, dyh[4] = nan;
  xh[5] = nan;
  xh[6] = 2, dyh[6] = inf;
  for (Context ctx : testing::all_devices()) {
    NDArray x = array(xh, {10, 100}, ctx);
    x.attach_grad();
    {
      auto recording = autograd::record();
      const NDArray y = relu(x);
      y.backward(array(dyh, {10, 100}, ctx));
    }
    const std::vector<float> got = x.grad().to_vector<float>();
    for (std::size_t i = 0; i < xh.size(); ++i) {
      const float expected = xh[i] > 0 ? dyh[i] : 0.f;
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(got[i])) << ctx << " at " << i;
      } else {
        EXPECT_EQ(got[i], expected) << ctx << " at " << i << ": x " << xh[i] << ", dy " << dyh[i];
      }
    }
  }
}

TEST(ElementwiseTest, BinaryOperatorsBroadcastLikeNumpy) {
  const std::pair<Shape, Shape> shapes[] = {
      {{3, 4}, {3, 4}},
      {{3, 4}, {4}},
      {{3, 1}, {1, 4}},
      {{2, 3, 4}, {3, 1}},
      {{1}, {2, 3}},
      {{2, 1, 4}, {2, 3, 1}},
      {{5, 1, 1, 2}, {1, 3, 4, 1}},
      {{64, 1000}, {1000}},
      {{4, 1, 3}, {4, 5, 3}},
  };
  struct Op {
    const char* name;
    NDArray (*op)(const NDArray&, const NDArray&);
    std::function<double(double, double)> reference;
  };
  const Op ops[] = {
      {"+", [](const NDArray& a, const NDArray& b) { return a + b; }, std::plus<double>()},
      {"-", [](const NDArray& a, const NDArray& b) { return a - b; }, std::minus<double>()},
      {"*", [](const NDArray& a, const NDArray& b) { return a * b; }, std::multiplies<double>()},
      {"/", [](const NDArray& a, const NDArray& b) { return a / b; }, std::divides<double>()},
      {"power", [](const NDArray& a, const NDArray& b) { return power(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](const NDArray& a, const NDArray& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const NDArray& a, const NDArray& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
      {"greater", [](const NDArray& a, const NDArray& b) { return greater(a, b); },
       [](double a, double b) { return a > b ? 1.0 : 0.0; }},
      {"lesser_equal", [](const NDArray& a, const NDArray& b) { return lesser_equal(a, b); },
       [](double a, double b) { return a <= b ? 1.0 : 0.0; }},
  };
  std::uint32_t seed = 10;
  for (const auto& [as, bs] : shapes) {
    const Shape out = broadcast_shapes(as, bs, "test");
    const auto a = random_floats(static_cast<std::size_t>(as.size()), 0.5f, 2.f, ++seed);
    const auto b = random_floats(static_cast<std::size_t>(bs.size()), 0.5f, 2.f, ++seed);
    for (const Op& op : ops) {
      const auto expected = broadcast_reference(a, as, b, bs, out, op.reference);
      for (Context ctx : all_devices()) {
        NDArray c = op.op(array(a, as, ctx), array(b, bs, ctx));
        ASSERT_EQ(c.shape(), out) << op.name;
        expect_close(
            c.to_vector<float>(), expected, kRel, kAbs,
            std::string(op.name) + " (" + as.str() + ") (" + bs.str() + ") on " + ctx.str());
      }
    }
  }
}

TEST(ElementwiseTest, ScalarFormsOnEitherSide) {
  const auto x = random_floats(1000, 0.5f, 4.f, 3);
  for (Context ctx : all_devices()) {
    NDArray a = array(x, {10, 100}, ctx);
    struct Case {
      NDArray result;
      std::function<double(double)> reference;
      const char* name;
    };
    const Case cases[] = {
        {a + 2, [](double v) { return v + 2; }, "a + 2"},
        {2 + a, [](double v) { return 2 + v; }, "2 + a"},
        {a - 1.5, [](double v) { return v - 1.5; }, "a - 1.5"},
        {1.5 - a, [](double v) { return 1.5 - v; }, "1.5 - a"},
        {a * 3, [](double v) { return v * 3; }, "a * 3"},
        {a / 4, [](double v) { return v / 4; }, "a / 4"},
        {4 / a, [](double v) { return 4 / v; }, "4 / a"},
        {power(a, 2.5), [](double v) { return std::pow(v, 2.5); }, "power(a, 2.5)"},
        {power(2, a), [](double v) { return std::pow(2, v); }, "power(2, a)"},
        {maximum(a, 2), [](double v) { return std::max(v, 2.0); }, "maximum(a, 2)"},
        {minimum(a, 2), [](double v) { return std::min(v, 2.0); }, "minimum(a, 2)"},
        {equal(a, x[7]), [&](double v) { return v == x[7] ? 1.0 : 0.0; }, "equal(a, x7)"},
        {not_equal(a, x[7]), [&](double v) { return v != x[7] ? 1.0 : 0.0; }, "not_equal"},
        {lesser(a, 2), [](double v) { return v < 2 ? 1.0 : 0.0; }, "lesser(a, 2)"},
        {greater_equal(a, 2), [](double v) { return v >= 2 ? 1.0 : 0.0; }, "greater_equal"},
        {-a, [](double v) { return -v; }, "-a"},
    };
    for (const Case& c : cases) {
      std::vector<double> expected(x.size());
      for (std::size_t i = 0; i < x.size(); ++i)
        expected[i] = c.reference(static_cast<float>(x[i]));
      expect_close(c.result.to_vector<float>(), expected, kRel, kAbs,
                   std::string(c.name) + " on " + ctx.str());
    }
  }
}

TEST(ElementwiseTest, InPlaceFormsWriteTheFirstOperandAndItsViews) {
  for (Context ctx : all_devices()) {
    NDArray a = array(std::vector<float>{1, 2, 3, 4, 5, 6}, {2, 3}, ctx);
    NDArray handle = a;             // another handle on the same array
    NDArray row = a.slice(1, 2);    // a view of the second row
    a += array({10, 20, 30}, ctx);  // broadcast over rows
    a *= 2;
    a -= 1;
    a /= array(std::vector<float>{1, 1, 1, 2, 2, 2}, {2, 3}, ctx);
    const std::vector<float> expected = {21, 43, 65, 13.5f, 24.5f, 35.5f};
    EXPECT_EQ(handle.to_vector<float>(), expected) << ctx;
    EXPECT_EQ(row.to_vector<float>(), (std::vector<float>{13.5f, 24.5f, 35.5f})) << ctx;
    // The result must keep a's shape: (2,3) += (4,2,3) would grow it.
    EXPECT_THROW(a += zeros({4, 2, 3}, DType::kFloat32, ctx), Error);
  }
}

TEST(ElementwiseTest, IntegerArithmeticWrapsAndDivisionByZeroGivesZero) {
  for (Context ctx : all_devices()) {
    const std::int32_t big = std::numeric_limits<std::int32_t>::max();
    const std::int32_t small = std::numeric_limits<std::int32_t>::min();
    NDArray a = array(std::vector<std::int32_t>{big, small, 7, -7, 9}, {5}, ctx);
    NDArray b = array(std::vector<std::int32_t>{1, -1, 0, 2, -2}, {5}, ctx);
    EXPECT_EQ((a + b).to_vector<std::int32_t>(), (std::vector<std::int32_t>{small, big, 7, -5, 7}));
    EXPECT_EQ((a / b).to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{big, small, 0, -3, -4}));  // C++ truncation; MIN/-1 wraps
    EXPECT_EQ((a * 2).to_vector<std::int32_t>(), (std::vector<std::int32_t>{-2, 0, 14, -14, 18}));
    NDArray u = array(std::vector<std::uint8_t>{250, 3, 0}, {3}, ctx);
    EXPECT_EQ((u + 10).to_vector<std::int64_t>(), (std::vector<std::int64_t>{4, 13, 10}));
    EXPECT_EQ(abs(array(std::vector<std::int64_t>{-5, 5}, {2}, ctx)).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{5, 5}));
    // Comparisons give 1 or 0 in the operands' dtype.
    NDArray eq = equal(a, a);
    EXPECT_EQ(eq.dtype(), DType::kInt32);
    EXPECT_EQ(eq.to_vector<std::int32_t>(), (std::vector<std::int32_t>{1, 1, 1, 1, 1}));
  }
}

TEST(ElementwiseTest, ClipWhereAndAstype) {
  const auto x = random_floats(5000, -3, 3, 5);
  for (Context ctx : all_devices()) {
    NDArray a = array(x, {50, 100}, ctx);
    std::vector<double> clipped(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      clipped[i] = std::min(1.0, std::max(-1.0, double{x[i]}));
    expect_close(clip(a, -1, 1).to_vector<float>(), clipped, 0, 0, "clip on " + ctx.str());
    NDArray chosen = where(greater(a, 0), a, a * 10);
    std::vector<double> expected(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) expected[i] = x[i] > 0 ? x[i] : double{x[i] * 10.f};
    expect_close(chosen.to_vector<float>(), expected, 0, 0, "where on " + ctx.str());
    NDArray ints =
        array(std::vector<float>{-2.7f, -0.5f, 0.5f, 2.7f, 255}, {5}, ctx).astype(DType::kInt32);
    EXPECT_EQ(ints.dtype(), DType::kInt32);
    EXPECT_EQ(ints.to_vector<std::int32_t>(), (std::vector<std::int32_t>{-2, 0, 0, 2, 255}));
    EXPECT_EQ(ints.astype(DType::kUInt8).astype(DType::kFloat32).to_vector<float>(),
              (std::vector<float>{254, 0, 0, 2, 255}));
  }
}

// Note [Conversions between dtypes], written out: each float32 input with
// what astype gives as int32, int64 and uint8.
struct FloatToIntegers {
  float in;
  std::int32_t i32;
  std::int64_t i64;
  std::uint8_t u8;
};

constexpr std::int32_t kI32Min = std::numeric_limits<std::int32_t>::min();
constexpr std::int32_t kI32Max = std::numeric_limits<std::int32_t>::max();
constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

const std::vector<FloatToIntegers> kFloatToIntegers = {
    {kNaN, 0, 0, 0},                                 // NaN: 0
    {-kNaN, 0, 0, 0},                                // NaN with the sign bit: 0
    {kInf, kI32Max, kI64Max, 255},                   // +inf saturates
    {-kInf, kI32Min, kI64Min, 0},                    // -inf saturates
    {2147483648.f, kI32Max, 2147483648, 255},        // 2^31: just past int32
    {2147483520.f, 2147483520, 2147483520, 255},     // the largest float below 2^31
    {-2147483648.f, kI32Min, -2147483648LL, 0},      // -2^31: int32's minimum, exact
    {-2147483904.f, kI32Min, -2147483904LL, 0},      // below -2^31 (-2^31 - 1 is no float)
    {9223372036854775808.f, kI32Max, kI64Max, 255},  // 2^63: just past int64
    {9223371487098961920.f, kI32Max, 9223371487098961920, 255},  // the largest float below 2^63
    {-9223372036854775808.f, kI32Min, kI64Min, 0},               // -2^63: int64's minimum, exact
    {-9223373136366403584.f, kI32Min, kI64Min, 0},               // the float below -2^63
    {3e38f, kI32Max, kI64Max, 255},
    {-3e38f, kI32Min, kI64Min, 0},
    {255.9f, 255, 255, 255},  // truncated, in uint8's range
    {256.f, 256, 256, 255},   // just past uint8
    {300.5f, 300, 300, 255},
    {2.7f, 2, 2, 2},  // truncation toward zero
    {-2.7f, -2, -2, 0},
    {-0.5f, 0, 0, 0},  // truncates to 0, in every range
    {-0.99f, 0, 0, 0},
    {-1.f, -1, -1, 0},  // below uint8: saturates to 0
    {-0.f, 0, 0, 0},
    {1e-45f, 0, 0, 0},                      // the smallest subnormal
    {16777217.f, 16777216, 16777216, 255},  // 2^24 + 1 is no float: 2^24
};

TEST(ElementwiseTest, AstypeFromFloatTruncatesSaturatesAndSendsNaNToZero) {
  std::vector<float> in;
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;
  std::vector<std::uint8_t> u8;
  for (const FloatToIntegers& row : kFloatToIntegers) {
    in.push_back(row.in);
    i32.push_back(row.i32);
    i64.push_back(row.i64);
    u8.push_back(row.u8);
  }
  const Shape shape{static_cast<std::int64_t>(in.size())};
  for (Context ctx : all_devices()) {
    const NDArray x = array(in, shape, ctx);
    EXPECT_EQ(x.astype(DType::kInt32).to_vector<std::int32_t>(), i32) << ctx;
    EXPECT_EQ(x.astype(DType::kInt64).to_vector<std::int64_t>(), i64) << ctx;
    EXPECT_EQ(x.astype(DType::kUInt8).to_vector<std::uint8_t>(), u8) << ctx;
    // A large array: the CPU kernel's vectorized loop and its remainder.
    std::vector<float> many;
    std::vector<std::int32_t> many_i32;
    for (int k = 0; k < 37; ++k) {
      for (const FloatToIntegers& row : kFloatToIntegers) {
        many.push_back(row.in);
        many_i32.push_back(row.i32);
      }
    }
    EXPECT_EQ(array(many, {static_cast<std::int64_t>(many.size())}, ctx)
                  .astype(DType::kInt32)
                  .to_vector<std::int32_t>(),
              many_i32)
        << ctx;
  }
}

TEST(ElementwiseTest, AstypeBetweenIntegersWrapsAndToFloatRoundsToNearest) {
  for (Context ctx : all_devices()) {
    // int64 to int32 and uint8: the value modulo 2^32 or 2^8, as NumPy wraps.
    const NDArray wide = array(
        std::vector<std::int64_t>{(std::int64_t{1} << 32) + 5, std::int64_t{1} << 31,
                                  -(std::int64_t{1} << 31) - 1, 256, -1, 300, kI64Max, kI64Min, -7},
        {9}, ctx);
    EXPECT_EQ(wide.astype(DType::kInt32).to_vector<std::int32_t>(),
              (std::vector<std::int32_t>{5, kI32Min, kI32Max, 256, -1, 300, -1, 0, -7}))
        << ctx;
    EXPECT_EQ(wide.astype(DType::kUInt8).to_vector<std::uint8_t>(),
              (std::vector<std::uint8_t>{5, 0, 255, 0, 255, 44, 255, 0, 249}))
        << ctx;
    // int32 to uint8 wraps; to int64 is exact.
    const NDArray narrow = array(std::vector<std::int32_t>{-2, 511, kI32Min, kI32Max}, {4}, ctx);
    EXPECT_EQ(narrow.astype(DType::kUInt8).to_vector<std::uint8_t>(),
              (std::vector<std::uint8_t>{254, 255, 0, 255}))
        << ctx;
    EXPECT_EQ(narrow.astype(DType::kInt64).to_vector<std::int64_t>(),
              (std::vector<std::int64_t>{-2, 511, kI32Min, kI32Max}))
        << ctx;
    // To float32: the nearest float, ties to the even one.
    const NDArray exact = array(
        std::vector<std::int64_t>{16777217, 16777219, kI64Max, kI64Min, kI32Max, -3}, {6}, ctx);
    EXPECT_EQ(exact.astype(DType::kFloat32).to_vector<float>(),
              (std::vector<float>{16777216.f, 16777220.f, 9223372036854775808.f,
                                  -9223372036854775808.f, 2147483648.f, -3.f}))
        << ctx;
  }
}

TEST(ElementwiseTest, BadInputGetsTypedErrorsAndLeavesTheEngineUsable) {
  NDArray f = zeros({2, 3});
  NDArray g = zeros({4, 3});
  NDArray i = zeros({2, 3}, DType::kInt32);
  EXPECT_EQ(error_of([&] { (void)(f + g); }),
            "broadcast_add: shapes (2x3) and (4x3) do not broadcast: axis 0 has 2 against 4");
  EXPECT_EQ(error_of([&] { (void)(f * i); }),
            "broadcast_mul: all inputs must have the same dtype, but the first argument is float32 "
            "while the 2nd argument is int32. Convert one with astype()");
  EXPECT_EQ(error_of([&] { (void)exp(i); }),
            "exp: expected a floating-point array (float32, float16 or bfloat16) as the first "
            "argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] { (void)(i + 2.5); }),
            "plus_scalar: the scalar 2.5 cannot be used with a int32 array: expected an integer "
            "in [-2147483648, 2147483647]");
  EXPECT_EQ(error_of([&] { (void)(NDArray() + f); }),
            "broadcast_add: the first argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of([&] { (void)(f - NDArray()); }),
            "broadcast_sub: the 2nd argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of([&] { (void)(NDArray() / NDArray()); }),
            "broadcast_div: the first argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of([&] {
              (void)(i + zeros({2, 3}, DType::kInt64));
            }),
            "broadcast_add: all inputs must have the same dtype, but the first argument is int32 "
            "while the 2nd argument is int64. Convert one with astype()");
  EXPECT_EQ(error_of([&] { (void)power(i, i); }),
            "broadcast_power: expected a floating-point array (float32, float16 or bfloat16) as "
            "the first argument, got int32. Convert it with astype(DType::kFloat32)");
  NDArray row = zeros({1, 3});
  EXPECT_EQ(error_of([&] { row += f; }),
            "broadcast_add: an in-place result keeps the shape of the first argument (1x3), but "
            "broadcasting with (2x3) gives (2x3)");
  EXPECT_EQ(error_of([&] {
              (void)where(f, f, zeros({3, 2}));
            }),
            "where: expected the condition, x and y of one shape, got (2x3), (2x3) and (3x2)");
  EXPECT_EQ(error_of([&] { (void)clip(f, 1, -1); }),
            "clip: expected low <= high, got low 1 and high -1");
  EXPECT_EQ(error_of([&] {
              (void)(f + zeros({2, 3}, DType::kFloat32, cpu(1)));
            }),
            "broadcast_add: all inputs must live on the same context, but the first argument is on "
            "cpu(0) while the 2nd argument is on cpu(1). Nothing is copied implicitly: move one "
            "with copyto() or as_in_context()");
  EXPECT_EQ((f + 1).to_vector<float>(), std::vector<float>(6, 1.f));  // still usable
}

}  // namespace
}  // namespace tagflow
