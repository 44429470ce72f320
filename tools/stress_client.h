#pragma once
// The part of `tagflow stress` (tools/stress.h) that runs one client: the
// cells the variables guard, the threads completing asynchronous steps, and
// the client that pushes a round, then checks it against its serial replay
// (Note [Stress workload] in stress_workload.h). Internal to tools/.

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tagflow/tagflow.h"
#include "tools/stress.h"
#include "tools/stress_workload.h"

namespace tagflow::tools::stress {

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
  /// Injected errors wait_for_all reported during the rounds (under a
  /// controlled schedule, Client::check waits for all).
  std::atomic<std::uint64_t> errors_reported_by_rounds{0};
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

/// Runs a compute or copy step's work on its cells.
void execute(const StepRun& run);
/// The error an injected failure of `s` raises.
std::exception_ptr injected_fault(const Step& s);

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
  Client(Shared& shared, Completers& completers, int index);

  /// Pushes round `round`, then checks every variable against the replay.
  void run_round(int round, StressReport& report);

  /// Deletes the variables (after their last check) and drops the arrays.
  void finish();

  std::uint64_t expected_runs() const { return expected_runs_; }
  /// Steps that failed or passed an error on: wait_for_all reports one of them.
  std::uint64_t errors_raised() const { return errors_raised_; }
  const std::array<std::uint64_t, kNumCounts>& counts() const { return counts_; }

 private:
  static std::vector<Value> constant_values(const Shared& shared);

  void plant_hang();

  Context context_of(const Step& s) const;

  void push(const Step& step, StressReport& report);

  void allocate(const Step& step, StressReport& report);

  void remove(const Step& step);

  void check(int round, StressReport& report);

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

}  // namespace tagflow::tools::stress
