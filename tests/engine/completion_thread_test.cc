// What a thread may do while it holds an asynchronous operation's
// Completion, and what a wait may run, on every engine and under controlled
// schedules: wait on variables the operation does not write, wait for work it
// pushed itself or that the running thread pushed, wait for another
// asynchronous operation, push more than a schedule keeps in view, push from
// host work on a GPU stream; a wait on a deleted variable, and a
// wait_for_all whose operations push more. Each of these returns on the
// threaded engine; the naive engine lends itself out while it awaits a
// completion (Note [Lending the naive engine] in
// engine/detail/naive_engine.h). Random work: completion_random_test.cc.

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <thread>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/operation_handle.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;
using testing::run_with_timeout;

class CompletionThreadTest : public EngineTest {
 protected:
  /// Waits (for all, as a controlled schedule needs, which runs pushes only
  /// at waits) until `flag` is set, for at most about five seconds.
  void wait_until(const std::atomic<bool>& flag) {
    for (int i = 0; i < 5000 && !flag.load(); ++i) {
      engine_->wait_for_all();
      if (!flag.load()) std::this_thread::sleep_for(1ms);
    }
  }

  /// Pushes an asynchronous operation writing `var` whose Completion goes
  /// to a new thread, which runs `before_done` and then completes it.
  template <typename F>
  std::thread push_completed_elsewhere(VarHandle var, F before_done) {
    std::thread completer;
    engine_->push({.name = "async",
                   .ctx = cpu(0),
                   .writes = {var},
                   .fn = [&, before_done](const RunContext&, Completion done) mutable {
                     completer = std::thread([before_done, done = std::move(done)]() mutable {
                       before_done();
                       done.done();
                     });
                   }});
    engine_->wait_for_all();  // under a schedule: runs the operation, and
                              // with it the completer
    return completer;
  }
};

// A wait_for_all whose operations push more (a child, a deletion, a
// callback's follow-up) returns once what was pushed before it has run;
// the follow-ups run at later waits.
TEST_P(CompletionThreadTest, WaitForAllReturnsWhenWhatItRunsPushesMore) {
  run_with_timeout(60s, [&] {
    VarHandle x = engine_->new_var();
    VarHandle doomed = engine_->new_var();
    std::atomic<bool> child_ran{false};
    std::atomic<bool> deleted{false};
    std::atomic<bool> follow_up_ran{false};
    engine_->push({.name = "parent", .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                     engine_->push({.name = "child",
                                    .ctx = cpu(1),
                                    .writes = {x},
                                    .fn = [&](const RunContext&) { child_ran.store(true); }});
                   }});
    engine_->push(
        {.name = "deleting", .ctx = cpu(0), .writes = {doomed}, .fn = [&](const RunContext&) {
           engine_->delete_var(doomed, [&] { deleted.store(true); });
         }});
    OperationHandle tracked = engine_->push_tracked(
        {.name = "tracked", .ctx = cpu(1), .reads = {x}, .fn = [](const RunContext&) {}});
    tracked.on_done([&](std::exception_ptr) {
      engine_->push({.name = "follow-up", .ctx = cpu(0), .fn = [&](const RunContext&) {
                       follow_up_ran.store(true);
                     }});
    });
    engine_->wait_for_all();  // hung under controlled schedules
    wait_until(child_ran);
    wait_until(deleted);
    wait_until(follow_up_ran);
    EXPECT_TRUE(child_ran.load());
    EXPECT_TRUE(deleted.load());
    EXPECT_TRUE(follow_up_ran.load());
    engine_->delete_var(x);
  });
}

// The completing thread waits on variables the operation does not touch
// before it calls done(): they are idle, so the waits return, with the
// value and the error the operations before them left.
TEST_P(CompletionThreadTest, CompletingThreadWaitsOnIdleVariablesBeforeDone) {
  run_with_timeout(60s, [&] {
    VarHandle busy = engine_->new_var();
    VarHandle idle = engine_->new_var();
    VarHandle failed = engine_->new_var();
    int value = 0;  // guarded by idle
    engine_->push({.name = "set", .ctx = cpu(1), .writes = {idle}, .fn = [&](const RunContext&) {
                     value = 7;
                   }});
    engine_->push({.name = "fail", .ctx = cpu(1), .writes = {failed}, .fn = [](const RunContext&) {
                     throw std::runtime_error("planted");
                   }});
    EXPECT_THROW(engine_->wait_for_all(), std::runtime_error);
    std::atomic<int> seen{-1};
    std::atomic<bool> error_seen{false};
    std::thread completer = push_completed_elsewhere(busy, [&] {
      engine_->wait_to_read(idle);
      engine_->wait_to_write(idle);
      seen.store(value);
      try {
        engine_->wait_to_read(failed);
      } catch (const std::runtime_error&) {
        error_seen.store(true);
      }
    });
    completer.join();
    engine_->wait_to_read(busy);
    EXPECT_EQ(seen.load(), 7);
    EXPECT_TRUE(error_seen.load()) << "the idle variable's error was not rethrown";
    for (VarHandle v : {busy, idle, failed}) engine_->delete_var(v);
  });
}

// The completing thread pushes work the operation does not conflict with,
// and waits for it (by its handle, and on what it writes) before done().
TEST_P(CompletionThreadTest, CompletingThreadWaitsForWorkItPushedBeforeDone) {
  run_with_timeout(60s, [&] {
    VarHandle busy = engine_->new_var();
    VarHandle out = engine_->new_var();
    int result = 0;  // guarded by out
    std::atomic<int> seen{-1};
    std::atomic<bool> handle_done{false};
    std::thread completer = push_completed_elsewhere(busy, [&] {
      OperationHandle h = engine_->push_tracked(
          {.name = "independent", .ctx = cpu(1), .writes = {out}, .fn = [&](const RunContext&) {
             result = 42;
           }});
      h.wait();
      handle_done.store(h.done());
      engine_->push({.name = "more", .ctx = cpu(0), .writes = {out}, .fn = [&](const RunContext&) {
                       result += 1;
                     }});
      engine_->wait_to_read(out);
      seen.store(result);
    });
    completer.join();
    engine_->wait_to_read(busy);
    EXPECT_TRUE(handle_done.load());
    EXPECT_EQ(seen.load(), 43);
    engine_->delete_var(busy);
    engine_->delete_var(out);
  });
}

// Pushes from the completing thread and from the operation's own closure
// run in push order where they conflict, whichever thread pushed them.
TEST_P(CompletionThreadTest, PushesOfTheCompleterAndTheClosureKeepPushOrder) {
  run_with_timeout(60s, [&] {
    VarHandle busy = engine_->new_var();
    VarHandle z = engine_->new_var();
    int value = 0;  // guarded by z
    std::atomic<bool> completer_pushed{false};
    std::atomic<bool> closure_pushed{false};
    std::atomic<bool> second_ran{false};
    std::thread completer;
    engine_->push(
        {.name = "async",
         .ctx = cpu(0),
         .writes = {busy},
         .fn = [&](const RunContext&, Completion done) {
           completer = std::thread([&, done = std::move(done)]() mutable {
             engine_->push(
                 {.name = "first", .ctx = cpu(1), .writes = {z}, .fn = [&](const RunContext&) {
                    value = 1;
                  }});
             completer_pushed.store(true);
             while (!closure_pushed.load()) std::this_thread::yield();
             done.done();
           });
           while (!completer_pushed.load()) std::this_thread::yield();
           engine_->push(
               {.name = "second", .ctx = cpu(1), .writes = {z}, .fn = [&](const RunContext&) {
                  value *= 10;
                  second_ran.store(true);
                }});
           closure_pushed.store(true);
         }});
    wait_until(second_ran);
    completer.join();
    engine_->wait_to_read(z);
    EXPECT_EQ(value, 10) << "\"second\" ran before \"first\", pushed before it";
    engine_->delete_var(busy);
    engine_->delete_var(z);
  });
}

// Host work on a GPU stream pushes a CPU operation: it runs, and the GPU
// operation's wait does not hang on it.
TEST_P(CompletionThreadTest, HostWorkOnAStreamPushes) {
  run_with_timeout(60s, [&] {
    VarHandle on_gpu = engine_->new_var();
    VarHandle on_cpu = engine_->new_var();
    std::atomic<bool> pushed_ran{false};
    engine_->push(
        {.name = "gpu", .ctx = gpu(0), .writes = {on_gpu}, .fn = [&](const RunContext& rc) {
           rc.stream->enqueue_host([&] {
             engine_->push({.name = "from host work",
                            .ctx = cpu(0),
                            .writes = {on_cpu},
                            .fn = [&](const RunContext&) { pushed_ran.store(true); }});
           });
         }});
    engine_->wait_to_read(on_gpu);
    wait_until(pushed_ran);
    EXPECT_TRUE(pushed_ran.load());
    engine_->delete_var(on_gpu);
    engine_->delete_var(on_cpu);
  });
}

// Work the engine's own thread pushes while the operation awaits its
// Completion runs for a completing thread that waits on it: a child the
// closure pushed, a grandchild pushed by an operation the completer pushed,
// and a follow-up pushed by that operation's completion callback.
TEST_P(CompletionThreadTest, CompletingThreadWaitsForWorkPushedFromTheRunningThread) {
  run_with_timeout(60s, [&] {
    VarHandle busy = engine_->new_var();
    std::array<VarHandle, 5> out{};
    for (VarHandle& v : out) v = engine_->new_var();
    std::array<int, 5> values{};  // values[i] guarded by out[i]
    std::array<std::atomic<int>, 3> seen{};
    for (auto& s : seen) s.store(-1);
    std::atomic<bool> registered{false};
    std::atomic<bool> follow_up_pushed{false};
    std::thread completer;
    engine_->push(
        {.name = "async",
         .ctx = cpu(0),
         .writes = {busy},
         .fn = [&](const RunContext&, Completion done) {
           engine_->push(
               {.name = "child", .ctx = cpu(1), .writes = {out[0]}, .fn = [&](const RunContext&) {
                  values[0] = 10;
                }});
           completer = std::thread([&, done = std::move(done)]() mutable {
             engine_->wait_to_read(out[0]);  // the closure's child
             seen[0].store(values[0]);
             engine_->push({.name = "parent",
                            .ctx = cpu(1),
                            .writes = {out[1]},
                            .fn = [&](const RunContext&) {
                              values[1] = 1;
                              engine_->push({.name = "grandchild",
                                             .ctx = cpu(0),
                                             .writes = {out[2]},
                                             .fn = [&](const RunContext&) { values[2] = 20; }});
                            }});
             engine_->wait_to_read(out[1]);  // "parent" has pushed the grandchild
             engine_->wait_to_read(out[2]);  // pushed by "parent", wherever it ran
             seen[1].store(values[2]);
             OperationHandle h = engine_->push_tracked({.name = "tracked",
                                                        .ctx = cpu(1),
                                                        .writes = {out[3]},
                                                        .fn = [&](const RunContext&) {
                                                          while (!registered.load())
                                                            std::this_thread::yield();
                                                          values[3] = 3;
                                                        }});
             h.on_done([&](std::exception_ptr) {
               engine_->push({.name = "follow-up",
                              .ctx = cpu(0),
                              .writes = {out[4]},
                              .fn = [&](const RunContext&) { values[4] = 30; }});
               follow_up_pushed.store(true);
             });
             registered.store(true);
             engine_->wait_to_read(out[3]);  // runs "tracked" under a schedule
             while (!follow_up_pushed.load()) std::this_thread::yield();
             engine_->wait_to_read(out[4]);  // pushed by the callback
             seen[2].store(values[4]);
             done.done();
           });
         }});
    wait_until(follow_up_pushed);
    completer.join();
    engine_->wait_to_read(busy);
    EXPECT_EQ(seen[0].load(), 10) << "the closure's child";
    EXPECT_EQ(seen[1].load(), 20) << "the grandchild";
    EXPECT_EQ(seen[2].load(), 30) << "the callback's follow-up";
    engine_->delete_var(busy);
    for (VarHandle v : out) engine_->delete_var(v);
  });
}

// An asynchronous operation B whose completing thread waits on what another
// asynchronous operation A writes: A's completion is not held up by B, even
// where one thread awaits both (the naive engine runs B while A awaits).
TEST_P(CompletionThreadTest, ACompleterMayWaitForAnotherAsynchronousOperation) {
  run_with_timeout(60s, [&] {
    VarHandle x = engine_->new_var();
    VarHandle y = engine_->new_var();
    VarHandle d = engine_->new_var();
    int x_value = 0;  // guarded by x
    std::atomic<int> seen_by_b{-1};
    std::atomic<bool> b_done{false};
    // Set once each closure has stored its thread: the thread itself may
    // finish its work before the closure's assignment does.
    std::atomic<bool> a_stored{false};
    std::atomic<bool> b_stored{false};
    std::thread completer_a;
    std::thread completer_b;
    engine_->push(
        {.name = "A",
         .ctx = cpu(0),
         .writes = {x},
         .fn = [&](const RunContext&, Completion done_a) {
           completer_a = std::thread([&, done_a = std::move(done_a)]() mutable {
             engine_->push({.name = "B",
                            .ctx = cpu(1),
                            .writes = {y},
                            .fn = [&](const RunContext&, Completion done_b) {
                              completer_b = std::thread([&, done_b = std::move(done_b)]() mutable {
                                engine_->wait_to_read(x);  // A's result
                                seen_by_b.store(x_value);
                                b_done.store(true);
                                done_b.done();
                              });
                              b_stored.store(true);
                            }});
             // Work after B that runs before A completes (under a schedule,
             // this wait lets B run first).
             engine_
                 ->push_tracked(
                     {.name = "D", .ctx = cpu(1), .writes = {d}, .fn = [](const RunContext&) {}})
                 .wait();
             x_value = 5;
             done_a.done();
           });
           a_stored.store(true);
         }});
    wait_until(b_done);
    while (!a_stored.load() || !b_stored.load()) std::this_thread::yield();
    completer_a.join();
    completer_b.join();
    engine_->wait_to_read(y);
    EXPECT_EQ(seen_by_b.load(), 5) << "B's completer saw x before A completed";
    for (VarHandle v : {x, y, d}) engine_->delete_var(v);
  });
}

// A completing thread's wait is for what was pushed before it began: a
// write pushed meanwhile that waits for the operation being completed does
// not hold it up (it would wait forever), nor do writes that keep coming
// while the thread waits again and again.
TEST_P(CompletionThreadTest, ACompletersWaitIsNotHeldUpByLaterPushes) {
  run_with_timeout(60s, [&] {
    VarHandle busy = engine_->new_var();
    VarHandle y = engine_->new_var();
    std::uint64_t y_value = 0;  // guarded by y
    std::atomic<bool> waiting{false};
    std::atomic<std::uint64_t> seen{0};
    std::thread pusher([&] {
      while (!waiting.load()) std::this_thread::yield();
      std::this_thread::sleep_for(10ms);  // while the completer waits
      engine_->push({.name = "later",
                     .ctx = cpu(0),
                     .reads = {busy},
                     .writes = {y},
                     .fn = [&](const RunContext&) { y_value = y_value * 10 + 2; }});
    });
    std::thread completer = push_completed_elsewhere(busy, [&] {
      engine_->push({.name = "first", .ctx = cpu(1), .writes = {y}, .fn = [&](const RunContext&) {
                       std::this_thread::sleep_for(50ms);  // still running when "later" comes
                       y_value = 1;
                     }});
      waiting.store(true);
      engine_->wait_to_read(y);
      seen.store(y_value);
    });
    completer.join();
    pusher.join();
    engine_->wait_to_read(y);
    EXPECT_EQ(seen.load(), 1U);
    EXPECT_EQ(y_value, 12U) << "\"later\" ran before \"first\"";

    VarHandle busy2 = engine_->new_var();
    VarHandle z = engine_->new_var();
    std::uint64_t z_value = 0;  // guarded by z
    std::atomic<bool> stop{false};
    std::atomic<int> pushed{0};
    std::thread producer([&] {
      for (int k = 1; !stop.load(); ++k) {
        engine_->push(
            {.name = "steady", .ctx = cpu(k % 2), .writes = {z}, .fn = [&, k](const RunContext&) {
               z_value = z_value * 31 + static_cast<std::uint64_t>(k);
             }});
        pushed.store(k);
        std::this_thread::sleep_for(200us);
      }
    });
    std::atomic<int> waits{0};
    std::thread completer2 = push_completed_elsewhere(busy2, [&] {
      for (int i = 0; i < 30; ++i) {
        engine_->wait_to_write(z);
        waits.fetch_add(1);
        std::this_thread::sleep_for(1ms);
      }
    });
    completer2.join();
    stop.store(true);
    producer.join();
    engine_->wait_to_read(z);
    std::uint64_t want = 0;
    for (int k = 1; k <= pushed.load(); ++k) want = want * 31 + static_cast<std::uint64_t>(k);
    EXPECT_EQ(waits.load(), 30);
    EXPECT_EQ(z_value, want);
    for (VarHandle v : {busy, y, busy2, z}) engine_->delete_var(v);
  });
}

// A wait on a deleted variable's handle throws StaleVariableError at once,
// from the test thread and from a completing thread (also when the deletion
// must wait for the operation it completes), never hangs.
TEST_P(CompletionThreadTest, WaitsOnADeletedVariableThrowStale) {
  run_with_timeout(60s, [&] {
    for (int from_completer = 0; from_completer < 2; ++from_completer) {
      SCOPED_TRACE(from_completer ? "from a completing thread" : "from the test thread");
      // How many of a read wait and a write wait on `v` threw StaleVariableError.
      auto stale_waits = [&](VarHandle v) {
        int n = 0;
        for (const bool write : {false, true}) {
          try {
            write ? engine_->wait_to_write(v) : engine_->wait_to_read(v);
          } catch (const StaleVariableError&) {
            ++n;
          }
        }
        return n;
      };
      auto check = [&] {
        VarHandle v = engine_->new_var();
        VarHandle keep = engine_->new_var();
        engine_->push(
            {.name = "write", .ctx = cpu(1), .writes = {v}, .fn = [](const RunContext&) {}});
        engine_->push({.name = "other",
                       .ctx = cpu(1),
                       .reads = {v},
                       .writes = {keep},
                       .fn = [](const RunContext&) {}});
        engine_->delete_var(v);
        VarHandle reused = engine_->new_var();  // may take the deleted one's record
        engine_->push(
            {.name = "reuse", .ctx = cpu(0), .writes = {reused}, .fn = [](const RunContext&) {}});
        const int stale = stale_waits(v);
        engine_->wait_to_read(keep);
        engine_->delete_var(keep);
        engine_->delete_var(reused);
        return stale;
      };
      std::atomic<int> stale{-1};
      if (from_completer == 0) {
        stale.store(check());
      } else {
        // It also deletes what the awaited operation writes (the deletion
        // waits for the operation), and waits on that.
        VarHandle busy = engine_->new_var();
        std::thread completer = push_completed_elsewhere(busy, [&] {
          const int n = check();
          engine_->delete_var(busy);
          stale.store(n + stale_waits(busy));
        });
        completer.join();
        engine_->wait_for_all();
      }
      EXPECT_EQ(stale.load(), from_completer ? 4 : 2) << "waits that threw StaleVariableError";
    }
  });
}

// A completing thread pushes more operations on what the awaited operation
// writes than a schedule keeps in view, then one on another variable, and
// waits for that one: it runs, and the many run after the completion, in
// push order.
TEST_P(CompletionThreadTest, ACompleterMayPushManyConflictingOperationsThenWaitForAnother) {
  constexpr int kMany = 700;
  run_with_timeout(60s, [&] {
    VarHandle x = engine_->new_var();
    VarHandle y = engine_->new_var();
    std::uint64_t x_value = 1;  // guarded by x
    int y_value = 0;            // guarded by y
    std::atomic<int> seen{-1};
    std::thread completer = push_completed_elsewhere(x, [&] {
      for (int i = 0; i < kMany; ++i) {
        engine_->push(
            {.name = "on x", .ctx = cpu(i % 2), .writes = {x}, .fn = [&, i](const RunContext&) {
               x_value = x_value * 3 + i;
             }});
      }
      engine_->push({.name = "on y", .ctx = cpu(0), .writes = {y}, .fn = [&](const RunContext&) {
                       y_value = 9;
                     }});
      engine_->wait_to_read(y);
      seen.store(y_value);
    });
    completer.join();
    engine_->wait_to_read(x);
    std::uint64_t want = 1;
    for (int i = 0; i < kMany; ++i) want = want * 3 + static_cast<std::uint64_t>(i);
    EXPECT_EQ(seen.load(), 9);
    EXPECT_EQ(x_value, want) << "the operations on x ran out of push order";
    engine_->delete_var(x);
    engine_->delete_var(y);
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, CompletionThreadTest, testing::engine_params_with_schedules(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
