// Deleting a variable, checked on every engine kind and worker count and on
// every device kind: the work pushed before goes on, and the deleter (how
// an array's memory goes back to its pool) runs once, after the device work
// of every reader and writer has finished.

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/stream.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;
using testing::on_device;
using testing::run_with_timeout;

TEST_P(EngineTest, DeleteVarWaitsForPendingWork) {
  run_with_timeout(30s, [&] {
    std::atomic<int> finished{0};
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      for (int i = 0; i < 5; ++i) {
        engine_->push({.name = "slow", .ctx = ctx, .reads = {x}, .fn = [&](const RunContext& rc) {
                         on_device(rc, [&] {
                           std::this_thread::sleep_for(5ms);
                           ++finished;
                         });
                       }});
      }
      engine_->delete_var(x);  // the handle is gone; the work is not
    }
    engine_->wait_for_all();
    EXPECT_EQ(finished.load(), 15);
  });
}

// The deleter is how memory goes back to its pool: it must run after the
// device work of every reader and writer has finished, not merely launched,
// and exactly once.
TEST_P(EngineTest, DeleterRunsOnceAfterTheDeviceWorkHasFinished) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      for (bool last_is_write : {false, true}) {
        VarHandle x = engine_->new_var();
        std::atomic<int> finished{0};
        std::atomic<int> seen_by_deleter{-1};
        std::atomic<int> deleter_calls{0};
        for (int i = 0; i < 4; ++i) {
          Operation op{.name = "slow", .ctx = ctx, .fn = [&](const RunContext& rc) {
                         on_device(rc, [&] {
                           std::this_thread::sleep_for(3ms);
                           ++finished;
                         });
                       }};
          (last_is_write && i == 3 ? op.writes : op.reads).push_back(x);
          engine_->push(std::move(op));
        }
        engine_->delete_var(x, [&] {
          seen_by_deleter = finished.load();
          ++deleter_calls;
        });
        engine_->wait_for_all();
        // wait_for_all does not order with the deleter: give it a moment.
        for (int spin = 0; spin < 2000 && deleter_calls.load() == 0; ++spin) {
          std::this_thread::sleep_for(1ms);
        }
        EXPECT_EQ(deleter_calls.load(), 1) << ctx;
        EXPECT_EQ(seen_by_deleter.load(), 4) << ctx << (last_is_write ? " write" : " reads");
      }
    }
  });
}

// A deletion may ride on its variable's last writer only while that writer
// is pending on a CPU (Note [Deletion after the last writer]). A GPU writer
// that has launched leaves the variable busy until its device work finishes,
// and its record goes back to the pool, to be taken by later operations, CPU
// ones included: a deletion riding on one of those gave the memory back
// while the device work was still queued. Here the stream is held, the
// writer launches, thousands of CPU operations are pushed (one of them takes
// its record), and they complete: the deleter must still wait for the
// stream.
TEST_P(EngineTest, DeleterWaitsForDeviceWorkAfterTheWritersRecordIsReused) {
  if (!threaded()) {
    GTEST_SKIP() << "the naive engine finishes an operation's device work before push returns";
  }
  run_with_timeout(60s, [&] {
    std::promise<void> open_stream;
    std::promise<void> open_cpu;
    const std::shared_future<void> stream_gate = open_stream.get_future().share();
    const std::shared_future<void> cpu_gate = open_cpu.get_future().share();
    VarHandle held = engine_->new_var();
    VarHandle x = engine_->new_var();
    VarHandle blocker = engine_->new_var();
    std::atomic<bool> launched{false};
    std::atomic<bool> written{false};
    std::atomic<int> deleter_calls{0};
    std::atomic<int> written_when_deleted{-1};
    engine_->push({.name = "hold the stream",
                   .ctx = gpu(0),
                   .writes = {held},
                   .fn = [stream_gate](const RunContext& rc) {
                     on_device(rc, [stream_gate] { stream_gate.wait(); });
                   }});
    engine_->push(
        {.name = "gpu writer", .ctx = gpu(0), .writes = {x}, .fn = [&](const RunContext& rc) {
           on_device(rc, [&] { written = true; });
           launched = true;
         }});
    while (!launched.load()) std::this_thread::sleep_for(1ms);
    std::this_thread::sleep_for(20ms);  // its completion follows its closure
    engine_->push({.name = "hold the cpu",
                   .ctx = cpu(0),
                   .writes = {blocker},
                   .fn = [cpu_gate](const RunContext&) { cpu_gate.wait(); }});
    for (int i = 0; i < 4096; ++i) {
      engine_->push(
          {.name = "cpu reader", .ctx = cpu(0), .reads = {blocker}, .fn = [](const RunContext&) {
           }});
    }
    engine_->delete_var(x, [&] {
      written_when_deleted = written.load() ? 1 : 0;
      ++deleter_calls;
    });
    open_cpu.set_value();
    engine_->push({.name = "after the readers",
                   .ctx = cpu(0),
                   .writes = {blocker},
                   .fn = [](const RunContext&) {}});
    engine_->wait_to_read(blocker);
    std::this_thread::sleep_for(20ms);
    EXPECT_EQ(deleter_calls.load(), 0)
        << "the deleter ran while the writer's device work was queued";
    open_stream.set_value();
    engine_->wait_for_all();
    for (int spin = 0; spin < 2000 && deleter_calls.load() == 0; ++spin) {
      std::this_thread::sleep_for(1ms);
    }
    EXPECT_EQ(deleter_calls.load(), 1);
    EXPECT_EQ(written_when_deleted.load(), 1);
    engine_->delete_var(held);
    engine_->delete_var(blocker);
  });
}

TEST_P(EngineTest, DeleterOfAnIdleVariableRunsAndAThrowingOneIsContained) {
  run_with_timeout(30s, [&] {
    std::atomic<int> calls{0};
    engine_->delete_var(engine_->new_var(), [&] { ++calls; });
    engine_->delete_var(engine_->new_var(), [&] {
      ++calls;
      throw std::runtime_error("deleter failure");
    });
    for (int spin = 0; spin < 2000 && calls.load() < 2; ++spin) std::this_thread::sleep_for(1ms);
    EXPECT_EQ(calls.load(), 2);
    VarHandle y = engine_->new_var();  // the engine is still usable
    int value = 0;
    engine_->push({.name = "write", .ctx = cpu(0), .writes = {y}, .fn = [&](const RunContext&) {
                     value = 7;
                   }});
    engine_->wait_to_read(y);
    EXPECT_EQ(value, 7);
    engine_->delete_var(y);
  });
}

}  // namespace
}  // namespace tagflow
