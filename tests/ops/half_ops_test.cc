// Operators on float16 and bfloat16 arrays (Note [Half precision arithmetic]
// in ops/half.h): each result against a reference computed here in double
// precision from the same (exactly representable) inputs, on every device.
// Where the rule makes the result exact (sums, products and differences of
// two 16-bit values, a float16 sum of any length, extremes, moves) the bits
// must be the double result rounded once; elsewhere (quotients, exp, log,
// softmax) within one unit in the last place of the 16-bit type. Gradients
// in half precision against the float32 gradients of the same inputs.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
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

constexpr DType kHalfTypes[] = {DType::kFloat16, DType::kBFloat16};

/// `values` rounded to `dtype` on the host, as the doubles they stand for.
std::vector<double> rounded(const std::vector<float>& values, DType dtype) {
  std::vector<double> out;
  out.reserve(values.size());
  for (const float v : values) {
    out.push_back(dtype == DType::kFloat16 ? static_cast<double>(static_cast<float>(Half(v)))
                                           : static_cast<double>(static_cast<float>(BFloat16(v))));
  }
  return out;
}

/// A `dtype` array of `values` (rounded to it) on `ctx`.
NDArray half_array(const std::vector<float>& values, const Shape& shape, Context ctx, DType dtype) {
  return array(values, shape, ctx).astype(dtype);
}

/// The exact values of a 16-bit array.
std::vector<float> values_of(const NDArray& a) {
  return a.astype(DType::kFloat32).to_vector<float>();
}

/// `x` rounded once to `dtype` (the library's conversion, itself checked
/// against independent references over every value in half_test.cc).
double round_to(double x, DType dtype) {
  return dtype == DType::kFloat16
             ? static_cast<double>(static_cast<float>(Half(round_to_odd(x))))
             : static_cast<double>(static_cast<float>(BFloat16(round_to_odd(x))));
}

/// The spacing of `dtype` values around |x| (its unit in the last place).
double ulp(double x, DType dtype) {
  const int mantissa_bits = dtype == DType::kFloat16 ? 10 : 7;
  const int min_exponent = dtype == DType::kFloat16 ? -14 : -126;
  const double magnitude = std::abs(x);
  const int exponent =
      magnitude == 0 ? min_exponent : std::max(min_exponent, std::ilogb(magnitude));
  return std::ldexp(1.0, exponent - mantissa_bits);
}

/// Every element exactly `expected` rounded once to `dtype` (NaN as NaN).
void expect_rounded_once(const std::vector<float>& actual, const std::vector<double>& expected,
                         DType dtype, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double want = round_to(expected[i], dtype);
    const bool ok =
        (std::isnan(want) && std::isnan(actual[i])) || static_cast<double>(actual[i]) == want;
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << " (" << dtype_name(dtype) << "): element " << i << " is "
                    << actual[i] << ", expected " << want << " (" << expected[i] << " rounded)";
    }
  }
}

/// Every element within `ulps` units in the last place of `dtype` of
/// `expected` (NaN as NaN; a result beyond the largest finite value as
/// infinity of its sign).
void expect_within_ulps(const std::vector<float>& actual, const std::vector<double>& expected,
                        DType dtype, double ulps, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    const double limit = round_to(e, dtype);
    bool ok = false;
    if (std::isnan(e)) {
      ok = std::isnan(a);
    } else if (std::isinf(limit)) {
      ok = a == limit || std::abs(a - e) <= ulps * ulp(e, dtype);
    } else {
      ok = std::abs(a - e) <= ulps * ulp(e, dtype);
    }
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << " (" << dtype_name(dtype) << "): element " << i << " is " << a
                    << ", expected " << e << " within " << ulps << " ulp (" << ulps * ulp(e, dtype)
                    << ")";
    }
  }
}

/// Applies `f` to every element of `x`.
template <typename F>
std::vector<double> each(const std::vector<double>& x, F f) {
  std::vector<double> out;
  out.reserve(x.size());
  for (const double v : x) out.push_back(f(v));
  return out;
}

template <typename F>
std::vector<double> each(const std::vector<double>& x, const std::vector<double>& y, F f) {
  std::vector<double> out;
  out.reserve(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out.push_back(f(x[i], y[i]));
  return out;
}

TEST(HalfOpsTest, ElementwiseOperatorsComputeInFloatAndRoundOnce) {
  const std::vector<float> xs = random_floats(600, -6.f, 6.f, 1);
  const std::vector<float> ys = random_floats(600, 0.25f, 4.f, 2);
  const Shape shape{20, 30};
  for (const DType dtype : kHalfTypes) {
    const std::vector<double> x = rounded(xs, dtype);
    const std::vector<double> y = rounded(ys, dtype);
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray a = half_array(xs, shape, ctx, dtype);
      const NDArray b = half_array(ys, shape, ctx, dtype);
      // Exact in float: one rounding, to the double result's nearest.
      expect_rounded_once(values_of(a + b), each(x, y, [](double p, double q) { return p + q; }),
                          dtype, "a + b");
      expect_rounded_once(values_of(a - b), each(x, y, [](double p, double q) { return p - q; }),
                          dtype, "a - b");
      expect_rounded_once(values_of(a * b), each(x, y, [](double p, double q) { return p * q; }),
                          dtype, "a * b");
      expect_rounded_once(values_of(square(a)), each(x, [](double p) { return p * p; }), dtype,
                          "square");
      expect_rounded_once(values_of(maximum(a, b)),
                          each(x, y, [](double p, double q) { return std::max(p, q); }), dtype,
                          "maximum");
      expect_rounded_once(values_of(relu(a)), each(x, [](double p) { return std::max(p, 0.0); }),
                          dtype, "relu");
      expect_rounded_once(values_of(abs(-a)), each(x, [](double p) { return std::abs(p); }), dtype,
                          "abs(-a)");
      expect_rounded_once(values_of(greater(a, b)),
                          each(x, y, [](double p, double q) { return p > q ? 1.0 : 0.0; }), dtype,
                          "greater");
      // Rounded from a float result: within one unit in the last place.
      expect_within_ulps(values_of(a / b), each(x, y, [](double p, double q) { return p / q; }),
                         dtype, 1, "a / b");
      expect_within_ulps(values_of(exp(a)), each(x, [](double p) { return std::exp(p); }), dtype, 1,
                         "exp");
      expect_within_ulps(values_of(log(b)), each(y, [](double p) { return std::log(p); }), dtype, 1,
                         "log");
      expect_within_ulps(values_of(sqrt(b)), each(y, [](double p) { return std::sqrt(p); }), dtype,
                         1, "sqrt");
      expect_within_ulps(values_of(tanh(a)), each(x, [](double p) { return std::tanh(p); }), dtype,
                         1, "tanh");
      expect_within_ulps(values_of(sigmoid(a)),
                         each(x, [](double p) { return 1.0 / (1.0 + std::exp(-p)); }), dtype, 1,
                         "sigmoid");
      expect_within_ulps(values_of(power(b, a)),
                         each(y, x, [](double p, double q) { return std::pow(p, q); }), dtype, 1,
                         "power");
    }
  }
}

TEST(HalfOpsTest, ScalarsStayFloatAndBroadcastsClipsAndWheresFollowTheRule) {
  const std::vector<float> xs = random_floats(24, -3.f, 3.f, 3);
  const std::vector<float> rows = random_floats(4, -1.f, 1.f, 4);
  for (const DType dtype : kHalfTypes) {
    const std::vector<double> x = rounded(xs, dtype);
    const std::vector<double> row = rounded(rows, dtype);
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray a = half_array(xs, {6, 4}, ctx, dtype);
      // The scalar 0.1 is the float 0.1f, not 0.1 rounded to the array's
      // type: a * 0.1 is the float product rounded once.
      std::vector<double> times_tenth;
      for (const double v : x) {
        times_tenth.push_back(static_cast<double>(static_cast<float>(v) * 0.1f));
      }
      expect_rounded_once(values_of(a * 0.1), times_tenth, dtype, "a * 0.1");
      expect_rounded_once(values_of(1.0 - a), each(x, [](double p) { return 1.0 - p; }), dtype,
                          "1 - a");
      // (6, 4) + (4): the row broadcast down the columns.
      std::vector<double> sums;
      for (std::size_t i = 0; i < x.size(); ++i) sums.push_back(x[i] + row[i % 4]);
      expect_rounded_once(values_of(a + half_array(rows, {4}, ctx, dtype)), sums, dtype, "a + row");
      expect_rounded_once(values_of(clip(a, -1.5, 0.7)),
                          each(x, [](double p) { return std::clamp(p, -1.5, 0.7); }), dtype,
                          "clip");
      const NDArray positive = greater(a, 0.0);
      EXPECT_EQ(positive.dtype(), dtype);
      expect_rounded_once(values_of(where(positive, a, -a)),
                          each(x, [](double p) { return std::abs(p); }), dtype, "where");
      // Mixed dtypes are refused, naming both.
      EXPECT_NE(error_of([&] {
                  (void)(a + ones({6, 4}, DType::kFloat32, ctx));
                })
                    .find(std::string("the first argument is ") + std::string(dtype_name(dtype)) +
                          " while the 2nd argument is float32"),
                std::string::npos);
    }
  }
}

TEST(HalfOpsTest, ReductionsAccumulateInDoubleAndRoundOnce) {
  // 3 x 500 x 4: reductions over the long middle axis, the last, and all.
  const std::vector<float> xs = random_floats(6000, -4.f, 4.f, 5);
  const Shape shape{3, 500, 4};
  for (const DType dtype : kHalfTypes) {
    const std::vector<double> x = rounded(xs, dtype);
    std::vector<double> sum1(12, 0.0);
    std::vector<double> squares1(12, 0.0);
    std::vector<double> max1(12, -INFINITY);
    std::vector<std::int64_t> argmax1(12, 0);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 500; ++j) {
        for (int k = 0; k < 4; ++k) {
          const double v = x[static_cast<std::size_t>((i * 500 + j) * 4 + k)];
          const auto o = static_cast<std::size_t>(i * 4 + k);
          sum1[o] += v;
          squares1[o] += v * v;
          if (v > max1[o]) {
            max1[o] = v;
            argmax1[o] = j;
          }
        }
      }
    }
    std::vector<double> mean1;
    std::vector<double> norm1;
    for (std::size_t o = 0; o < 12; ++o) {
      mean1.push_back(sum1[o] / 500);
      norm1.push_back(std::sqrt(squares1[o]));
    }
    double total = 0;
    for (const double v : x) total += v;
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray a = half_array(xs, shape, ctx, dtype);
      const NDArray s = sum(a, 1);
      EXPECT_EQ(s.dtype(), dtype);
      // float16 values are multiples of 2^-24 below 2^16: their double sums
      // are exact, so the result is the exact sum rounded once. bfloat16's
      // may round in double; far below its own unit.
      expect_rounded_once(values_of(s), sum1, dtype, "sum over axis 1");
      expect_rounded_once(values_of(sum(a)), {total}, dtype, "sum of all");
      const NDArray m = mean(a, 1);
      EXPECT_EQ(m.dtype(), dtype) << "the mean of a half array has its dtype, as in NumPy";
      expect_rounded_once(values_of(m), mean1, dtype, "mean");
      expect_within_ulps(values_of(norm(a, 1)), norm1, dtype, 0.5, "norm");
      expect_rounded_once(values_of(max(a, 1)), max1, dtype, "max");
      EXPECT_EQ(argmax(a, 1).to_vector<std::int64_t>(), argmax1);
      // A sum the 16-bit type cannot hold overflows to infinity only at the
      // end, not on the way: 4000 x 30 = 120000 is past float16's range, but
      // 4000 x 30 - 4000 x 30 is 0.
      if (dtype == DType::kFloat16) {
        std::vector<float> big(8000, 30.f);
        std::fill(big.begin() + 4000, big.end(), -30.f);
        EXPECT_EQ(values_of(sum(half_array(big, {8000}, ctx, dtype))), std::vector<float>{0.f});
        EXPECT_EQ(values_of(sum(half_array(std::vector<float>(4000, 30.f), {4000}, ctx, dtype))),
                  std::vector<float>{INFINITY});
      }
    }
  }
}

TEST(HalfOpsTest, SoftmaxAndCrossEntropyMatchDoubleReferences) {
  const std::int64_t batch = 8;
  const std::int64_t classes = 10;
  const std::vector<float> xs =
      random_floats(static_cast<std::size_t>(batch * classes), -5.f, 5.f, 6);
  const std::vector<std::int32_t> labels = {0, 3, 9, 1, 4, 4, 7, 2};
  for (const DType dtype : kHalfTypes) {
    const std::vector<double> x = rounded(xs, dtype);
    std::vector<double> p(x.size());
    std::vector<double> logp(x.size());
    std::vector<double> loss(static_cast<std::size_t>(batch));
    for (std::int64_t i = 0; i < batch; ++i) {
      const double* row = x.data() + i * classes;
      const double m = *std::max_element(row, row + classes);
      double total = 0;
      for (std::int64_t j = 0; j < classes; ++j) total += std::exp(row[j] - m);
      for (std::int64_t j = 0; j < classes; ++j) {
        p[static_cast<std::size_t>(i * classes + j)] = std::exp(row[j] - m) / total;
        logp[static_cast<std::size_t>(i * classes + j)] = row[j] - m - std::log(total);
      }
      loss[static_cast<std::size_t>(i)] =
          -logp[static_cast<std::size_t>(i * classes + labels[static_cast<std::size_t>(i)])];
    }
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray a = half_array(xs, {batch, classes}, ctx, dtype);
      const NDArray y = softmax(a);
      EXPECT_EQ(y.dtype(), dtype);
      expect_within_ulps(values_of(y), p, dtype, 1, "softmax");
      expect_within_ulps(values_of(log_softmax(a)), logp, dtype, 1, "log_softmax");
      const NDArray label = array(labels, {batch}, ctx);
      const NDArray l = softmax_cross_entropy(a, label);
      EXPECT_EQ(l.dtype(), dtype);
      expect_within_ulps(values_of(l), loss, dtype, 1, "softmax_cross_entropy");
      // Its gradient (p - onehot) / batch for a mean loss, in half.
      NDArray w = a.copyto(ctx);
      w.attach_grad();
      {
        const auto recording = autograd::record();
        NDArray total = mean(softmax_cross_entropy(w, label));
        total.backward();
      }
      EXPECT_EQ(w.grad().dtype(), dtype);
      std::vector<double> expected_grad = p;
      for (std::int64_t i = 0; i < batch; ++i) {
        expected_grad[static_cast<std::size_t>(i * classes +
                                               labels[static_cast<std::size_t>(i)])] -= 1.0;
      }
      for (double& g : expected_grad) g /= static_cast<double>(batch);
      // The mean's gradient 1/8 is exact, the product with p rounds twice.
      expect_within_ulps(values_of(w.grad()), expected_grad, dtype, 2, "d loss / d pred");
    }
  }
}

TEST(HalfOpsTest, GradientsInHalfFollowTheFloat32Gradients) {
  // loss = sum(tanh(x * w) * x) over half inputs; the float32 gradient of the
  // same (exact) inputs is the reference, itself checked against finite
  // differences in autograd_test.cc. The half gradient differs by its
  // roundings: within a few rounding units, normwise.
  const std::vector<float> xs = random_floats(64, -2.f, 2.f, 7);
  const std::vector<float> ws = random_floats(64, -1.f, 1.f, 8);
  for (const DType dtype : kHalfTypes) {
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray x = half_array(xs, {8, 8}, ctx, dtype);
      NDArray w = half_array(ws, {8, 8}, ctx, dtype);
      NDArray w32 = w.astype(DType::kFloat32);
      const NDArray x32 = x.astype(DType::kFloat32);
      w.attach_grad();
      w32.attach_grad();
      {
        const auto recording = autograd::record();
        NDArray loss = sum(tanh(x * w) * x);
        loss.backward();
        NDArray loss32 = sum(tanh(x32 * w32) * x32);
        loss32.backward();
      }
      ASSERT_EQ(w.grad().dtype(), dtype);
      const std::vector<float> reference = w32.grad().to_vector<float>();
      const std::vector<float> actual = values_of(w.grad());
      // Normwise: 1 - tanh^2 cancels where tanh is near 1, so single elements
      // lose more digits than the rounding unit, but the vector may not.
      double error = 0;
      double size = 0;
      for (std::size_t i = 0; i < reference.size(); ++i) {
        error += std::pow(static_cast<double>(actual[i]) - reference[i], 2);
        size += std::pow(static_cast<double>(reference[i]), 2);
      }
      const double unit = dtype == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
      EXPECT_LE(std::sqrt(error / size), 4 * unit) << dtype_name(dtype);
      EXPECT_GT(std::sqrt(error / size), 0) << "computed in half, not float32";
    }
  }
}

TEST(HalfOpsTest, AstypePassesGradientsBackInTheSourceDtype) {
  // float32 master weights used in half: the gradient arrives in float32.
  for (const DType dtype : kHalfTypes) {
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      NDArray master = array(std::vector<float>{0.5f, -1.25f, 3.f}, {3}, ctx);
      master.attach_grad();
      {
        const auto recording = autograd::record();
        NDArray h = master.astype(dtype);
        NDArray loss = sum(h * h);
        loss.backward();
      }
      ASSERT_EQ(master.grad().dtype(), DType::kFloat32);
      EXPECT_EQ(master.grad().to_vector<float>(), (std::vector<float>{1.f, -2.5f, 6.f}));
    }
  }
}

TEST(HalfOpsTest, MovesAndOneHotKeepTheBits) {
  const std::vector<float> xs = random_floats(24, -100.f, 100.f, 9);
  for (const DType dtype : kHalfTypes) {
    const std::vector<double> x = rounded(xs, dtype);
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray a = half_array(xs, {2, 3, 4}, ctx, dtype);
      const NDArray t = transpose(a, {2, 0, 1});
      EXPECT_EQ(t.dtype(), dtype);
      const std::vector<float> tv = values_of(t);
      for (int k = 0; k < 4; ++k) {
        for (int i = 0; i < 2; ++i) {
          for (int j = 0; j < 3; ++j) {
            ASSERT_EQ(static_cast<double>(tv[static_cast<std::size_t>((k * 2 + i) * 3 + j)]),
                      x[static_cast<std::size_t>((i * 3 + j) * 4 + k)]);
          }
        }
      }
      const std::vector<float> joined = values_of(concat({a, a}, 0));
      ASSERT_EQ(joined.size(), 48u);
      EXPECT_TRUE(std::equal(joined.begin(), joined.begin() + 24, joined.begin() + 24));
      const NDArray labels = half_array({2.f, 0.f, 1.9f}, {3}, ctx, dtype);
      EXPECT_EQ(values_of(one_hot(labels, 3, 0.1, 0, dtype)),
                (std::vector<float>{0, 0, static_cast<float>(round_to(0.1, dtype)),
                                    static_cast<float>(round_to(0.1, dtype)), 0, 0, 0,
                                    static_cast<float>(round_to(0.1, dtype)), 0}));
    }
  }
}

/// `f(inputs)` for 16-bit inputs and for their float32 copies: the 16-bit
/// outputs (and the gradients of the inputs flagged in `grads`, through the
/// head gradient `head`) must be the float32 ones rounded once: a CPU
/// device or simulated GPU widens 16-bit arrays, runs the float32 kernel and
/// rounds its result (Note [Half precision arithmetic]). Gradients of
/// float32 parameters (batch norm's) must be equal.
void expect_float32_rounded_once(const std::function<NDArray(const std::vector<NDArray>&)>& f,
                                 std::vector<NDArray> inputs, const std::vector<bool>& grads,
                                 const NDArray& head, DType dtype, const std::string& what) {
  std::vector<NDArray> wide;
  for (NDArray& in : inputs) {
    wide.push_back(in.astype(is_half(in.dtype()) ? DType::kFloat32 : in.dtype()));
  }
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (grads[i]) {
      inputs[i].attach_grad();
      wide[i].attach_grad();
    }
  }
  NDArray out;
  NDArray out32;
  {
    const auto recording = autograd::record();
    out = f(inputs);
    out32 = f(wide);
    sum(out * head).backward();
    sum(out32 * head.astype(DType::kFloat32)).backward();
  }
  ASSERT_EQ(out.dtype(), dtype) << what;
  const auto as_doubles = [](const NDArray& a) {
    const std::vector<float> v = a.astype(DType::kFloat32).to_vector<float>();
    return std::vector<double>(v.begin(), v.end());
  };
  // A real GPU's 16-bit kernels (cuBLAS, cuDNN, tensor cores) sum in
  // another order than its float32 ones: one unit apart, not bitwise.
  const bool real_gpu = is_real_gpu(out.context());
  const auto expect_16_bit = [&](const NDArray& got, const NDArray& wide_result,
                                 const std::string& name) {
    if (real_gpu) {
      expect_within_ulps(values_of(got), as_doubles(wide_result), dtype, 1, name);
    } else {
      expect_rounded_once(values_of(got), as_doubles(wide_result), dtype, name);
    }
  };
  expect_16_bit(out, out32, what);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!grads[i]) continue;
    const std::string name = what + ", gradient of input " + std::to_string(i);
    ASSERT_EQ(inputs[i].grad().dtype(), inputs[i].dtype()) << name;
    if (is_half(inputs[i].dtype())) {
      expect_16_bit(inputs[i].grad(), wide[i].grad(), name);
    } else if (real_gpu) {
      testing::expect_close(inputs[i].grad().to_vector<float>(), as_doubles(wide[i].grad()), 1e-2,
                            1e-3, name);
    } else {
      EXPECT_EQ(inputs[i].grad().to_vector<float>(), wide[i].grad().to_vector<float>()) << name;
    }
  }
}

TEST(HalfOpsTest, ProductsSumInFloatAndRoundOnce) {
  const std::vector<float> as = random_floats(6 * 64, -1.f, 1.f, 10);
  const std::vector<float> bs = random_floats(64 * 5, -1.f, 1.f, 11);
  for (const DType dtype : kHalfTypes) {
    const std::vector<double> a = rounded(as, dtype);
    const std::vector<double> b = rounded(bs, dtype);
    std::vector<double> c(30, 0.0);
    for (int i = 0; i < 6; ++i) {
      for (int j = 0; j < 5; ++j) {
        for (int k = 0; k < 64; ++k) {
          c[static_cast<std::size_t>(i * 5 + j)] +=
              a[static_cast<std::size_t>(i * 64 + k)] * b[static_cast<std::size_t>(k * 5 + j)];
        }
      }
    }
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray x = half_array(as, {6, 64}, ctx, dtype);
      const NDArray y = half_array(bs, {64, 5}, ctx, dtype);
      // Float accumulation of 64 products: far inside one 16-bit unit.
      expect_within_ulps(values_of(dot(x, y)), c, dtype, 1, "dot");
      expect_within_ulps(values_of(matmul(x, y)), c, dtype, 1, "matmul");
      const NDArray head = half_array(random_floats(30, -1.f, 1.f, 12), {6, 5}, ctx, dtype);
      expect_float32_rounded_once([](const std::vector<NDArray>& in) { return dot(in[0], in[1]); },
                                  {x, y}, {true, true}, head, dtype, "dot and its gradients");
      expect_float32_rounded_once(
          [](const std::vector<NDArray>& in) {
            return batch_dot(in[0].reshape({2, 3, 64}), in[1].reshape({2, 64, 5}), false, false)
                .reshape({6, 5});
          },
          {x, half_array(random_floats(2 * 64 * 5, -1.f, 1.f, 13), {128, 5}, ctx, dtype)},
          {true, true}, head, dtype, "batch_dot");
    }
  }
}

TEST(HalfOpsTest, ConvolutionsPoolingBatchNormAndDropoutComputeInFloat32) {
  for (const DType dtype : kHalfTypes) {
    for (const Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray x =
          half_array(random_floats(2 * 3 * 8 * 8, -2.f, 2.f, 14), {2, 3, 8, 8}, ctx, dtype);
      const NDArray w =
          half_array(random_floats(4 * 3 * 3 * 3, -0.5f, 0.5f, 15), {4, 3, 3, 3}, ctx, dtype);
      const NDArray b = half_array(random_floats(4, -1.f, 1.f, 16), {4}, ctx, dtype);
      const NDArray conv_head =
          half_array(random_floats(2 * 4 * 8 * 8, -1.f, 1.f, 17), {2, 4, 8, 8}, ctx, dtype);
      expect_float32_rounded_once(
          [](const std::vector<NDArray>& in) {
            return conv2d(in[0], in[1], in[2], {.padding = {1, 1}});
          },
          {x, w, b}, {true, true, true}, conv_head, dtype, "conv2d");
      const NDArray pool_head =
          half_array(random_floats(2 * 3 * 4 * 4, -1.f, 1.f, 18), {2, 3, 4, 4}, ctx, dtype);
      expect_float32_rounded_once([](const std::vector<NDArray>& in) { return max_pool2d(in[0]); },
                                  {x}, {true}, pool_head, dtype, "max_pool2d");
      expect_float32_rounded_once([](const std::vector<NDArray>& in) { return avg_pool2d(in[0]); },
                                  {x}, {true}, pool_head, dtype, "avg_pool2d");
      // Batch norm: a 16-bit input with float32 per-channel values, whose
      // gradients stay float32.
      const NDArray gamma = array(std::vector<float>{1.5f, -0.5f, 2.f}, {3}, ctx);
      const NDArray beta = array(std::vector<float>{0.f, 0.25f, -1.f}, {3}, ctx);
      NDArray mean16 = zeros({3}, DType::kFloat32, ctx);
      NDArray var16 = ones({3}, DType::kFloat32, ctx);
      NDArray mean32 = zeros({3}, DType::kFloat32, ctx);
      NDArray var32 = ones({3}, DType::kFloat32, ctx);
      expect_float32_rounded_once(
          [&](const std::vector<NDArray>& in) {
            const bool half = is_half(in[0].dtype());
            return batch_norm(in[0], in[1], in[2], half ? mean16 : mean32, half ? var16 : var32);
          },
          {x, gamma, beta}, {true, true, true}, x, dtype, "batch_norm");
      if (is_real_gpu(ctx)) {  // cuDNN's statistics of 16-bit inputs: float32 sums, another order
        const auto as_doubles = [](const std::vector<float>& v) {
          return std::vector<double>(v.begin(), v.end());
        };
        testing::expect_close(mean16.to_vector<float>(), as_doubles(mean32.to_vector<float>()),
                              1e-5, 1e-6, "running mean");
        testing::expect_close(var16.to_vector<float>(), as_doubles(var32.to_vector<float>()), 1e-5,
                              1e-6, "running variance");
      } else {
        EXPECT_EQ(mean16.to_vector<float>(), mean32.to_vector<float>());
        EXPECT_EQ(var16.to_vector<float>(), var32.to_vector<float>());
      }
      // Dropout: the same float32 draws keep the same elements; a kept one
      // is x / (1 - p) rounded once from double.
      const std::vector<float> kept32 =
          dropout(x.astype(DType::kFloat32), 0.3, true, 99).to_vector<float>();
      const NDArray dropped = dropout(x, 0.3, true, 99);
      EXPECT_EQ(dropped.dtype(), dtype);
      const std::vector<float> xv = values_of(x);
      std::vector<double> expected;
      for (std::size_t i = 0; i < xv.size(); ++i) {
        expected.push_back(kept32[i] == 0.f ? 0.0 : static_cast<double>(xv[i]) / 0.7);
      }
      expect_rounded_once(values_of(dropped), expected, dtype, "dropout");
    }
  }
}

}  // namespace
}  // namespace tagflow
