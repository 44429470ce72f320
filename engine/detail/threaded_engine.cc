#include "engine/detail/threaded_engine.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/detail/launch_group.h"
#include "engine/detail/operation_state.h"
#include "engine/detail/stall_watch.h"
#include "engine/error.h"

namespace tagflow::detail {

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
  for (const auto& [ctx, order] : group_order_) delete_var(order);
  drain();
  withdraw();
  if (config_.profiler) g_profiling.fetch_sub(1, std::memory_order_relaxed);
  // A Completion called from a client thread may still be on its way out of
  // complete_async() after the count that released drain().
  while (completers_inside_.load(std::memory_order_acquire) != 0) std::this_thread::yield();
  for (auto& pool : owned_pools_) pool->stop();
  while (spare_edges_ != nullptr) delete std::exchange(spare_edges_, spare_edges_->owned_next);
  delete spare_extras_;
  if (std::exception_ptr error = errors_->unreported()) {
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
          n == 0 ? std::string("there is no GPU (") + backend_->status() +
                       "; TAGFLOW_SIM_GPUS=N simulates N)"
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

void ThreadedEngine::push_group(LaunchGroup group) {
  if (fork_check_.forked()) [[unlikely]]
    throw_fork_error("push_group");
  check_launch_group(group);
  // Every device first: pool_for throws for one that does not exist.
  for (const Operation& part : group.parts) pool_for(part.name, part.ctx, part.queue);
  // Note [Launch groups]: one group at a time, each part after the parts of
  // the earlier groups on its device. What may throw (a new order variable,
  // room for it in a part's writes) comes before the first push.
  const std::lock_guard lock(group_mutex_);
  for (Operation& part : group.parts) {
    auto [order, added] = group_order_.try_emplace(part.ctx);
    if (added) {
      try {
        order->second = new_var();
      } catch (...) {
        group_order_.erase(order);
        throw;
      }
    }
  }
  for (Operation& part : group.parts) part.writes.push_back(group_order_.at(part.ctx));
  for (Operation& part : group.parts) push_block(part, nullptr);
}

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
    reserve_links(*block);
    std::unique_ptr<ProfileMarks> marks;  // the record does not free them
    if (profiling()) [[unlikely]] {
      marks.reset(new ProfileMarks{.pushed = profiler_now()});
    }
    if (marks != nullptr || tracker != nullptr) [[unlikely]]
      block->extra();
    if (model_ != nullptr) [[unlikely]]
      note_modelled_issue(*block);
    // Nothing below throws (Note [Linking cannot fail]).
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

void ThreadedEngine::make_room_for_reader(VarBlock& var) {
  var.readers.reserve(var.readers.size() + 1);
}

void ThreadedEngine::add_spares(std::size_t most_edges) {
  while (num_spare_edges_ < most_edges) {
    auto* edge = new OverflowEdge;
    edge->owned_next = std::exchange(spare_edges_, edge);
    ++num_spare_edges_;
  }
  if (spare_extras_ == nullptr) spare_extras_ = new OpExtras;
}

void ThreadedEngine::submit(OpBlock* op) noexcept {
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
  return add_overflow_edge(p, op, edges);
}

bool ThreadedEngine::add_overflow_edge(OpBlock& pred, OpBlock* op, std::int32_t& edges) {
  // Slots full: an overflow edge on the predecessor's stack, owned by `op`,
  // both taken from the spares (Note [Linking cannot fail]).
  OverflowEdge* node = spare_edges_;
  spare_edges_ = node->owned_next;
  --num_spare_edges_;
  node->edge.to = op;
  Edge* head = pred.overflow.load(std::memory_order_acquire);
  do {
    if (head == OpBlock::kClosed) {
      node->owned_next = std::exchange(spare_edges_, node);
      ++num_spare_edges_;
      return false;
    }
    node->edge.next = head;
  } while (!pred.overflow.compare_exchange_weak(head, &node->edge, std::memory_order_acq_rel,
                                                std::memory_order_acquire));
  if (op->extras == nullptr) op->extras = std::exchange(spare_extras_, nullptr);
  node->owned_next = op->extras->owned_edges;
  op->extras->owned_edges = node;
  ++edges;
  return true;
}

}  // namespace tagflow::detail
