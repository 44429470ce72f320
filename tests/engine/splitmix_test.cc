// SplitMix64 (engine/splitmix.h): the published reference words, so that
// every seed keeps naming the same shuffle, workload and replay.

#include "engine/splitmix.h"

#include <gtest/gtest.h>

namespace tagflow {
namespace {

// The generator's first words from seed 0, as in the reference implementation
// (Vigna's splitmix64.c).
static_assert(splitmix64(0) == 0xE220A8397B1DCDAFULL);

TEST(SplitMix64, GivesTheReferenceWords) {
  SplitMix64 rng(0);
  EXPECT_EQ(rng(), 0xE220A8397B1DCDAFULL);
  EXPECT_EQ(rng(), 0x6E789E6AA1B965F4ULL);
  EXPECT_EQ(rng(), 0x06C45D188009454FULL);
  EXPECT_EQ(splitmix64(12345), 0x22118258A9D111A0ULL);
}

TEST(SplitMix64, TheGeneratorStepsItsStateThroughTheMixer) {
  SplitMix64 rng(42);
  EXPECT_EQ(rng(), splitmix64(42));
  EXPECT_EQ(rng(), splitmix64(42 + detail::kSplitMix64Increment));
}

}  // namespace
}  // namespace tagflow
