#include "tests/engine/differential_harness.h"

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "engine/stream.h"

namespace tagflow::testing {

using namespace std::chrono_literals;

bool heavy_tests_enabled() {
  const char* flag = std::getenv("TAGFLOW_HEAVY_TESTS");
  return flag != nullptr && std::string(flag) == "1";
}

std::unique_ptr<Engine> build(const EngineSetup& setup, int max_pending) {
  EngineConfig config = EngineConfig::defaults();
  config.kind = setup.kind;
  config.cpu_workers = setup.cpu_workers;
  if (setup.worker_spin >= 0) config.worker_spin = setup.worker_spin;
  if (max_pending >= 0) config.max_pending = max_pending;
  config.sim_gpus = kSimGpus;
  if (setup.schedule != nullptr) config.schedule = ScheduleOptions::parse(setup.schedule);
  return make_engine(config);
}

// --- Completer ----------------------------------------------------------------------

Completer::Completer(int num_threads) {
  for (int i = 0; i < num_threads; ++i) threads_.emplace_back([this] { run(); });
}

Completer::~Completer() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Completer::post(Task task) {
  {
    std::lock_guard lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

void Completer::run() {
  for (;;) {
    Task task;
    {
      std::unique_lock lock(mutex_);
      ready_.wait(lock, [&] { return stopping_ || !tasks_.empty(); });
      if (tasks_.empty()) return;
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    task();
  }
}

// --- operations ----------------------------------------------------------------------

namespace {

void run_work(const Binding& b, const OpSpec& op) {
  if (op.slow) std::this_thread::sleep_for(2ms);
  apply(op, b.table);
  b.probe->runs[op.index].fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

bool routed_correctly(const Binding& b, const OpSpec& op, const RunContext& rc) {
  if (rc.ctx != op.ctx || rc.worker < 0) return false;
  if (op.ctx.is_cpu()) return rc.stream == nullptr && rc.worker < b.cpu_workers;
  return rc.stream != nullptr && rc.stream->context() == op.ctx && rc.stream->kind() == op.queue &&
         rc.worker == 0;
}

Operation make_operation(const Binding& b, const OpSpec& op, const std::vector<VarHandle>& vars) {
  Operation o;
  o.name = op.ctx.is_gpu() ? "differential_gpu_op" : "differential_cpu_op";
  o.ctx = op.ctx;
  o.queue = op.queue;
  o.priority = op.priority;
  for (int r : op.reads) o.reads.push_back(vars[static_cast<std::size_t>(r)]);
  for (int v : op.writes) o.writes.push_back(vars[static_cast<std::size_t>(v)]);
  const Binding* bp = &b;
  const OpSpec* opp = &op;
  auto check_route = [bp, opp](const RunContext& rc) {
    if (!routed_correctly(*bp, *opp, rc)) bp->probe->misrouted.fetch_add(1);
  };
  switch (op.finish) {
    case Finish::kSync:
      o.fn = [bp, opp, check_route](const RunContext& rc) {
        check_route(rc);
        if (rc.stream != nullptr) {
          rc.stream->enqueue_host([bp, opp] { run_work(*bp, *opp); });
        } else {
          run_work(*bp, *opp);
        }
      };
      break;
    case Finish::kDoneElsewhere:
      o.fn = [bp, opp, check_route](const RunContext& rc, Completion done) {
        check_route(rc);
        if (rc.stream != nullptr) {
          rc.stream->enqueue_host([bp, opp] { run_work(*bp, *opp); });
        } else {
          run_work(*bp, *opp);
        }
        bp->completer->post([done = std::move(done)]() mutable { done.done(); });
      };
      break;
    case Finish::kWorkElsewhere:
      o.fn = [bp, opp, check_route](const RunContext& rc, Completion done) {
        check_route(rc);
        bp->completer->post([bp, opp, stream = rc.stream, done = std::move(done)]() mutable {
          if (stream != nullptr) {
            // Another thread launching onto the GPU selects it first, as
            // CUDA requires (Note [Simulated CUDA rules]).
            stream->make_device_current();
            stream->enqueue_host([bp, opp] { run_work(*bp, *opp); });
          } else {
            run_work(*bp, *opp);
          }
          done.done();
        });
      };
      break;
  }
  return o;
}

// --- comparisons ---------------------------------------------------------------------

std::vector<Cell*> table_of(std::vector<Cell>& cells) {
  std::vector<Cell*> table;
  for (Cell& c : cells) table.push_back(&c);
  return table;
}

::testing::AssertionResult cells_match(const std::vector<Cell>& expected,
                                       const std::vector<Cell>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure()
           << "expected " << expected.size() << " cells, got " << actual.size();
  }
  int wrong = 0;
  std::string detail;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == actual[i]) continue;
    if (++wrong <= 3) {
      char line[160];
      std::snprintf(line, sizeof line, "\n  cell %zu: word0 expected %016llx, got %016llx", i,
                    static_cast<unsigned long long>(expected[i].words[0]),
                    static_cast<unsigned long long>(actual[i].words[0]));
      detail += line;
    }
  }
  if (wrong == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << wrong << " of " << expected.size() << " cells differ from the serial replay" << detail;
}

::testing::AssertionResult each_op_ran_once(const Probe& probe) {
  for (std::size_t i = 0; i < probe.runs.size(); ++i) {
    const std::uint32_t n = probe.runs[i].load();
    if (n != 1)
      return ::testing::AssertionFailure() << "operation " << i << " ran " << n << " times";
  }
  if (probe.misrouted.load() != 0) {
    return ::testing::AssertionFailure()
           << probe.misrouted.load()
           << " operation(s) ran with the wrong context, stream or worker";
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tagflow::testing
