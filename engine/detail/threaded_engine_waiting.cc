// The threaded engine's waits: for one variable (an operation of its own
// kind, claimed like any other), and for everything pushed (counts of pushed
// and completed operations, then every stream synchronised); at exit, the
// same with a limit on how long nothing may complete.

#include <chrono>
#include <exception>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/detail/model_clock.h"
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
    check_live(var, what);
    if (profiled) [[unlikely]] {
      const OpRef& writer = var_block(var)->last_writer;
      if (writer.op != nullptr && writer.op->seq == writer.seq) {
        waited_for = writer.op->name;
        waited_for_seq = writer.seq;
      }
    }
    auto op = std::make_unique<OpBlock>();
    op->name = what;
    op->kind = OpKind::kWait;
    op->extra().signal = &signal;
    op->extras->engine = this;  // for dumps (OpBlock::owner)
    op->deps.push_back(Dep{var_block(var), access, var.generation()});
    reserve_links(*op);
    submit(op.release());
  }
  signal.wait();
  if (model_ != nullptr) [[unlikely]]
    model_->host_reach(signal.modelled_ns);
  if (profiled) [[unlikely]]
    record_wait(what, waited_for, waited_for_seq, started);
  if (signal.error) {
    errors_->seen(signal.error);  // Note [Errors seen by wait_for_all]
    std::rethrow_exception(signal.error);
  }
}

void ThreadedEngine::wait_to_read(VarHandle var) { wait_on(var, Access::kRead, "wait_to_read"); }

void ThreadedEngine::wait_to_write(VarHandle var) { wait_on(var, Access::kWrite, "wait_to_write"); }

void ThreadedEngine::wait_for_all() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("wait_for_all");
  check_not_inside_operation("wait_for_all");
  const bool profiled = profiling();
  const std::int64_t started = profiled ? profiler_now() : 0;
  // Note [Errors seen by wait_for_all] in error_report.h.
  const std::uint64_t window = errors_->open_window();
  drain();
  if (profiled) [[unlikely]]
    record_wait("wait_for_all", nullptr, 0, started);
  if (std::exception_ptr error = errors_->close(window)) std::rethrow_exception(error);
}

void ThreadedEngine::drain() {
  // Note [Waiting for all] in threaded_engine.h.
  auto raise = [](std::atomic<std::uint64_t>& bound, std::uint64_t value) {
    std::uint64_t now = bound.load(std::memory_order_relaxed);
    while (now < value && !bound.compare_exchange_weak(now, value, std::memory_order_acq_rel)) {
    }
  };
  all_waiters_.fetch_add(1, std::memory_order_seq_cst);
  std::uint64_t target;
  {
    std::lock_guard lock(push_lock_);
    target = epoch_.load(std::memory_order_relaxed);
  }
  const int target_slot = static_cast<int>(target & 1);
  const int other_slot = 1 - target_slot;
  for (;;) {
    const std::uint32_t wake = all_done_.epoch();
    if (complete_below_.load(std::memory_order_acquire) > target) break;
    const std::uint64_t now = epoch_.load(std::memory_order_acquire);
    if (now == target) {
      // Open: close it once the older epochs (the other slot) have drained.
      if (slot_drained(other_slot)) {
        std::lock_guard lock(push_lock_);
        if (epoch_.load(std::memory_order_relaxed) == target) {
          raise(complete_below_, target);
          epoch_.store(target + 1, std::memory_order_release);
        }
        continue;
      }
    } else if (now == target + 1) {
      // Closed: nothing is added to its slot any more.
      if (slot_drained(target_slot)) {
        raise(complete_below_, target + 1);
        break;
      }
    } else {
      // Two epochs on: closing target + 1 needed target's slot drained.
      raise(complete_below_, target + 1);
      break;
    }
    // Idle workers wake us; with pushes going on they may never be idle, so
    // look again now and then.
    all_done_.wait_for(wake, std::chrono::milliseconds(1));
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
        record_error(device_work_error(*stream, error));
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
  for (std::uint64_t completed = completed_count(); completed != pushed_count();) {
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
  if (std::exception_ptr error = errors_->unreported()) {
    spdlog::warn("engine: exiting with an operation error never waited for: {}", describe(error));
  }
  return true;
}

}  // namespace tagflow::detail
