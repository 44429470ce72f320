// The order among operations that are ready together, where one worker
// makes it defined: priorities first, then push order, including for the
// successors of one operation that do not fit in its inline slots. Part of
// the engine's contract tests (engine_test.cc, the same fixture and engines).

#include <chrono>
#include <future>
#include <mutex>
#include <numeric>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;
using testing::run_with_timeout;

TEST_P(EngineTest, HigherPriorityRunsFirstAmongReadyOperations) {
  if (!threaded() || GetParam().workers != 1) GTEST_SKIP() << "order is defined with one worker";
  run_with_timeout(30s, [&] {
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    // Occupy the only worker while the others become ready.
    engine_->push({.name = "blocker", .ctx = cpu(0), .fn = [released](const RunContext&) {
                     released.wait();
                   }});
    std::mutex mutex;
    std::vector<int> order;
    const int priorities[] = {0, 5, -1, 3, 0, 7, -4};
    std::vector<VarHandle> vars;
    for (int i = 0; i < 7; ++i) {
      vars.push_back(engine_->new_var());
      engine_->push({.name = "ranked",
                     .ctx = cpu(0),
                     .writes = {vars.back()},
                     .priority = priorities[i],
                     .fn = [&, i](const RunContext&) {
                       std::lock_guard lock(mutex);
                       order.push_back(i);
                     }});
    }
    release.set_value();
    engine_->wait_for_all();
    // 7, 5, 3, then the two 0s in push order, then -1, -4.
    EXPECT_EQ(order, (std::vector<int>{5, 1, 3, 0, 4, 2, 6}));
    for (VarHandle v : vars) engine_->delete_var(v);
  });
}

// More readers wait on one writer than it keeps inline: the rest wait on its
// overflow stack, which is newest first, and are still released in push order.
TEST_P(EngineTest, ReadersReleasedByOneWriterRunInPushOrder) {
  if (!threaded() || GetParam().workers != 1) GTEST_SKIP() << "order is defined with one worker";
  run_with_timeout(30s, [&] {
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    VarHandle x = engine_->new_var();
    engine_->push(
        {.name = "writer", .ctx = cpu(0), .writes = {x}, .fn = [released](const RunContext&) {
           released.wait();
         }});
    std::mutex mutex;
    std::vector<int> order;
    constexpr int kReaders = 12;  // more than the five inline successor slots
    for (int i = 0; i < kReaders; ++i) {
      engine_->push(
          {.name = "reader", .ctx = cpu(0), .reads = {x}, .fn = [&, i](const RunContext&) {
             std::lock_guard lock(mutex);
             order.push_back(i);
           }});
    }
    release.set_value();
    engine_->wait_for_all();
    std::vector<int> pushed(kReaders);
    std::iota(pushed.begin(), pushed.end(), 0);
    EXPECT_EQ(order, pushed);
    engine_->delete_var(x);
  });
}

}  // namespace
}  // namespace tagflow
