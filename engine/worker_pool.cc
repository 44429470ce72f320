#include "tagflow/engine/worker_pool.h"

#include <algorithm>

#include "tagflow/engine/error.h"

#include "tagflow/engine/threaded_engine.h"

namespace tagflow::detail {

WorkerIdentity& this_worker() {
  thread_local WorkerIdentity identity;
  return identity;
}

void check_not_inside_operation(const char* what) {
  const WorkerIdentity& me = this_worker();
  if (me.running != nullptr) [[unlikely]] {
    throw_error<WaitInsideOperationError>(
        "{} called from inside engine operation '{}': the wait would block the worker "
        "that has to run what it waits for (deadlock). Push a dependent operation instead, "
        "or wait from a host thread.",
        what, me.running);
  }
}

// --- ReadyQueue ----------------------------------------------------------------

namespace {
/// Heap order: higher priority first, then earlier push.
bool runs_later(const OpBlock* a, const OpBlock* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->seq > b->seq;
}
}  // namespace

void ReadyQueue::push(OpBlock* op) {
  std::lock_guard lock(lock_);
  if (op->priority == 0) {
    op->next = nullptr;
    if (fifo_tail_ != nullptr) {
      fifo_tail_->next = op;
    } else {
      fifo_head_ = op;
    }
    fifo_tail_ = op;
  } else {
    heap_.push_back(op);
    std::push_heap(heap_.begin(), heap_.end(), runs_later);
    if (op->priority > 0) prioritized_.fetch_add(1, std::memory_order_relaxed);
  }
  size_.store(size_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

OpBlock* ReadyQueue::pop() {
  std::lock_guard lock(lock_);
  OpBlock* op = nullptr;
  if (!heap_.empty() && (heap_.front()->priority > 0 || fifo_head_ == nullptr)) {
    std::pop_heap(heap_.begin(), heap_.end(), runs_later);
    op = heap_.back();
    heap_.pop_back();
    if (op->priority > 0) prioritized_.fetch_sub(1, std::memory_order_relaxed);
  } else if (fifo_head_ != nullptr) {
    op = fifo_head_;
    fifo_head_ = op->next;
    if (fifo_head_ == nullptr) fifo_tail_ = nullptr;
  } else {
    return nullptr;
  }
  size_.store(size_.load(std::memory_order_relaxed) - 1, std::memory_order_relaxed);
  return op;
}

bool ReadyQueue::has_priority_above_slow(int priority) const {
  if (prioritized_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(lock_);
  return !heap_.empty() && heap_.front()->priority > priority;
}

// --- WorkerPool ------------------------------------------------------------------

WorkerPool::WorkerPool(ThreadedEngine& engine, Context ctx, QueueKind kind, int num_workers,
                       std::unique_ptr<Stream> stream, int spin)
    : engine_(engine),
      ctx_(ctx),
      kind_(kind),
      stream_(std::move(stream)),
      spin_(spin),
      counters_(std::make_unique<Counter[]>(static_cast<std::size_t>(num_workers))) {
  threads_.reserve(static_cast<std::size_t>(num_workers));
  for (int i = 0; i < num_workers; ++i) threads_.emplace_back([this, i] { run(i); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::stop() {
  if (stopping_.exchange(true)) return;
  wake_epoch_.fetch_add(1, std::memory_order_seq_cst);
  wake_epoch_.notify_all();
  for (std::thread& t : threads_) t.join();
}

std::uint64_t WorkerPool::completed() const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    total += counters_[i].completed.load(std::memory_order_acquire);
  }
  return total;
}

void WorkerPool::enqueue(OpBlock* op) {
  queue_.push(op);
  // A read-modify-write, not a plain load: it is ordered with the sleeper's
  // increment in next_op(), so either the sleeper sees the operation or we
  // see the sleeper. (A fence would do on x86; this is also what
  // ThreadSanitizer can check.)
  if (sleepers_.fetch_add(0, std::memory_order_seq_cst) > 0) {
    wake_epoch_.fetch_add(1, std::memory_order_seq_cst);
    wake_epoch_.notify_one();
  }
}

OpBlock* WorkerPool::next_op(int index) {
  (void)index;
  if (OpBlock* op = queue_.pop()) return op;
  engine_.notify_idle();
  for (int polls = 0;; ++polls) {
    if (queue_.size() > 0) {
      if (OpBlock* op = queue_.pop()) return op;
    }
    if (stopping_.load(std::memory_order_acquire)) return nullptr;
    if (polls < spin_) {
      cpu_relax();
      continue;
    }
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const std::uint32_t epoch = wake_epoch_.load(std::memory_order_seq_cst);
    if (queue_.size() == 0 && !stopping_.load(std::memory_order_seq_cst)) {
      wake_epoch_.wait(epoch, std::memory_order_seq_cst);
    }
    sleepers_.fetch_sub(1, std::memory_order_relaxed);
    polls = 0;
  }
}

void WorkerPool::run(int index) {
  WorkerIdentity& me = this_worker();
  me.pool = this;
  me.index = index;
  while (OpBlock* op = next_op(index)) {
    while (op != nullptr) op = engine_.execute(op, *this, index);
  }
  me.pool = nullptr;
}

}  // namespace tagflow::detail
