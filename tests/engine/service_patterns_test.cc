// The engine's contract under the patterns a long-running service uses:
// operations pushing follow-up work (from their closure or from the thread
// that completes them), deleting what they write, and a producer that never
// pauses while another thread waits for all. Every engine kind and worker
// count, as in engine_test.cc.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>
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

class ServicePatternsTest : public EngineTest {};

// Conflicting operations run in push order on every engine, even when one is
// pushed from inside the other: the nested one runs after its parent, never
// inside it (Note [Naive engine order]).
TEST_P(ServicePatternsTest, NestedPushOnTheSameVariableRunsAfterItsParent) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      int value = 0;  // guarded by x
      std::atomic<bool> nested_ran{false};
      engine_->push({.name = "parent", .ctx = ctx, .writes = {x}, .fn = [&](const RunContext&) {
                       value = 1;
                       engine_->push({.name = "times ten",
                                      .ctx = ctx,
                                      .reads = {x},
                                      .writes = {x},
                                      .fn = [&](const RunContext&) {
                                        value *= 10;
                                        nested_ran.store(true);
                                      }});
                       value = 2;
                     }});
      // A wait pushed now may come before the nested push: wait until it ran.
      while (!nested_ran.load()) engine_->wait_for_all();
      engine_->wait_to_read(x);
      EXPECT_EQ(value, 20) << ctx;
      engine_->delete_var(x);
    }
  });
}

// A completion callback that pushes follow-up work before calling done(),
// from the thread that completes the operation.
TEST_P(ServicePatternsTest, PushFromTheCompletingThreadBeforeDone) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    VarHandle y = engine_->new_var();
    std::atomic<bool> followed{false};
    std::thread completer;
    engine_->push({.name = "async",
                   .ctx = cpu(0),
                   .writes = {x},
                   .fn = [&](const RunContext&, Completion done) {
                     completer = std::thread([&, done = std::move(done)]() mutable {
                       engine_->push({.name = "follow-up",
                                      .ctx = cpu(1),
                                      .reads = {x},
                                      .writes = {y},
                                      .fn = [&](const RunContext&) { followed.store(true); }});
                       done.done();
                     });
                   }});
    // The follow-up is pushed after this thread's waits may be: wait until it ran.
    while (!followed.load()) engine_->wait_for_all();
    engine_->wait_to_read(y);
    engine_->wait_to_read(x);
    completer.join();
    engine_->delete_var(x);
    engine_->delete_var(y);
  });
}

// delete_var from inside an operation that writes the variable: the deleter
// (for an array, handing its memory back) runs only after the operation.
TEST_P(ServicePatternsTest, DeleteVarInsideAnOperationWaitsForIt) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      std::atomic<bool> deleted{false};
      std::atomic<bool> deleted_while_running{false};
      engine_->push({.name = "writer", .ctx = ctx, .writes = {x}, .fn = [&](const RunContext&) {
                       engine_->delete_var(x, [&] { deleted.store(true); });
                       std::this_thread::sleep_for(5ms);
                       deleted_while_running.store(deleted.load());
                     }});
      // Under a controlled schedule the deletion runs at a wait: wait again.
      for (int i = 0; i < 5000 && !deleted.load(); ++i) {
        engine_->wait_for_all();
        std::this_thread::sleep_for(1ms);
      }
      EXPECT_TRUE(deleted.load()) << ctx;
      EXPECT_FALSE(deleted_while_running.load()) << ctx << ": the deleter ran inside the operation";
    }
  });
}

// "Every operation pushed so far": a producer that never pauses does not
// keep wait_for_all() from returning, and what was pushed before the call
// has completed when it does (Note [Waiting for all]).
TEST_P(ServicePatternsTest, WaitForAllIsBoundedByWhatWasPushedBeforeIt) {
  run_with_timeout(60s, [&] {
    VarHandle slow = engine_->new_var();
    std::atomic<bool> slow_done{false};
    std::atomic<bool> stop{false};
    std::atomic<std::uint64_t> produced{0};
    std::thread producer([&] {
      std::vector<VarHandle> vars;
      for (int i = 0; i < 8; ++i) vars.push_back(engine_->new_var());
      for (std::uint64_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
        // Longer than a push: the backlog never empties while it produces.
        engine_->push({.name = "steady",
                       .ctx = cpu(1),
                       .writes = {vars[i % vars.size()]},
                       .fn = [](const RunContext&) {
                         const auto until = std::chrono::steady_clock::now() + 20us;
                         while (std::chrono::steady_clock::now() < until) {
                         }
                       }});
        produced.fetch_add(1, std::memory_order_relaxed);
      }
      for (VarHandle v : vars) engine_->delete_var(v);
    });
    while (produced.load() < 1000) std::this_thread::yield();
    engine_->push({.name = "slow", .ctx = cpu(0), .writes = {slow}, .fn = [&](const RunContext&) {
                     std::this_thread::sleep_for(20ms);
                     slow_done.store(true);
                   }});
    // Should the wait not return while the producer runs, stop it after 10 s
    // so that the test fails instead of hanging.
    std::atomic<bool> waited{false};
    std::thread stopper([&] {
      for (int i = 0; i < 1000 && !waited.load(); ++i) std::this_thread::sleep_for(10ms);
      stop.store(true);
    });
    const auto start = std::chrono::steady_clock::now();
    engine_->wait_for_all();
    const auto elapsed = std::chrono::steady_clock::now() - start;
    const bool producer_still_running = !stop.load();
    waited.store(true);
    EXPECT_TRUE(slow_done.load()) << "wait_for_all returned before an operation pushed before it";
    EXPECT_TRUE(producer_still_running)
        << "wait_for_all returned only once the producer stopped, after "
        << std::chrono::duration_cast<std::chrono::milliseconds>(elapsed).count() << " ms";
    stopper.join();
    producer.join();
    engine_->wait_for_all();
    engine_->delete_var(slow);
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, ServicePatternsTest, testing::engine_params_with_schedules(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
