// Random work from threads that complete asynchronous operations, checked
// against serial replays on every engine and under controlled schedules:
// completers that push and wait for their own work, and completers that wait
// for one another's operations (on the naive engine, nested awaits: Note
// [Lending the naive engine] in engine/detail/naive_engine.h).

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
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
using testing::run_with_timeout;

class CompletionRandomTest : public testing::EngineTest {};

// Asynchronous operations pushed from several threads, each completed by a
// thread that first waits for an earlier one's result (some also declare
// it as a read) and for work of its own, complete in any order: on the
// naive engine their awaits nest, and an inner one finishes outer ones.
// The results match a serial replay.
TEST_P(CompletionRandomTest, CompletersWaitingOnEachOtherMatchASerialReplay) {
  constexpr int kOps = 24;
  constexpr int kPushers = 3;
  run_with_timeout(120s, [&] {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed);
      testing::Rng rng(seed);
      std::vector<VarHandle> x(kOps);
      std::vector<VarHandle> own(kOps);
      std::vector<std::uint64_t> values(kOps, 0);      // values[i] guarded by x[i]
      std::vector<std::uint64_t> own_values(kOps, 0);  // guarded by own[i]
      std::vector<std::uint64_t> expected(kOps);
      std::vector<int> waits_on(kOps, -1);
      std::vector<bool> reads_it(kOps, false);
      std::vector<bool> pushes_own(kOps, false);
      std::vector<int> pause_us(kOps);
      for (int i = 0; i < kOps; ++i) {
        x[i] = engine_->new_var();
        own[i] = engine_->new_var();
        if (i > 0 && rng.chance(75)) waits_on[i] = rng.below(i);
        reads_it[i] = waits_on[i] >= 0 && rng.chance(25);
        pushes_own[i] = rng.chance(40);
        pause_us[i] = rng.below(400);
        const std::uint64_t base =
            waits_on[i] >= 0 ? expected[static_cast<std::size_t>(waits_on[i])] * 31 : 7;
        expected[i] = base + static_cast<std::uint64_t>(i) + (pushes_own[i] ? 1000 : 0);
      }
      std::vector<std::thread> completers(kOps);  // completers[i] set by closure i
      std::vector<std::atomic<bool>> may_push(kOps + 1);
      may_push[0].store(true);
      auto complete = [&](int i, Completion done) {
        std::uint64_t base = 7;
        if (waits_on[i] >= 0) {
          const auto j = static_cast<std::size_t>(waits_on[i]);
          engine_->wait_to_read(x[j]);
          base = values[j] * 31;
        }
        std::uint64_t extra = 0;
        if (pushes_own[i]) {
          engine_->push({.name = "own",
                         .ctx = cpu(i % 2),
                         .writes = {own[i]},
                         .fn = [&, i](const RunContext&) { own_values[i] = 1000; }});
          engine_->wait_to_read(own[i]);
          extra = own_values[i];
        }
        std::this_thread::sleep_for(std::chrono::microseconds(pause_us[i]));
        values[i] = base + static_cast<std::uint64_t>(i) + extra;
        done.done();
      };
      std::vector<std::thread> pushers;
      for (int t = 0; t < kPushers; ++t) {
        pushers.emplace_back([&, t] {
          for (int i = t; i < kOps; i += kPushers) {
            while (!may_push[i].load()) std::this_thread::yield();
            Operation op{.name = "A",
                         .ctx = cpu(i % 2),
                         .writes = {x[i]},
                         .fn = [&, i](const RunContext&, Completion done) {
                           may_push[i + 1].store(true);  // the naive engine's holder is here
                           completers[i] = std::thread(complete, i, std::move(done));
                         }};
            if (reads_it[i]) op.reads = {x[static_cast<std::size_t>(waits_on[i])]};
            engine_->push(std::move(op));
            may_push[i + 1].store(true);
          }
        });
      }
      for (std::thread& t : pushers) t.join();
      engine_->wait_for_all();
      for (std::thread& t : completers) t.join();
      for (int i = 0; i < kOps; ++i) {
        EXPECT_EQ(values[i], expected[i]) << "operation " << i;
        engine_->delete_var(x[i]);
        engine_->delete_var(own[i]);
      }
    }
  });
}

// Random work from completing threads: each of a series of asynchronous
// operations hands its Completion to a thread that pushes operations on
// variables of its own (some asynchronous, completed from yet another
// thread), waits for some of them by handle or by variable, checks what it
// sees against its own serial replay, and only then calls done(). The test
// thread meanwhile pushes on variables every round shares.
TEST_P(CompletionRandomTest, RandomWorkFromCompletingThreadsMatchesASerialReplay) {
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

INSTANTIATE_TEST_SUITE_P(Engines, CompletionRandomTest, testing::engine_params_with_schedules(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
