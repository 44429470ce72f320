// Differential tests of the engines under a pattern long-running services
// use: follow-up work pushed from an operation's closure, or from the thread
// that completes it, before it calls done() or fail() or drops its
// Completion (service_patterns_test.cc states the contract on small cases).
// The test thread pushes a random workload over cpu(0..2) and two simulated
// GPUs; some of its operations push follow-ups, which may push their own.
// Some operations fail, and what reads what they wrote is skipped (Note
// [Errors on variables] in engine/engine.h). A serial replay in push order
// models all of it: the cells, which operations run, and where each
// variable's error comes from must match it on the naive engine and the
// threaded engine at 1, 2 and 4 workers.
//
// Every test body runs under a watchdog that aborts with the test's name on
// a deadlock; the heavy variants run with TAGFLOW_HEAVY_TESTS=1.

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "tests/engine/differential_harness.h"
#include "tests/engine/random_workload.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;

using testing::apply;
using testing::Binding;
using testing::build;
using testing::Cell;
using testing::cells_match;
using testing::Completer;
using testing::EngineSetup;
using testing::Finish;
using testing::heavy_tests_enabled;
using testing::kSetups;
using testing::OpSpec;
using testing::Rng;
using testing::run_with_timeout;
using testing::table_of;

using Clock = std::chrono::steady_clock;

// --- follow-up work pushed by closures and by completing threads ----------------------

/// How an operation of a service workload ends.
enum class Outcome : std::uint8_t {
  kSucceed,
  kFail,  ///< throws from its closure, or its Completion's fail(); does no work
  kDrop,  ///< asynchronous: its Completion is destroyed unused; does no work
};

/// Who pushes an operation's follow-ups: its closure (before it does its
/// work), or the completer thread it hands its Completion to (before done(),
/// fail() or the drop).
enum class Pusher : std::uint8_t { kClosure, kCompleter };

struct ServiceOp {
  OpSpec spec;  ///< spec.index: its position in ServiceWorkload::ops
  Outcome outcome = Outcome::kSucceed;
  Pusher pusher = Pusher::kClosure;
  std::vector<std::uint32_t> follow_ups;  ///< pushed in this order, only if it runs
  int lend = -1;                          ///< the lend its follow-ups belong to
  bool is_follow_up = false;
};

// Note [A sink for each dropped Completion]
// An operation that drops its Completion also writes a variable of its own
// that nothing else touches, so its error (or the one it inherits) stays
// referenced until the end of the run, where the test checks it. Besides,
// the engine makes a dropped Completion's error in a temporary that the
// dropping thread destroys only after fail() has returned; the error the
// engine keeps shares its message with that temporary, through a reference
// count inside the C++ library, which ThreadSanitizer does not see. Were the
// engine to let go of its copy first, the completer thread would free the
// message after the engine's thread read it, and ThreadSanitizer would
// report a race; with the sink holding the copy, it never frees it.

// Note [Lent variables]
// A follow-up is pushed from another thread at a moment no seed decides, so
// its place in push order against the test thread's pushes is not fixed; the
// replay needs it fixed only against operations on the same variables. So
// the test thread lends the variables an operation with follow-ups touches
// (sometimes one more) to that operation's follow-ups, which touch nothing
// else, and pushes nothing on them until every follow-up the replay says
// will be pushed has been; lends in flight hold disjoint variables. Only the
// last follow-up of an operation may have follow-ups of its own, pushed
// after its siblings. Then every conflicting pair is pushed in one order on
// every engine: the parent, its follow-ups depth first, then the test
// thread's next operation on those variables.
struct ServiceWorkload {
  int num_vars = 0;
  std::vector<Cell> initial;
  std::vector<ServiceOp> ops;
  std::vector<std::uint32_t> roots;     ///< pushed by the test thread, in this order
  std::vector<std::vector<int>> lends;  ///< the variables of each lend
};

constexpr std::array<Context, 5> kContexts = {cpu(0), cpu(1), cpu(2), gpu(0), gpu(1)};
constexpr int kMaxFollowUpDepth = 3;

ServiceWorkload generate_service(std::uint64_t seed, int num_vars, int num_roots) {
  Rng rng(seed);
  ServiceWorkload w;
  w.num_vars = num_vars;
  w.initial.resize(static_cast<std::size_t>(num_vars));
  for (Cell& c : w.initial) {
    for (auto& word : c.words) word = rng.next();
  }
  const int hot = std::min(4, num_vars);
  auto any_var = [&] { return rng.chance(50) ? rng.below(hot) : rng.below(num_vars); };
  // A new operation, all but its variables; asynchronous when `async`.
  auto add_op = [&](bool async) {
    ServiceOp op;
    op.spec.index = static_cast<std::uint32_t>(w.ops.size());
    op.spec.id = (seed << 24) + op.spec.index;
    op.spec.ctx = kContexts[static_cast<std::size_t>(rng.below(5))];
    op.spec.queue = op.spec.ctx.is_gpu() && rng.chance(35) ? QueueKind::kCopy : QueueKind::kCompute;
    op.spec.priority = rng.chance(20) ? rng.below(5) - 2 : 0;
    const int finish = rng.below(100);
    op.spec.finish = async || finish >= 70
                         ? (rng.chance(50) ? Finish::kDoneElsewhere : Finish::kWorkElsewhere)
                         : Finish::kSync;
    const bool is_async = op.spec.finish != Finish::kSync;
    const int outcome = rng.below(100);
    op.outcome = outcome < 5               ? Outcome::kFail
                 : outcome < 8 && is_async ? Outcome::kDrop
                                           : Outcome::kSucceed;
    op.spec.slow = rng.below(1000) < 3;
    w.ops.push_back(std::move(op));
    return static_cast<std::uint32_t>(w.ops.size() - 1);
  };
  auto pick_vars = [&](OpSpec& s, auto&& pick) {
    const int num_reads = rng.below(3);
    for (int r = 0; r < num_reads; ++r) s.reads.push_back(pick());
    const int num_writes = 1 + rng.below(2);
    for (int k = 0; k < num_writes; ++k) s.writes.push_back(pick());
    if (rng.chance(20)) s.reads.push_back(s.writes.back());  // read-modify-write
  };
  // Follow-ups over the lend's variables, mostly on what their parent writes.
  auto add_follow_ups = [&](auto&& self, std::uint32_t parent, int lend, int depth) -> void {
    const int count = 1 + rng.below(3);
    for (int j = 0; j < count; ++j) {
      const bool chained = j == count - 1 && depth < kMaxFollowUpDepth && rng.chance(40);
      const bool from_completer = chained && rng.chance(60);
      const std::uint32_t child = add_op(from_completer);
      ServiceOp& c = w.ops[child];
      c.is_follow_up = true;
      c.lend = lend;
      const std::vector<int> parent_writes = w.ops[parent].spec.writes;
      const std::vector<int>& vars = w.lends[static_cast<std::size_t>(lend)];
      pick_vars(c.spec, [&] {
        if (rng.chance(60))
          return parent_writes[static_cast<std::size_t>(
              rng.below(static_cast<int>(parent_writes.size())))];
        return vars[static_cast<std::size_t>(rng.below(static_cast<int>(vars.size())))];
      });
      w.ops[parent].follow_ups.push_back(child);
      if (chained) {
        w.ops[child].pusher = from_completer ? Pusher::kCompleter : Pusher::kClosure;
        self(self, child, lend, depth + 1);
      }
    }
  };
  for (int i = 0; i < num_roots; ++i) {
    const bool has_follow_ups = rng.chance(35);
    const bool from_completer = has_follow_ups && rng.chance(60);
    const std::uint32_t root = add_op(from_completer);
    w.roots.push_back(root);
    pick_vars(w.ops[root].spec, any_var);
    if (!has_follow_ups) continue;
    w.ops[root].pusher = from_completer ? Pusher::kCompleter : Pusher::kClosure;
    std::vector<int> lent = w.ops[root].spec.reads;
    lent.insert(lent.end(), w.ops[root].spec.writes.begin(), w.ops[root].spec.writes.end());
    if (rng.chance(30)) lent.push_back(rng.below(num_vars));
    std::sort(lent.begin(), lent.end());
    lent.erase(std::unique(lent.begin(), lent.end()), lent.end());
    w.ops[root].lend = static_cast<int>(w.lends.size());
    w.lends.push_back(std::move(lent));
    add_follow_ups(add_follow_ups, root, w.ops[root].lend, 1);
  }
  // Note [A sink for each dropped Completion].
  for (ServiceOp& op : w.ops) {
    if (op.outcome != Outcome::kDrop) continue;
    op.spec.writes.push_back(w.num_vars++);
    Cell& sink = w.initial.emplace_back();
    for (auto& word : sink.words) word = rng.next();
  }
  return w;
}

/// The serial replay of a service workload, errors included.
struct ServiceExpected {
  std::vector<Cell> cells;
  /// Per variable, the operations its error may come from (more than one
  /// when an operation read several failed variables); empty: no error.
  std::vector<std::vector<std::uint32_t>> error_from;
  std::vector<std::uint32_t> runs;         ///< per op: its closure runs (1) or it is skipped (0)
  std::vector<std::uint32_t> lend_pushes;  ///< per lend: follow-ups pushed
  bool any_failure = false;
};

ServiceExpected replay_service(const ServiceWorkload& w) {
  ServiceExpected e;
  e.cells = w.initial;
  e.error_from.resize(static_cast<std::size_t>(w.num_vars));
  e.runs.assign(w.ops.size(), 0);
  e.lend_pushes.assign(w.lends.size(), 0);
  const std::vector<Cell*> table = table_of(e.cells);
  auto visit = [&](auto&& self, std::uint32_t i) -> void {
    const ServiceOp& op = w.ops[i];
    // Note [Errors on variables]: what reads a failed variable is skipped and
    // passes the error on to what it writes.
    std::vector<std::uint32_t> inherited;
    for (int r : op.spec.reads) {
      const auto& from = e.error_from[static_cast<std::size_t>(r)];
      inherited.insert(inherited.end(), from.begin(), from.end());
    }
    if (!inherited.empty()) {
      std::sort(inherited.begin(), inherited.end());
      inherited.erase(std::unique(inherited.begin(), inherited.end()), inherited.end());
      for (int v : op.spec.writes) e.error_from[static_cast<std::size_t>(v)] = inherited;
      return;
    }
    e.runs[i] = 1;
    if (op.outcome == Outcome::kSucceed) {
      apply(op.spec, table.data());
      for (int v : op.spec.writes) e.error_from[static_cast<std::size_t>(v)].clear();
    } else {
      e.any_failure = true;
      for (int v : op.spec.writes) e.error_from[static_cast<std::size_t>(v)] = {i};
    }
    for (std::uint32_t f : op.follow_ups) {
      ++e.lend_pushes[static_cast<std::size_t>(op.lend)];
      self(self, f);
    }
  };
  for (std::uint32_t root : w.roots) visit(visit, root);
  return e;
}

std::string failure_message(std::uint32_t op) {
  return "service operation " + std::to_string(op) + " failed";
}

/// A service workload running on one engine.
struct ServiceRun {
  ServiceRun(Engine& e, const ServiceWorkload& workload, Completer& c, int workers)
      : engine(&e),
        w(&workload),
        completer(&c),
        cpu_workers(workers),
        cells(workload.initial),
        table(table_of(cells)),
        runs(workload.ops.size()),
        lend_pushes(workload.lends.size()) {}
  Engine* engine;
  const ServiceWorkload* w;
  Completer* completer;
  int cpu_workers;
  std::vector<Cell> cells;
  std::vector<Cell*> table;
  std::vector<VarHandle> vars;
  std::vector<std::atomic<std::uint32_t>> runs;  ///< per op: its closure was called
  std::vector<std::atomic<std::uint32_t>> lend_pushes;
  std::atomic<int> misrouted{0};
  std::atomic<int> push_errors{0};
};

void push_service_op(ServiceRun& run, std::uint32_t i);

void push_follow_ups(ServiceRun& run, const ServiceOp& op) {
  for (std::uint32_t f : op.follow_ups) {
    push_service_op(run, f);
    run.lend_pushes[static_cast<std::size_t>(op.lend)].fetch_add(1, std::memory_order_release);
  }
}

/// Applies op `i`'s mix where the device's work runs: here on a CPU, in
/// stream order on a GPU.
void do_work(ServiceRun& run, std::uint32_t i, Stream* stream) {
  ServiceRun* r = &run;
  auto work = [r, i] {
    const OpSpec& spec = r->w->ops[i].spec;
    if (spec.slow) std::this_thread::sleep_for(2ms);
    apply(spec, r->table.data());
  };
  if (stream != nullptr) {
    stream->enqueue_host(work);
  } else {
    work();
  }
}

/// The end of an asynchronous op `i`, on a completer thread.
void complete_service_op(ServiceRun& run, std::uint32_t i, Stream* stream, Completion done) {
  const ServiceOp& op = run.w->ops[i];
  if (op.pusher == Pusher::kCompleter) push_follow_ups(run, op);
  if (op.spec.finish == Finish::kWorkElsewhere && op.outcome == Outcome::kSucceed) {
    // A thread of ours launching onto the GPU selects it first (Note
    // [Simulated CUDA rules]).
    if (stream != nullptr) stream->make_device_current();
    do_work(run, i, stream);
  }
  switch (op.outcome) {
    case Outcome::kSucceed:
      done.done();
      break;
    case Outcome::kFail: {
      // Made before the call: the temporary runtime_error, whose message the
      // engine may be reading once fail() returns, is gone by then (its
      // string's reference count is invisible to ThreadSanitizer).
      std::exception_ptr error = std::make_exception_ptr(std::runtime_error(failure_message(i)));
      done.fail(std::move(error));
      break;
    }
    case Outcome::kDrop: {  // Note [A sink for each dropped Completion]
      const Completion dropped = std::move(done);
      break;
    }
  }
}

void push_service_op(ServiceRun& run, std::uint32_t i) {
  const ServiceOp& op = run.w->ops[i];
  Operation o;
  o.name = op.spec.ctx.is_gpu() ? "differential_service_gpu_op" : "differential_service_cpu_op";
  o.ctx = op.spec.ctx;
  o.queue = op.spec.queue;
  o.priority = op.spec.priority;
  for (int r : op.spec.reads) o.reads.push_back(run.vars[static_cast<std::size_t>(r)]);
  for (int v : op.spec.writes) o.writes.push_back(run.vars[static_cast<std::size_t>(v)]);
  ServiceRun* r = &run;
  auto started = [r, i](const RunContext& rc) {
    r->runs[i].fetch_add(1, std::memory_order_relaxed);
    const Binding routing{.cpu_workers = r->cpu_workers};
    if (!testing::routed_correctly(routing, r->w->ops[i].spec, rc)) r->misrouted.fetch_add(1);
  };
  if (op.spec.finish == Finish::kSync) {
    o.fn = [r, i, started](const RunContext& rc) {
      started(rc);
      const ServiceOp& me = r->w->ops[i];
      push_follow_ups(*r, me);
      if (me.outcome == Outcome::kFail) throw std::runtime_error(failure_message(i));
      do_work(*r, i, rc.stream);
    };
  } else {
    o.fn = [r, i, started](const RunContext& rc, Completion done) {
      started(rc);
      const ServiceOp& me = r->w->ops[i];
      if (me.pusher == Pusher::kClosure) push_follow_ups(*r, me);
      if (me.spec.finish == Finish::kDoneElsewhere && me.outcome == Outcome::kSucceed)
        do_work(*r, i, rc.stream);
      r->completer->post([r, i, stream = rc.stream, done = std::move(done)]() mutable {
        complete_service_op(*r, i, stream, std::move(done));
      });
    };
  }
  try {
    run.engine->push(std::move(o));
  } catch (const std::exception& e) {
    run.push_errors.fetch_add(1);
    ADD_FAILURE() << "push of operation " << i << " threw: " << e.what();
  }
}

/// Success when `var`'s error is the replay's: none, or one raised by an
/// operation of `from` (its own failure, or its dropped Completion).
::testing::AssertionResult error_matches(Engine& engine, VarHandle var,
                                         const std::vector<std::uint32_t>& from,
                                         const ServiceWorkload& w) {
  try {
    engine.wait_to_read(var);
  } catch (const OperationError& error) {
    if (from.empty()) return ::testing::AssertionFailure() << "unexpected error: " << error.what();
    bool dropped = false;
    std::string cause;
    try {
      std::rethrow_exception(error.cause());
    } catch (const Error& e) {  // the engine's, for a dropped Completion
      dropped = true;
      cause = e.what();
    } catch (const std::exception& e) {
      cause = e.what();
    }
    for (std::uint32_t o : from) {
      const ServiceOp& op = w.ops[o];
      if (error.context() != op.spec.ctx) continue;
      if (op.outcome == Outcome::kFail && !dropped && cause == failure_message(o))
        return ::testing::AssertionSuccess();
      if (op.outcome == Outcome::kDrop && dropped) return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure()
           << "error \"" << error.what() << "\" comes from none of the " << from.size()
           << " operation(s) expected, first " << from.front();
  } catch (const std::exception& e) {
    return ::testing::AssertionFailure() << "not an OperationError: " << e.what();
  }
  if (!from.empty())
    return ::testing::AssertionFailure() << "no error, expected one from operation " << from[0];
  return ::testing::AssertionSuccess();
}

/// Waits until every follow-up of lend `l` the replay expects has been
/// pushed (Note [Lent variables]). After 10 s, fails the test and returns false.
bool await_lend(const ServiceRun& run, const ServiceExpected& expected, int l) {
  const auto limit = Clock::now() + 10s;
  const auto& pushed = run.lend_pushes[static_cast<std::size_t>(l)];
  const std::uint32_t want = expected.lend_pushes[static_cast<std::size_t>(l)];
  while (pushed.load(std::memory_order_acquire) < want) {
    if (Clock::now() > limit) {
      ADD_FAILURE() << "lend " << l << ": " << pushed.load() << " of its " << want
                    << " follow-ups pushed after 10 s (an operation skipped, or never completed?)";
      return false;
    }
    std::this_thread::yield();
  }
  return true;
}

/// The test thread pushes the roots of a service workload while closures
/// and completer threads push their follow-ups, on each engine.
void check_follow_ups(std::uint64_t seed, int num_vars, int num_roots) {
  SCOPED_TRACE("seed " + std::to_string(seed) + ", " + std::to_string(num_vars) + " variables, " +
               std::to_string(num_roots) + " operations of the test thread");
  const ServiceWorkload w = generate_service(seed, num_vars, num_roots);
  const ServiceExpected expected = replay_service(w);
  for (const EngineSetup& setup : kSetups) {
    // The test waits for follow-ups by watching them being pushed, not
    // through the engine: a controlled schedule runs nothing until a wait
    // (Note [Controlled schedules]).
    if (setup.schedule != nullptr) continue;
    SCOPED_TRACE(setup.label);
    std::unique_ptr<Engine> engine = build(setup);
    {
      Completer completer(3);  // joined after the last wait, before the engine goes away
      ServiceRun run(*engine, w, completer, setup.cpu_workers);
      for (int v = 0; v < w.num_vars; ++v) run.vars.push_back(engine->new_var());
      std::vector<int> lent_to(static_cast<std::size_t>(w.num_vars), -1);
      bool lend_lost = false;  // then the test has failed: wait for no other
      auto take_back = [&](int v) {
        const int l = lent_to[static_cast<std::size_t>(v)];
        if (l < 0) return;
        lend_lost = lend_lost || !await_lend(run, expected, l);
        for (int u : w.lends[static_cast<std::size_t>(l)])
          lent_to[static_cast<std::size_t>(u)] = -1;
      };
      for (std::uint32_t root : w.roots) {
        const ServiceOp& op = w.ops[root];
        for (int v : op.spec.reads) take_back(v);
        for (int v : op.spec.writes) take_back(v);
        if (op.lend >= 0) {
          for (int v : w.lends[static_cast<std::size_t>(op.lend)]) take_back(v);
          for (int v : w.lends[static_cast<std::size_t>(op.lend)])
            lent_to[static_cast<std::size_t>(v)] = op.lend;
        }
        push_service_op(run, root);
      }
      for (int v = 0; v < w.num_vars; ++v) take_back(v);
      // Everything is pushed: the first failure comes back once, then nothing.
      if (expected.any_failure) {
        EXPECT_THROW(engine->wait_for_all(), OperationError);
      } else {
        EXPECT_NO_THROW(engine->wait_for_all());
      }
      EXPECT_NO_THROW(engine->wait_for_all());
      EXPECT_TRUE(cells_match(expected.cells, run.cells));
      for (std::size_t i = 0; i < w.ops.size(); ++i) {
        if (run.runs[i].load() != expected.runs[i]) {
          ADD_FAILURE() << "operation " << i << (w.ops[i].is_follow_up ? " (a follow-up)" : "")
                        << " ran " << run.runs[i].load() << " times, expected " << expected.runs[i];
          break;
        }
      }
      for (int v = 0; v < w.num_vars; ++v) {
        EXPECT_TRUE(error_matches(*engine, run.vars[static_cast<std::size_t>(v)],
                                  expected.error_from[static_cast<std::size_t>(v)], w))
            << "variable " << v;
      }
      EXPECT_EQ(run.misrouted.load(), 0) << "operations run with the wrong context or stream";
      EXPECT_EQ(run.push_errors.load(), 0);
      for (VarHandle v : run.vars) engine->delete_var(v);
      EXPECT_NO_THROW(engine->wait_for_all());
    }
  }
}

// --- the checker checks ------------------------------------------------------------------

// The workloads must hold what the test claims to exercise, and the errors
// must change the replay: a replay where no operation fails disagrees.
TEST(DifferentialService, WorkloadsExerciseEveryPatternAndErrorsChangeTheReplay) {
  const ServiceWorkload w = generate_service(21, 12, 800);
  const ServiceExpected e = replay_service(w);
  int fails = 0, drops = 0, by_closure = 0, by_completer = 0, nested = 0, skipped = 0;
  int skipped_follow_ups = 0, follow_ups_on_parent_writes = 0, gpu = 0, async = 0;
  for (const ServiceOp& op : w.ops) {
    fails += op.outcome == Outcome::kFail ? 1 : 0;
    drops += op.outcome == Outcome::kDrop ? 1 : 0;
    gpu += op.spec.ctx.is_gpu() ? 1 : 0;
    async += op.spec.finish != Finish::kSync ? 1 : 0;
    skipped += e.runs[op.spec.index] == 0 ? 1 : 0;
    skipped_follow_ups += op.is_follow_up && e.runs[op.spec.index] == 0 ? 1 : 0;
    if (op.follow_ups.empty()) continue;
    (op.pusher == Pusher::kClosure ? by_closure : by_completer) += 1;
    nested += op.is_follow_up ? 1 : 0;
    for (std::uint32_t f : op.follow_ups) {
      for (int r : w.ops[f].spec.reads) {
        follow_ups_on_parent_writes +=
            std::count(op.spec.writes.begin(), op.spec.writes.end(), r) > 0 ? 1 : 0;
      }
    }
  }
  int failed_at_end = 0;
  for (const auto& from : e.error_from) failed_at_end += from.empty() ? 0 : 1;
  EXPECT_GT(fails, 0);
  EXPECT_GT(drops, 0);
  EXPECT_GT(by_closure, 0);
  EXPECT_GT(by_completer, 0);
  EXPECT_GT(nested, 0);
  EXPECT_GT(skipped, 0);
  EXPECT_GT(skipped_follow_ups, 0);
  EXPECT_GT(follow_ups_on_parent_writes, 0);
  EXPECT_GT(gpu, 0);
  EXPECT_GT(async, 0);
  EXPECT_GT(failed_at_end, 0);
  EXPECT_LT(failed_at_end, w.num_vars);

  ServiceWorkload no_failures = w;
  for (ServiceOp& op : no_failures.ops) op.outcome = Outcome::kSucceed;
  EXPECT_FALSE(cells_match(e.cells, replay_service(no_failures).cells));
}

// --- quick differential tests (CI) -------------------------------------------------------

TEST(DifferentialService, FollowUpsPushedByClosuresAndCompletersMatchTheSerialReplay) {
  run_with_timeout(90s, [] {
    // Few variables: long chains and errors that travel far; more: parallelism.
    check_follow_ups(41, 5, 600);
    check_follow_ups(42, 12, 800);
    check_follow_ups(43, 40, 800);
  });
}

// --- heavy differential tests (TAGFLOW_HEAVY_TESTS=1) ---------------------------------------

class DifferentialServiceHeavy : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (!heavy_tests_enabled()) GTEST_SKIP() << "set TAGFLOW_HEAVY_TESTS=1 to run";
  }
};

TEST_P(DifferentialServiceHeavy, FollowUpsMatchTheSerialReplay) {
  const int seed = GetParam();
  run_with_timeout(600s, [seed] {
    const int num_vars = std::array{3, 8, 24, 96}[static_cast<std::size_t>(seed % 4)];
    check_follow_ups(4000 + static_cast<std::uint64_t>(seed), num_vars, 20'000);
  });
}

INSTANTIATE_TEST_SUITE_P(DifferentialService, DifferentialServiceHeavy, ::testing::Range(0, 12));

}  // namespace
}  // namespace tagflow
