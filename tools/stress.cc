#include "tools/stress.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "tagflow/tagflow.h"

namespace tagflow::tools {

namespace {

using namespace stress;
using Clock = std::chrono::steady_clock;

/// The memory a variable guards. `in_flight` counts step bodies touching it,
/// so a deleter that runs too early is caught.
struct Cell {
  Value value;
  std::atomic<int> in_flight{0};
};

/// What every client shares: devices, the shared constants, the checks'
/// counters.
struct Shared {
  const StressOptions& options;
  Engine& engine;
  std::vector<Context> devices;
  std::vector<VarHandle> constant_vars;
  std::vector<std::unique_ptr<Cell>> constants;
  std::atomic<std::uint64_t> executed{0};
  std::atomic<std::uint64_t> mismatches{0};
  std::mutex mismatch_mutex;
  std::vector<std::string> first_mismatches;

  void mismatch(std::string what) {
    mismatches.fetch_add(1);
    std::lock_guard lock(mismatch_mutex);
    if (first_mismatches.size() < 10) first_mismatches.push_back(std::move(what));
  }
};

/// One step as pushed: the cells its body touches.
struct StepRun {
  const Step* step = nullptr;
  Shared* shared = nullptr;
  std::array<Cell*, 3> inputs = {};
  int num_inputs = 0;
  Cell* out = nullptr;
};

void execute(const StepRun& run) {
  const Step& s = *run.step;
  for (int i = 0; i < run.num_inputs; ++i)
    run.inputs[static_cast<std::size_t>(i)]->in_flight.fetch_add(1);
  run.out->in_flight.fetch_add(1);
  std::array<Value, 3> values;
  for (int i = 0; i < run.num_inputs; ++i) {
    values[static_cast<std::size_t>(i)] = run.inputs[static_cast<std::size_t>(i)]->value;
  }
  const Value result = s.kind == StepKind::kCopy
                           ? values[0]
                           : mix_values(s, values.data(), run.num_inputs,
                                        s.read_modify_write ? &run.out->value : nullptr);
  if (s.id != run.shared->options.sabotage_step) {
    // One word, then the other: a conflicting step running meanwhile would
    // see them torn.
    run.out->value.lo = result.lo;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    run.out->value.hi = result.hi;
  }
  run.shared->executed.fetch_add(1, std::memory_order_relaxed);
  run.out->in_flight.fetch_sub(1);
  for (int i = 0; i < run.num_inputs; ++i)
    run.inputs[static_cast<std::size_t>(i)]->in_flight.fetch_sub(1);
}

std::exception_ptr injected_fault(const Step& s) {
  return std::make_exception_ptr(Error(fmt::format("injected fault #{}", s.id)));
}

/// Threads that finish asynchronous steps, out of the engine's workers.
class Completers {
 public:
  explicit Completers(int threads) {
    for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { serve(); });
  }
  ~Completers() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }

  /// Runs `run`'s body (unless `device_work`: already on a stream) and then
  /// completes it (or fails it, for an injected fault).
  void submit(const StepRun* run, Completion completion, bool device_work) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back({run, std::move(completion), device_work});
    }
    cv_.notify_one();
  }

  /// Keeps a step from completing until release_held().
  void hold(const StepRun* run, Completion completion) {
    std::lock_guard lock(mutex_);
    held_.push_back({run, std::move(completion), false});
  }

  /// Hands the held steps to the threads; returns how many there were.
  std::size_t release_held() {
    std::size_t n = 0;
    {
      std::lock_guard lock(mutex_);
      n = held_.size();
      for (Task& t : held_) queue_.push_back(std::move(t));
      held_.clear();
    }
    cv_.notify_all();
    return n;
  }

 private:
  struct Task {
    const StepRun* run;
    Completion completion;
    bool device_work;
  };

  void serve() {
    for (;;) {
      std::unique_lock lock(mutex_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;
      Task task = std::move(queue_.front());
      queue_.pop_front();
      lock.unlock();
      if (task.run->step->fails) {
        task.completion.fail(injected_fault(*task.run->step));
        continue;
      }
      if (!task.device_work) execute(*task.run);
      task.completion.done();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  std::vector<Task> held_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

/// What the steps did, counted per client without allocating.
enum Count : std::size_t {
  kCompute,
  kCopy,
  kAllocate,
  kDeleted,
  kAsync,
  kPrioritized,
  kOnGpus,
  kFailures,
  kOutOfMemory,
  kNumCounts
};
constexpr std::array<const char*, kNumCounts> kCountNames = {
    "compute",       "copy",    "allocate",          "deleted with pending work", "asynchronous",
    "with priority", "on GPUs", "injected failures", "injected out-of-memory"};

/// One client thread's variables, replay and pushes.
class Client {
 public:
  Client(Shared& shared, Completers& completers, int index)
      : shared_(shared),
        completers_(completers),
        index_(index),
        replay_(shared.options.seed, index, shared.options.slots, constant_values(shared)) {
    for (int s = 0; s < shared.options.slots; ++s) {
      vars_.push_back(shared.engine.new_var());
      cells_.push_back(std::make_unique<Cell>());
      cells_.back()->value = replay_.slot(s).value;
    }
  }

  /// Pushes round `round`, then checks every variable against the replay.
  void run_round(int round, StressReport& report) {
    const ClientShape shape{shared_.options.slots, static_cast<int>(shared_.devices.size()),
                            shared_.options.round_steps};
    steps_ = generate_round(shared_.options.seed, index_, round, shape, shared_.options.mix);
    if (shared_.options.hang && index_ == 0 && round == 0) plant_hang();
    runs_.clear();
    runs_.reserve(steps_.size());
    for (const Step& step : steps_) push(step, report);
    check(round, report);
  }

  /// Deletes the variables (after their last check) and drops the arrays.
  void finish() {
    kept_.fill(NDArray());
    for (std::size_t s = 0; s < vars_.size(); ++s) {
      Cell* cell = cells_[s].release();
      shared_.engine.delete_var(vars_[s], [cell] { delete cell; });
    }
    vars_.clear();
  }

  std::uint64_t expected_runs() const { return expected_runs_; }
  /// Steps that failed or passed an error on: wait_for_all reports one of them.
  std::uint64_t errors_raised() const { return errors_raised_; }
  const std::array<std::uint64_t, kNumCounts>& counts() const { return counts_; }

 private:
  static std::vector<Value> constant_values(const Shared& shared) {
    std::vector<Value> values;
    for (std::size_t d = 0; d < shared.devices.size(); ++d) {
      values.push_back(shared_value(shared.options.seed, static_cast<int>(d)));
    }
    return values;
  }

  void plant_hang() {
    for (std::size_t i = steps_.size() / 2; i < steps_.size(); ++i) {
      Step& s = steps_[i];
      if (s.kind == StepKind::kCompute &&
          !shared_.devices[static_cast<std::size_t>(s.device)].is_gpu()) {
        s.async = true;
        s.fails = false;
        hang_id_ = s.id;
        return;
      }
    }
  }

  Context context_of(const Step& s) const {
    return shared_.devices[static_cast<std::size_t>(s.device)];
  }

  void push(const Step& step, StressReport& report) {
    ++report.steps;
    ++report.steps_per_device[static_cast<std::size_t>(step.device)];
    switch (step.kind) {
      case StepKind::kAllocate:
        allocate(step, report);
        return;
      case StepKind::kDelete:
        remove(step);
        return;
      case StepKind::kCompute:
      case StepKind::kCopy:
        break;
    }
    const bool runs = replay_.apply(step);
    expected_runs_ += runs ? 1 : 0;
    errors_raised_ += runs ? 0 : 1;
    ++counts_[step.kind == StepKind::kCopy ? kCopy : kCompute];
    if (step.async) ++counts_[kAsync];
    if (step.priority != 0) ++counts_[kPrioritized];
    if (step.fails) ++counts_[kFailures];
    if (step.fails) ++report.faults_injected;

    StepRun& run = runs_.emplace_back();
    run.step = &step;
    run.shared = &shared_;
    Operation op{.name = step.kind == StepKind::kCopy ? "stress_copy" : "stress_compute",
                 .ctx = context_of(step),
                 .priority = step.priority};
    auto read = [&](VarHandle var, Cell* cell) {
      op.reads.push_back(var);
      run.inputs[static_cast<std::size_t>(run.num_inputs++)] = cell;
    };
    for (int r : step.reads) {
      if (r >= 0)
        read(vars_[static_cast<std::size_t>(r)], cells_[static_cast<std::size_t>(r)].get());
    }
    if (step.reads_shared) {
      read(shared_.constant_vars[static_cast<std::size_t>(step.device)],
           shared_.constants[static_cast<std::size_t>(step.device)].get());
    }
    const auto w = static_cast<std::size_t>(step.write);
    if (step.read_modify_write) op.reads.push_back(vars_[w]);
    op.writes.push_back(vars_[w]);
    run.out = cells_[w].get();
    if (step.kind == StepKind::kCopy) {
      // On a GPU's copy queue: the destination's, else the source's.
      const Context from =
          shared_.devices[static_cast<std::size_t>(step.reads[0]) % shared_.devices.size()];
      if (!op.ctx.is_gpu() && from.is_gpu()) op.ctx = from;
      op.queue = op.ctx.is_gpu() ? QueueKind::kCopy : QueueKind::kCompute;
    }
    if (op.ctx.is_gpu()) ++counts_[kOnGpus];
    const StepRun* r = &run;
    Completers* completers = &completers_;
    const bool hang = step.id == hang_id_;
    if (!step.async) {
      op.fn = [r](const RunContext& rc) {
        if (r->step->fails) std::rethrow_exception(injected_fault(*r->step));
        if (rc.stream != nullptr) {
          rc.stream->enqueue_host([r] { execute(*r); });
        } else {
          execute(*r);
        }
      };
    } else {
      op.fn = [r, completers, hang](const RunContext& rc, Completion c) {
        const bool device_work = rc.stream != nullptr && !r->step->fails;
        if (device_work) rc.stream->enqueue_host([r] { execute(*r); });
        if (hang) {
          completers->hold(r, std::move(c));
        } else {
          completers->submit(r, std::move(c), device_work);
        }
      };
    }
    shared_.engine.push(std::move(op));
  }

  void allocate(const Step& step, StressReport& report) {
    const Context ctx = context_of(step);
    ++counts_[kAllocate];
    if (!step.fails) {
      kept_[next_kept_++ % kept_.size()] =
          zeros(Shape{static_cast<std::int64_t>(step.bytes / 4)}, DType::kFloat32, ctx);
      return;
    }
    ++report.faults_injected;
    ++counts_[kOutOfMemory];
    const auto elements = static_cast<std::int64_t>(shared_.options.memory_limit / 4 + (1 << 20));
    try {
      NDArray too_big = empty(Shape{elements}, DType::kFloat32, ctx);
      shared_.mismatch(fmt::format("client {}: {} bytes on {} beyond its limit did not fail",
                                   index_, elements * 4, ctx.str()));
    } catch (const OutOfMemoryError&) {
      // expected: typed, and nothing else changed (the checks will tell)
    } catch (const std::exception& e) {
      shared_.mismatch(
          fmt::format("client {}: an allocation beyond the limit of {} threw "
                      "something else than OutOfMemoryError: {}",
                      index_, ctx.str(), e.what()));
    }
  }

  void remove(const Step& step) {
    ++counts_[kDeleted];
    const auto s = static_cast<std::size_t>(step.write);
    // The deleter runs once every step on the variable has finished: the
    // cell must then hold what the replay says, and nobody may touch it.
    Cell* cell = cells_[s].release();
    const Value expected = replay_.slot(step.write).value;
    Shared* shared = &shared_;
    const int client = index_;
    const int slot = step.write;
    pending_deleters_.fetch_add(1);
    std::atomic<int>* pending = &pending_deleters_;
    shared_.engine.delete_var(vars_[s], [cell, expected, shared, pending, client, slot] {
      if (cell->in_flight.load() != 0) {
        shared->mismatch(
            fmt::format("client {} slot {}: deleted while a step still ran on it", client, slot));
      } else if (!(cell->value == expected)) {
        shared->mismatch(
            fmt::format("client {} slot {}: deleted holding a value the replay "
                        "does not give",
                        client, slot));
      }
      delete cell;
      pending->fetch_sub(1);
    });
    replay_.apply(step);
    vars_[s] = shared_.engine.new_var();
    cells_[s] = std::make_unique<Cell>();
    cells_[s]->value = replay_.slot(step.write).value;
  }

  void check(int round, StressReport& report) {
    for (std::size_t s = 0; s < vars_.size(); ++s) {
      const SlotState& want = replay_.slot(static_cast<int>(s));
      if (!want.errors.empty()) ++report.errors_expected;
      try {
        shared_.engine.wait_to_read(vars_[s]);
        if (!want.errors.empty()) {
          shared_.mismatch(
              fmt::format("client {} round {} slot {}: no error, expected the one "
                          "of injected fault #{}",
                          index_, round, s, want.errors.front()));
        } else if (!(cells_[s]->value == want.value)) {
          shared_.mismatch(
              fmt::format("client {} round {} slot {}: value differs from the "
                          "serial replay",
                          index_, round, s));
        }
      } catch (const OperationError& e) {
        const std::string what = e.what();
        const bool expected = std::any_of(want.errors.begin(), want.errors.end(), [&](auto id) {
          return what.find(fmt::format("injected fault #{}", id)) != std::string::npos;
        });
        if (expected) {
          ++report.errors_seen;
        } else {
          shared_.mismatch(fmt::format("client {} round {} slot {}: unexpected error: {}", index_,
                                       round, s, what));
        }
      }
    }
    // The round's steps may still run on deleted variables: their records
    // stay until every deleter has run.
    while (pending_deleters_.load() != 0)
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }

  Shared& shared_;
  Completers& completers_;
  int index_;
  Replay replay_;
  std::vector<VarHandle> vars_;
  std::vector<std::unique_ptr<Cell>> cells_;
  std::vector<Step> steps_;
  std::vector<StepRun> runs_;  // reserved per round: addresses stay put
  std::array<NDArray, 4> kept_;
  std::size_t next_kept_ = 0;
  std::atomic<int> pending_deleters_{0};
  std::uint64_t expected_runs_ = 0;
  std::uint64_t errors_raised_ = 0;
  std::uint64_t hang_id_ = 0;
  std::array<std::uint64_t, kNumCounts> counts_{};
};

std::vector<Context> default_devices() {
  std::vector<Context> devices = {cpu(0), cpu(1)};
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  return devices;
}

void check_options(const StressOptions& o, const std::vector<Context>& devices) {
  TAGFLOW_CHECK(!devices.empty(), "stress: expected at least one device, got none");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    check_device(devices[i]);
    TAGFLOW_CHECK(!devices[i].is_cpu_pinned(), "stress: expected cpu:N or gpu:N, got {}",
                  devices[i].str());
    for (std::size_t j = 0; j < i; ++j) {
      TAGFLOW_CHECK(devices[i] != devices[j], "stress: the device {} is listed twice",
                    devices[i].str());
    }
  }
  TAGFLOW_CHECK(o.clients >= 1 && o.clients <= 256, "stress: expected 1..256 clients, got {}",
                o.clients);
  TAGFLOW_CHECK(o.completers >= 1 && o.completers <= 64,
                "stress: expected 1..64 completer threads, got {}", o.completers);
  TAGFLOW_CHECK(o.slots >= 2 * static_cast<int>(devices.size()) && o.slots <= 100000,
                "stress: expected 2..100000 variables per client and at least two per device "
                "({}), got {}",
                2 * devices.size(), o.slots);
  TAGFLOW_CHECK(o.round_steps >= 1 && o.round_steps <= (1 << 24),
                "stress: expected 1..16777216 steps per round, got {}", o.round_steps);
  TAGFLOW_CHECK(o.watchdog_seconds > 0, "stress: expected a positive watchdog time, got {}",
                o.watchdog_seconds);
  TAGFLOW_CHECK(o.memory_limit >= (std::uint64_t{1} << 20),
                "stress: expected a memory limit of at least 1 MiB, got {} bytes", o.memory_limit);
  const stress::Mix& m = o.mix;
  for (const auto& [name, rate] : {std::pair{"copy", m.copy},
                                   {"allocate", m.allocate},
                                   {"delete", m.remove},
                                   {"async", m.async},
                                   {"priority", m.priority},
                                   {"fail", m.fail},
                                   {"oom", m.alloc_fail}}) {
    TAGFLOW_CHECK(rate >= 0 && rate <= 100,
                  "stress: expected a {} rate in 0..100 (percent), got {}", name, rate);
  }
  TAGFLOW_CHECK(m.copy + m.allocate + m.remove <= 100,
                "stress: copy, allocate and delete rates add up to {}%, expected at most 100",
                m.copy + m.allocate + m.remove);
}

}  // namespace

StressReport run_stress(const StressOptions& options, const StallHandler& on_stall) {
  std::vector<Context> devices = options.devices.empty() ? default_devices() : options.devices;
  check_options(options, devices);
  Engine& engine = Engine::get();
  engine.wait_for_all();

  StressReport report;
  report.devices = devices;
  report.steps_per_device.assign(devices.size(), 0);
  for (Context c : devices) report.memory_before.push_back(memory_stats(c).in_use);
  for (Context c : devices) set_memory_limit(c, options.memory_limit);

  Shared shared{.options = options, .engine = engine, .devices = devices};
  for (std::size_t d = 0; d < devices.size(); ++d) {
    shared.constant_vars.push_back(engine.new_var());
    shared.constants.push_back(std::make_unique<Cell>());
    // Written once, on its device, before any client reads it.
    Cell* cell = shared.constants.back().get();
    const Value value = shared_value(options.seed, static_cast<int>(d));
    engine.push({.name = "stress_constant",
                 .ctx = devices[d],
                 .writes = {shared.constant_vars.back()},
                 .fn = [cell, value](const RunContext& rc) {
                   if (rc.stream != nullptr) {
                     rc.stream->enqueue_host([cell, value] { cell->value = value; });
                   } else {
                     cell->value = value;
                   }
                 }});
  }

  const auto start = Clock::now();
  std::atomic<std::uint64_t> budget{options.steps};
  std::atomic<int> rounds{0};
  std::vector<StressReport> partial(static_cast<std::size_t>(options.clients));
  std::uint64_t expected_runs = 0;
  {
    Completers completers(options.completers);
    Watchdog watchdog(engine,
                      std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(
                          options.watchdog_seconds * 1000)),
                      [&](const DependencyState& state) {
                        if (on_stall(state)) completers.release_held();
                      });
    std::vector<std::unique_ptr<Client>> clients;
    for (int c = 0; c < options.clients; ++c) {
      clients.push_back(std::make_unique<Client>(shared, completers, c));
    }
    std::vector<std::thread> threads;
    for (int c = 0; c < options.clients; ++c) {
      threads.emplace_back([&, c] {
        StressReport& mine = partial[static_cast<std::size_t>(c)];
        mine.steps_per_device.assign(devices.size(), 0);
        for (int round = 0;; ++round) {
          const bool out_of_time =
              options.duration.count() > 0 && Clock::now() - start >= options.duration;
          const std::uint64_t want = static_cast<std::uint64_t>(options.round_steps);
          std::uint64_t left = budget.load();
          while (left >= want && !budget.compare_exchange_weak(left, left - want)) {
          }
          if (out_of_time || left < want) break;
          try {
            clients[static_cast<std::size_t>(c)]->run_round(round, mine);
          } catch (const std::exception& e) {
            shared.mismatch(fmt::format("client {} round {}: {}", c, round, e.what()));
            break;
          }
          rounds.fetch_add(1);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::uint64_t errors_raised = 0;
    for (auto& client : clients) {
      client->finish();
      expected_runs += client->expected_runs();
      errors_raised += client->errors_raised();
      for (std::size_t k = 0; k < kNumCounts; ++k)
        report.counts[kCountNames[k]] += client->counts()[k];
    }
    for (VarHandle v : shared.constant_vars) engine.delete_var(v);
    // wait_for_all reports the first error raised since the run began: an
    // injected one exactly when some step failed.
    try {
      engine.wait_for_all();
      if (errors_raised > 0) {
        shared.mismatch(
            fmt::format("wait_for_all: no error, though {} steps failed", errors_raised));
      }
    } catch (const std::exception& e) {
      if (errors_raised == 0 ||
          std::string_view(e.what()).find("injected fault #") == std::string_view::npos) {
        shared.mismatch(fmt::format("wait_for_all: {}", e.what()));
      }
    }
    report.stalls = watchdog.stalls();
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.rounds = static_cast<std::uint64_t>(rounds.load());
  for (const StressReport& p : partial) {
    report.steps += p.steps;
    for (std::size_t d = 0; d < devices.size() && d < p.steps_per_device.size(); ++d) {
      report.steps_per_device[d] += p.steps_per_device[d];
    }
    report.faults_injected += p.faults_injected;
    report.errors_expected += p.errors_expected;
    report.errors_seen += p.errors_seen;
  }
  report.executed = shared.executed.load();
  if (report.executed != expected_runs) {
    shared.mismatch(
        fmt::format("{} step bodies ran, the replay runs {}", report.executed, expected_runs));
  }
  report.mismatches = shared.mismatches.load();
  report.first_mismatches = shared.first_mismatches;
  for (Context c : devices) {
    set_memory_limit(c, 0);
    report.memory_after.push_back(memory_stats(c).in_use);
  }
  return report;
}

std::string format_report(const StressReport& r) {
  std::string devices;
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    devices += fmt::format("{}{} ({} steps)", d == 0 ? "" : ", ", r.devices[d].str(),
                           r.steps_per_device[d]);
  }
  std::string out = fmt::format(
      "stress: {} steps in {} rounds, {:.2f} s: {} operations/s\n"
      "  devices: {}\n",
      r.steps, r.rounds, r.seconds, r.operations_per_second(), devices);
  for (const auto& [name, count] : r.counts) out += fmt::format("  {:<26} {}\n", name, count);
  out += fmt::format("  faults injected: {}; errors expected at waits: {}, seen: {}\n",
                     r.faults_injected, r.errors_expected, r.errors_seen);
  std::string memory;
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    memory += fmt::format("{}{} {} -> {} bytes", d == 0 ? "" : ", ", r.devices[d].str(),
                          r.memory_before[d], r.memory_after[d]);
  }
  out += fmt::format("  memory in use before -> after: {}\n", memory);
  out += fmt::format("  watchdog stalls: {}\n", r.stalls);
  out += fmt::format("  mismatches against the serial replay: {}\n", r.mismatches);
  for (const std::string& m : r.first_mismatches) out += fmt::format("    {}\n", m);
  out += r.passed() ? "  PASSED\n" : "  FAILED\n";
  return out;
}

std::string report_json(const StressReport& r) {
  std::string counts;
  for (const auto& [name, count] : r.counts) {
    counts += fmt::format("{}\"{}\":{}", counts.empty() ? "" : ",", name, count);
  }
  return fmt::format(
      "{{\"bench\":\"stress\",\"steps\":{},\"rounds\":{},\"seconds\":{:.3f},\"ops_per_s\":{},"
      "\"devices\":{},\"counts\":{{{}}},\"faults_injected\":{},\"errors_expected\":{},"
      "\"errors_seen\":{},\"mismatches\":{},\"stalls\":{},\"passed\":{}}}",
      r.steps, r.rounds, r.seconds, r.operations_per_second(), r.devices.size(), counts,
      r.faults_injected, r.errors_expected, r.errors_seen, r.mismatches, r.stalls,
      r.passed() ? "true" : "false");
}

}  // namespace tagflow::tools
