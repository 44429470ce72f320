// ReleaseGate (storage/detail/release_gate.h) on its own: a release runs at
// once with no collective in flight and holds new ones off while it runs;
// with collectives in flight it is put off, without waiting, and runs on
// the thread that ends the last of them. Every wait has a watchdog.

#include "storage/detail/release_gate.h"

#include <atomic>
#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "tests/engine/watchdog.h"

namespace tagflow::detail {
namespace {

using namespace std::chrono_literals;
using testing::run_with_timeout;

/// Counts the gate's calls, and what the gate counted in flight then.
class CountingClient final : public ReleaseGate::Client {
 public:
  explicit CountingClient(ReleaseGate& gate) : gate_(gate) {}
  void release_deferred() noexcept override {
    ++calls;
    in_flight_seen = gate_.collectives_in_flight();
    thread = std::this_thread::get_id();
  }
  std::atomic<int> calls{0};
  std::atomic<std::size_t> in_flight_seen{99};
  std::thread::id thread;

 private:
  ReleaseGate& gate_;
};

/// True once `flag` is set, polling for up to `limit`.
bool becomes_true(const std::atomic<bool>& flag, std::chrono::milliseconds limit) {
  for (auto waited = 0ms; waited < limit && !flag; waited += 1ms) std::this_thread::sleep_for(1ms);
  return flag;
}

TEST(ReleaseGateTest, ReleasesAtOnceWhenNoCollectiveIsInFlight) {
  ReleaseGate gate;
  CountingClient client(gate);
  int released = 0;
  EXPECT_EQ(gate.release_or_defer(client, [&] { ++released; }), 0u);
  EXPECT_EQ(released, 1);
  gate.collective_began();
  gate.collective_ended();
  EXPECT_EQ(client.calls.load(), 0) << "nothing was put off";
  EXPECT_EQ(gate.collectives_in_flight(), 0u);
}

TEST(ReleaseGateTest, PutsReleasesOffUntilTheLastCollectiveEndsWithoutWaiting) {
  run_with_timeout(10s, [] {
    ReleaseGate gate;
    CountingClient client(gate);
    gate.collective_began();
    gate.collective_began();
    int released = 0;
    EXPECT_EQ(gate.release_or_defer(client, [&] { ++released; }), 2u);
    EXPECT_EQ(gate.release_or_defer(client, [&] { ++released; }), 2u);
    EXPECT_EQ(released, 0);
    gate.collective_ended();
    EXPECT_EQ(client.calls.load(), 0) << "one collective is still in flight";
    std::thread ender([&] { gate.collective_ended(); });
    const std::thread::id ender_id = ender.get_id();
    ender.join();
    EXPECT_EQ(client.calls.load(), 1) << "asked twice, released once";
    EXPECT_EQ(client.in_flight_seen.load(), 0u);
    EXPECT_EQ(client.thread, ender_id) << "the thread that ends the last collective releases";
    gate.collective_began();
    gate.collective_ended();
    EXPECT_EQ(client.calls.load(), 1) << "nothing more was put off";
  });
}

TEST(ReleaseGateTest, ACollectiveAboutToBeginWaitsForTheReleaseRunning) {
  run_with_timeout(10s, [] {
    ReleaseGate gate;
    CountingClient client(gate);
    std::atomic<bool> releasing{false};
    std::atomic<bool> let_go{false};
    std::atomic<bool> began{false};
    std::thread releaser([&] {
      EXPECT_EQ(gate.release_or_defer(client,
                                      [&] {
                                        releasing = true;
                                        while (!let_go) std::this_thread::sleep_for(1ms);
                                      }),
                0u);
    });
    ASSERT_TRUE(becomes_true(releasing, 5000ms));
    std::thread collective([&] {
      gate.collective_began();
      began = true;
    });
    EXPECT_FALSE(becomes_true(began, 100ms)) << "a collective began during a release";
    EXPECT_EQ(gate.collectives_in_flight(), 0u);
    let_go = true;
    releaser.join();
    collective.join();
    EXPECT_TRUE(began.load());
    EXPECT_EQ(gate.collectives_in_flight(), 1u);
    gate.collective_ended();
  });
}

TEST(ReleaseGateTest, ForgottenClientsAreNotCalled) {
  ReleaseGate gate;
  CountingClient kept(gate);
  CountingClient forgotten(gate);
  gate.collective_began();
  EXPECT_EQ(gate.release_or_defer(kept, [] {}), 1u);
  EXPECT_EQ(gate.release_or_defer(forgotten, [] {}), 1u);
  gate.forget(forgotten);
  gate.collective_ended();
  EXPECT_EQ(kept.calls.load(), 1);
  EXPECT_EQ(forgotten.calls.load(), 0);
}

TEST(ReleaseGateTest, TheProcessGateIsOne) {
  EXPECT_EQ(&ReleaseGate::process(), &ReleaseGate::process());
  EXPECT_EQ(ReleaseGate::process().collectives_in_flight(), 0u);
}

}  // namespace
}  // namespace tagflow::detail
