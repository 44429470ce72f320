// `tagflow selftest` (tools/selftest.h): every check passes on CPU devices
// and simulated GPUs; a planted wrong kernel (a custom operator one element
// of whose output is off by 1e-3, and one whose gradient is off) is reported
// as a failure with the element, and so is an exception; the report names
// every operator on every device.

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tools/selftest.h"

namespace tagflow::tools {
namespace {

const SelftestResult* find(const std::vector<SelftestResult>& results, const std::string& check,
                           const std::string& device) {
  for (const SelftestResult& r : results) {
    if (r.check == check && r.device == device) return &r;
  }
  return nullptr;
}

TEST(SelftestTest, EveryCheckPassesOnCpuDevicesAndSimulatedGpus) {
  const std::vector<SelftestResult> results =
      run_selftest_checks({.devices = {cpu(0), gpu(0)}, .trials = 2});
  std::set<std::string> devices;
  int operators = 0;
  for (const SelftestResult& r : results) {
    EXPECT_TRUE(r.passed || r.skipped) << r.check << " on " << r.device << ": " << r.detail;
    if (r.check.rfind("operator ", 0) == 0) {
      ++operators;
      devices.insert(r.device);
      EXPECT_EQ(r.cases, 2) << r.check;
      EXPECT_LE(r.worst, 1.0) << r.check;
    }
  }
  EXPECT_EQ(devices, (std::set<std::string>{"cpu(0)", "gpu(0)"}));
  EXPECT_EQ(operators, 2 * static_cast<int>(operator_cases().size()));
  // Copies in every direction among cpu(0), cpu(1), cpu_pinned(0) and the GPUs.
  const std::size_t copy_devices = 3 + static_cast<std::size_t>(num_gpus());
  EXPECT_EQ(std::count_if(results.begin(), results.end(),
                          [](const SelftestResult& r) { return r.check == "copy"; }),
            static_cast<long>(copy_devices * (copy_devices - 1)));
  ASSERT_NE(find(results, "copy", "gpu(1) -> cpu_pinned(0)"), nullptr);
  ASSERT_NE(find(results, "memory back to where it started", "gpu(0)"), nullptr);
  const SelftestResult* sums =
      find(results, "sums across GPUs (engine copies; NCCL on real GPUs)", "1 GPUs");
  ASSERT_NE(sums, nullptr);
  EXPECT_TRUE(sums->skipped) << "one GPU among the devices checked";
  EXPECT_EQ(sums->detail, "needs two GPUs");
  const std::vector<SelftestResult> two =
      run_selftest_checks({.devices = {gpu(0), gpu(1)}, .trials = 1});
  const SelftestResult* summed =
      find(two, "sums across GPUs (engine copies; NCCL on real GPUs)", "2 GPUs");
  ASSERT_NE(summed, nullptr);
  EXPECT_TRUE(summed->passed && !summed->skipped) << summed->detail;
  EXPECT_EQ(summed->cases, 2 * 10007);
}

/// exp, as a custom operator whose kernel gets element 3 wrong by `error`
/// (and whose gradient is `gradient_scale` times the right one).
OperatorCase planted(const std::string& name, float error, float gradient_scale) {
  const CustomOp op({
      .name = name,
      .host_fallback = true,
      .cpu =
          [error](const KernelArgs& k) {
            for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) {
              k.outputs[0].data<float>()[i] =
                  std::exp(k.inputs[0].data<float>()[i]) + (i == 3 ? error : 0.f);
            }
          },
      .backward =
          [gradient_scale](const GradientArgs& g) {
            return std::vector<NDArray>{g.output_grads[0] * g.outputs[0] * gradient_scale};
          },
  });
  return {
      .name = name,
      .shapes =
          [](std::mt19937_64&) {
            return std::vector<Shape>{Shape{5, 2}};
          },
      .run = [op](const std::vector<NDArray>& in) { return op(in[0]); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            Values y;
            for (double v : x[0]) y.push_back(std::exp(v));
            return y;
          },
  };
}

TEST(SelftestTest, APlantedWrongKernelFails) {
  SelftestOptions options{.devices = {cpu(1), gpu(1)}, .trials = 1};
  options.extra_operators = {planted("right exp", 0.f, 1.f), planted("wrong exp", 1e-3f, 1.f),
                             planted("wrong exp gradient", 0.f, 1.01f),
                             planted("NaN exp gradient", 0.f, std::nanf(""))};
  const std::vector<SelftestResult> results = run_selftest_checks(options);
  for (const char* device : {"cpu(1)", "gpu(1)"}) {
    const SelftestResult* right = find(results, "operator right exp", device);
    const SelftestResult* wrong = find(results, "operator wrong exp", device);
    const SelftestResult* wrong_gradient = find(results, "operator wrong exp gradient", device);
    ASSERT_TRUE(right && wrong && wrong_gradient) << device;
    EXPECT_TRUE(right->passed) << right->detail;
    EXPECT_FALSE(wrong->passed);
    EXPECT_GT(wrong->worst, 1.0);
    EXPECT_NE(wrong->detail.find("element 3 is"), std::string::npos) << wrong->detail;
    EXPECT_FALSE(wrong_gradient->passed);
    EXPECT_NE(wrong_gradient->detail.find("gradient of input 0"), std::string::npos)
        << wrong_gradient->detail;
    const SelftestResult* nan_gradient = find(results, "operator NaN exp gradient", device);
    ASSERT_NE(nan_gradient, nullptr);
    EXPECT_FALSE(nan_gradient->passed) << "a NaN gradient is a mismatch";
  }
  // The built-in operators still pass, and the exit status says one failed.
  EXPECT_TRUE(find(results, "operator exp", "gpu(1)")->passed);
}

TEST(SelftestTest, AnOperatorThatThrowsIsAFailureWithItsMessage) {
  SelftestOptions options{.devices = {cpu(0)}, .trials = 1};
  options.extra_operators.push_back({
      .name = "throwing",
      .shapes = [](std::mt19937_64&) { return std::vector<Shape>{Shape{2}}; },
      .run = [](const std::vector<NDArray>& in) { return in[0] + zeros({3}); },
      .reference = [](const std::vector<Values>& x, const std::vector<Shape>&) { return x[0]; },
  });
  const std::vector<SelftestResult> results = run_selftest_checks(options);
  const SelftestResult* throwing = find(results, "operator throwing", "cpu(0)");
  ASSERT_NE(throwing, nullptr);
  EXPECT_FALSE(throwing->passed);
  EXPECT_NE(throwing->detail.find("broadcast_add"), std::string::npos) << throwing->detail;
}

}  // namespace
}  // namespace tagflow::tools
