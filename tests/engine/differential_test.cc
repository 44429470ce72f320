// Differential tests of the engines (STYLE.md habit 7): one random workload of
// reads and writes over cpu(0..2) and two simulated GPUs must leave every
// variable's cell bit-identical on the naive engine, the threaded engine at
// 1, 2 and 4 workers per CPU device, and a plain serial replay of the
// operations in push order.
//
// Every operation computes a mix of the cells it reads into the cells it
// writes, tagged with its own id; the mix is order-sensitive, so any two
// conflicting operations run out of push order (or overlapping, or twice, or
// not at all) change the final cells. GPU operations do their work on the
// simulated stream (`enqueue_host`), so the launched/finished fences of Note
// [Completion on device queues] decide whether CPU operations, waits and
// deletions see it. Some operations are asynchronous and completed from a
// small pool of completer threads.
//
// The quick tests run in CI in a few seconds; the heavy ones (many seeds,
// 200k operations each) only with TAGFLOW_HEAVY_TESTS=1. Every test body runs
// under a watchdog that aborts with the test's name on a deadlock.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <latch>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/splitmix.h"
#include "tests/engine/differential_harness.h"
#include "tests/engine/random_workload.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;

using testing::run_with_timeout;

// --- random workloads (tests/engine/random_workload.h) and the harness ------------
// (tests/engine/differential_harness.h)

using testing::apply;
using testing::Binding;
using testing::build;
using testing::Cell;
using testing::cells_match;
using testing::Checkpoint;
using testing::Completer;
using testing::Coverage;
using testing::coverage_of;
using testing::each_op_ran_once;
using testing::EngineSetup;
using testing::Expected;
using testing::generate;
using testing::heavy_tests_enabled;
using testing::kSetups;
using testing::kSimGpus;
using testing::make_operation;
using testing::OpSpec;
using testing::Probe;
using testing::replay;
using testing::Rng;
using testing::Workload;
using testing::WorkloadShape;

// --- running a workload on an engine ------------------------------------------------

/// Pushes the workload in order, with its checkpoint waits (recording the
/// cell seen) and its early deletions, issued while work on the variable may
/// still be pending. Does not wait for the work. Returns the own variables
/// not deleted: the caller deletes them once it has checked that
/// wait_for_all alone made their cells final.
std::vector<VarHandle> push_workload(Engine& engine, const Workload& w, const Binding& b,
                                     std::vector<VarHandle> vars,
                                     std::vector<Cell>& seen_at_checkpoint) {
  std::vector<std::vector<int>> deletions(w.ops.size());
  for (std::size_t v = 0; v < w.delete_after.size(); ++v) {
    if (w.delete_after[v] >= 0)
      deletions[static_cast<std::size_t>(w.delete_after[v])].push_back(static_cast<int>(v));
  }
  std::size_t next_checkpoint = 0;
  for (const OpSpec& op : w.ops) {
    engine.push(make_operation(b, op, vars));
    for (; next_checkpoint < w.checkpoints.size() &&
           w.checkpoints[next_checkpoint].after_op == op.index;
         ++next_checkpoint) {
      const Checkpoint& c = w.checkpoints[next_checkpoint];
      VarHandle var = vars[static_cast<std::size_t>(c.var)];
      if (c.for_write) {
        engine.wait_to_write(var);
      } else {
        engine.wait_to_read(var);
      }
      seen_at_checkpoint.push_back(*b.table[c.var]);
    }
    for (int v : deletions[op.index]) {
      engine.delete_var(vars[static_cast<std::size_t>(v)]);
      vars[static_cast<std::size_t>(v)] = nullptr;
    }
  }
  std::vector<VarHandle> alive;
  for (int v = 0; v < w.num_vars; ++v) {
    if (vars[static_cast<std::size_t>(v)] != nullptr)
      alive.push_back(vars[static_cast<std::size_t>(v)]);
  }
  return alive;
}

void delete_vars(Engine& engine, const std::vector<VarHandle>& vars) {
  for (VarHandle v : vars) engine.delete_var(v);
}

/// One client pushing one workload on each engine: cells, checkpoint values
/// and run counts must match the serial replay.
void check_single_client(std::uint64_t seed, const WorkloadShape& shape) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(shape.num_vars) +
               " variables, " + std::to_string(shape.num_ops) + " operations");
  const Workload w = generate(seed, shape);
  const Expected expected = replay(w, {});
  for (const EngineSetup& setup : kSetups) {
    SCOPED_TRACE(setup.label);
    std::unique_ptr<Engine> engine = build(setup);
    ASSERT_EQ(engine->num_gpus(), kSimGpus);
    std::vector<Cell> cells = w.initial;
    std::vector<Cell*> table;
    for (Cell& c : cells) table.push_back(&c);
    Probe probe(w.ops.size());
    std::vector<Cell> seen;
    {
      Completer completer(2);  // joined before the engine goes away
      const Binding binding{table.data(), &probe, &completer, setup.cpu_workers};
      std::vector<VarHandle> vars;
      for (int v = 0; v < w.num_vars; ++v) vars.push_back(engine->new_var());
      const std::vector<VarHandle> alive = push_workload(*engine, w, binding, vars, seen);
      EXPECT_NO_THROW(engine->wait_for_all());
      // Checked before the remaining deletions: wait_for_all alone must have
      // finished the device work too.
      EXPECT_TRUE(cells_match(expected.cells, cells));
      delete_vars(*engine, alive);
      EXPECT_NO_THROW(engine->wait_for_all());
    }
    EXPECT_TRUE(cells_match(expected.at_checkpoint, seen))
        << "values seen after wait_to_read/write";
    EXPECT_TRUE(each_op_ran_once(probe));
  }
}

/// Several client threads push concurrently into one engine, each its own
/// workload on its own variables; all of them also read a few shared
/// variables, written once (on a GPU) before the clients start.
void check_concurrent_clients(std::uint64_t seed, int num_clients, const WorkloadShape& shape) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(num_clients) + " clients");
  constexpr int kShared = 3;
  std::vector<Workload> workloads;
  for (int t = 0; t < num_clients; ++t) {
    WorkloadShape s = shape;
    s.num_shared = kShared;
    s.id_base = (static_cast<std::uint64_t>(t) + 1) << 32;
    workloads.push_back(generate(splitmix64(seed) + static_cast<std::uint64_t>(t), s));
  }
  // The writer of the shared variables: its only writes, on a GPU's copy queue.
  Rng rng(seed);
  std::vector<Cell> shared_initial(kShared);
  for (Cell& c : shared_initial) {
    for (auto& word : c.words) word = rng.next();
  }
  OpSpec init;
  init.id = ~0ULL;
  init.ctx = gpu(1);
  init.queue = QueueKind::kCopy;
  init.writes = {0, 1, 2};
  std::vector<Cell> shared_expected = shared_initial;
  {
    std::vector<Cell*> t;
    for (Cell& c : shared_expected) t.push_back(&c);
    apply(init, t.data());
  }
  std::vector<Expected> expected;
  for (const Workload& w : workloads) expected.push_back(replay(w, shared_expected));

  for (const EngineSetup& setup : kSetups) {
    SCOPED_TRACE(setup.label);
    std::unique_ptr<Engine> engine = build(setup);
    std::vector<Cell> shared_cells = shared_initial;
    std::vector<Cell*> shared_table;
    for (Cell& c : shared_cells) shared_table.push_back(&c);
    std::vector<VarHandle> shared_vars;
    for (int v = 0; v < kShared; ++v) shared_vars.push_back(engine->new_var());

    std::vector<std::vector<Cell>> cells;
    std::vector<std::vector<Cell*>> tables(static_cast<std::size_t>(num_clients));
    std::vector<std::unique_ptr<Probe>> probes;
    std::vector<std::vector<Cell>> seen(static_cast<std::size_t>(num_clients));
    std::vector<std::vector<VarHandle>> alive(static_cast<std::size_t>(num_clients));
    for (const Workload& w : workloads) {
      cells.push_back(w.initial);
      probes.push_back(std::make_unique<Probe>(w.ops.size()));
    }
    Probe init_probe(1);
    {
      Completer completer(2);
      std::vector<Binding> bindings;
      for (std::size_t t = 0; t < workloads.size(); ++t) {
        for (Cell& c : cells[t]) tables[t].push_back(&c);
        for (Cell* c : shared_table) tables[t].push_back(c);
        bindings.push_back({tables[t].data(), probes[t].get(), &completer, setup.cpu_workers});
      }
      const Binding init_binding{shared_table.data(), &init_probe, &completer, setup.cpu_workers};
      engine->push(make_operation(init_binding, init, shared_vars));

      std::latch start(num_clients);
      std::vector<std::thread> clients;
      for (std::size_t t = 0; t < workloads.size(); ++t) {
        std::vector<VarHandle> client_vars;
        for (int v = 0; v < workloads[t].num_vars; ++v) client_vars.push_back(engine->new_var());
        for (VarHandle s : shared_vars) client_vars.push_back(s);
        clients.emplace_back([&, t, client_vars] {
          start.arrive_and_wait();
          try {
            alive[t] = push_workload(*engine, workloads[t], bindings[t], client_vars, seen[t]);
          } catch (const std::exception& e) {
            ADD_FAILURE() << "client " << t << " threw: " << e.what();
          }
        });
      }
      for (std::thread& c : clients) c.join();
      delete_vars(*engine, shared_vars);  // readers still pending
      EXPECT_NO_THROW(engine->wait_for_all());
      for (std::size_t t = 0; t < workloads.size(); ++t) {
        EXPECT_TRUE(cells_match(expected[t].cells, cells[t])) << "client " << t;
        delete_vars(*engine, alive[t]);
      }
      EXPECT_NO_THROW(engine->wait_for_all());
    }
    EXPECT_EQ(shared_cells, shared_expected) << "shared variables";
    EXPECT_TRUE(each_op_ran_once(init_probe));
    for (std::size_t t = 0; t < workloads.size(); ++t) {
      SCOPED_TRACE("client " + std::to_string(t));
      EXPECT_TRUE(cells_match(expected[t].at_checkpoint, seen[t]))
          << "values seen after wait_to_read/write";
      EXPECT_TRUE(each_op_ran_once(*probes[t]));
    }
  }
}

// --- the checker checks ----------------------------------------------------------------

// The comparison would be a tautology if the mix did not depend on order: a
// replay that swaps two adjacent conflicting operations, or drops one, must
// disagree with the true replay.
TEST(Differential, ReplayIsSensitiveToOrderAndToMissingOperations) {
  const Workload w = generate(7, {.num_vars = 8, .num_ops = 400});
  const Expected truth = replay(w, {});
  std::size_t swap_at = 0;
  for (; swap_at + 1 < w.ops.size(); ++swap_at) {
    const OpSpec& a = w.ops[swap_at];
    const OpSpec& b = w.ops[swap_at + 1];
    bool conflict = false;
    for (int x : a.writes) {
      for (int y : b.writes) conflict = conflict || x == y;
    }
    if (conflict) break;
  }
  ASSERT_LT(swap_at + 1, w.ops.size()) << "no two adjacent operations write the same variable";
  Workload swapped = w;
  std::swap(swapped.ops[swap_at], swapped.ops[swap_at + 1]);
  swapped.ops[swap_at].index = static_cast<std::uint32_t>(swap_at);
  swapped.ops[swap_at + 1].index = static_cast<std::uint32_t>(swap_at + 1);
  EXPECT_FALSE(cells_match(truth.cells, replay(swapped, {}).cells));

  Workload dropped = w;
  dropped.ops[w.ops.size() / 2].writes.clear();  // runs, but writes nothing
  EXPECT_FALSE(cells_match(truth.cells, replay(dropped, {}).cells));
}

TEST(Differential, GeneratedWorkloadsExerciseEveryFeature) {
  const Coverage c = coverage_of(generate(1, {.num_vars = 16, .num_ops = 3000}));
  EXPECT_GT(c.gpu_ops, 0);
  EXPECT_GT(c.copy_queue_ops, 0);
  EXPECT_GT(c.async_done_elsewhere, 0);
  EXPECT_GT(c.async_work_elsewhere, 0);
  EXPECT_GT(c.read_modify_write, 0);
  EXPECT_GT(c.repeated_listing, 0);
  EXPECT_GT(c.prioritized, 0);
  EXPECT_GT(c.no_reads, 0);
  EXPECT_GT(c.early_deletes, 0);
  EXPECT_GT(c.checkpoints, 0);
  EXPECT_GT(c.slow, 1);
}

// --- quick differential tests (CI) -------------------------------------------------------

TEST(Differential, RandomWorkloadsMatchSerialReplayOnEveryEngine) {
  run_with_timeout(90s, [] {
    // Few variables: long conflict chains; more variables: more parallelism.
    check_single_client(1, {.num_vars = 4, .num_ops = 3000});
    check_single_client(2, {.num_vars = 16, .num_ops = 3000});
    check_single_client(3, {.num_vars = 64, .num_ops = 3000});
  });
}

TEST(Differential, ConcurrentClientsMatchTheirSerialReplays) {
  run_with_timeout(90s, [] {
    check_concurrent_clients(11, 3, {.num_vars = 8, .num_ops = 1500});
    check_concurrent_clients(12, 4, {.num_vars = 24, .num_ops = 1000});
  });
}

// --- heavy differential tests (TAGFLOW_HEAVY_TESTS=1) ---------------------------------------
// One test per seed, so each stays well inside the ctest timeout.

class DifferentialHeavy : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!heavy_tests_enabled()) GTEST_SKIP() << "set TAGFLOW_HEAVY_TESTS=1 to run";
  }
};

TEST_P(DifferentialHeavy, RandomWorkloadMatchesSerialReplay) {
  const int seed = GetParam();
  run_with_timeout(600s, [seed] {
    const int num_vars = std::array{3, 8, 32, 256}[static_cast<std::size_t>(seed % 4)];
    check_single_client(1000 + static_cast<std::uint64_t>(seed),
                        {.num_vars = num_vars, .num_ops = 200'000});
  });
}

TEST_P(DifferentialHeavy, ConcurrentClientsMatchTheirSerialReplays) {
  const int seed = GetParam();
  run_with_timeout(600s, [seed] {
    check_concurrent_clients(2000 + static_cast<std::uint64_t>(seed), 2 + seed % 3,
                             {.num_vars = 4 + 12 * (seed % 3), .num_ops = 50'000});
  });
}

INSTANTIATE_TEST_SUITE_P(Differential, DifferentialHeavy, ::testing::Range(0, 12));

}  // namespace
}  // namespace tagflow
