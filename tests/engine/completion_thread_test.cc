// What a thread may do while it holds an asynchronous operation's
// Completion, and what a wait may run, on every engine and under controlled
// schedules: wait on variables the operation does not write, wait for work it
// pushed itself, push from host work on a GPU stream, and a wait_for_all
// whose operations push more. Each of these returns on the threaded engine;
// the naive engine lends itself out while it awaits a completion (Note
// [Lending the naive engine] in engine/detail/naive_engine.h).

#include <array>
#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/operation_handle.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/random_workload.h"
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

// Random work from completing threads: each of a series of asynchronous
// operations hands its Completion to a thread that pushes operations on
// variables of its own (some asynchronous, completed from yet another
// thread), waits for some of them by handle or by variable, checks what it
// sees against its own serial replay, and only then calls done(). The test
// thread meanwhile pushes on variables every round shares.
TEST_P(CompletionThreadTest, RandomWorkFromCompletingThreadsMatchesASerialReplay) {
  constexpr int kRounds = 24;
  constexpr int kOwnVars = 3;
  constexpr int kOpsPerRound = 8;
  run_with_timeout(120s, [&] {
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed);
      testing::Rng rng(seed);
      VarHandle shared = engine_->new_var();
      std::uint64_t shared_value = 0;  // guarded by shared
      std::vector<VarHandle> busy(kRounds);
      std::vector<std::array<VarHandle, kOwnVars>> own(kRounds);
      std::vector<std::array<std::uint64_t, kOwnVars>> values(kRounds);  // guarded by own
      std::vector<std::array<std::uint64_t, kOwnVars>> expected(kRounds);
      std::vector<std::thread> completers(kRounds);
      std::atomic<int> mismatches{0};
      std::atomic<int> waited{0};
      for (int k = 0; k < kRounds; ++k) {
        busy[k] = engine_->new_var();
        for (int v = 0; v < kOwnVars; ++v) {
          own[k][v] = engine_->new_var();
          values[k][v] = expected[k][v] = static_cast<std::uint64_t>(k * 10 + v);
        }
        const std::uint64_t plan = rng.next();  // the completer's own choices
        engine_->push(
            {.name = "async",
             .ctx = cpu(k % 2),
             .reads = {shared},
             .writes = {busy[k]},
             .fn = [&, k, plan](const RunContext&, Completion done) {
               completers[k] = std::thread([&, k, plan, done = std::move(done)]() mutable {
                 testing::Rng r(plan);
                 std::mutex helpers_mutex;
                 std::vector<std::thread> helpers;
                 for (int i = 0; i < kOpsPerRound; ++i) {
                   const int w = r.below(kOwnVars);
                   const int from = r.below(kOwnVars);
                   const auto add = static_cast<std::uint64_t>(r.below(1000));
                   std::uint64_t* vals = values[k].data();
                   Operation op{.name = "own",
                                .ctx = cpu(r.below(2)),
                                .reads = {own[k][from]},
                                .writes = {own[k][w]}};
                   if (from == w) op.reads.clear();
                   if (r.chance(30)) {  // completed from another thread
                     op.fn = [&helpers, &helpers_mutex, vals, w, from, add](const RunContext&,
                                                                            Completion c) {
                       vals[w] = vals[w] * 31 + vals[from] + add;
                       const std::lock_guard lock(helpers_mutex);
                       helpers.emplace_back([c = std::move(c)]() mutable { c.done(); });
                     };
                   } else {
                     op.fn = [vals, w, from, add](const RunContext&) {
                       vals[w] = vals[w] * 31 + vals[from] + add;
                     };
                   }
                   std::uint64_t* want = expected[k].data();
                   want[w] = want[w] * 31 + want[from] + add;
                   const int how = r.below(4);
                   if (how == 0) {
                     engine_->push_tracked(std::move(op)).wait();
                   } else {
                     engine_->push(std::move(op));
                     if (how == 1) engine_->wait_to_read(own[k][w]);
                     if (how == 2) engine_->wait_to_write(own[k][from]);
                   }
                   if (how == 3) continue;
                   waited.fetch_add(1);
                   const int seen = how == 2 ? from : w;
                   if (vals[seen] != want[seen]) mismatches.fetch_add(1);
                 }
                 // The helpers were started by operations that have run.
                 for (int v = 0; v < kOwnVars; ++v) engine_->wait_to_write(own[k][v]);
                 const std::lock_guard lock(helpers_mutex);
                 for (std::thread& h : helpers) h.join();
                 done.done();
               });
             }});
        const auto add = static_cast<std::uint64_t>(rng.below(1000));
        engine_->push({.name = "shared",
                       .ctx = cpu(2),
                       .writes = {shared},
                       .fn = [&, add](const RunContext&) { shared_value += add; }});
      }
      engine_->wait_for_all();
      for (std::thread& t : completers) {
        if (t.joinable()) t.join();
      }
      engine_->wait_for_all();
      EXPECT_EQ(mismatches.load(), 0) << "a wait returned before what it waited for had run";
      EXPECT_GT(waited.load(), 0);
      for (int k = 0; k < kRounds; ++k) {
        for (int v = 0; v < kOwnVars; ++v) {
          engine_->wait_to_read(own[k][v]);
          EXPECT_EQ(values[k][v], expected[k][v]) << "round " << k << ", variable " << v;
          engine_->delete_var(own[k][v]);
        }
        engine_->delete_var(busy[k]);
      }
      engine_->delete_var(shared);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, CompletionThreadTest, testing::engine_params_with_schedules(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
