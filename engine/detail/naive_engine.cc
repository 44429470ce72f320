#include "engine/detail/naive_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iterator>
#include <memory>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/detail/model_clock.h"
#include "engine/detail/operation_state.h"
#include "engine/detail/stall_watch.h"
#include "engine/detail/worker_pool.h"
#include "engine/error.h"

namespace tagflow::detail {

NaiveEngine::NaiveEngine(const EngineConfig& config)
    : config_(config), backend_(make_device_backend(config)) {
  if (config_.schedule.controlled()) scheduler_ = std::make_unique<Scheduler>(config_.schedule);
}

NaiveEngine::~NaiveEngine() {
  if (fork_check_.forked()) [[unlikely]] {
    // A forked child: the streams' threads are the parent's (Note [Engine lifetime]).
    for (auto& [key, stream] : streams_) abandon(std::move(stream));
    abandon(std::move(backend_));
    return;
  }
  if (scheduler_) {
    try {  // what is kept runs, as a wait_for_all would
      run_kept([] { return false; });
    } catch (const std::exception& e) {
      spdlog::error("engine: the controlled schedule stopped at shutdown: {}", e.what());
    }
  }
  if (std::exception_ptr error = errors_->unreported()) {
    spdlog::warn("engine shut down with an operation error never waited for: {}", describe(error));
  }
}

VarHandle NaiveEngine::new_var() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("new_var");
  return make_var();
}

void NaiveEngine::delete_var(VarHandle var, VarDeleter on_deleted) {
  if (fork_check_.forked()) [[unlikely]] {  // as in the threaded engine
    if (on_deleted) abandon(std::make_unique<VarDeleter>(std::move(on_deleted)));
    return;
  }
  TAGFLOW_CHECK(var != nullptr, "delete_var: expected a variable, got null");
  run_exclusively({.deleted = var, .on_deleted = std::move(on_deleted)});
}

void NaiveEngine::delete_now(VarHandle var, VarDeleter& on_deleted) {
  // Every operation pushed before has completed, device work included (each
  // synchronises its stream).
  VarBlock* record = var_block(var);
  profiled_writers_.erase(record);
  free_var(record);
  if (on_deleted) run_deleter(on_deleted);
}

void NaiveEngine::admit(Deferred& item) {
  if (!item.op) {
    check_live(item.deleted, "delete_var");
    end_generation(var_block(item.deleted));  // stale from here on
    return;
  }
  for (const Dep& d : item.op->deps) {
    if (!is_live(d.var, d.generation)) [[unlikely]] {
      if (item.op->extras != nullptr) delete std::exchange(item.op->extras->profile, nullptr);
      throw_stale(var_handle(d), "push", item.op->name,
                  d.access == Access::kRead    ? "reads"
                  : d.access == Access::kWrite ? "writes"
                                               : "reads and writes");
    }
  }
  pushed_.fetch_add(1, std::memory_order_relaxed);
}

void NaiveEngine::check_context(Context ctx) const {
  if (!ctx.is_gpu()) {
    TAGFLOW_CHECK_AS(DeviceError, ctx.is_cpu() || ctx.is_cpu_pinned(),
                     "push: {} is a device of unknown type: expected cpu(i), gpu(i) or "
                     "cpu_pinned(i)",
                     ctx.str());
    TAGFLOW_CHECK_AS(DeviceError, ctx.index >= 0 && ctx.index < kMaxCpuDevices,
                     "push: {} is not a valid device; CPU device indices are 0..{}", ctx.str(),
                     kMaxCpuDevices - 1);
    return;
  }
  const int n = num_gpus();
  if (ctx.index < 0 || ctx.index >= n) {
    throw_error<DeviceError>("push: operation targets {} but {}", ctx.str(),
                             n == 0
                                 ? std::string("there is no GPU (") + backend_->status() +
                                       "; TAGFLOW_SIM_GPUS=N simulates N)"
                                 : fmt::format("only {} GPU(s) exist: gpu(0)..gpu({})", n, n - 1));
  }
}

Stream* NaiveEngine::stream_for(Context ctx, QueueKind queue) {
  if (!ctx.is_gpu()) return nullptr;
  auto& stream = streams_[{ctx.index, queue}];
  if (!stream) stream = backend_->make_stream(ctx, queue);
  return stream.get();
}

void NaiveEngine::push(Operation op) { push_block(op, nullptr); }

OperationHandle NaiveEngine::push_tracked(Operation op) {
  OperationHandle handle = OperationState::make_handle();
  push_block(op, OperationState::of(handle));
  return handle;
}

void NaiveEngine::push_block(Operation& op, OperationState* tracker) {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("push");
  TAGFLOW_CHECK(static_cast<bool>(op.fn), "push: operation '{}' has no closure", op.name);
  for (VarHandle v : op.reads) {
    TAGFLOW_CHECK(v != nullptr, "push: operation '{}' lists a null variable in reads", op.name);
  }
  for (VarHandle v : op.writes) {
    TAGFLOW_CHECK(v != nullptr, "push: operation '{}' lists a null variable in writes", op.name);
  }
  check_context(op.ctx);
  auto block = std::make_unique<OpBlock>();
  block->name = op.name;
  block->ctx = op.ctx;
  block->set_deps(op.reads, op.writes);
  block->fn = std::move(op.fn);
  if (profiling()) [[unlikely]] {
    OpExtras& extras = block->extra();
    extras.profile = new ProfileMarks{.name = block->name,
                                      .ctx = block->ctx,
                                      .queue = op.queue,
                                      .priority = op.priority,
                                      .pushed = profiler_now()};
  }
  if (tracker != nullptr) [[unlikely]] {
    block->extra().tracker = tracker->retain();  // given back once it has run
    if (scheduler_) {
      tracker->set_runner(
          [](void* engine, const OperationState& state) {
            auto* self = static_cast<NaiveEngine*>(engine);
            const KeptWaiter waiting(self->kept_waiters_);
            self->run_kept([&] { return state.done(); });
          },
          this);
    }
  }
  run_exclusively({.op = std::move(block), .queue = op.queue, .priority = op.priority});
}

void NaiveEngine::run_exclusively(Deferred first) {
  if (scheduler_) {
    keep(std::move(first));
    return;
  }
  // Note [Naive engine order]. A ticket once admitted: a refused push never
  // runs, so it must not hold up wait_for_all (Note [Naive wait_for_all]).
  // What may need memory comes before the admission: a push or deletion
  // that throws std::bad_alloc has changed nothing (Note [Linking cannot
  // fail] in threaded_engine.h).
  if (inside_own_operation()) {
    deferred_.push_back(std::move(first));  // only this thread, the holder, uses it
    try {
      std::lock_guard lock(state_mutex_);
      admit(deferred_.back());
      deferred_.back().ticket = next_ticket_.fetch_add(1, std::memory_order_seq_cst);
    } catch (...) {
      deferred_.pop_back();
      throw;
    }
    return;
  }
  {
    std::unique_lock lock(state_mutex_);
    state_changed_.wait(lock, [&] { return !busy_ || awaiting_ > 0; });
    if (busy_) {  // the holder awaits another thread: maybe this one
      handed_over_.push_back(std::move(first));
      try {
        admit(handed_over_.back());
      } catch (...) {
        handed_over_.pop_back();
        throw;
      }
      handed_over_.back().ticket = next_ticket_.fetch_add(1, std::memory_order_seq_cst);
      state_changed_.notify_all();  // a lent holder may run it
      throttle_handed_over(lock);
      return;
    }
    admit(first);
    first.ticket = next_ticket_.fetch_add(1, std::memory_order_seq_cst);
    busy_ = true;
  }
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  run_item(first);
  // Then what the operations deferred and what was handed over while they
  // awaited, in push order across both (each queue is in push order). No
  // await goes on here, so no other thread touches either queue.
  for (;;) {
    const bool deferred =
        !deferred_.empty() &&
        (handed_over_.empty() || deferred_.front().ticket < handed_over_.front().ticket);
    std::deque<Deferred>& queue = deferred ? deferred_ : handed_over_;
    if (queue.empty()) break;
    Deferred next = std::move(queue.front());
    queue.pop_front();
    run_item(next);
  }
  owner_.store(std::thread::id(), std::memory_order_relaxed);
  release();
}

void NaiveEngine::run_item(Deferred& item) {
  try {
    if (item.op) {
      run(item);
    } else {
      delete_now(item.deleted, item.on_deleted);
    }
  } catch (...) {  // no memory for the bookkeeping: still reported, and the rest runs
    errors_->record(std::current_exception());
    if (item.op) notify_tracker(*item.op, std::current_exception());
  }
  if (!item.ticket_finished) finish_ticket(item.ticket);
}

void NaiveEngine::finish_ticket(std::uint64_t ticket) {
  // Note [Naive wait_for_all]: only the engine's holder is here.
  const std::uint64_t below = finished_below_.load(std::memory_order_relaxed);
  const auto at = static_cast<std::size_t>(ticket - below);
  if (finished_window_.size() <= at) finished_window_.resize(at + 1, false);
  finished_window_[at] = true;
  std::uint64_t passed = 0;
  while (!finished_window_.empty() && finished_window_.front()) {
    finished_window_.pop_front();
    ++passed;
  }
  if (passed == 0) return;
  finished_below_.store(below + passed, std::memory_order_seq_cst);
  if (all_waiters_.load(std::memory_order_seq_cst) > 0) {
    { const std::lock_guard lock(state_mutex_); }  // a waiter is checking or asleep
    state_changed_.notify_all();
  }
}

void NaiveEngine::throttle_handed_over(std::unique_lock<std::mutex>& lock) {
  // Note [Bounded run-ahead] in threaded_engine.h, for pushes handed over:
  // they return before they run, so a producer that never pauses would grow
  // the holder's backlog without end. Above max_pending unfinished tickets
  // it waits for half that, unless nothing finishes for a while (it may be
  // the thread that is to complete the running operation).
  const auto limit = static_cast<std::uint64_t>(config_.max_pending);
  auto backlog = [&] {
    return next_ticket_.load(std::memory_order_relaxed) -
           finished_below_.load(std::memory_order_seq_cst);
  };
  if (limit == 0 || backlog() <= limit) return;
  if (finished_below_.load(std::memory_order_relaxed) == stalled_below_) return;
  all_waiters_.fetch_add(1, std::memory_order_seq_cst);
  StallWatch watch(finished_below_.load(std::memory_order_relaxed));
  while (backlog() > limit / 2) {
    state_changed_.wait_for(lock, std::chrono::milliseconds(2));
    // Stalled: the backlog may wait on this very thread.
    if (watch.stalled(finished_below_.load(std::memory_order_relaxed))) {
      stalled_below_ = finished_below_.load(std::memory_order_relaxed);
      break;
    }
  }
  all_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

void NaiveEngine::release() {
  {
    std::lock_guard lock(state_mutex_);
    busy_ = false;
  }
  state_changed_.notify_all();
}

void NaiveEngine::run(Deferred& item) {
  OpBlock& block = *item.op;  // one at a time: the priority orders nothing
  Stream* stream = nullptr;
  try {
    stream = stream_for(block.ctx, item.queue);
  } catch (...) {
    block.error = block.wrap(std::current_exception());
  }
  block.seq = next_seq_++;
  if (block.profile() != nullptr) [[unlikely]] {
    // Ready and started when it runs (the push that deferred it returned).
    block.profile()->seq = block.seq;
    block.profile()->ready = block.profile()->started = profiler_now();
    for (const Dep& d : block.deps) {
      const auto writer = profiled_writers_.find(d.var);
      if (reads_value(d.access) && writer != profiled_writers_.end()) {
        record_flow(writer->second, block.seq);
      }
      if (is_write(d.access)) profiled_writers_[d.var] = block.seq;
    }
  } else if (!profiled_writers_.empty()) {
    for (const Dep& d : block.deps) {
      if (is_write(d.access)) profiled_writers_.erase(d.var);
    }
  }
  if (!block.error) {
    for (const Dep& d : block.deps) {
      if (reads_value(d.access) && d.var->error) {
        block.error = d.var->error;  // inherited: skipped
        break;
      }
    }
  }
  if (!block.error) {
    block.stage.store(OperationStage::kRunning, std::memory_order_relaxed);
    {
      std::lock_guard running_lock(running_mutex_);
      running_.push_back({&block, item.ticket});
    }
    WorkerIdentity& me = this_worker();
    const char* outer = std::exchange(me.running, block.name);
    const RunContext rc{block.ctx, stream, 0};
    if (block.fn.is_async()) {
      Await await{.item = &item, .stream = stream, .outer = awaits_};
      const bool launched = launch_async(block, rc, await);
      me.running = outer;  // the wait below is ours, not the operation's
      if (launched) {
        struct Nest {  // awaits_ names only live frames, whatever happens
          Await*& innermost;
          explicit Nest(Await*& top, Await& frame) : innermost(top) { innermost = &frame; }
          ~Nest() { innermost = innermost->outer; }
          Nest(const Nest&) = delete;
          Nest& operator=(const Nest&) = delete;
        } nest(awaits_, await);
        await_completion(await);  // finishes it, and its ticket
        return;
      }
    } else {
      try {
        // The operation's kernels are launched from this thread: its GPU
        // must be current here, and the caller's current device comes back
        // after.
        std::optional<ScopedDevice> on_device;
        if (stream != nullptr) on_device.emplace(*backend_, block.ctx.index);
        if (block.profile() != nullptr && stream != nullptr) [[unlikely]] {
          stream->enqueue_timestamp(&block.profile()->device_started);
        }
        block.fn.body()(rc, nullptr);
        if (stream != nullptr) finish_on_device(block, *stream);
      } catch (...) {
        block.error = block.wrap(std::current_exception());
      }
      me.running = outer;
    }
    forget_running(block);
  }
  complete(block, stream);
}

void NaiveEngine::forget_running(const OpBlock& block) {
  // Innermost last; an outer asynchronous one may finish first (Await).
  const std::lock_guard running_lock(running_mutex_);
  const auto it = std::find_if(running_.rbegin(), running_.rend(),
                               [&](const Running& r) { return r.op == &block; });
  if (it != running_.rend()) running_.erase(std::next(it).base());
}

void NaiveEngine::complete(OpBlock& block, Stream* stream) {
  if (block.profile() != nullptr) [[unlikely]] {
    ProfileMarks* marks = std::exchange(block.extras->profile, nullptr);
    marks->ended = profiler_now();
    marks->failed = block.error != nullptr;
    bool handed_on = stream == nullptr;
    if (handed_on) record_op(marks);
    try {  // device times are written once the stream passes them: this
      // engine is synchronous, so the operation's record is complete before
      // push() returns and a wait_for_all() after it finds it
      if (!handed_on) {
        stream->synchronize(stream->record());
        record_op(marks);
      }
      handed_on = true;
    } catch (...) {
    }
    if (!handed_on) {  // a broken stream: as in the threaded engine
      auto* copy = new ProfileMarks(*marks);
      copy->device_started = copy->device_ended = -1;
      record_op(copy);
    }
  }
  if (block.error) errors_->record(block.error);
  for (const Dep& d : block.deps) {
    if (is_write(d.access)) d.var->error = block.error;
  }
  // What the closure captured is let go before its handle is told, as on
  // the threaded engine (Note [Closures die before waits return] in
  // threaded_engine.h).
  block.fn.body().reset();
  // Device work included: the stream was synchronised above.
  if (block.tracker() != nullptr) [[unlikely]]
    notify_tracker(block, block.error);
  completed_.fetch_add(1, std::memory_order_relaxed);
}

void NaiveEngine::notify_tracker(OpBlock& block, std::exception_ptr error) noexcept {
  if (block.tracker() == nullptr) return;
  const OperationStateRef state(std::exchange(block.extras->tracker, nullptr));
  state->complete(std::move(error), errors_);
}

OperationCounts NaiveEngine::operation_counts() const {
  const std::uint64_t completed = completed_.load(std::memory_order_relaxed);
  return {pushed_.load(std::memory_order_relaxed), completed};
}

DependencyState NaiveEngine::dependency_state() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("dependency_state");
  check_not_inside_operation("dependency_state");
  DependencyState state;
  state.counts = operation_counts();
  std::lock_guard lock(running_mutex_);
  for (const auto& [op, ticket] : running_) {
    PendingOperation& p = state.operations.emplace_back();
    p.seq = op->seq;
    p.name = op->name;
    p.ctx = op->ctx;
    p.stage = op->stage.load(std::memory_order_relaxed);
    for (const Dep& d : op->deps) {
      (is_write(d.access) ? p.writes : p.reads).push_back(var_handle(d));
    }
  }
  return state;
}

void NaiveEngine::complete_async(OpBlock* op, std::exception_ptr error) {
  if (fork_check_.forked()) [[unlikely]]
    return;  // the operation, and its waiting pusher, are the parent's
  // The holder lends the engine meanwhile, waiting on state_changed_ (Note
  // [Lending the naive engine]). Both under the lock: once the holder sees
  // the signal, its caller may destroy the engine, so nothing here may
  // touch it after the lock is let go.
  const std::lock_guard lock(state_mutex_);
  op->extras->signal->notify(std::move(error));
  state_changed_.notify_all();
}

bool NaiveEngine::finish_pending(std::chrono::milliseconds stall) {
  if (scheduler_ && !inside_own_operation()) {
    try {
      run_kept([] { return false; });
      const std::lock_guard lock(state_mutex_);  // a lent holder may be picking
      scheduler_->write_record();
    } catch (const std::exception& e) {
      spdlog::error("engine: the controlled schedule stopped at exit: {}", e.what());
    }
  }
  // Operations run in their pushers, device work included; only one still
  // running in another thread can be pending.
  using Clock = std::chrono::steady_clock;
  auto last_progress = Clock::now();
  for (OperationCounts counts = operation_counts(); counts.pending() != 0;) {
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    const OperationCounts now = operation_counts();
    if (now.completed != counts.completed) {
      counts = now;
      last_progress = Clock::now();
    } else if (Clock::now() - last_progress > stall) {
      return false;
    }
  }
  // The report has a lock of its own: nothing to take (exit() may come from
  // inside an operation, which holds the engine).
  if (std::exception_ptr error = errors_->unreported()) {
    spdlog::warn("engine: exiting with an operation error never waited for: {}", describe(error));
  }
  return true;
}

void NaiveEngine::check_not_running_here(const char* what) const {
  check_not_inside_operation(what);
  if (inside_own_operation()) [[unlikely]] {
    throw_error<WaitInsideOperationError>(
        "{} called from a variable's deleter: the naive engine runs it with its lock held "
        "(deadlock). Wait from outside.",
        what);
  }
}

void NaiveEngine::rethrow_error_of(VarHandle var, const char* what, bool or_reads,
                                   std::uint64_t below) {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error(what);
  check_not_running_here(what);
  TAGFLOW_CHECK(var != nullptr, "{}: expected a variable, got null", what);
  std::exception_ptr error;
  {
    std::unique_lock lock(state_mutex_);
    check_live(var, what);  // at once, even while an operation runs
    // A lent engine's holder may await this thread (Note [Lending the naive
    // engine]); what was pushed since the wait began may wait for it too.
    state_changed_.wait(
        lock, [&] { return !busy_ || (lent_ && !pending_use(var_block(var), or_reads, below)); });
    check_live(var, what);  // a deletion may have been admitted meanwhile
    if (busy_) {            // lent, and nothing pending uses `var`
      error = var_block(var)->error;
      lock.unlock();
      if (error) {
        errors_->seen(error);
        std::rethrow_exception(error);
      }
      return;
    }
    busy_ = true;
  }
  error = var_block(var)->error;
  release();
  if (error) {
    errors_->seen(error);  // Note [Errors seen by wait_for_all]
    std::rethrow_exception(error);
  }
}

void NaiveEngine::run_kept_using(VarHandle var, const char* what, bool or_reads,
                                 std::uint64_t below) {
  check_not_running_here(what);
  {
    // A stale handle throws before anything runs, as without a schedule:
    // what it named may be kept behind work that waits for this thread.
    const std::lock_guard lock(state_mutex_);
    check_live(var, what);
  }
  const KeptWaiter waiting(kept_waiters_);
  run_kept([&] {
    return !is_live(var_block(var), var.generation()) ||
           !kept_uses(var_block(var), or_reads, below);
  });
}

void NaiveEngine::wait_to_read(VarHandle var) {
  const std::uint64_t below = next_ticket_.load(std::memory_order_seq_cst);
  if (scheduler_ && var != nullptr) run_kept_using(var, "wait_to_read", false, below);
  rethrow_error_of(var, "wait_to_read", false, below);
}

void NaiveEngine::wait_to_write(VarHandle var) {
  const std::uint64_t below = next_ticket_.load(std::memory_order_seq_cst);
  if (scheduler_ && var != nullptr) run_kept_using(var, "wait_to_write", true, below);
  rethrow_error_of(var, "wait_to_write", true, below);
}

void NaiveEngine::wait_for_all() {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("wait_for_all");
  check_not_running_here("wait_for_all");
  // Note [Errors seen by wait_for_all] in error_report.h: the window is the
  // one open at the call, before the lock may make this thread wait.
  const std::uint64_t window = errors_->open_window();
  // Note [Naive wait_for_all]: what was pushed before the call, no more;
  // under a controlled schedule, what the operations it runs push is kept
  // for a later wait.
  const std::uint64_t target = next_ticket_.load(std::memory_order_seq_cst);
  if (scheduler_) {
    // Kept items are in push order.
    const KeptWaiter waiting(kept_waiters_);
    run_kept([&] { return kept_.empty() || kept_.front().ticket >= target; }, target);
    const std::lock_guard lock(state_mutex_);  // a lent holder may be picking
    scheduler_->write_record();
  }
  if (finished_below_.load(std::memory_order_seq_cst) < target) {
    std::unique_lock lock(state_mutex_);
    all_waiters_.fetch_add(1, std::memory_order_seq_cst);
    state_changed_.wait(lock,
                        [&] { return finished_below_.load(std::memory_order_seq_cst) >= target; });
    all_waiters_.fetch_sub(1, std::memory_order_relaxed);
  }
  if (std::exception_ptr error = errors_->close(window)) std::rethrow_exception(error);
}

std::int64_t NaiveEngine::modelled_time_ns() const {
  const sim::ModelClock* clock = backend_->model_clock();
  return clock != nullptr ? clock->host_now() : -1;
}

}  // namespace tagflow::detail
