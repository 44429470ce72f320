#include "tagflow/engine/threaded_engine.h"

#include <chrono>
#include <thread>

#include <spdlog/spdlog.h>

#include "tagflow/engine/error.h"

namespace tagflow::detail {

namespace {

/// At most this many operations run back to back on one worker through
/// inline hand-over, before it goes back to its queue (fairness).
constexpr int kMaxInlineRun = 256;

}  // namespace

ThreadedEngine::ThreadedEngine(const EngineConfig& config)
    : config_(config), backend_(make_device_backend(config)) {
  TAGFLOW_CHECK(static_cast<int>(backend_->devices().size()) <= kMaxGpus,
                "engine: at most {} GPUs are supported, found {}", kMaxGpus,
                backend_->devices().size());
}

ThreadedEngine::~ThreadedEngine() {
  drain();
  for (auto& pool : owned_pools_) pool->stop();
  if (has_error_.load()) {
    spdlog::warn("engine shut down with an operation error never waited for: {}",
                 describe(first_error_));
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
    if (ctx.index < 0 || ctx.index >= kMaxCpuDevices) [[unlikely]] {
      throw_error<DeviceError>("push: operation '{}' targets {}; CPU device indices are 0..{}",
                               op_name, ctx.str(), kMaxCpuDevices - 1);
    }
    slot = ctx.index;  // cpu_pinned(i) runs on cpu(i)'s pool
  }
  WorkerPool* pool = pools_[static_cast<std::size_t>(slot)].load(std::memory_order_acquire);
  if (pool == nullptr) [[unlikely]] pool = create_pool(slot, ctx, queue);
  return pool;
}

WorkerPool* ThreadedEngine::create_pool(int slot, Context ctx, QueueKind queue) {
  std::lock_guard lock(pools_mutex_);
  auto& entry = pools_[static_cast<std::size_t>(slot)];
  if (WorkerPool* existing = entry.load(std::memory_order_relaxed)) return existing;
  std::unique_ptr<WorkerPool> pool;
  if (ctx.is_gpu()) {
    pool = std::make_unique<WorkerPool>(*this, ctx, queue, 1, backend_->make_stream(ctx, queue),
                                        config_.worker_spin);
  } else {
    pool = std::make_unique<WorkerPool>(*this, cpu(ctx.index), QueueKind::kCompute,
                                        config_.cpu_workers, nullptr, config_.worker_spin);
  }
  spdlog::debug("engine: started {} {} queue with {} worker(s)", pool->context().str(),
                queue == QueueKind::kCopy ? "copy" : "compute", pool->num_workers());
  entry.store(pool.get(), std::memory_order_release);
  const int started = num_started_.load(std::memory_order_relaxed);
  started_[static_cast<std::size_t>(started)] = pool.get();
  num_started_.store(started + 1, std::memory_order_release);
  owned_pools_.push_back(std::move(pool));
  return owned_pools_.back().get();
}

// --- variables ----------------------------------------------------------------

VarHandle ThreadedEngine::new_var() { return new VarBlock; }

void ThreadedEngine::delete_var(VarHandle var) {
  TAGFLOW_CHECK(var != nullptr, "delete_var: expected a variable, got null");
  auto* op = new OpBlock;
  op->name = "delete_var";
  op->kind = OpKind::kDelete;
  op->engine = this;
  op->deps.push_back(Dep{nullptr, op, var, Access::kWrite});
  submit(op);
}

// --- push: appending claims ----------------------------------------------------

void ThreadedEngine::push(Operation op) {
  TAGFLOW_CHECK(static_cast<bool>(op.fn), "push: operation '{}' has no closure", op.name);
  WorkerPool* pool = pool_for(op.name, op.ctx, op.queue);
  auto* block = new OpBlock;
  block->name = op.name;
  block->ctx = op.ctx;
  block->priority = op.priority;
  block->queue = op.queue;
  block->pool = pool;
  block->engine = this;
  try {
    block->set_deps(op.reads, op.writes);
  } catch (...) {
    delete block;
    throw;
  }
  block->fn = std::move(op.fn);
  submit(block);
  thread_local std::uint32_t pushes = 0;
  if ((++pushes & 63) == 0 && config_.max_pending > 0 && this_worker().pool == nullptr) {
    throttle();
  }
}

std::uint64_t ThreadedEngine::completed_count() const {
  std::uint64_t completed = external_completed_.load(std::memory_order_seq_cst);
  const int n = num_started_.load(std::memory_order_acquire);
  for (int i = 0; i < n; ++i) completed += started_[static_cast<std::size_t>(i)]->completed();
  return completed;
}

void ThreadedEngine::throttle() {
  // See Note [Bounded run-ahead].
  const auto limit = static_cast<std::uint64_t>(config_.max_pending);
  std::uint64_t completed = completed_count();
  if (pushed_.load(std::memory_order_relaxed) - completed <= limit) return;
  auto last_progress = std::chrono::steady_clock::now();
  for (int round = 0; pushed_.load(std::memory_order_relaxed) - completed > limit / 2; ++round) {
    if (round < 16) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    const std::uint64_t now_completed = completed_count();
    const auto now = std::chrono::steady_clock::now();
    if (now_completed != completed) {
      completed = now_completed;
      last_progress = now;
    } else if (now - last_progress > std::chrono::milliseconds(20)) {
      return;  // stalled: the backlog may wait on this very thread
    }
  }
}

void ThreadedEngine::submit(OpBlock* op) {
  pushed_.fetch_add(1, std::memory_order_relaxed);
  const auto n = static_cast<std::int32_t>(op->deps.size());
  op->pending.store(n + 1, std::memory_order_relaxed);
  for (Dep& d : op->deps) d.var->lock.lock();
  std::int32_t granted = 0;
  for (Dep& d : op->deps) granted += append(d) ? 1 : 0;
  for (Dep& d : op->deps) d.var->lock.unlock();
  if (op->pending.fetch_sub(granted + 1, std::memory_order_acq_rel) == granted + 1) {
    on_ready(op, nullptr);
  }
}

bool ThreadedEngine::append(Dep& dep) {
  VarBlock& v = *dep.var;
  const bool free = !v.writer_active && v.head == nullptr;
  if (!is_write(dep.access)) {
    if (free) {
      ++v.running_reads;
      return true;
    }
  } else if (free && v.running_reads == 0) {
    v.writer_active = true;
    return true;
  }
  dep.next = nullptr;
  if (v.tail != nullptr) {
    v.tail->next = &dep;
  } else {
    v.head = &dep;
  }
  v.tail = &dep;
  return false;
}

// --- completion: releasing claims ----------------------------------------------

void ThreadedEngine::release(Dep& dep, SmallVector<OpBlock*, 8>& granted) {
  VarBlock& v = *dep.var;
  const OpBlock& op = *dep.op;
  if (!is_write(dep.access)) {
    --v.running_reads;
    if (op.fence) v.add_read_fence(op.fence);
    if (v.running_reads > 0) return;
  } else {
    v.writer_active = false;
    if (op.kind == OpKind::kUser) {
      v.error = op.error;
      v.write_fence = op.fence;
      v.read_fences.clear();
    }
  }
  auto pop = [&v] {
    Dep* d = v.head;
    v.head = d->next;
    if (v.head == nullptr) v.tail = nullptr;
    return d;
  };
  while (v.head != nullptr && !is_write(v.head->access)) {
    ++v.running_reads;
    granted.push_back(pop()->op);
  }
  if (v.running_reads == 0 && v.head != nullptr) {
    v.writer_active = true;
    granted.push_back(pop()->op);
  }
}

void ThreadedEngine::complete(OpBlock* op, Followers* followers) {
  if (op->error && op->kind == OpKind::kUser) record_error(op->error);
  SmallVector<OpBlock*, 8> granted;
  for (Dep& d : op->deps) {
    std::lock_guard lock(d.var->lock);
    release(d, granted);
  }
  if (op->kind == OpKind::kDelete) {
    VarBlock* var = op->deps[0].var;
    if (var->idle()) {
      delete var;
    } else {
      spdlog::error("delete_var: operations were pushed on a deleted variable; it is kept");
    }
  }
  for (OpBlock* g : granted) {
    if (g->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) on_ready(g, followers);
  }
  delete op;
  count_completion();
}

void ThreadedEngine::count_completion() {
  const WorkerIdentity& me = this_worker();
  if (me.pool != nullptr && me.pool->engine() == this) {
    me.pool->count_completion(me.index);  // checked by notify_idle when it runs dry
    return;
  }
  external_completed_.fetch_add(1, std::memory_order_seq_cst);
  notify_idle();
}

void ThreadedEngine::notify_idle() {
  // Ordered with the waiter's increment in drain() (see WorkerPool::enqueue).
  if (all_waiters_.fetch_add(0, std::memory_order_seq_cst) > 0) {
    all_epoch_.fetch_add(1, std::memory_order_seq_cst);
    all_epoch_.notify_all();
  }
}

void ThreadedEngine::record_error(const std::exception_ptr& error) {
  if (has_error_.load(std::memory_order_relaxed)) return;
  std::lock_guard lock(error_mutex_);
  if (!first_error_) {
    first_error_ = error;
    has_error_.store(true, std::memory_order_release);
  }
}

// --- ready: errors, fences, hand-over -------------------------------------------

void ThreadedEngine::on_ready(OpBlock* op, Followers* followers) {
  Stream* own_stream = op->pool != nullptr ? op->pool->stream() : nullptr;
  SmallVector<Fence, 4> host_waits;
  auto consider = [&](const Fence& fence) {
    if (!fence || fence.stream == own_stream || fence.stream->finished(fence.seq)) return;
    if (own_stream != nullptr) {
      if (!op->stream_waits) op->stream_waits = std::make_unique<std::vector<Fence>>();
      op->stream_waits->push_back(fence);
    } else {
      host_waits.push_back(fence);
    }
  };
  // Every claim is granted, so no conflicting operation can change these fields.
  for (const Dep& d : op->deps) {
    const VarBlock& v = *d.var;
    if (reads_value(d.access) && v.error && !op->error && op->kind == OpKind::kUser) {
      op->error = v.error;  // inherited: the operation is skipped
    }
    consider(v.write_fence);
    if (is_write(d.access)) {
      for (const Fence& f : v.read_fences) consider(f);
    }
  }
  if (host_waits.empty()) {
    run_or_enqueue(op, followers);
    return;
  }
  // Held back until its device inputs have finished; the last fence to
  // finish hands it on, from the stream's thread.
  op->pending.store(static_cast<std::int32_t>(host_waits.size()) + 1, std::memory_order_relaxed);
  for (const Fence& f : host_waits) {
    f.stream->when_finished(f.seq, [this, op] {
      if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) run_or_enqueue(op, nullptr);
    });
  }
  if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) run_or_enqueue(op, followers);
}

void ThreadedEngine::run_or_enqueue(OpBlock* op, Followers* followers) {
  if (op->kind != OpKind::kUser) {
    finish_host_op(op, followers);
    return;
  }
  if (followers != nullptr && followers->current == op->pool && followers->inline_next == nullptr &&
      !op->pool->queue().has_priority_above(op->priority)) {
    followers->inline_next = op;
    return;
  }
  op->pool->enqueue(op);
}

void ThreadedEngine::finish_host_op(OpBlock* op, Followers* followers) {
  if (op->kind == OpKind::kWait) {
    WaitSignal* signal = op->signal;
    std::exception_ptr error = op->deps[0].var->error;
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
  for (int run = 0; op != nullptr && run < kMaxInlineRun; ++run) {
    followers.inline_next = nullptr;
    if (stream != nullptr && op->stream_waits) {
      for (const Fence& f : *op->stream_waits) stream->wait(*f.stream, f.seq);
    }
    if (op->error) {
      finish(op, &followers);  // skipped: it inherited an error
    } else if (!op->fn.is_async()) {
      WorkerIdentity& me = this_worker();
      me.running = op->name;
      try {
        op->fn.body()(RunContext{op->ctx, stream, index}, nullptr);
      } catch (...) {
        op->error = op->wrap(std::current_exception());
      }
      me.running = nullptr;
      finish(op, &followers);
    } else {
      // Two references, this launcher's and the Completion's: whichever
      // lets go last finishes the operation.
      op->pending.store(2, std::memory_order_relaxed);
      WorkerIdentity& me = this_worker();
      me.running = op->name;
      {
        Completion completion = OpBlock::make_completion(op);
        try {
          op->fn.body()(RunContext{op->ctx, stream, index}, &completion);
        } catch (...) {
          op->launch_error = std::current_exception();
        }
      }  // a Completion the closure did not take is dropped here: fails the op
      me.running = nullptr;
      if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(op, &followers);
    }
    op = followers.inline_next;
  }
  return op;
}

void ThreadedEngine::complete_async(OpBlock* op, std::exception_ptr error) {
  op->async_error = std::move(error);
  if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) finish(op, nullptr);
}

void ThreadedEngine::finish(OpBlock* op, Followers* followers) {
  if (!op->error) {
    if (op->launch_error) {
      op->error = op->wrap(op->launch_error);
    } else if (op->async_error) {
      op->error = op->wrap(op->async_error);
    }
  }
  // Device work enqueued by the operation ends at this mark, skipped or not:
  // successors must still order after the fences it waited on.
  if (Stream* stream = op->pool->stream()) op->fence = Fence{stream, stream->record()};
  complete(op, followers);
}

// --- waiting -------------------------------------------------------------------

void ThreadedEngine::wait_on(VarHandle var, Access access, const char* what) {
  check_not_inside_operation(what);
  TAGFLOW_CHECK(var != nullptr, "{}: expected a variable, got null", what);
  WaitSignal signal;
  auto* op = new OpBlock;
  op->name = what;
  op->kind = OpKind::kWait;
  op->engine = this;
  op->signal = &signal;
  op->deps.push_back(Dep{nullptr, op, var, access});
  submit(op);
  signal.wait();
  if (signal.error) std::rethrow_exception(signal.error);
}

void ThreadedEngine::wait_to_read(VarHandle var) { wait_on(var, Access::kRead, "wait_to_read"); }

void ThreadedEngine::wait_to_write(VarHandle var) {
  wait_on(var, Access::kWrite, "wait_to_write");
}

void ThreadedEngine::wait_for_all() {
  check_not_inside_operation("wait_for_all");
  drain();
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
    const std::uint32_t epoch = all_epoch_.load(std::memory_order_seq_cst);
    // Completions first, pushes second: equal counts then mean that at the
    // moment the completions were read, everything pushed had completed.
    const std::uint64_t completed = completed_count();
    if (completed == pushed_.load(std::memory_order_seq_cst)) break;
    all_epoch_.wait(epoch, std::memory_order_seq_cst);
  }
  all_waiters_.fetch_sub(1, std::memory_order_seq_cst);
  // Operations on GPUs complete when launched; their device work may still run.
  for (auto& slot : pools_) {
    WorkerPool* pool = slot.load(std::memory_order_acquire);
    if (pool != nullptr && pool->stream() != nullptr) {
      pool->stream()->synchronize(pool->stream()->record());
    }
  }
}

}  // namespace tagflow::detail
