// CollectiveWatch (nn/dist/detail/collective_watch.h), the NCCL monitor's
// clock, on a fake clock: a collective is timed from when its stream reached
// it, not from when it was enqueued (Note [NCCL failures and timeouts]); a
// host call from its start; finished ones are forgotten. Every expected
// figure is worked out by hand from the times given.

#include "nn/dist/detail/collective_watch.h"

#include <chrono>
#include <limits>

#include <gtest/gtest.h>

#include "engine/error.h"

namespace tagflow::dist {
namespace {

using namespace std::chrono_literals;
using Clock = CollectiveWatch::Clock;
using Seconds = CollectiveWatch::Seconds;

/// The fake clock: a fixed origin, moved by hand.
const Clock::time_point t0 = Clock::time_point{} + 1000h;

TEST(CollectiveWatchTest, AHealthyCollectiveQueuedBehindLongComputeIsNotLate) {
  CollectiveWatch watch(120s);
  const std::uint64_t id = watch.enqueued(t0);
  // The stream still runs 300 s of compute ahead of the collective.
  EXPECT_FALSE(watch.late(t0 + 300s)) << "timed from enqueue, not from when the stream got there";
  EXPECT_FALSE(watch.has_started(id));
  watch.started(id, t0 + 300s);
  EXPECT_TRUE(watch.has_started(id));
  EXPECT_FALSE(watch.late(t0 + 300s + 120s)) << "exactly the timeout is not past it";
  const auto late = watch.late(t0 + 300s + 121s);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->kind, CollectiveWatch::Wait::kCollective);
  EXPECT_EQ(late->id, id);
  EXPECT_DOUBLE_EQ(late->waited.count(), 121.0);
  EXPECT_DOUBLE_EQ(watch.since_enqueued(id, t0 + 421s).count(), 421.0);
}

TEST(CollectiveWatchTest, TheFirstTimeTheStreamWasSeenThereCounts) {
  CollectiveWatch watch(10s);
  const std::uint64_t id = watch.enqueued(t0);
  watch.started(id, t0 + 5s);
  watch.started(id, t0 + 9s);  // seen again at a later poll
  const auto late = watch.late(t0 + 16s);
  ASSERT_TRUE(late);
  EXPECT_DOUBLE_EQ(late->waited.count(), 11.0);
}

TEST(CollectiveWatchTest, FinishedCollectivesAreForgotten) {
  CollectiveWatch watch(10s);
  const std::uint64_t a = watch.enqueued(t0);
  const std::uint64_t b = watch.enqueued(t0 + 1s);
  EXPECT_NE(a, b);
  EXPECT_EQ(watch.collectives(), 2u);
  watch.started(a, t0 + 2s);
  watch.started(b, t0 + 20s);
  watch.finished(a);
  EXPECT_EQ(watch.collectives(), 1u);
  EXPECT_FALSE(watch.has_started(a));
  EXPECT_FALSE(watch.late(t0 + 25s)) << "a finished; b has run 5 s";
  watch.finished(b);
  EXPECT_EQ(watch.collectives(), 0u);
  EXPECT_FALSE(watch.late(t0 + 1000s));
  EXPECT_FALSE(watch.longest(t0 + 1000s));
  watch.started(a, t0 + 30s);  // unknown ids are ignored
  watch.finished(a);
  EXPECT_FALSE(watch.has_started(a));
  EXPECT_DOUBLE_EQ(watch.since_enqueued(a, t0 + 30s).count(), 0.0);
}

TEST(CollectiveWatchTest, HostCallsCountFromTheirStart) {
  CollectiveWatch watch(10s);
  watch.call_began(1, t0);
  EXPECT_FALSE(watch.late(t0 + 10s));
  const auto late = watch.late(t0 + 12s);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->kind, CollectiveWatch::Wait::kCall);
  EXPECT_EQ(late->id, 1u);
  EXPECT_DOUBLE_EQ(late->waited.count(), 12.0);
  watch.call_ended(1);
  EXPECT_FALSE(watch.late(t0 + 12s));
  watch.call_began(0, t0 + 20s);
  watch.call_began(0, t0 + 25s);  // the slot's next call replaces the last
  EXPECT_FALSE(watch.late(t0 + 34s));
  EXPECT_TRUE(watch.late(t0 + 36s));
}

TEST(CollectiveWatchTest, TheLongestStartedWaitIsTheOneReported) {
  CollectiveWatch watch(100s);
  const std::uint64_t queued = watch.enqueued(t0);  // never reached: not counted
  const std::uint64_t early = watch.enqueued(t0 + 1s);
  const std::uint64_t later = watch.enqueued(t0 + 2s);
  watch.started(later, t0 + 3s);
  watch.started(early, t0 + 7s);
  watch.call_began(2, t0 + 5s);
  auto longest = watch.longest(t0 + 50s);
  ASSERT_TRUE(longest);
  EXPECT_EQ(longest->kind, CollectiveWatch::Wait::kCollective);
  EXPECT_EQ(longest->id, later);
  EXPECT_DOUBLE_EQ(longest->waited.count(), 47.0);
  EXPECT_FALSE(watch.late(t0 + 50s));
  watch.finished(later);
  longest = watch.longest(t0 + 50s);
  ASSERT_TRUE(longest);
  EXPECT_EQ(longest->kind, CollectiveWatch::Wait::kCall);
  EXPECT_EQ(longest->id, 2u);
  EXPECT_DOUBLE_EQ(longest->waited.count(), 45.0);
  const auto late = watch.late(t0 + 106s);
  ASSERT_TRUE(late);
  EXPECT_EQ(late->kind, CollectiveWatch::Wait::kCall) << "the call began 2 s before `early`";
  EXPECT_DOUBLE_EQ(late->waited.count(), 101.0);
  watch.clear_collectives();
  EXPECT_EQ(watch.collectives(), 0u);
  EXPECT_TRUE(watch.late(t0 + 106s)) << "calls stay when the collectives are cleared";
  (void)queued;
}

TEST(CollectiveWatchTest, ATimeoutMustBePositiveAndFinite) {
  EXPECT_THROW(CollectiveWatch(Seconds(0)), Error);
  EXPECT_THROW(CollectiveWatch(Seconds(-1)), Error);
  EXPECT_THROW(CollectiveWatch(Seconds(std::numeric_limits<double>::infinity())), Error);
  EXPECT_DOUBLE_EQ(CollectiveWatch(Seconds(0.5)).timeout().count(), 0.5);
}

}  // namespace
}  // namespace tagflow::dist
