// The threaded engine's completion side: running an operation on its
// worker, what it leaves on its variables, the release of its successors
// and their hand-over (Note [Dependencies as edges] in var_block.h, Note
// [Closures die before waits return] in threaded_engine.h).

#include <algorithm>
#include <array>
#include <exception>
#include <utility>

#include "engine/detail/nvtx_range.h"
#include "engine/detail/threaded_engine.h"
#include "engine/error.h"

namespace tagflow::detail {

namespace {

/// At most this many operations run back to back on one worker through
/// inline hand-over, before it goes back to its queue (fairness).
constexpr int kMaxInlineRun = 256;

}  // namespace

// --- completion: following edges -----------------------------------------------

void ThreadedEngine::prefetch_successors(const OpBlock& op) {
  // Note [Successors fetched ahead]. Acquire: the slots below the count are filled.
  const std::uint32_t n =
      std::min(op.successor_count.load(std::memory_order_acquire), OpBlock::kInlineSuccessors);
  for (std::uint32_t i = 0; i < n; ++i) {
    OpBlock* successor = op.inline_successors[i].load(std::memory_order_relaxed);
    if (as_deletion(successor) == nullptr) prefetch_for_write(successor);
  }
}

void ThreadedEngine::leave_on(const Dep& dep, const OpBlock& op) {
  VarBlock& v = *dep.var;
  const Fence fence = op.fence();
  if (!is_write(dep.access)) {
    if (fence) {
      std::lock_guard lock(v.lock);
      v.add_read_fence(fence);
    }
    return;
  }
  if (op.kind != OpKind::kUser) return;  // waits and deletions leave nothing
  // Writers run alone: no lock needed. Skip stores that change nothing, so
  // that CPU operations without errors leave the line shared.
  if (v.error != op.error) v.error = op.error;
  if (v.write_fence.stream != fence.stream || v.write_fence.seq != fence.seq) {
    v.write_fence = fence;
  }
  if (!v.read_fences.empty()) v.read_fences.clear();
}

void ThreadedEngine::complete(OpBlock* op, Followers* followers) {
  if (op->error && op->kind == OpKind::kUser) record_error(op->error);
  for (const Dep& d : op->deps) leave_on(d, *op);
  if (op->kind == OpKind::kDelete) {
    if (op->fn) op->fn.body()(RunContext{}, nullptr);
    free_var(op->deps[0].var);  // nothing can follow it
  }
  // Note [Closures die before waits return]: the closure goes before the
  // operation can be seen completed (a wait that finds its variable idle
  // returns at once) and before its handle is told, the record before any
  // successor is released.
  op->fn.body().reset();
  if (op->tracker() != nullptr) [[unlikely]]
    notify_tracker(*op);
  // Close the slots and the overflow stack, then release the successors in
  // push order: the slots first, then the stack (newest first, so reversed).
  // Each successor's first line is fetched for writing up front, so that the
  // misses overlap; its counter is on it. They are copied out first: the
  // record is freed before them, and the stack's edges belong to the
  // successors, which may free them once released.
  // Sequentially consistent: ordered with a dump's look (Note [Dependency state]).
  const std::uint32_t n =
      op->successor_count.exchange(OpBlock::kCompleted, std::memory_order_seq_cst);
  std::array<OpBlock*, OpBlock::kInlineSuccessors> slots;
  for (std::uint32_t i = 0; i < n; ++i) {
    slots[i] = op->inline_successors[i].load(std::memory_order_relaxed);
    prefetch_for_write(slots[i]);
  }
  // A pusher only turns to the stack once it saw every slot taken: with a
  // slot still free when they closed, nothing was or will be put on it.
  Edge* stack = n == OpBlock::kInlineSuccessors
                    ? op->overflow.exchange(OpBlock::kClosed, std::memory_order_acq_rel)
                    : nullptr;
  SmallVector<OpBlock*, 8> stacked;
  if (stack != nullptr) [[unlikely]] {
    for (Edge* e = stack; e != nullptr; e = e->next) stacked.push_back(e->to);
    std::reverse(stacked.begin(), stacked.end());
  }
  const int slot = op->epoch_slot;
  release(op);
  for (std::uint32_t i = 0; i < n; ++i) release_successor(slots[i], followers);
  for (OpBlock* successor : stacked) release_successor(successor, followers);
  count_completion(slot);
}

void ThreadedEngine::release_successor(OpBlock* successor, Followers* followers) {
  if (VarBlock* deleted = as_deletion(successor)) [[unlikely]] {
    delete_now(deleted);  // Note [Deletion after the last writer]
  } else if (successor->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    on_ready(successor, followers);
  }
}

void ThreadedEngine::count_completion(int slot) {
  const WorkerIdentity& me = this_worker();
  if (me.pool != nullptr && me.pool->engine() == this) {
    me.pool->count_completion(me.index, slot);  // checked by notify_idle when it runs dry
    return;
  }
  external_completed_[slot].fetch_add(1, std::memory_order_seq_cst);
  notify_idle();
}

int ThreadedEngine::spin_budget() const {
  // Spinning pays only with a core to spare; with more workers than cores it
  // takes the core from the thread that would produce the work.
  const int threads = worker_threads_.load(std::memory_order_relaxed);
  if (threads <= cores_) return config_.worker_spin;
  return config_.worker_spin * cores_ / (4 * threads);
}

void ThreadedEngine::notify_idle() {
  // Ordered with the waiter's increment in drain() (see WorkerPool::enqueue).
  if (all_waiters_.fetch_add(0, std::memory_order_seq_cst) > 0) {
    all_done_.wake_all();
  }
}

void ThreadedEngine::record_error(const std::exception_ptr& error) { errors_->record(error); }

// --- ready: errors, fences, hand-over -------------------------------------------

void ThreadedEngine::on_ready(OpBlock* op, Followers* followers) {
  // Every claim is granted, so no conflicting operation can change the
  // variables' error and fences while we read them.
  bool has_fences = false;
  for (const Dep& d : op->deps) {
    const VarBlock& v = *d.var;
    if (reads_value(d.access) && v.error && !op->error && op->kind == OpKind::kUser) {
      op->error = v.error;  // inherited: the operation is skipped
    }
    has_fences = has_fences || v.write_fence || (is_write(d.access) && !v.read_fences.empty());
  }
  if (has_fences && hold_for_fences(op)) return;
  run_or_enqueue(op, followers);
}

void ThreadedEngine::run_or_enqueue(OpBlock* op, Followers* followers) {
  if (op->kind != OpKind::kUser) {
    finish_host_op(op, followers);
    return;
  }
  if (op->profile() != nullptr) [[unlikely]]
    op->profile()->ready = profiler_now();
  op->stage.store(OperationStage::kQueued, std::memory_order_relaxed);
  if (followers != nullptr && followers->current == op->pool && followers->inline_next == nullptr &&
      !op->pool->queue().has_priority_above(op->priority)) {
    followers->inline_next = op;
    return;
  }
  op->pool->enqueue(op);
}

void ThreadedEngine::finish_host_op(OpBlock* op, Followers* followers) {
  if (op->kind == OpKind::kWait) {
    WaitSignal* signal = op->extras->signal;
    const VarBlock& var = *op->deps[0].var;
    // Every fence on the variable has finished: the wait was held for them.
    std::exception_ptr error = var.error ? var.error : fence_error(var.write_fence);
    if (model_ != nullptr) [[unlikely]]
      signal->modelled_ns = modelled_time_of(var, is_write(op->deps[0].access));
    complete(op, followers);
    signal->notify(std::move(error));
  } else {
    complete(op, followers);
  }
}

// --- running -------------------------------------------------------------------

OpBlock* ThreadedEngine::execute(OpBlock* op, WorkerPool& pool, int index) {
  Followers followers{&pool, nullptr};
  Stream* stream = pool.stream();
  const bool real_gpu = stream != nullptr && stream->native_handle() != nullptr;
  const std::exception_ptr& device_error = pool.device_error();
  for (int run = 0; op != nullptr && run < kMaxInlineRun; ++run) {
    // exit() was called from inside an operation (Note [Engine lifetime]).
    if (workers_stopped_.load(std::memory_order_relaxed)) [[unlikely]]
      park_until_exit();
    followers.inline_next = nullptr;
    prefetch_successors(*op);
    // Before anything goes into the stream: it is issued at this time.
    if (model_ != nullptr) [[unlikely]]
      enter_modelled_time(*op);
    // Skipped or not: the fence it leaves on what it writes must follow the
    // device work of the operations it follows (Note [Skipped operations on
    // device queues]).
    if (stream != nullptr && op->extras != nullptr && !op->extras->stream_waits.empty()) {
      try {
        for (const Fence& f : op->extras->stream_waits) stream->wait(*f.stream, f.seq);
      } catch (...) {
        if (!op->error) op->error = op->wrap(std::current_exception());  // a broken device
      }
    }
    if (device_error && !op->error) [[unlikely]]
      op->error = op->wrap(device_error);  // the worker could not select its GPU
    // After the waits on other streams: the device span is the work alone.
    if (op->profile() != nullptr) [[unlikely]] {
      profile_start(*op, stream, index);
    }
    if (op->error) {
      if (model_ != nullptr) [[unlikely]]
        leave_modelled_time(*op);
      finish(op, &followers);  // skipped: it inherited an error
    } else if (!op->fn.is_async()) {
      op->stage.store(OperationStage::kRunning, std::memory_order_relaxed);
      WorkerIdentity& me = this_worker();
      me.running = op->name;
      try {
        const NvtxRange range(op->name, real_gpu);
        op->fn.body()(RunContext{op->ctx, stream, index}, nullptr);
      } catch (...) {
        op->error = op->wrap(std::current_exception());
      }
      me.running = nullptr;
      if (model_ != nullptr) [[unlikely]]
        leave_modelled_time(*op);
      finish(op, &followers);
    } else {
      // Two references, this launcher's and the Completion's: whichever
      // lets go last finishes the operation.
      op->pending.store(2, std::memory_order_relaxed);
      op->stage.store(OperationStage::kRunning, std::memory_order_relaxed);
      WorkerIdentity& me = this_worker();
      me.running = op->name;
      {
        Completion completion = OpBlock::make_completion(op);
        try {
          const NvtxRange range(op->name, real_gpu);
          op->fn.body()(RunContext{op->ctx, stream, index}, &completion);
        } catch (...) {
          op->extras->launch_error = std::current_exception();
        }
      }  // a Completion the closure did not take is dropped here: fails the op
      me.running = nullptr;
      if (model_ != nullptr) [[unlikely]]
        leave_modelled_time(*op);
      // Before this launcher lets go: the marks are only handed on once
      // both have (profile_end, from finish).
      if (op->profile() != nullptr) [[unlikely]]
        op->profile()->returned = profiler_now();
      op->stage.store(OperationStage::kLaunched, std::memory_order_relaxed);
      if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(op, &followers);
    }
    op = followers.inline_next;
  }
  return op;
}

void ThreadedEngine::complete_async(OpBlock* op, std::exception_ptr error) {
  // A Completion kept by the child of a fork: its operation is the parent's.
  if (fork_check_.forked()) [[unlikely]]
    return;
  // Called from any thread, possibly one the engine does not own: counted,
  // so that the destructor waits until it has stopped touching the engine.
  completers_inside_.fetch_add(1, std::memory_order_acq_rel);
  op->extras->async_error = std::move(error);
  if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(op, nullptr);
  completers_inside_.fetch_sub(1, std::memory_order_release);  // the last touch
}

void ThreadedEngine::finish(OpBlock* op, Followers* followers) {
  if (!op->error && op->extras != nullptr) [[unlikely]] {
    if (op->extras->launch_error) {
      op->error = op->wrap(op->extras->launch_error);
    } else if (op->extras->async_error) {
      op->error = op->wrap(op->extras->async_error);
    }
  }
  // Device work enqueued by the operation ends at this mark, skipped or not:
  // successors must still order after the fences it waited on.
  if (Stream* stream = op->pool->stream()) {
    if (op->profile() != nullptr) [[unlikely]] {
      profile_device_end(*op, stream);
    }
    try {
      op->extra().fence = Fence{stream, stream->record()};
    } catch (...) {
      if (!op->error) op->error = op->wrap(std::current_exception());
    }
  }
  if (op->profile() != nullptr) [[unlikely]]
    profile_end(*op, op->pool->stream());
  complete(op, followers);
}

}  // namespace tagflow::detail
