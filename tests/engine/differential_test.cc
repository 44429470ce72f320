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
// Workloads are pushed by one client, by several at once, and by producers
// that never pause while another thread calls wait_for_all over and over:
// each call must return while they push, and when it does, every operation
// pushed before it must have run (Note [Waiting for all] in
// engine/detail/threaded_engine.h). Operations that push follow-up work,
// and failures, are in differential_service_test.cc.
//
// The quick tests run in CI in a few seconds; the heavy ones (many seeds,
// up to 200k operations each) only with TAGFLOW_HEAVY_TESTS=1. Every test
// body runs under a watchdog that aborts with the test's name on a deadlock.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <latch>
#include <memory>
#include <span>
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

using Clock = std::chrono::steady_clock;

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

static_assert(kSetups[0].kind == EngineKind::kNaive && kSetups[5].schedule != nullptr,
              "kSetups: the naive engine first, the controlled schedules last");
/// The engines without a controlled schedule, and those with one: the
/// heavy variants leave the latter out (they run one operation at a time,
/// covered by the regular tests, at the cost of the other five together).
constexpr std::span<const EngineSetup> kUncontrolledSetups = std::span(kSetups).first(5);
constexpr std::span<const EngineSetup> kScheduledSetups = std::span(kSetups).subspan(5);
using testing::kSimGpus;
using testing::make_operation;
using testing::OpSpec;
using testing::Probe;
using testing::replay;
using testing::Rng;
using testing::table_of;
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
void check_single_client(std::uint64_t seed, const WorkloadShape& shape,
                         std::span<const EngineSetup> setups = kSetups) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(shape.num_vars) +
               " variables, " + std::to_string(shape.num_ops) + " operations");
  const Workload w = generate(seed, shape);
  const Expected expected = replay(w, {});
  for (const EngineSetup& setup : setups) {
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
void check_concurrent_clients(std::uint64_t seed, int num_clients, const WorkloadShape& shape,
                              std::span<const EngineSetup> setups = kSetups) {
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

  for (const EngineSetup& setup : setups) {
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

// --- producers that never pause while another thread waits for all ---------------------
// Each producer owns its variables, so its own push order defines its serial
// replay: at the end, its cells must match the replay of exactly what it
// pushed.

/// One producer: its workload, its cells and variables, and how far it got.
struct Producer {
  explicit Producer(const Workload& w)
      : workload(w), cells(w.initial), table(table_of(cells)), probe(w.ops.size()) {}
  const Workload& workload;
  std::vector<Cell> cells;
  std::vector<Cell*> table;
  Probe probe;
  std::vector<VarHandle> vars;
  /// Operations whose push has returned: ops[0, pushed) are in the engine.
  std::atomic<std::size_t> pushed{0};
};

/// How long one wait_for_all may take while producers keep pushing, before
/// the producers are stopped (so that the test fails instead of hanging).
constexpr auto kWaitLimit = 20s;

/// What the waiting thread saw.
struct WaitLog {
  int waits = 0;
  int waits_while_pushing = 0;  ///< a push returned while the wait was under way
  std::string first_missing;    ///< an op pushed before a wait, not run when it returned
  int held_up = 0;  ///< the first wait during which a producer pushed all it had left (1-based)
};

/// `num_producers` threads push their workloads without pausing while this
/// thread calls wait_for_all over and over for `duration` (and until three
/// waits have overlapped pushes), on each engine of `setups`.
void check_waits_with_busy_producers(std::span<const EngineSetup> setups, std::uint64_t seed,
                                     int num_producers, const WorkloadShape& shape,
                                     Clock::duration duration) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(num_producers) +
               " producers, " + std::to_string(shape.num_vars) + " variables each");
  std::vector<Workload> workloads;
  for (int t = 0; t < num_producers; ++t) {
    WorkloadShape s = shape;
    s.id_base = (static_cast<std::uint64_t>(t) + 1) << 32;
    workloads.push_back(generate(splitmix64(seed) + static_cast<std::uint64_t>(t), s));
  }
  for (const EngineSetup& setup : setups) {
    SCOPED_TRACE(setup.label);
    // Each producer runs ahead by at most 4096 operations (Note [Bounded
    // run-ahead]), a tenth of its workload: waits then overlap its pushes.
    std::unique_ptr<Engine> engine = build(setup, 4096);
    std::vector<std::unique_ptr<Producer>> producers;
    for (const Workload& w : workloads) producers.push_back(std::make_unique<Producer>(w));
    std::atomic<bool> stop{false};
    std::atomic<bool> overran{false};
    WaitLog log;
    {
      Completer completer(2);  // joined before the engine goes away
      std::vector<Binding> bindings;
      for (auto& p : producers) {
        for (int v = 0; v < p->workload.num_vars; ++v) p->vars.push_back(engine->new_var());
        bindings.push_back({p->table.data(), &p->probe, &completer, setup.cpu_workers});
      }
      std::latch start(num_producers + 1);
      std::vector<std::thread> threads;
      for (std::size_t t = 0; t < producers.size(); ++t) {
        threads.emplace_back([&, t] {
          Producer& p = *producers[t];
          start.arrive_and_wait();
          try {
            for (const OpSpec& op : p.workload.ops) {
              if (stop.load(std::memory_order_relaxed)) break;
              engine->push(make_operation(bindings[t], op, p.vars));
              p.pushed.store(op.index + 1, std::memory_order_release);
            }
          } catch (const std::exception& e) {
            ADD_FAILURE() << "producer " << t << " threw: " << e.what();
          }
        });
      }
      // Should a wait not return while the producers push, stop them.
      std::atomic<std::int64_t> wait_began{0};  // steady_clock ticks; 0: not waiting
      std::thread guard([&] {
        while (!stop.load()) {
          std::this_thread::sleep_for(10ms);
          const std::int64_t began = wait_began.load();
          if (began != 0 && Clock::now().time_since_epoch().count() - began >
                                Clock::duration(kWaitLimit).count()) {
            overran.store(true);
            stop.store(true);
          }
        }
      });
      start.arrive_and_wait();
      std::vector<std::size_t> verified(producers.size(), 0);
      std::vector<std::size_t> before(producers.size());
      Rng pauses(seed);
      const auto end = Clock::now() + duration;
      // Waits begin while every producer has at least half its workload left:
      // far more than a backlog (Note [Bounded run-ahead] in
      // engine/detail/threaded_engine.h), so a wait that returns only once
      // one of them has pushed all the rest was held up by what it pushed
      // meanwhile.
      auto half_left = [&] {
        for (auto& p : producers) {
          if (p->pushed.load() > p->workload.ops.size() / 2) return false;
        }
        return true;
      };
      // At least three waits must see pushes return meanwhile, or the test
      // proves nothing; a loaded machine may take a while to give them.
      const auto give_up = Clock::now() + kWaitLimit;
      while ((Clock::now() < end || log.waits_while_pushing < 3) && Clock::now() < give_up &&
             half_left() && !stop.load()) {
        std::this_thread::sleep_for(std::chrono::microseconds(pauses.below(1500)));
        for (std::size_t t = 0; t < producers.size(); ++t)
          before[t] = producers[t]->pushed.load(std::memory_order_acquire);
        wait_began.store(Clock::now().time_since_epoch().count());
        EXPECT_NO_THROW(engine->wait_for_all());
        wait_began.store(0);
        ++log.waits;
        bool pushing = false, ran_out = false;
        for (std::size_t t = 0; t < producers.size(); ++t) {
          const Producer& p = *producers[t];
          const std::size_t now_pushed = p.pushed.load();
          pushing = pushing || now_pushed > before[t];
          ran_out = ran_out || now_pushed == p.workload.ops.size();
          for (std::size_t i = verified[t]; i < before[t] && log.first_missing.empty(); ++i) {
            if (p.probe.runs[i].load(std::memory_order_relaxed) == 0) {
              log.first_missing = "producer " + std::to_string(t) + "'s operation " +
                                  std::to_string(i) + " of the " + std::to_string(before[t]) +
                                  " pushed before wait_for_all #" + std::to_string(log.waits) +
                                  " had not run when it returned";
            }
          }
          verified[t] = std::max(verified[t], before[t]);
        }
        log.waits_while_pushing += pushing ? 1 : 0;
        if (ran_out && log.held_up == 0) log.held_up = log.waits;
      }
      stop.store(true);
      for (std::thread& t : threads) t.join();
      guard.join();
      EXPECT_NO_THROW(engine->wait_for_all());
      for (std::size_t t = 0; t < producers.size(); ++t) {
        SCOPED_TRACE("producer " + std::to_string(t));
        Producer& p = *producers[t];
        const std::size_t n = p.pushed.load();
        Workload prefix = p.workload;
        prefix.ops.resize(n);
        EXPECT_TRUE(cells_match(replay(prefix, {}).cells, p.cells));
        for (std::size_t i = 0; i < p.workload.ops.size(); ++i) {
          const std::uint32_t runs = p.probe.runs[i].load();
          if (runs != (i < n ? 1U : 0U)) {
            ADD_FAILURE() << "operation " << i << " ran " << runs << " times (" << n << " pushed)";
            break;
          }
        }
        EXPECT_EQ(p.probe.misrouted.load(), 0);
        for (VarHandle v : p.vars) engine->delete_var(v);
      }
      EXPECT_NO_THROW(engine->wait_for_all());
    }
    EXPECT_FALSE(overran.load()) << "a wait_for_all did not return within "
                                 << std::chrono::seconds(kWaitLimit).count()
                                 << " s while the producers kept pushing";
    EXPECT_EQ(log.held_up, 0) << "wait_for_all #" << log.held_up
                              << " returned only once a producer had pushed the rest of its "
                                 "workload: it was held up by what was pushed while it waited";
    EXPECT_TRUE(log.first_missing.empty()) << log.first_missing;
    EXPECT_GE(log.waits_while_pushing, 3) << "of " << log.waits << " waits";
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

constexpr std::span<const EngineSetup> kThreadedSetups = std::span(kSetups).subspan(1, 4);
constexpr std::span<const EngineSetup> kNaiveSetup = std::span(kSetups).first(1);

TEST(Differential, WaitForAllWithProducersThatNeverPause) {
  run_with_timeout(90s, [] {
    check_waits_with_busy_producers(kThreadedSetups, 31, 3, {.num_vars = 6, .num_ops = 40'000},
                                    100ms);
    check_waits_with_busy_producers(kThreadedSetups, 32, 2, {.num_vars = 24, .num_ops = 40'000},
                                    100ms);
  });
}

// The naive engine hands pushes over to the thread holding it while an
// asynchronous operation awaits its Completion (Note [Naive engine order]):
// its wait must still be bounded by what was pushed before it (Note [Naive
// wait_for_all]).
TEST(Differential, WaitForAllWithProducersThatNeverPauseOnTheNaiveEngine) {
  run_with_timeout(90s, [] {
    check_waits_with_busy_producers(kNaiveSetup, 31, 3, {.num_vars = 6, .num_ops = 40'000}, 100ms);
  });
}

// Under a controlled schedule pushes are kept until a wait runs them (Note
// [Controlled schedules]): a wait_for_all still runs only what came before it.
TEST(Differential, WaitForAllWithProducersThatNeverPauseUnderControlledSchedules) {
  run_with_timeout(90s, [] {
    check_waits_with_busy_producers(kScheduledSetups, 33, 3, {.num_vars = 6, .num_ops = 20'000},
                                    100ms);
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
                        {.num_vars = num_vars, .num_ops = 200'000}, kUncontrolledSetups);
  });
}

TEST_P(DifferentialHeavy, ConcurrentClientsMatchTheirSerialReplays) {
  const int seed = GetParam();
  run_with_timeout(600s, [seed] {
    check_concurrent_clients(2000 + static_cast<std::uint64_t>(seed), 2 + seed % 3,
                             {.num_vars = 4 + 12 * (seed % 3), .num_ops = 50'000},
                             kUncontrolledSetups);
  });
}

TEST_P(DifferentialHeavy, WaitForAllWithProducersThatNeverPause) {
  const int seed = GetParam();
  run_with_timeout(600s, [seed] {
    check_waits_with_busy_producers(kThreadedSetups, 3000 + static_cast<std::uint64_t>(seed),
                                    2 + seed % 4,
                                    {.num_vars = 3 + 10 * (seed % 3), .num_ops = 60'000}, 1s);
  });
}

INSTANTIATE_TEST_SUITE_P(Differential, DifferentialHeavy, ::testing::Range(0, 12));

}  // namespace
}  // namespace tagflow
