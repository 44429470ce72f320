// format_array against NumPy 1.24: every expected string below is the output
// of `print(<expression>)` in NumPy 1.24.2 (default print options), with the
// expression in the comment beside it, where `f = np.float32`.

#include "ops/detail/format.h"

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/error.h"

namespace tagflow::detail {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::string print_floats(const std::vector<float>& values, const std::vector<std::int64_t>& shape) {
  return format_array(std::span<const float>(values), shape);
}

/// A one-dimensional float array.
std::string print_floats(const std::vector<float>& values) {
  return print_floats(values, {static_cast<std::int64_t>(values.size())});
}

std::string print_integers(const std::vector<std::int64_t>& values,
                           const std::vector<std::int64_t>& shape) {
  return format_array(std::span<const std::int64_t>(values), shape);
}

std::string print_integers(const std::vector<std::int64_t>& values) {
  return print_integers(values, {static_cast<std::int64_t>(values.size())});
}

/// np.arange(count, dtype=f) * scale, computed in float32 as numpy does.
std::vector<float> float_range(int count, float scale = 1.0f) {
  std::vector<float> values;
  for (int i = 0; i < count; ++i) values.push_back(static_cast<float>(i) * scale);
  return values;
}

/// np.arange(count) * step.
std::vector<std::int64_t> integer_range(std::int64_t count, std::int64_t step = 1) {
  std::vector<std::int64_t> values;
  for (std::int64_t i = 0; i < count; ++i) values.push_back(i * step);
  return values;
}

TEST(FormatArray, FloatsSharePaddingAcrossElements) {
  // np.array([1, 2, 3], dtype=f)
  EXPECT_EQ(print_floats({1, 2, 3}), "[1. 2. 3.]");
  // np.array([20.085537, 109.1963, 445.2395], dtype=f)
  EXPECT_EQ(print_floats({20.085537f, 109.1963f, 445.2395f}), "[ 20.085537 109.1963   445.2395  ]");
  // np.array([[0.6686509, 0.17409194, 0.3850025], [0.24678314, 0.35134333, 0.8404298]], dtype=f)
  EXPECT_EQ(
      print_floats({0.6686509f, 0.17409194f, 0.3850025f, 0.24678314f, 0.35134333f, 0.8404298f},
                   {2, 3}),
      "[[0.6686509  0.17409194 0.3850025 ]\n [0.24678314 0.35134333 0.8404298 ]]");
  // np.array([-1, 0.5, 2.25], dtype=f)
  EXPECT_EQ(print_floats({-1, 0.5f, 2.25f}), "[-1.    0.5   2.25]");
  // np.array([-2.5, 0, 3, -0.125], dtype=f)
  EXPECT_EQ(print_floats({-2.5f, 0, 3, -0.125f}), "[-2.5    0.     3.    -0.125]");
  // np.zeros((2, 2), dtype=f)
  EXPECT_EQ(print_floats({0, 0, 0, 0}, {2, 2}), "[[0. 0.]\n [0. 0.]]");
}

TEST(FormatArray, FloatsKeepAtMostEightFractionDigits) {
  // np.array([1, 2], dtype=f) / f(3)
  EXPECT_EQ(print_floats({1.0f / 3.0f, 2.0f / 3.0f}), "[0.33333334 0.6666667 ]");
  // np.array([0.00012345678, 0.001], dtype=f)
  EXPECT_EQ(print_floats({0.00012345678f, 0.001f}), "[0.00012346 0.001     ]");
  // np.array([1 / 512, 1], dtype=f): 0.001953125 exactly, a tie rounded to even.
  EXPECT_EQ(print_floats({1.0f / 512.0f, 1}), "[0.00195312 1.        ]");
  // np.array([74413168, 43969556], dtype=f): integer digits stay exact.
  EXPECT_EQ(print_floats({74413168.0f, 43969556.0f}), "[74413168. 43969556.]");
  // np.array([6.36998, 6369.98], dtype=f): the float32 quotient is exactly 1000.
  EXPECT_EQ(print_floats({6.36998f, 6369.98f}), "[   6.36998 6369.98   ]");
}

TEST(FormatArray, NegativeZeroKeepsItsSign) {
  // np.array([-0.0, 1], dtype=f)
  EXPECT_EQ(print_floats({-0.0f, 1}), "[-0.  1.]");
  // np.array([-0.0, 0.0], dtype=f)
  EXPECT_EQ(print_floats({-0.0f, 0.0f}), "[-0.  0.]");
}

TEST(FormatArray, NonFiniteValuesAlignWithTheOthers) {
  // np.array([np.nan, np.inf, -np.inf], dtype=f)
  EXPECT_EQ(print_floats({kNaN, kInf, -kInf}), "[ nan  inf -inf]");
  // np.array([np.nan, 1.5], dtype=f)
  EXPECT_EQ(print_floats({kNaN, 1.5f}), "[nan 1.5]");
  // np.array([np.inf, -0.5, 10], dtype=f)
  EXPECT_EQ(print_floats({kInf, -0.5f, 10}), "[ inf -0.5 10. ]");
  // np.array([-np.inf, 1e-05], dtype=f)
  EXPECT_EQ(print_floats({-kInf, 1e-05f}), "[  -inf 1.e-05]");
  // np.array([np.nan, np.nan], dtype=f)
  EXPECT_EQ(print_floats({kNaN, kNaN}), "[nan nan]");
}

TEST(FormatArray, SwitchesToScientificNotationLikeNumpy) {
  // np.array([1e-05, 1], dtype=f)
  EXPECT_EQ(print_floats({1e-05f, 1}), "[1.e-05 1.e+00]");
  // np.array([1, 1.2345679e+09], dtype=f)
  EXPECT_EQ(print_floats({1, 1.2345679e+09f}), "[1.000000e+00 1.234568e+09]");
  // np.array([1e8], dtype=f)
  EXPECT_EQ(print_floats({1e8f}), "[1.e+08]");
  // np.array([0.0001, 0.01], dtype=f): float32(1e-4) is below the double 1e-4.
  EXPECT_EQ(print_floats({0.0001f, 0.01f}), "[1.e-04 1.e-02]");
  // np.array([0.5, 500.5], dtype=f)
  EXPECT_EQ(print_floats({0.5f, 500.5f}), "[5.000e-01 5.005e+02]");
  // np.array([-1e-05, 200000, 0], dtype=f)
  EXPECT_EQ(print_floats({-1e-05f, 200000, 0}), "[-1.e-05  2.e+05  0.e+00]");
  // np.array([1e-45, 3.4e+38], dtype=f)
  EXPECT_EQ(print_floats({1e-45f, 3.4e+38f}), "[1.4e-45 3.4e+38]");
}

TEST(FormatArray, ScientificElementsShowTheirExactDigitsToTheCommonLength) {
  // np.array([2.4782405e+08, 0.0014701739], dtype=f): the shortest 1.470174e-03
  // is extended with the value's own digits, not zeros.
  EXPECT_EQ(print_floats({2.4782405e+08f, 0.0014701739f}), "[2.4782405e+08 1.4701739e-03]");
}

TEST(FormatArray, NestsDimensionsWithBlankLinesBetweenBlocks) {
  // np.arange(8, dtype=f).reshape(2, 2, 2)
  EXPECT_EQ(print_floats(float_range(8), {2, 2, 2}),
            "[[[0. 1.]\n  [2. 3.]]\n\n [[4. 5.]\n  [6. 7.]]]");
  // np.arange(4, dtype=f).reshape(2, 1, 1, 2)
  EXPECT_EQ(print_floats(float_range(4), {2, 1, 1, 2}), "[[[[0. 1.]]]\n\n\n [[[2. 3.]]]]");
  // np.array([[[5.5]]], dtype=f)
  EXPECT_EQ(print_floats({5.5f}, {1, 1, 1}), "[[[5.5]]]");
}

TEST(FormatArray, WrapsLongRowsAtSeventyFiveColumns) {
  // np.arange(30, dtype=f) * f(1.5)
  EXPECT_EQ(print_floats(float_range(30, 1.5f)),
            "[ 0.   1.5  3.   4.5  6.   7.5  9.  10.5 12.  13.5 15.  16.5 18.  19.5\n"
            " 21.  22.5 24.  25.5 27.  28.5 30.  31.5 33.  34.5 36.  37.5 39.  40.5\n"
            " 42.  43.5]");
  // np.arange(40, dtype=f).reshape(2, 20) / f(7)
  std::vector<float> sevenths;
  for (int i = 0; i < 40; ++i) sevenths.push_back(static_cast<float>(i) / 7.0f);
  EXPECT_EQ(print_floats(sevenths, {2, 20}),
            "[[0.         0.14285715 0.2857143  0.42857143 0.5714286  0.71428573\n"
            "  0.85714287 1.         1.1428572  1.2857143  1.4285715  1.5714285\n"
            "  1.7142857  1.8571428  2.         2.142857   2.2857144  2.4285715\n"
            "  2.5714285  2.7142856 ]\n"
            " [2.857143   3.         3.142857   3.2857144  3.4285715  3.5714285\n"
            "  3.7142856  3.857143   4.         4.142857   4.285714   4.428571\n"
            "  4.571429   4.714286   4.857143   5.         5.142857   5.285714\n"
            "  5.428571   5.571429  ]]");
}

TEST(FormatArray, SummarisesArraysOverAThousandElements) {
  // np.arange(2000, dtype=f)
  EXPECT_EQ(print_floats(float_range(2000)),
            "[0.000e+00 1.000e+00 2.000e+00 ... 1.997e+03 1.998e+03 1.999e+03]");
  // np.arange(2000, dtype=f).reshape(40, 50)
  EXPECT_EQ(print_floats(float_range(2000), {40, 50}),
            "[[0.000e+00 1.000e+00 2.000e+00 ... 4.700e+01 4.800e+01 4.900e+01]\n"
            " [5.000e+01 5.100e+01 5.200e+01 ... 9.700e+01 9.800e+01 9.900e+01]\n"
            " [1.000e+02 1.010e+02 1.020e+02 ... 1.470e+02 1.480e+02 1.490e+02]\n"
            " ...\n"
            " [1.850e+03 1.851e+03 1.852e+03 ... 1.897e+03 1.898e+03 1.899e+03]\n"
            " [1.900e+03 1.901e+03 1.902e+03 ... 1.947e+03 1.948e+03 1.949e+03]\n"
            " [1.950e+03 1.951e+03 1.952e+03 ... 1.997e+03 1.998e+03 1.999e+03]]");
  // np.where(np.arange(2000) == 1000, f(1e9), f(1)).astype(f): the hidden 1e9
  // plays no part in the notation or the widths.
  std::vector<float> hidden_outlier(2000, 1.0f);
  hidden_outlier[1000] = 1e9f;
  EXPECT_EQ(print_floats(hidden_outlier), "[1. 1. 1. ... 1. 1. 1.]");
}

TEST(FormatArray, SummarisesEveryAxisOfALargeCube) {
  // np.arange(1331, dtype=f).reshape(11, 11, 11)
  EXPECT_EQ(print_floats(float_range(1331), {11, 11, 11}),
            "[[[0.000e+00 1.000e+00 2.000e+00 ... 8.000e+00 9.000e+00 1.000e+01]\n"
            "  [1.100e+01 1.200e+01 1.300e+01 ... 1.900e+01 2.000e+01 2.100e+01]\n"
            "  [2.200e+01 2.300e+01 2.400e+01 ... 3.000e+01 3.100e+01 3.200e+01]\n"
            "  ...\n"
            "  [8.800e+01 8.900e+01 9.000e+01 ... 9.600e+01 9.700e+01 9.800e+01]\n"
            "  [9.900e+01 1.000e+02 1.010e+02 ... 1.070e+02 1.080e+02 1.090e+02]\n"
            "  [1.100e+02 1.110e+02 1.120e+02 ... 1.180e+02 1.190e+02 1.200e+02]]\n"
            "\n"
            " [[1.210e+02 1.220e+02 1.230e+02 ... 1.290e+02 1.300e+02 1.310e+02]\n"
            "  [1.320e+02 1.330e+02 1.340e+02 ... 1.400e+02 1.410e+02 1.420e+02]\n"
            "  [1.430e+02 1.440e+02 1.450e+02 ... 1.510e+02 1.520e+02 1.530e+02]\n"
            "  ...\n"
            "  [2.090e+02 2.100e+02 2.110e+02 ... 2.170e+02 2.180e+02 2.190e+02]\n"
            "  [2.200e+02 2.210e+02 2.220e+02 ... 2.280e+02 2.290e+02 2.300e+02]\n"
            "  [2.310e+02 2.320e+02 2.330e+02 ... 2.390e+02 2.400e+02 2.410e+02]]\n"
            "\n"
            " [[2.420e+02 2.430e+02 2.440e+02 ... 2.500e+02 2.510e+02 2.520e+02]\n"
            "  [2.530e+02 2.540e+02 2.550e+02 ... 2.610e+02 2.620e+02 2.630e+02]\n"
            "  [2.640e+02 2.650e+02 2.660e+02 ... 2.720e+02 2.730e+02 2.740e+02]\n"
            "  ...\n"
            "  [3.300e+02 3.310e+02 3.320e+02 ... 3.380e+02 3.390e+02 3.400e+02]\n"
            "  [3.410e+02 3.420e+02 3.430e+02 ... 3.490e+02 3.500e+02 3.510e+02]\n"
            "  [3.520e+02 3.530e+02 3.540e+02 ... 3.600e+02 3.610e+02 3.620e+02]]\n"
            "\n"
            " ...\n"
            "\n"
            " [[9.680e+02 9.690e+02 9.700e+02 ... 9.760e+02 9.770e+02 9.780e+02]\n"
            "  [9.790e+02 9.800e+02 9.810e+02 ... 9.870e+02 9.880e+02 9.890e+02]\n"
            "  [9.900e+02 9.910e+02 9.920e+02 ... 9.980e+02 9.990e+02 1.000e+03]\n"
            "  ...\n"
            "  [1.056e+03 1.057e+03 1.058e+03 ... 1.064e+03 1.065e+03 1.066e+03]\n"
            "  [1.067e+03 1.068e+03 1.069e+03 ... 1.075e+03 1.076e+03 1.077e+03]\n"
            "  [1.078e+03 1.079e+03 1.080e+03 ... 1.086e+03 1.087e+03 1.088e+03]]\n"
            "\n"
            " [[1.089e+03 1.090e+03 1.091e+03 ... 1.097e+03 1.098e+03 1.099e+03]\n"
            "  [1.100e+03 1.101e+03 1.102e+03 ... 1.108e+03 1.109e+03 1.110e+03]\n"
            "  [1.111e+03 1.112e+03 1.113e+03 ... 1.119e+03 1.120e+03 1.121e+03]\n"
            "  ...\n"
            "  [1.177e+03 1.178e+03 1.179e+03 ... 1.185e+03 1.186e+03 1.187e+03]\n"
            "  [1.188e+03 1.189e+03 1.190e+03 ... 1.196e+03 1.197e+03 1.198e+03]\n"
            "  [1.199e+03 1.200e+03 1.201e+03 ... 1.207e+03 1.208e+03 1.209e+03]]\n"
            "\n"
            " [[1.210e+03 1.211e+03 1.212e+03 ... 1.218e+03 1.219e+03 1.220e+03]\n"
            "  [1.221e+03 1.222e+03 1.223e+03 ... 1.229e+03 1.230e+03 1.231e+03]\n"
            "  [1.232e+03 1.233e+03 1.234e+03 ... 1.240e+03 1.241e+03 1.242e+03]\n"
            "  ...\n"
            "  [1.298e+03 1.299e+03 1.300e+03 ... 1.306e+03 1.307e+03 1.308e+03]\n"
            "  [1.309e+03 1.310e+03 1.311e+03 ... 1.317e+03 1.318e+03 1.319e+03]\n"
            "  [1.320e+03 1.321e+03 1.322e+03 ... 1.328e+03 1.329e+03 1.330e+03]]]");
}

TEST(FormatArray, EmptyArraysPrintAsBrackets) {
  // np.zeros(0, dtype=f)
  EXPECT_EQ(print_floats({}, {0}), "[]");
  // np.zeros((2, 0), dtype=f)
  EXPECT_EQ(print_floats({}, {2, 0}), "[]");
  // np.zeros((3, 0), dtype=np.int64)
  EXPECT_EQ(print_integers({}, {3, 0}), "[]");
}

TEST(FormatArray, IntegersAreRightAlignedToACommonWidth) {
  // np.array([1, 2, -3])
  EXPECT_EQ(print_integers({1, 2, -3}), "[ 1  2 -3]");
  // np.array([[1, 20], [3, 4]])
  EXPECT_EQ(print_integers({1, 20, 3, 4}, {2, 2}), "[[ 1 20]\n [ 3  4]]");
  // np.arange(100) * 1234567
  EXPECT_EQ(print_integers(integer_range(100, 1234567)),
            "[        0   1234567   2469134   3703701   4938268   6172835   7407402\n"
            "   8641969   9876536  11111103  12345670  13580237  14814804  16049371\n"
            "  17283938  18518505  19753072  20987639  22222206  23456773  24691340\n"
            "  25925907  27160474  28395041  29629608  30864175  32098742  33333309\n"
            "  34567876  35802443  37037010  38271577  39506144  40740711  41975278\n"
            "  43209845  44444412  45678979  46913546  48148113  49382680  50617247\n"
            "  51851814  53086381  54320948  55555515  56790082  58024649  59259216\n"
            "  60493783  61728350  62962917  64197484  65432051  66666618  67901185\n"
            "  69135752  70370319  71604886  72839453  74074020  75308587  76543154\n"
            "  77777721  79012288  80246855  81481422  82715989  83950556  85185123\n"
            "  86419690  87654257  88888824  90123391  91357958  92592525  93827092\n"
            "  95061659  96296226  97530793  98765360  99999927 101234494 102469061\n"
            " 103703628 104938195 106172762 107407329 108641896 109876463 111111030\n"
            " 112345597 113580164 114814731 116049298 117283865 118518432 119752999\n"
            " 120987566 122222133]");
}

TEST(FormatArray, IntegersFromEveryDtypeRange) {
  // np.array([-2147483648, 2147483647, 0], dtype=np.int32)
  EXPECT_EQ(print_integers({std::numeric_limits<std::int32_t>::min(),
                            std::numeric_limits<std::int32_t>::max(), 0}),
            "[-2147483648  2147483647           0]");
  // np.arange(0, 256, 51, dtype=np.uint8)
  EXPECT_EQ(print_integers(integer_range(6, 51)), "[  0  51 102 153 204 255]");
  // np.array([-9223372036854775808, 9223372036854775807])
  EXPECT_EQ(print_integers({std::numeric_limits<std::int64_t>::min(),
                            std::numeric_limits<std::int64_t>::max()}),
            "[-9223372036854775808  9223372036854775807]");
}

TEST(FormatArray, SummarisesIntegerArrays) {
  // np.arange(1001)
  EXPECT_EQ(print_integers(integer_range(1001)), "[   0    1    2 ...  998  999 1000]");
  // np.arange(3000).reshape(3, 1000)
  EXPECT_EQ(print_integers(integer_range(3000), {3, 1000}),
            "[[   0    1    2 ...  997  998  999]\n"
            " [1000 1001 1002 ... 1997 1998 1999]\n"
            " [2000 2001 2002 ... 2997 2998 2999]]");
  // np.where(np.arange(1200) == 600, -10**12, np.arange(1200))
  std::vector<std::int64_t> hidden_outlier = integer_range(1200);
  hidden_outlier[600] = -1'000'000'000'000;
  EXPECT_EQ(print_integers(hidden_outlier), "[   0    1    2 ... 1197 1198 1199]");
}

TEST(FormatArray, RejectsShapesThatDoNotDescribeTheValues) {
  const std::vector<float> values{1, 2, 3};
  EXPECT_THROW(print_floats(values, {}), Error);
  EXPECT_THROW(print_floats(values, {2}), Error);
  EXPECT_THROW(print_floats(values, {3, -1}), Error);
  EXPECT_THROW(print_integers({1, 2}, {3}), Error);
}

}  // namespace
}  // namespace tagflow::detail
