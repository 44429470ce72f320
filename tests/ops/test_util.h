#pragma once
// Helpers shared by the operator tests: the devices every test loops over,
// random host data, and comparison against double-precision references.

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

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

/// The message of the tagflow::Error `f` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace tagflow::testing
