// RingAggregator (Note [Collectives on simulated GPUs]): sums over 2 to 4
// simulated GPUs against a plain double sum, every copy bit-identical; many
// collectives pushed from one thread, interleaved over overlapping sets of
// GPUs, all complete (each GPU issues them in one order); copies off a
// simulated GPU refused before anything is pushed.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/dist/ring_aggregator.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::random_floats;

TEST(RingAggregatorTest, EveryCopyHoldsTheSum) {
  const Shape shape{5, 11};
  const auto n = static_cast<std::size_t>(shape.size());
  dist::RingAggregator ring;
  for (const std::vector<Context>& devices : std::vector<std::vector<Context>>{
           {gpu(0), gpu(1)}, {gpu(2), gpu(0), gpu(3)}, {gpu(3), gpu(2), gpu(1), gpu(0)}}) {
    std::vector<NDArray> copies;
    std::vector<double> expected(n, 0.0);
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const std::vector<float> values =
          random_floats(n, -2.f, 2.f, static_cast<std::uint32_t>(7 + d));
      for (std::size_t i = 0; i < n; ++i) expected[i] += values[i];
      copies.push_back(array(values, shape, devices[d]));
    }
    ring.allreduce(copies, 0);
    const std::vector<float> first = copies[0].to_vector<float>();
    testing::expect_close(first, expected, 1e-6, 1e-6, "ring");
    for (const NDArray& copy : copies) EXPECT_EQ(copy.to_vector<float>(), first);
  }
}

TEST(RingAggregatorTest, InterleavedCollectivesOnOverlappingGpusAllComplete) {
  // 60 collectives over three overlapping cliques, each gradient written by
  // its own kernel first: would deadlock if two GPUs issued them in
  // different orders.
  dist::RingAggregator ring;
  const std::vector<std::vector<Context>> cliques = {
      {gpu(0), gpu(1), gpu(2), gpu(3)}, {gpu(1), gpu(3)}, {gpu(2), gpu(0), gpu(1)}};
  std::vector<std::vector<NDArray>> lists;
  std::vector<double> expected;
  for (int k = 0; k < 60; ++k) {
    const auto& devices = cliques[static_cast<std::size_t>(k) % cliques.size()];
    std::vector<NDArray> copies;
    double sum = 0;
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const double value = k + 0.25 * static_cast<double>(d);
      copies.push_back(full({64}, value, DType::kFloat32, devices[d]) * 1.0);
      sum += value;
    }
    ring.allreduce(copies, k);
    lists.push_back(copies);
    expected.push_back(sum);
  }
  for (std::size_t k = 0; k < lists.size(); ++k) {
    for (const NDArray& copy : lists[k]) {
      EXPECT_EQ(copy.to_vector<float>(), std::vector<float>(64, static_cast<float>(expected[k])))
          << "collective " << k;
    }
  }
}

TEST(RingAggregatorTest, ABroadcastMakesEveryCopyTheFirst) {
  dist::RingAggregator ring;
  std::vector<NDArray> copies;
  for (int d = 0; d < 3; ++d) copies.push_back(full({17}, 1.5 + d, DType::kFloat32, gpu(d)));
  ring.broadcast(copies, 4);
  for (const NDArray& copy : copies)
    EXPECT_EQ(copy.to_vector<float>(), std::vector<float>(17, 1.5f));
}

TEST(RingAggregatorTest, CopiesOffSimulatedGpusAreRefused) {
  dist::RingAggregator ring;
  std::vector<NDArray> copies = {ones({3}, DType::kFloat32, gpu(0)),
                                 ones({3}, DType::kFloat32, cpu(0))};
  try {
    ring.allreduce(copies, 0);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("array 1 on cpu(0)"), std::string::npos) << e.what();
  }
  EXPECT_EQ(copies[0].to_vector<float>(), std::vector<float>(3, 1.f));  // nothing pushed
}

}  // namespace
}  // namespace tagflow
