// The dependency dump (engine/dependency_state.h): a known stuck graph gives
// exactly its pending operations, stages and waits; snapshots taken while
// several clients push and complete work are consistent and change nothing
// the work computes.

#include "engine/dependency_state.h"

#include <atomic>
#include <chrono>
#include <latch>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "tests/engine/random_workload.h"
#include "tests/engine/watchdog.h"

namespace tagflow::testing {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Engine> threaded_engine(int cpu_workers, int sim_gpus = 0) {
  EngineConfig config = EngineConfig::defaults();
  config.cpu_workers = cpu_workers;
  config.sim_gpus = sim_gpus;
  return make_engine(config);
}

/// Polls `state_of()` until `ready(state)` holds (the workers need a moment
/// to take what they were given); fails the test after 10 s.
template <typename Ready>
DependencyState state_when(Engine& engine, Ready ready) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  for (;;) {
    DependencyState state = engine.dependency_state();
    if (ready(state) || std::chrono::steady_clock::now() > deadline) return state;
    std::this_thread::sleep_for(1ms);
  }
}

const PendingOperation* named(const DependencyState& state, std::string_view name) {
  for (const PendingOperation& op : state.operations) {
    if (op.name == name) return &op;
  }
  return nullptr;
}

std::vector<std::uint64_t> seqs_of(const std::vector<Blocker>& blockers) {
  std::vector<std::uint64_t> out;
  for (const Blocker& b : blockers) out.push_back(b.seq);
  return out;
}

TEST(DependencyState, IdleEngineHasNothingPending) {
  auto engine = threaded_engine(2);
  VarHandle x = engine->new_var();
  engine->push({.name = "touch", .writes = {x}, .fn = [](const RunContext&) {}});
  engine->wait_for_all();
  const DependencyState state = engine->dependency_state();
  EXPECT_TRUE(state.operations.empty());
  EXPECT_EQ(state.counts.pushed, state.counts.completed);
  EXPECT_GE(state.counts.pushed, 1u);
  EXPECT_NE(state.describe().find("nothing pending"), std::string::npos);
  engine->delete_var(x);
}

// A graph stuck in every way an operation can be: an asynchronous operation
// whose Completion is held, a closure blocked on a latch, an operation queued
// behind it on a one-worker device, readers and writers behind them, a host
// thread in wait_to_read, and a CPU operation held for a simulated GPU's
// unfinished device work.
TEST(DependencyState, NamesEveryStuckOperationWhatItWaitsOnAndWhoHoldsIt) {
  run_with_timeout(60s, [] {
    auto engine = threaded_engine(1, 1);
    VarHandle x = engine->new_var(), y = engine->new_var(), z = engine->new_var(),
              g = engine->new_var(), h = engine->new_var(), q = engine->new_var();
    std::optional<Completion> held;
    std::latch release_running(1), release_device(1), launched(1);

    engine->push({.name = "async_never_done",
                  .ctx = cpu(0),
                  .writes = {x},
                  .fn = [&](const RunContext&, Completion c) {
                    held.emplace(std::move(c));
                    launched.count_down();
                  }});
    launched.wait();
    engine->push({.name = "reads_x",
                  .ctx = cpu(0),
                  .reads = {x},
                  .writes = {y},
                  .fn = [](const RunContext&) {}});
    engine->push(
        {.name = "writes_x", .ctx = cpu(0), .writes = {x}, .fn = [](const RunContext&) {}});
    engine->push(
        {.name = "blocked_closure", .ctx = cpu(1), .writes = {z}, .fn = [&](const RunContext&) {
           release_running.wait();
         }});
    engine->push(
        {.name = "queued_behind", .ctx = cpu(1), .writes = {q}, .fn = [](const RunContext&) {}});
    engine->push({.name = "reads_z_and_y",
                  .ctx = cpu(0),
                  .reads = {z, y},
                  .writes = {h},
                  .fn = [](const RunContext&) {}});
    engine->push(
        {.name = "slow_device_work", .ctx = gpu(0), .writes = {g}, .fn = [&](const RunContext& rc) {
           rc.stream->enqueue_host([&] { release_device.wait(); });
         }});
    engine->push(
        {.name = "reads_device_result", .ctx = cpu(2), .reads = {g}, .fn = [](const RunContext&) {
         }});
    std::thread waiter([&] { engine->wait_to_read(y); });

    const DependencyState state = state_when(*engine, [](const DependencyState& s) {
      const PendingOperation* running = named(s, "blocked_closure");
      const PendingOperation* queued = named(s, "queued_behind");
      const PendingOperation* held_op = named(s, "reads_device_result");
      const PendingOperation* async_op = named(s, "async_never_done");
      return async_op != nullptr && async_op->stage == OperationStage::kLaunched &&
             named(s, "wait_to_read") != nullptr && running != nullptr &&
             running->stage == OperationStage::kRunning && queued != nullptr &&
             queued->stage == OperationStage::kQueued && held_op != nullptr &&
             held_op->stage == OperationStage::kHeldForDevice;
    });
    SCOPED_TRACE(state.describe());

    // Exactly the eight pending operations, in push order.
    std::vector<std::string> names;
    for (const PendingOperation& op : state.operations) names.push_back(op.name);
    EXPECT_EQ(names, (std::vector<std::string>{"async_never_done", "reads_x", "writes_x",
                                               "blocked_closure", "queued_behind", "reads_z_and_y",
                                               "reads_device_result", "wait_to_read"}));
    EXPECT_EQ(state.counts.pending(), 8u);  // the GPU operation completed when launched

    const PendingOperation& async_op = *named(state, "async_never_done");
    const PendingOperation& reads_x = *named(state, "reads_x");
    const PendingOperation& writes_x = *named(state, "writes_x");
    const PendingOperation& running = *named(state, "blocked_closure");
    const PendingOperation& joiner = *named(state, "reads_z_and_y");
    const PendingOperation& waiter_op = *named(state, "wait_to_read");
    EXPECT_EQ(async_op.stage, OperationStage::kLaunched);
    EXPECT_EQ(async_op.writes, std::vector<VarHandle>{x});
    EXPECT_TRUE(async_op.waits_for.empty());
    EXPECT_EQ(reads_x.stage, OperationStage::kWaiting);
    ASSERT_EQ(reads_x.waits_for.size(), 1u);
    EXPECT_EQ(reads_x.waits_for[0].seq, async_op.seq);
    EXPECT_EQ(reads_x.waits_for[0].var, x);
    // Write after read: the writer follows the reader, not the first writer.
    EXPECT_EQ(seqs_of(writes_x.waits_for), std::vector<std::uint64_t>{reads_x.seq});
    EXPECT_EQ(writes_x.waits_for[0].var, x);
    EXPECT_EQ(seqs_of(joiner.waits_for), (std::vector<std::uint64_t>{reads_x.seq, running.seq}));
    EXPECT_EQ(joiner.waits_for[0].var, y);
    EXPECT_EQ(joiner.waits_for[1].var, z);
    EXPECT_EQ(seqs_of(waiter_op.waits_for), std::vector<std::uint64_t>{reads_x.seq});
    EXPECT_EQ(waiter_op.waits_for[0].var, y);

    // The blockers, and what waits behind each.
    std::set<std::string> blockers;
    for (const PendingOperation* op : state.blockers()) blockers.insert(op->name);
    EXPECT_EQ(blockers, (std::set<std::string>{"async_never_done", "blocked_closure",
                                               "queued_behind", "reads_device_result"}));
    EXPECT_EQ(state.waiting_behind(async_op.seq), 4u);  // reads_x, writes_x, joiner, waiter
    EXPECT_EQ(state.waiting_behind(running.seq), 1u);
    EXPECT_EQ(state.waiting_behind(named(state, "queued_behind")->seq), 0u);

    const std::string text = state.describe();
    EXPECT_NE(text.find("'async_never_done' on cpu(0): launched: asynchronous, its Completion "
                        "has not been called; 4 operation(s) wait behind it"),
              std::string::npos);
    EXPECT_NE(text.find("'blocked_closure' on cpu(1): running"), std::string::npos);
    EXPECT_NE(text.find("'reads_device_result' on cpu(2): held until device work"),
              std::string::npos);
    EXPECT_NE(text.find("held by #" + std::to_string(async_op.seq) +
                        " 'async_never_done' on cpu(0), which writes it (launched)"),
              std::string::npos);

    // Everything moves again once released, and nothing is left pending.
    release_running.count_down();
    release_device.count_down();
    held->done();
    waiter.join();
    engine->wait_for_all();
    const DependencyState after = engine->dependency_state();
    EXPECT_TRUE(after.operations.empty()) << after.describe();
    EXPECT_EQ(after.counts.pending(), 0u);
    for (VarHandle v : {x, y, z, g, h, q}) engine->delete_var(v);
  });
}

TEST(DependencyState, DescribeShortensLongListsOfWaitingOperations) {
  run_with_timeout(60s, [] {
    auto engine = threaded_engine(1);
    VarHandle x = engine->new_var();
    std::optional<Completion> held;
    std::latch launched(1);
    engine->push({.name = "head", .writes = {x}, .fn = [&](const RunContext&, Completion c) {
                    held.emplace(std::move(c));
                    launched.count_down();
                  }});
    launched.wait();
    for (int i = 0; i < 50; ++i) {
      engine->push({.name = "tail", .writes = {x}, .fn = [](const RunContext&) {}});
    }
    const DependencyState state = engine->dependency_state();
    EXPECT_EQ(state.operations.size(), 51u);
    EXPECT_EQ(state.waiting_behind(state.operations.front().seq), 50u);
    const std::string text = state.describe(10);
    EXPECT_NE(text.find("... and 40 more"), std::string::npos) << text;
    held->done();
    engine->wait_for_all();
    engine->delete_var(x);
  });
}

TEST(DependencyState, NaiveEngineListsTheOperationItRuns) {
  run_with_timeout(60s, [] {
    EngineConfig config = EngineConfig::defaults();
    config.kind = EngineKind::kNaive;
    auto engine = make_engine(config);
    VarHandle x = engine->new_var();
    std::latch inside(1), release(1);
    std::thread pusher([&] {
      engine->push(
          {.name = "naive_blocked", .ctx = cpu(1), .writes = {x}, .fn = [&](const RunContext&) {
             inside.count_down();
             release.wait();
           }});
    });
    inside.wait();
    const DependencyState state = engine->dependency_state();
    ASSERT_EQ(state.operations.size(), 1u) << state.describe();
    EXPECT_EQ(state.operations[0].name, "naive_blocked");
    EXPECT_EQ(state.operations[0].stage, OperationStage::kRunning);
    EXPECT_EQ(state.operations[0].ctx, cpu(1));
    EXPECT_EQ(state.counts.pending(), 1u);
    release.count_down();
    pusher.join();
    EXPECT_TRUE(engine->dependency_state().operations.empty());
    engine->delete_var(x);
  });
}

TEST(DependencyState, EachEngineListsItsOwnOperationsOnly) {
  // Every engine's records share one pool: a dump must tell its own user
  // operations, waits and deletions from another threaded engine's and from
  // a naive engine's, running or long destroyed.
  run_with_timeout(60s, [] {
    auto a = threaded_engine(1);
    auto b = threaded_engine(1);
    EngineConfig naive_config = EngineConfig::defaults();
    naive_config.kind = EngineKind::kNaive;
    auto naive = make_engine(naive_config);
    for (int i = 0; i < 100; ++i) {  // destroyed naive records, never marked completed
      naive->push({.name = "naive_done", .ctx = cpu(0), .fn = [](const RunContext&) {}});
    }
    std::latch release(1), naive_inside(1);
    // A blocked writer, a reader behind it, and a deletion of what they
    // use: with the reader pending, the deletion is an operation of its own.
    auto stall = [&](Engine& e, const char* blocked, const char* reader) {
      VarHandle x = e.new_var(), y = e.new_var();
      e.push({.name = blocked, .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                release.wait();
              }});
      e.push(
          {.name = reader, .ctx = cpu(0), .reads = {x}, .writes = {y}, .fn = [](const RunContext&) {
           }});
      e.delete_var(x);
      return y;
    };
    const VarHandle ya = stall(*a, "a_blocked", "a_reader");
    const VarHandle yb = stall(*b, "b_blocked", "b_reader");
    std::thread waiter([&] { a->wait_to_read(ya); });
    std::thread naive_pusher([&] {
      naive->push({.name = "naive_blocked", .ctx = cpu(0), .fn = [&](const RunContext&) {
                     naive_inside.count_down();
                     release.wait();
                   }});
    });
    naive_inside.wait();

    auto names = [](const DependencyState& state) {
      std::vector<std::string> out;
      for (const PendingOperation& op : state.operations) out.push_back(op.name);
      return out;
    };
    const DependencyState of_a = state_when(
        *a, [](const DependencyState& s) { return named(s, "wait_to_read") != nullptr; });
    EXPECT_EQ(names(of_a),
              (std::vector<std::string>{"a_blocked", "a_reader", "delete_var", "wait_to_read"}))
        << of_a.describe();
    const DependencyState of_b = b->dependency_state();
    EXPECT_EQ(names(of_b), (std::vector<std::string>{"b_blocked", "b_reader", "delete_var"}))
        << of_b.describe();
    EXPECT_EQ(names(naive->dependency_state()), std::vector<std::string>{"naive_blocked"});

    release.count_down();
    waiter.join();
    naive_pusher.join();
    for (Engine* e : {a.get(), b.get()}) {
      e->wait_for_all();
      EXPECT_TRUE(e->dependency_state().operations.empty());
    }
    a->delete_var(ya);
    b->delete_var(yb);
  });
}

TEST(DependencyState, RefusedFromInsideAnOperation) {
  auto engine = threaded_engine(1);
  VarHandle x = engine->new_var();
  engine->push({.name = "asks", .writes = {x}, .fn = [&](const RunContext&) {
                  (void)engine->dependency_state();
                }});
  EXPECT_THROW(engine->wait_to_read(x), Error);
  engine->delete_var(x);
}

// Snapshots taken as fast as possible while three clients push random work
// (CPU devices, simulated GPUs, copy queues, priorities) must be internally
// consistent, and the work must still match its serial replay: records read
// by the dump are parked rather than freed, never corrupted.
TEST(DependencyState, SnapshotsDuringHeavyWorkAreConsistentAndHarmless) {
  run_with_timeout(120s, [] {
    auto engine = threaded_engine(2, 2);
    constexpr int kClients = 3;
    std::vector<Workload> workloads;
    std::vector<Expected> expected;
    for (int t = 0; t < kClients; ++t) {
      WorkloadShape shape{.num_vars = 12,
                          .num_shared = 0,
                          .num_ops = 4000,
                          .id_base = static_cast<std::uint64_t>(t + 1) << 32};
      workloads.push_back(generate(1000 + static_cast<std::uint64_t>(t), shape));
      expected.push_back(replay(workloads.back(), {}));
    }
    std::vector<std::vector<Cell>> cells;
    for (const Workload& w : workloads) cells.push_back(w.initial);

    std::atomic<bool> stop{false};
    std::atomic<int> snapshots{0}, nonempty{0};
    std::thread inspector([&] {
      while (!stop.load()) {
        const DependencyState s = engine->dependency_state();
        ++snapshots;
        nonempty += s.operations.empty() ? 0 : 1;
        std::set<std::uint64_t> seen;
        for (const PendingOperation& op : s.operations) {
          EXPECT_TRUE(seen.insert(op.seq).second) << "operation listed twice";
          EXPECT_LT(op.seq, s.counts.pushed + 1);
          for (const Blocker& b : op.waits_for) EXPECT_LT(b.seq, op.seq) << "waits on a later op";
        }
        EXPECT_LE(s.operations.size(), s.counts.pending());
        (void)s.describe();
      }
    });
    std::vector<std::thread> clients;
    for (int t = 0; t < kClients; ++t) {
      clients.emplace_back([&, t] {
        const Workload& w = workloads[static_cast<std::size_t>(t)];
        std::vector<Cell*> table;
        for (Cell& c : cells[static_cast<std::size_t>(t)]) table.push_back(&c);
        std::vector<VarHandle> vars;
        for (int v = 0; v < w.num_vars; ++v) vars.push_back(engine->new_var());
        for (const OpSpec& spec : w.ops) {
          Operation op{
              .name = "stress", .ctx = spec.ctx, .priority = spec.priority, .queue = spec.queue};
          for (int r : spec.reads) op.reads.push_back(vars[static_cast<std::size_t>(r)]);
          for (int v : spec.writes) op.writes.push_back(vars[static_cast<std::size_t>(v)]);
          const OpSpec* s = &spec;
          Cell* const* tab = table.data();
          op.fn = [s, tab](const RunContext& rc) {
            if (rc.stream != nullptr) {
              rc.stream->enqueue_host([s, tab] { apply(*s, tab); });
            } else {
              apply(*s, tab);
            }
          };
          engine->push(std::move(op));
        }
        for (VarHandle v : vars) engine->wait_to_read(v);
        for (VarHandle v : vars) engine->delete_var(v);
      });
    }
    for (std::thread& c : clients) c.join();
    engine->wait_for_all();
    stop = true;
    inspector.join();
    for (int t = 0; t < kClients; ++t) {
      EXPECT_TRUE(cells[static_cast<std::size_t>(t)] == expected[static_cast<std::size_t>(t)].cells)
          << "client " << t << " differs from its serial replay";
    }
    EXPECT_GT(nonempty.load(), 0) << "no snapshot saw pending work (" << snapshots.load()
                                  << " taken)";
    EXPECT_TRUE(engine->dependency_state().operations.empty());
  });
}

}  // namespace
}  // namespace tagflow::testing
