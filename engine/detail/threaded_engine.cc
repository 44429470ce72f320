#include "engine/detail/threaded_engine.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/detail/nvtx_range.h"
#include "engine/detail/operation_state.h"
#include "engine/detail/stall_watch.h"
#include "engine/error.h"

namespace tagflow::detail {

namespace {

/// At most this many operations run back to back on one worker through
/// inline hand-over, before it goes back to its queue (fairness).
constexpr int kMaxInlineRun = 256;

}  // namespace

ThreadedEngine::ThreadedEngine(const EngineConfig& config)
    : config_(config),
      backend_(make_device_backend(config)),
      model_(backend_->model_clock()),
      cores_(static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))),
      run_ahead_limit_(static_cast<std::uint64_t>(config_.max_pending)) {
  TAGFLOW_CHECK(static_cast<int>(backend_->devices().size()) <= kMaxGpus,
                "engine: at most {} GPUs are supported, found {}", kMaxGpus,
                backend_->devices().size());
  if (config_.profiler) g_profiling.fetch_add(1, std::memory_order_relaxed);  // TAGFLOW_PROFILER
  enroll();
}

ThreadedEngine::~ThreadedEngine() {
  if (fork_check_.forked()) [[unlikely]] {
    // A forked child: the workers and stream threads are the parent's, and
    // joining them, or destroying what they wait on, would wait forever.
    // Everything they use is kept, unreachable (Note [Engine lifetime]); the
    // registry does not follow this engine there (threaded_engine_inspection.cc).
    for (auto& pool : owned_pools_) abandon(std::move(pool));
    abandon(std::move(backend_));
    return;
  }
  drain();
  withdraw();
  if (config_.profiler) g_profiling.fetch_sub(1, std::memory_order_relaxed);
  // A Completion called from a client thread may still be on its way out of
  // complete_async() after the count that released drain().
  while (completers_inside_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  for (auto& pool : owned_pools_) pool->stop();
  if (std::exception_ptr error = errors_.unreported()) {
    spdlog::warn("engine shut down with an operation error never waited for: {}", describe(error));
  }
}

// --- devices -----------------------------------------------------------------

WorkerPool* ThreadedEngine::pool_for(const char* op_name, Context ctx, QueueKind queue) {
  int slot;
  if (ctx.is_gpu()) {
    const int n = num_gpus();
    if (ctx.index < 0 || ctx.index >= n) [[unlikely]] {
      throw_error<DeviceError>(
          "push: operation '{}' targets {} but {}", op_name, ctx.str(),
          n == 0 ? std::string("there is no GPU (") + backend_->status() + ")"
                 : fmt::format("only {} GPU(s) exist: gpu(0)..gpu({})", n, n - 1));
    }
    slot = kMaxCpuDevices + 2 * ctx.index + (queue == QueueKind::kCopy ? 1 : 0);
  } else {
    if (!ctx.is_cpu() && !ctx.is_cpu_pinned()) [[unlikely]] {
      throw_error<DeviceError>(
          "push: operation '{}' targets {}, a device of unknown type: expected cpu(i), gpu(i) "
          "or cpu_pinned(i)",
          op_name, ctx.str());
    }
    if (ctx.index < 0 || ctx.index >= kMaxCpuDevices) [[unlikely]] {
      throw_error<DeviceError>("push: operation '{}' targets {}; CPU device indices are 0..{}",
                               op_name, ctx.str(), kMaxCpuDevices - 1);
    }
    slot = ctx.index;  // cpu_pinned(i) runs on cpu(i)'s pool
  }
  WorkerPool* pool = pools_[static_cast<std::size_t>(slot)].load(std::memory_order_acquire);
  if (pool == nullptr) [[unlikely]]
    pool = create_pool(slot, ctx, queue);
  return pool;
}

WorkerPool* ThreadedEngine::create_pool(int slot, Context ctx, QueueKind queue) {
  std::lock_guard lock(pools_mutex_);
  auto& entry = pools_[static_cast<std::size_t>(slot)];
  if (WorkerPool* existing = entry.load(std::memory_order_relaxed)) return existing;
  std::unique_ptr<WorkerPool> pool;
  if (ctx.is_gpu()) {
    pool = std::make_unique<WorkerPool>(*this, ctx, queue, 1, backend_->make_stream(ctx, queue),
                                        backend_.get());
  } else {
    pool = std::make_unique<WorkerPool>(*this, cpu(ctx.index), QueueKind::kCompute,
                                        config_.cpu_workers, nullptr);
  }
  if (!exit_started()) {  // spdlog may be gone once exit has started
    spdlog::debug("engine: started {} {} queue with {} worker(s)", pool->context().str(),
                  queue == QueueKind::kCopy ? "copy" : "compute", pool->num_workers());
  }
  worker_threads_.fetch_add(pool->num_workers(), std::memory_order_relaxed);
  entry.store(pool.get(), std::memory_order_release);
  const int started = num_started_.load(std::memory_order_relaxed);
  started_[static_cast<std::size_t>(started)] = pool.get();
  num_started_.store(started + 1, std::memory_order_release);
  owned_pools_.push_back(std::move(pool));
  return owned_pools_.back().get();
}

// --- push: appending claims ----------------------------------------------------

void ThreadedEngine::prefetch_variable(VarHandle var) {
  const VarBlock* record = var_block(var);
  __builtin_prefetch(&generation_of(record), 0, 3);
  __builtin_prefetch(record, 0, 3);
}

void ThreadedEngine::push(Operation op) { push_block(op, nullptr); }

void ThreadedEngine::push_block(Operation& op, OperationState* tracker) {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("push");
  TAGFLOW_CHECK(static_cast<bool>(op.fn), "push: operation '{}' has no closure", op.name);
  // One pass over each list before the lock: refuse a null handle, and ask
  // for the variables' records and generations all at once, so that their
  // misses overlap one another and the lock (a prefetch of a freed record
  // is harmless: nothing is read yet).
  for (VarHandle v : op.reads) {
    TAGFLOW_CHECK(v != nullptr, "push: operation '{}' lists a null variable in reads", op.name);
    prefetch_variable(v);
  }
  for (VarHandle v : op.writes) {
    TAGFLOW_CHECK(v != nullptr, "push: operation '{}' lists a null variable in writes", op.name);
    prefetch_variable(v);
  }
  // The common case inline: a CPU device whose pool has started.
  WorkerPool* pool = nullptr;
  if (op.ctx.is_cpu() && static_cast<unsigned>(op.ctx.index) < kMaxCpuDevices) [[likely]]
    pool = pools_[static_cast<std::size_t>(op.ctx.index)].load(std::memory_order_acquire);
  if (pool == nullptr) [[unlikely]]
    pool = pool_for(op.name, op.ctx, op.queue);
  // Dropped, unpushed, if a handle is stale or what follows throws: after
  // the lock is let go, since the closure's destructor may call the engine
  // (an array's last reference deletes its variable).
  std::unique_ptr<OpBlock> made;
  {
    std::lock_guard lock(push_lock_);
    made.reset(new OpBlock(op, pool, this));
    OpBlock* block = made.get();
    // In the pass that merges the lists: refuse a stale handle (Note
    // [Variable generations] in var_block.h), and ask for the earlier
    // operations' first lines before the rest of the record is built, so
    // the transfers overlap with that work (see submit()).
    block->set_deps(op.reads, op.writes, [&](const VarBlock* var, VarHandle v, bool write) {
      if (!is_live(var, v.generation())) [[unlikely]]
        throw_stale(v, "push", op.name, write ? "writes" : "reads");
      prefetch_predecessors(*var, write);
    });
    std::unique_ptr<ProfileMarks> marks;  // the record does not free them
    if (profiling()) [[unlikely]] {
      marks.reset(new ProfileMarks{.pushed = profiler_now()});
    }
    if (model_ != nullptr) [[unlikely]]
      note_modelled_issue(*block);
    if (marks != nullptr || tracker != nullptr) [[unlikely]]
      block->extra();
    // Nothing below throws.
    if (marks != nullptr) [[unlikely]]
      block->extras->profile = marks.release();
    if (tracker != nullptr) [[unlikely]]
      block->extras->tracker = tracker->retain();  // given back by complete()
    submit(made.release());
  }
  thread_local std::uint32_t pushes = 0;
  if ((++pushes & 63) == 0 && config_.max_pending > 0 && this_worker().pool == nullptr) {
    throttle();
  }
}

std::uint64_t ThreadedEngine::completed_count(int slot) const {
  if (slot < 0) return completed_count(0) + completed_count(1);
  std::uint64_t completed = external_completed_[slot].load(std::memory_order_seq_cst);
  const int n = num_started_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) completed += started_[static_cast<std::size_t>(i)]->completed(slot);
  return completed;
}

bool ThreadedEngine::slot_drained(int slot) const {
  // Completions first, pushes second: equal counts then mean that at the
  // moment the completions were read, everything pushed had completed.
  const std::uint64_t completed = completed_count(slot);
  return completed == pushed_count(slot);
}

void ThreadedEngine::throttle() {
  // See Note [Bounded run-ahead].
  const auto limit = run_ahead_limit_.load(std::memory_order_relaxed);
  std::uint64_t completed = completed_count();
  if (pushed_count() - completed <= limit) return;
  StallWatch watch(completed);
  for (int round = 0; pushed_count() - completed > limit / 2; ++round) {
    if (round < 16) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    completed = completed_count();
    if (watch.stalled(completed)) return;  // the backlog may wait on this very thread
  }
}

void ThreadedEngine::submit(OpBlock* op) {
  const auto slot = static_cast<std::uint8_t>(epoch_.load(std::memory_order_relaxed) & 1);
  op->epoch_slot = slot;
  // Only pushers change the count, under the push lock: no read-modify-write.
  pushed_[slot].store(pushed_[slot].load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  op->seq = next_seq_++;
  if (op->profile() != nullptr || !profiled_writers_.empty()) [[unlikely]]
    note_flows(*op);
  // Predecessors may complete while the edges are being made: until they
  // all are, the count holds a bias larger than any number of edges, so it
  // cannot reach zero early. The bias, less the edges made, is given back last.
  constexpr std::int32_t kLinking = 1 << 30;
  op->pending.store(kLinking, std::memory_order_relaxed);
  std::int32_t edges = 0;
  for (const Dep& d : op->deps) {
    VarBlock& v = *d.var;
    if (!is_write(d.access)) {
      // A writer found completed is forgotten: later readers of a variable
      // written long ago then look at nothing (the readers workload).
      if (!add_edge(v.last_writer, op, edges)) v.last_writer = OpRef{};
      if (v.readers.size() >= v.prune_at) {
        drop_completed_readers(v);
        v.prune_at = static_cast<std::uint32_t>(std::max<std::size_t>(8, 2 * v.readers.size()));
      }
      v.readers.push_back(OpRef{op, op->seq});
    } else {
      bool after_readers = false;
      for (const OpRef& r : v.readers) after_readers = add_edge(r, op, edges) || after_readers;
      // Readers follow the writer: with none pending, the writer is what is left.
      if (!after_readers) add_edge(v.last_writer, op, edges);
      v.readers.clear();
      v.prune_at = 8;
      v.last_writer = OpRef{op, op->seq};
    }
  }
  // Note [Bounded run-ahead]: the bound follows the edges per operation.
  window_edges_ += static_cast<std::uint64_t>(edges);
  if ((op->seq & (kEdgeWindow - 1)) == 0) {
    const auto max_pending = static_cast<std::uint64_t>(config_.max_pending);
    const std::uint64_t weight =
        std::clamp(window_edges_, kEdgeWindow, kMaxEdgeWeight * kEdgeWindow);
    run_ahead_limit_.store(max_pending * kEdgeWindow / weight, std::memory_order_relaxed);
    window_edges_ = 0;
  }
  // With no edge made, no other thread knows the operation: it is ready.
  if (edges == 0) {
    on_ready(op, nullptr);
    return;
  }
  const std::int32_t unused = kLinking - edges;
  if (op->pending.fetch_sub(unused, std::memory_order_acq_rel) == unused) on_ready(op, nullptr);
}

void ThreadedEngine::prefetch_predecessors(const VarBlock& var, bool write) {
  // The earlier operations' first lines were last written by the workers
  // that completed them: asking for all of them at once makes the misses
  // overlap instead of following one another in add_edge().
  // A read, not a write, prefetch: the record may have been recycled for an
  // operation a worker is running right now, which must keep its line.
  if (var.last_writer.op != nullptr) __builtin_prefetch(var.last_writer.op, 0, 3);
  if (write) {
    for (const OpRef& r : var.readers) __builtin_prefetch(r.op, 0, 3);
  }
}

void ThreadedEngine::drop_completed_readers(VarBlock& var) {
  // Ask for every record first: the misses then overlap.
  for (const OpRef& r : var.readers) __builtin_prefetch(r.op, 0, 3);
  std::size_t kept = 0;
  for (const OpRef& r : var.readers) {
    if (r.op->seq == r.seq && !r.op->completed()) {
      var.readers[kept++] = r;
    }
  }
  var.readers.truncate(kept);
}

bool ThreadedEngine::add_edge(const OpRef& pred, OpBlock* op, std::int32_t& edges) {
  // A recycled record (other sequence number) completed long ago.
  if (pred.op == nullptr || pred.op->seq != pred.seq) return false;
  OpBlock& p = *pred.op;
  // An inline slot: filled first, then claimed by advancing the count; the
  // completion bit, once set, makes every claim fail.
  std::uint32_t n = p.successor_count.load(std::memory_order_acquire);
  while (n < OpBlock::kInlineSuccessors) {
    p.inline_successors[n].store(op, std::memory_order_relaxed);
    if (p.successor_count.compare_exchange_weak(n, n + 1, std::memory_order_release,
                                                std::memory_order_acquire)) {
      ++edges;
      return true;
    }
  }
  if ((n & OpBlock::kCompleted) != 0) return false;
  // Slots full: an overflow edge on the predecessor's stack, owned by `op`
  // (both allocations before the edge is published).
  OpExtras& owner = op->extra();
  auto* node = new OverflowEdge;
  node->edge.to = op;
  Edge* head = p.overflow.load(std::memory_order_acquire);
  do {
    if (head == OpBlock::kClosed) {
      delete node;
      return false;
    }
    node->edge.next = head;
  } while (!p.overflow.compare_exchange_weak(head, &node->edge, std::memory_order_acq_rel,
                                             std::memory_order_acquire));
  node->owned_next = owner.owned_edges;
  owner.owned_edges = node;
  ++edges;
  return true;
}

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
  if (op->tracker() != nullptr) [[unlikely]]
    notify_tracker(*op);
  for (const Dep& d : op->deps) leave_on(d, *op);
  if (op->kind == OpKind::kDelete) {
    if (op->fn) op->fn.body()(RunContext{}, nullptr);
    free_var(op->deps[0].var);  // nothing can follow it
  }
  // Note [Closures die before waits return]: the closure goes before the
  // operation can be seen completed (a wait that finds its variable idle
  // returns at once), the record before any successor is released.
  op->fn.body().reset();
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

void ThreadedEngine::record_error(const std::exception_ptr& error) { errors_.record(error); }

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
