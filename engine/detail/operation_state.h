#pragma once
// OperationState: the shared state behind OperationHandle, and what the
// engines do with it. Internal to engine/.
//
// Note [Operation handles]
// push_tracked() makes a state with two references, the handle's and the
// operation's, and puts a pointer to it in the operation's record (OpBlock
// `tracker`). Untracked pushes leave it null: what they pay is a test of
// that null pointer when pushed and when completed. The engine gives the
// operation's reference back once it has told the state the outcome:
//  - Threaded engine, in complete(), on the completing thread: a host
//    operation completes the state there. A GPU operation hands its
//    reference to Stream::when_finished on its fence, and the state
//    completes once the device work has finished: at once if it has, else
//    from the stream's thread (Note [Completion on device queues]). The
//    outcome is the one wait_to_read on a variable the operation writes
//    would give: the operation's error (its own or inherited), else the
//    error of its fence (fence_error, Note [Errors of device work] in
//    engine/stream.h). Streams run the callbacks of a mark before they
//    finish the next one, and wait_for_all() synchronises a mark recorded
//    after everything it waits for: when it returns, the handles of what it
//    waited for are done.
//  - Naive engine, at the end of run(): the device work was synchronised
//    there, and its failure is the operation's error. A push deferred by
//    Note [Naive engine order] completes its state when it runs; one whose
//    bookkeeping failed completes it with that failure, so no waiter hangs.
// complete() records the outcome under the state's mutex, then runs the
// callbacks registered so far outside it, again until none is left, and
// only then sets `done` (release) and wakes the waiters. So done() and
// wait() mean "completed and its callbacks have returned", a callback that
// registers another on the same handle has it run right after, and one
// registered after `done` runs at once on the registering thread: each runs
// exactly once whatever the race. While callbacks run, the thread is marked
// as running one (WorkerIdentity::running), so that a wait from a callback
// throws WaitInsideOperationError instead of deadlocking the thread that
// must complete what it waits for. The state knows nothing of its engine,
// so a handle kept after the engine is destroyed still answers.
// A failed operation's state keeps the engine's ErrorReport (shared, so it
// outlives the engine), and wait() marks the error it rethrows as seen
// there, as a wait on a variable does (Note [Errors seen by wait_for_all]
// in error_report.h); callbacks and error() are told, not asked, and leave
// the error for wait_for_all.

#include <atomic>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/detail/error_report.h"
#include "engine/detail/lifetime.h"
#include "engine/operation_handle.h"

namespace tagflow::detail {

class OperationState {
 public:
  using Callback = OperationHandle::Callback;

  /// A handle on a new state; the state's one reference is the handle's.
  static OperationHandle make_handle();
  /// The state of `handle` (null when empty); no reference is taken.
  static OperationState* of(const OperationHandle& handle) noexcept { return handle.state_; }

  OperationState() = default;
  OperationState(const OperationState&) = delete;
  OperationState& operator=(const OperationState&) = delete;

  /// Takes one more reference; returns this.
  OperationState* retain() noexcept {
    refs_.fetch_add(1, std::memory_order_relaxed);
    return this;
  }
  /// Gives one reference back; the last one frees the state.
  void release() noexcept {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

  /// Records the outcome (null: success), runs the callbacks, then marks the
  /// state done and wakes the waiters (Note [Operation handles]). Only the
  /// first call counts. `report`: where wait() marks a rethrown error seen.
  void complete(std::exception_ptr error, std::shared_ptr<ErrorReport> report = nullptr) noexcept;

  bool done() const noexcept { return done_.load(std::memory_order_acquire); }
  /// Under a controlled schedule the operation runs only when something
  /// waits for it (Note [Controlled schedules] in engine/schedule.h): wait()
  /// first asks `runner(engine, *this)` to run it. Set before the push returns.
  using Runner = void (*)(void* engine, const OperationState& state);
  void set_runner(Runner runner, void* engine) noexcept {
    runner_ = runner;
    runner_engine_ = engine;
  }
  /// Written before `done_` is set, never after: readable once done().
  std::exception_ptr error() const noexcept { return done() ? error_ : nullptr; }
  void wait() const;
  void on_done(Callback callback);

 private:
  ~OperationState() = default;
  /// Runs `callback` with the outcome, marked as a callback; logs what it throws.
  void run_callback(Callback& callback) const noexcept;

  std::atomic<int> refs_{1};
  std::atomic<bool> done_{false};
  mutable std::mutex mutex_;
  mutable std::condition_variable finished_;
  bool completing_ = false;  ///< under mutex_: complete() was called
  std::exception_ptr error_;
  std::shared_ptr<ErrorReport> report_;  ///< set with a failure
  std::vector<Callback> callbacks_;      ///< under mutex_, until done
  /// Tells a child forked while the operation was pending, where nothing
  /// will complete it (Note [Engine lifetime] in engine.h).
  ForkCheck fork_check_;
  Runner runner_ = nullptr;
  void* runner_engine_ = nullptr;
};

/// Owns one reference to a state; for closures that must give it back even
/// when they are dropped uncalled.
class OperationStateRef {
 public:
  /// Adopts one reference to `state`.
  explicit OperationStateRef(OperationState* state) noexcept : state_(state) {}
  OperationStateRef(OperationStateRef&& other) noexcept : state_(other.state_) {
    other.state_ = nullptr;
  }
  OperationStateRef& operator=(OperationStateRef&&) = delete;
  OperationStateRef(const OperationStateRef&) = delete;
  OperationStateRef& operator=(const OperationStateRef&) = delete;
  ~OperationStateRef() {
    if (state_ != nullptr) state_->release();
  }
  OperationState* operator->() const noexcept { return state_; }

 private:
  OperationState* state_;
};

}  // namespace tagflow::detail
