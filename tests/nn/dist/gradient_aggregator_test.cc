// GradientAggregator and PriorityScope: sums over 2 to 4 devices (CPU
// devices, simulated GPUs, mixed) against a plain double sum, every copy
// bit-identical afterwards, whichever device is the root; bad lists refused
// before anything changes.

#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "nn/dist/gradient_aggregator.h"
#include "nn/dist/nccl_aggregator.h"
#include "ops/priority.h"
#include "tagflow/dist.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;
using testing::random_floats;

std::vector<std::vector<Context>> device_sets() {
  return {{cpu(0), cpu(1)}, {cpu(2), cpu(0), cpu(1)},         {cpu(0), cpu(1), cpu(2), cpu(3)},
          {gpu(0), gpu(1)}, {gpu(0), gpu(1), gpu(2), gpu(3)}, {gpu(1), cpu(0), gpu(0), cpu(1)}};
}

std::string text(const std::vector<Context>& devices) {
  std::string s;
  for (Context c : devices) s += c.str() + " ";
  return s;
}

TEST(GradientAggregatorTest, EveryCopyHoldsTheSumWhicheverDeviceIsTheRoot) {
  const Shape shape{7, 13};
  const auto n = static_cast<std::size_t>(shape.size());
  for (const std::vector<Context>& devices : device_sets()) {
    for (int key = 0; key <= static_cast<int>(devices.size()); ++key) {
      std::vector<NDArray> copies;
      std::vector<double> expected(n, 0.0);
      for (std::size_t d = 0; d < devices.size(); ++d) {
        const std::vector<float> values =
            random_floats(n, -2.f, 2.f, static_cast<std::uint32_t>(100 * key + d));
        for (std::size_t i = 0; i < n; ++i) expected[i] += values[i];
        copies.push_back(array(values, shape, devices[d]));
      }
      dist::DeviceAggregator aggregator;
      aggregator.allreduce(copies, key);
      const std::string what = text(devices) + "key " + std::to_string(key);
      const std::vector<float> first = copies[0].to_vector<float>();
      testing::expect_close(first, expected, 1e-6, 1e-6, what);
      for (std::size_t d = 0; d < copies.size(); ++d) {
        EXPECT_EQ(copies[d].context(), devices[d]) << what;
        EXPECT_EQ(copies[d].to_vector<float>(), first) << what << ": copy " << d;
      }
    }
  }
}

TEST(GradientAggregatorTest, IntegerSumsAreExactAndRepeatedAggregationsCompound) {
  const std::vector<Context> devices = {cpu(0), gpu(0), cpu(1), gpu(1)};
  std::vector<NDArray> copies;
  std::vector<std::int32_t> expected(6, 0);
  for (std::size_t d = 0; d < devices.size(); ++d) {
    std::vector<float> values(6);
    for (std::size_t i = 0; i < 6; ++i) {
      values[i] = static_cast<float>((d + 1) * 10 + i);
      expected[i] += static_cast<std::int32_t>(values[i]);
    }
    copies.push_back(array(values, {2, 3}, devices[d]).astype(DType::kInt32));
  }
  dist::DeviceAggregator aggregator;
  aggregator.allreduce(copies, 3);
  for (const NDArray& c : copies) EXPECT_EQ(c.to_vector<std::int32_t>(), expected);
  // Aggregating the sums again gives 4 times the sum on every device: no
  // copy is read before the first aggregation has written it.
  aggregator.allreduce(copies, 1);
  for (std::int32_t& e : expected) e *= 4;
  for (const NDArray& c : copies) EXPECT_EQ(c.to_vector<std::int32_t>(), expected);
}

TEST(GradientAggregatorTest, ManyParametersInFlightAtOnce) {
  // Forty parameters of different sizes pushed back to back on four devices,
  // as a step does, with no wait in between; then every one checked.
  const std::vector<Context> devices = {cpu(0), cpu(1), gpu(0), gpu(1)};
  dist::DeviceAggregator aggregator;
  std::vector<std::vector<NDArray>> params;
  std::vector<std::vector<double>> expected;
  for (int key = 0; key < 40; ++key) {
    const auto n = static_cast<std::size_t>(1 + (key * 37) % 300);
    std::vector<NDArray> copies;
    std::vector<double> sum(n, 0.0);
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const std::vector<float> v =
          random_floats(n, -1.f, 1.f, static_cast<std::uint32_t>(key * 10 + d));
      for (std::size_t i = 0; i < n; ++i) sum[i] += v[i];
      copies.push_back(array(v, {static_cast<std::int64_t>(n)}, devices[d]));
    }
    aggregator.allreduce(copies, key);
    params.push_back(copies);
    expected.push_back(sum);
  }
  for (std::size_t k = 0; k < params.size(); ++k) {
    for (const NDArray& c : params[k]) {
      testing::expect_close(c.to_vector<float>(), expected[k], 1e-6, 1e-6,
                            "parameter " + std::to_string(k) + " on " + c.context().str());
    }
  }
}

TEST(GradientAggregatorTest, OneCopyIsLeftAsItIs) {
  NDArray only = array({1, 2, 3}, gpu(1));
  dist::DeviceAggregator aggregator;
  aggregator.allreduce(std::vector<NDArray>{only}, 5);
  EXPECT_EQ(only.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

TEST(GradientAggregatorTest, BadListsAreRefusedBeforeAnythingChanges) {
  dist::DeviceAggregator aggregator;
  NDArray a = array({1, 2, 3}, cpu(0));
  NDArray b = array({4, 5, 6}, cpu(1));
  NDArray same_device = array({7, 8, 9}, cpu(0));
  NDArray other_shape = array({1, 2}, gpu(0));
  NDArray other_dtype = array({1, 2, 3}, gpu(0)).astype(DType::kInt32);
  auto refuse = [&](std::vector<NDArray> copies, int key, const std::string& expected) {
    const std::string message = error_of([&] { aggregator.allreduce(copies, key); });
    EXPECT_NE(message.find(expected), std::string::npos) << message;
  };
  refuse({}, 0, "expected at least one array, got none");
  refuse({a, NDArray()}, 0, "array 1 of 2 is undefined");
  refuse({a, b, same_device}, 0, "arrays 0 and 2 both on cpu(0)");
  refuse({a, other_shape}, 0, "got (3) float32 at 0 and (2) float32 at 1");
  refuse({a, other_dtype}, 0, "(3) int32 at 1");
  refuse({a, b}, -1, "expected a key >= 0, got -1");
  EXPECT_EQ(a.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(same_device.to_vector<float>(), (std::vector<float>{7, 8, 9}));
  // The engine is still usable.
  aggregator.allreduce(std::vector<NDArray>{a, b}, 0);
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{5, 7, 9}));
}

TEST(NcclAggregatorTest, RefusesDevicesThatAreNotRealGpus) {
  // No real GPU here: NCCL is compiled in (CUDA builds) but cannot run; the
  // refusal must be a typed error naming the device.
  auto error_text = [](const std::vector<Context>& devices) -> std::string {
    try {
      dist::NcclAggregator nccl(devices);
    } catch (const DeviceError& e) {
      return e.what();
    }
    return "(no DeviceError)";
  };
  EXPECT_NE(error_text({gpu(0), gpu(1)}).find("NCCL needs real GPUs, got gpu(0) (simulated)"),
            std::string::npos)
      << error_text({gpu(0), gpu(1)});
  EXPECT_NE(error_text({cpu(0)}).find("NCCL needs real GPUs, got cpu(0)"), std::string::npos);
  EXPECT_NE(error_text({}).find("expected at least one GPU"), std::string::npos);
  // The local aggregator keeps simulated GPUs on engine copies.
  std::vector<NDArray> copies = {array({1, 2}, gpu(0)), array({3, 4}, gpu(1))};
  dist::make_local_aggregator()->allreduce(copies, 0);
  EXPECT_EQ(copies[1].to_vector<float>(), (std::vector<float>{4, 6}));
}

TEST(NcclAggregatorTest, RefusesBadTimeoutsAndANullCommunicator) {
  // Checked before the devices and before any communication, in every build.
  const std::string zero = error_of([] { dist::NcclAggregator nccl({gpu(0)}, 0.0); });
  EXPECT_NE(zero.find("expected a timeout > 0 seconds, got 0"), std::string::npos) << zero;
  const std::string negative = error_of([] { dist::NcclAggregator nccl({cpu(0)}, -1.0); });
  EXPECT_NE(negative.find("got -1"), std::string::npos) << negative;
  const std::string null = error_of([] { dist::NcclAggregator nccl({gpu(0)}, nullptr, 10.0); });
  EXPECT_NE(null.find("expected a communicator between processes, got null"), std::string::npos)
      << null;
}

TEST(GradientAggregatorTest, BroadcastWithinOneProcessLeavesTheCopiesAndRefusesBadLists) {
  // Within one process the copies already agree (initialize() and load()
  // give every device the same values): broadcast() only checks its input.
  std::vector<NDArray> copies = {array({1, 2}, gpu(0)), array({3, 4}, cpu(1))};
  const std::unique_ptr<dist::GradientAggregator> aggregator = dist::make_local_aggregator();
  aggregator->broadcast(copies, 0);
  EXPECT_EQ(copies[0].to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(copies[1].to_vector<float>(), (std::vector<float>{3, 4}));
  const std::string bad_key = error_of([&] { aggregator->broadcast(copies, -2); });
  EXPECT_NE(bad_key.find("expected a key >= 0, got -2"), std::string::npos) << bad_key;
  const std::string undefined = error_of([&] {
    aggregator->broadcast(std::vector<NDArray>{copies[0], NDArray()}, 0);
  });
  EXPECT_NE(undefined.find("array 1 of 2 is undefined"), std::string::npos) << undefined;
}

TEST(PriorityScopeTest, ScopesNestAndRestore) {
  EXPECT_EQ(current_priority(), 0);
  {
    const PriorityScope outer(kCommunicationPriority);
    EXPECT_EQ(current_priority(), kCommunicationPriority);
    {
      const PriorityScope inner(-3);
      EXPECT_EQ(current_priority(), -3);
    }
    EXPECT_EQ(current_priority(), kCommunicationPriority);
    int other_thread = -1;
    std::thread([&] { other_thread = current_priority(); }).join();
    EXPECT_EQ(other_thread, 0);  // each thread has its own
  }
  EXPECT_EQ(current_priority(), 0);
}

}  // namespace
}  // namespace tagflow
