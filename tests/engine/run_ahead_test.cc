// The threaded engine's bound on how far a client thread runs ahead of the
// devices (Note [Bounded run-ahead] in engine/detail/threaded_engine.h): the
// backlog a client leaves stays near `max_pending` operations when each
// depends on one earlier operation, and near `max_pending` divided by the
// edges per operation when each depends on several recent ones.

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::run_with_timeout;

constexpr int kMaxPending = 1024;
constexpr int kVars = 16;
constexpr int kPushes = 4000;
/// Pushes not sampled at first, while the bound still has its initial value.
constexpr int kSettle = 256;
/// Pushes between the client's looks at its backlog.
constexpr std::uint64_t kCheckEvery = 64;

/// Pushes kPushes slow operations on one worker and returns the largest
/// backlog seen after each push; operation i writes variable i mod kVars
/// and, with `reads_recent`, reads the three variables written just before.
std::uint64_t largest_backlog(bool reads_recent) {
  EngineConfig config = EngineConfig::defaults();
  config.kind = EngineKind::kThreaded;
  config.cpu_workers = 1;
  config.max_pending = kMaxPending;
  auto engine = make_engine(config);
  std::vector<VarHandle> vars(kVars);
  for (VarHandle& v : vars) v = engine->new_var();
  std::uint64_t largest = 0;
  for (int i = 0; i < kPushes; ++i) {
    VarList reads;
    if (reads_recent) {
      for (int back = 1; back <= 3; ++back) reads.push_back(vars[(i + kVars - back) % kVars]);
    }
    engine->push({.name = "slow",
                  .ctx = cpu(0),
                  .reads = std::move(reads),
                  .writes = {vars[i % kVars]},
                  .fn = [](const RunContext&) { std::this_thread::sleep_for(20us); }});
    if (i >= kSettle) largest = std::max(largest, engine->operation_counts().pending());
  }
  engine->wait_for_all();
  for (VarHandle v : vars) engine->delete_var(v);
  return largest;
}

// One edge per operation (the previous writer of its variable): the bound is
// max_pending, reached, and overrun by at most the pushes between two looks.
TEST(RunAheadTest, OneEdgePerOperationKeepsTheBacklogNearTheBound) {
  run_with_timeout(60s, [] {
    const std::uint64_t largest = largest_backlog(false);
    EXPECT_GE(largest, kMaxPending * 3 / 4) << "the client paused far below its bound";
    // A pause also ends when nothing completes for a while (a stalled
    // backlog): allow a few such escapes on a loaded machine.
    EXPECT_LE(largest, kMaxPending + 4 * kCheckEvery);
  });
}

// Three reads of the variables written just before and a write after their
// readers: about six edges per operation, so the bound is about a sixth.
TEST(RunAheadTest, ManyEdgesPerOperationShrinkTheBound) {
  run_with_timeout(60s, [] {
    const std::uint64_t largest = largest_backlog(true);
    EXPECT_LE(largest, kMaxPending / 4 + 4 * kCheckEvery)
        << "the bound was not divided by the edges per operation";
    EXPECT_GE(largest, kMaxPending / 8) << "the client paused far below its bound";
  });
}

}  // namespace
}  // namespace tagflow
