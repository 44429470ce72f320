// The threaded engine's waits: for one variable (an operation of its own
// kind, claimed like any other), and for everything pushed (counts of pushed
// and completed operations, then every stream synchronised); at exit, the
// same with a limit on how long nothing may complete.

#include <chrono>
#include <exception>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/detail/threaded_engine.h"
#include "engine/error.h"

namespace tagflow::detail {

void ThreadedEngine::wait_on(VarHandle var, Access access, const char* what) {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error(what);
  check_not_inside_operation(what);
  TAGFLOW_CHECK(var != nullptr, "{}: expected a variable, got null", what);
  WaitSignal signal;
  const bool profiled = profiling();
  const std::int64_t started = profiled ? profiler_now() : 0;
  const char* waited_for = nullptr;
  std::uint64_t waited_for_seq = 0;
  {
    std::lock_guard lock(push_lock_);
    if (profiled) [[unlikely]] {
      const OpRef& writer = var->last_writer;
      if (writer.op != nullptr && writer.op->seq == writer.seq) {
        waited_for = writer.op->name;
        waited_for_seq = writer.seq;
      }
    }
    auto* op = new OpBlock;
    op->name = what;
    op->kind = OpKind::kWait;
    op->engine = this;
    op->signal = &signal;
    op->deps.push_back(Dep{var, access});
    submit(op);
  }
  signal.wait();
  if (profiled) [[unlikely]]
    record_wait(what, waited_for, waited_for_seq, started);
  if (signal.error) std::rethrow_exception(signal.error);
}

void ThreadedEngine::wait_to_read(VarHandle var) { wait_on(var, Access::kRead, "wait_to_read"); }

void ThreadedEngine::wait_to_write(VarHandle var) { wait_on(var, Access::kWrite, "wait_to_write"); }

void ThreadedEngine::wait_for_all() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("wait_for_all");
  check_not_inside_operation("wait_for_all");
  const bool profiled = profiling();
  const std::int64_t started = profiled ? profiler_now() : 0;
  drain();
  if (profiled) [[unlikely]]
    record_wait("wait_for_all", nullptr, 0, started);
  std::exception_ptr error;
  {
    std::lock_guard lock(error_mutex_);
    error = std::exchange(first_error_, nullptr);
    has_error_.store(false, std::memory_order_relaxed);
  }
  if (error) std::rethrow_exception(error);
}

void ThreadedEngine::drain() {
  all_waiters_.fetch_add(1, std::memory_order_seq_cst);
  for (;;) {
    const std::uint32_t epoch = all_done_.epoch();
    // Completions first, pushes second: equal counts then mean that at the
    // moment the completions were read, everything pushed had completed.
    const std::uint64_t completed = completed_count();
    if (completed == pushed_.load(std::memory_order_seq_cst)) break;
    all_done_.wait(epoch);
  }
  all_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  // Operations on GPUs complete when launched; their device work may still
  // run. An error raised by that work (a kernel, a host function) is sticky
  // on its stream; the first one not yet reported joins the operation errors.
  std::lock_guard lock(drain_mutex_);
  const int n = num_started_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    WorkerPool* pool = started_[static_cast<std::size_t>(i)];
    Stream* stream = pool->stream();
    if (stream == nullptr) continue;
    try {
      stream->synchronize(stream->record());
      if (std::exception_ptr error = stream->error(); error && !pool->stream_error_reported) {
        pool->stream_error_reported = true;
        record_error(std::make_exception_ptr(
            OperationError(pool->kind() == QueueKind::kCopy ? "device work on the copy stream"
                                                            : "device work on the compute stream",
                           pool->context(), error)));
      }
    } catch (...) {
      record_error(std::current_exception());
    }
  }
}

bool ThreadedEngine::finish_pending(std::chrono::milliseconds stall) {
  // Polled: exit is not a hot path, and the stall limit needs a timed wait,
  // which the wake words do not have.
  using Clock = std::chrono::steady_clock;
  auto last_progress = Clock::now();
  auto stalled = [&] { return Clock::now() - last_progress > stall; };
  auto pause = [] { std::this_thread::sleep_for(std::chrono::microseconds(200)); };
  // Completions first, pushes second, as in drain().
  for (std::uint64_t completed = completed_count();
       completed != pushed_.load(std::memory_order_seq_cst);) {
    pause();
    const std::uint64_t now_completed = completed_count();
    if (now_completed != completed) {
      completed = now_completed;
      last_progress = Clock::now();
    } else if (stalled()) {
      return false;
    }
  }
  const int n = num_started_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) {
    Stream* stream = started_[static_cast<std::size_t>(i)]->stream();
    if (stream == nullptr) continue;
    try {
      const std::uint64_t mark = stream->record();
      while (!stream->finished(mark)) {
        if (stalled()) return false;
        pause();
      }
      last_progress = Clock::now();
    } catch (...) {
      // A broken stream: nothing more will finish on it.
    }
  }
  std::lock_guard lock(error_mutex_);
  if (first_error_) {
    spdlog::warn("engine: exiting with an operation error never waited for: {}",
                 describe(first_error_));
  }
  return true;
}

}  // namespace tagflow::detail
