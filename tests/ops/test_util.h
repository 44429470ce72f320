#pragma once
// Helpers shared by the operator tests (and the nn tests): the devices every
// test loops over, random host data, comparison against double-precision
// references, error messages, and results independent of the thread count.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include "tagflow/tagflow.h"

namespace tagflow::testing {

/// Two CPU devices and the two simulated GPUs of the test main.
inline std::vector<Context> all_devices() { return {cpu(0), cpu(1), gpu(0), gpu(1)}; }

/// `n` floats uniform in [low, high) from a fixed seed.
inline std::vector<float> random_floats(std::size_t n, float low, float high,
                                        std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(low, high);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

/// `n` values of sin(1.3 i + phase): smooth, in [-1, 1], none repeated.
inline std::vector<float> wave(std::size_t n, float phase) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 1.3f + phase);
  return v;
}

/// `n` integers uniform in [low, high] from a fixed seed.
template <typename T>
std::vector<T> random_ints(std::size_t n, std::int64_t low, std::int64_t high,
                           std::uint32_t seed = 1) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> dist(low, high);
  std::vector<T> v(n);
  for (T& x : v) x = static_cast<T>(dist(rng));
  return v;
}

/// Every element of `actual` within `rel * |expected| + abs` of `expected`
/// (NaN matches NaN, infinities match exactly).
inline void expect_close(const std::vector<float>& actual, const std::vector<double>& expected,
                         double rel, double abs, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double a = actual[i];
    const double e = expected[i];
    const bool ok = (std::isnan(e) && std::isnan(a)) || (std::isinf(e) && a == e) ||
                    std::abs(a - e) <= rel * std::abs(e) + abs;
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << a << ", expected " << e;
    }
  }
}

/// Checks a computed gradient against central differences in double: for
/// up to `samples` evenly spaced elements j of `x` (the values `loss`
/// reads), (loss(x_j + h) - loss(x_j - h)) / 2h with h = 1e-6 max(1, |x_j|)
/// must be within `tolerance` * max(1, |difference|) of `grad[j]`.
inline void expect_gradient_matches_finite_differences(
    std::vector<double>& x, const std::vector<float>& grad, const std::function<double()>& loss,
    const std::string& what, std::size_t samples = 40, double tolerance = 2e-3) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  const std::size_t stride = std::max<std::size_t>(1, grad.size() / samples);
  for (std::size_t j = 0; j < grad.size(); j += stride) {
    const double saved = x[j];
    const double step = 1e-6 * std::max(1.0, std::abs(saved));
    x[j] = saved + step;
    const double up = loss();
    x[j] = saved - step;
    const double down = loss();
    x[j] = saved;
    const double numeric = (up - down) / (2 * step);
    EXPECT_NEAR(grad[j], numeric, tolerance * std::max(1.0, std::abs(numeric)))
        << what << ": element " << j;
  }
}

/// For several inputs at once: x[i] holds the values of input i that `loss`
/// reads, and inputs[i] the array whose gradient the backward pass gave.
inline void expect_gradients_match_finite_differences(std::vector<std::vector<double>>& x,
                                                      const std::vector<NDArray>& inputs,
                                                      const std::function<double()>& loss,
                                                      const std::string& what = "") {
  ASSERT_EQ(x.size(), inputs.size()) << what;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    expect_gradient_matches_finite_differences(
        x[i], inputs[i].grad().to_vector<float>(), loss,
        (what.empty() ? "" : what + ": ") + "input " + std::to_string(i));
  }
}

/// The sum of y[k] * r[k]: the scalar a gradient check differentiates, from a
/// reference's output `y` and the random weights `r` the backward pass used.
inline double weighted_sum(const std::vector<double>& y, const std::vector<float>& r) {
  double total = 0;
  for (std::size_t k = 0; k < y.size(); ++k) total += y[k] * r[k];
  return total;
}

/// The message of the error of type `E` (tagflow::Error unless named) that
/// `f` throws; "(no error)" when it throws none, and the message of any
/// other exception, marked, when it throws that instead.
template <typename E = Error>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(not the expected error type) ") + e.what();
  }
  return "(no error)";
}

/// Expects `call` to throw a tagflow::Error whose message is exactly `message`.
inline void expect_error(const std::function<void()>& call, const std::string& message) {
  try {
    call();
    ADD_FAILURE() << "expected an error: " << message;
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), message);
  }
}

/// Expects `run` to give the same bits with oneTBB limited to one thread as
/// with all of them: the CPU kernels' results must not depend on how the
/// work was split.
inline void expect_same_bits_on_one_and_all_threads(
    const std::function<std::vector<float>()>& run) {
  std::vector<float> one_thread;
  {
    tbb::global_control limit(tbb::global_control::max_allowed_parallelism, 1);
    one_thread = run();
  }
  const std::vector<float> all_threads = run();
  ASSERT_EQ(one_thread.size(), all_threads.size());
  EXPECT_EQ(std::memcmp(one_thread.data(), all_threads.data(), one_thread.size() * sizeof(float)),
            0);
}

}  // namespace tagflow::testing
