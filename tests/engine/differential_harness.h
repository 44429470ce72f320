#pragma once
// What the differential test files (differential_test.cc and those beside
// it) share: the engines they compare, a pool of completer threads,
// operations built from a random workload's specs, and the comparisons with
// the serial replay (tests/engine/random_workload.h).

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/config.h"
#include "engine/engine.h"
#include "engine/inline_function.h"
#include "tests/engine/random_workload.h"

namespace tagflow::testing {

/// True when TAGFLOW_HEAVY_TESTS=1: the many-seed variants run too.
bool heavy_tests_enabled();

// --- the engines compared ------------------------------------------------------------

struct EngineSetup {
  const char* label;
  EngineKind kind;
  int cpu_workers;
  int worker_spin;  ///< -1: the configured default
  /// A controlled schedule (TAGFLOW_SCHEDULE's syntax), or null.
  const char* schedule = nullptr;
};

inline constexpr int kDefaultSpin = -1;
// The last setup never spins: workers sleep at once, exercising the wake-up path.
// The naive engine also runs under controlled schedules (Note [Controlled
// schedules] in engine/schedule.h): every order they pick must agree too.
inline constexpr std::array<EngineSetup, 7> kSetups = {{
    {"naive", EngineKind::kNaive, 1, kDefaultSpin},
    {"threaded, 1 worker", EngineKind::kThreaded, 1, kDefaultSpin},
    {"threaded, 2 workers", EngineKind::kThreaded, 2, kDefaultSpin},
    {"threaded, 4 workers", EngineKind::kThreaded, 4, kDefaultSpin},
    {"threaded, 2 workers, no spinning", EngineKind::kThreaded, 2, 0},
    {"naive, random schedule", EngineKind::kNaive, 1, kDefaultSpin, "random:5"},
    {"naive, PCT schedule", EngineKind::kNaive, 1, kDefaultSpin, "pct:5:3:500"},
}};

/// Simulated GPUs of every engine built here: gpu(0) and gpu(1) of the workloads.
inline constexpr int kSimGpus = 2;

/// `max_pending` >= 0 overrides the default bound on a client's run-ahead.
std::unique_ptr<Engine> build(const EngineSetup& setup, int max_pending = -1);

// --- completing asynchronous operations elsewhere -------------------------------------

/// Runs tasks posted by operations on a few threads of its own: completes
/// asynchronous operations away from the engine's workers.
class Completer {
 public:
  using Task = detail::InlineFunction<void(), 64>;

  explicit Completer(int num_threads);
  /// Runs every task posted so far, then joins.
  ~Completer();
  Completer(const Completer&) = delete;
  Completer& operator=(const Completer&) = delete;

  void post(Task task);

 private:
  void run();

  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<Task> tasks_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// --- operations of a random workload ------------------------------------------------

/// What the operations of one workload observed while running.
struct Probe {
  explicit Probe(std::size_t num_ops) : runs(num_ops) {}
  std::vector<std::atomic<std::uint32_t>> runs;  ///< times each op's work ran
  std::atomic<int> misrouted{0};  ///< ran with the wrong context, stream or worker index
};

/// Everything an operation's closure needs, shared by the ops of a workload.
struct Binding {
  Cell* const* table = nullptr;
  Probe* probe = nullptr;
  Completer* completer = nullptr;
  int cpu_workers = 1;
};

/// True when `rc` is where `op` must run: its context, on a GPU its queue's
/// stream and worker 0, on a CPU a worker of the pool and no stream.
bool routed_correctly(const Binding& b, const OpSpec& op, const RunContext& rc);

/// The operation of `op` over `vars`: applies the mix where the device's work
/// runs (on a GPU, in stream order), finishing as `op.finish` says. `b` and
/// `op` must outlive it.
Operation make_operation(const Binding& b, const OpSpec& op, const std::vector<VarHandle>& vars);

// --- comparing with the serial replay ----------------------------------------------

/// `cells` as the table apply() takes: entry v points at cell v.
std::vector<Cell*> table_of(std::vector<Cell>& cells);

/// Success when the cells are bit-identical; else names the first few that differ.
::testing::AssertionResult cells_match(const std::vector<Cell>& expected,
                                       const std::vector<Cell>& actual);

/// Success when every operation's work ran exactly once, where it should.
::testing::AssertionResult each_op_ran_once(const Probe& probe);

}  // namespace tagflow::testing
