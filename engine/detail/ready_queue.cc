#include "engine/detail/ready_queue.h"

#include <algorithm>
#include <mutex>

namespace tagflow::detail {

namespace {
/// Heap order: higher priority first, then earlier push.
bool runs_later(const OpBlock* a, const OpBlock* b) {
  if (a->priority != b->priority) return a->priority < b->priority;
  return a->seq > b->seq;
}
}  // namespace

ReadyQueue::ReadyQueue() : cells_(std::make_unique<Cell[]>(kCapacity)) {
  for (std::uint64_t i = 0; i < kCapacity; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
}

void ReadyQueue::push(OpBlock* op) {
  if (op->priority == 0 && overflowed_.load(std::memory_order_acquire) == 0 && ring_push(op)) {
    return;
  }
  std::lock_guard lock(lock_);
  if (op->priority != 0) {
    heap_.push_back(op);
    std::push_heap(heap_.begin(), heap_.end(), runs_later);
    heaped_.fetch_add(1, std::memory_order_release);
    if (op->priority > 0) prioritized_.fetch_add(1, std::memory_order_release);
    return;
  }
  op->next = nullptr;
  if (overflow_tail_ != nullptr) {
    overflow_tail_->next = op;
  } else {
    overflow_head_ = op;
  }
  overflow_tail_ = op;
  overflowed_.fetch_add(1, std::memory_order_release);
}

OpBlock* ReadyQueue::pop() {
  if (prioritized_.load(std::memory_order_acquire) > 0) {
    if (OpBlock* op = locked_pop(true)) return op;
  }
  if (OpBlock* op = ring_pop()) return op;
  if (overflowed_.load(std::memory_order_acquire) > 0 ||
      heaped_.load(std::memory_order_acquire) > 0) {
    return locked_pop(false);
  }
  return nullptr;
}

OpBlock* ReadyQueue::locked_pop(bool prioritized_only) {
  std::lock_guard lock(lock_);
  if (!heap_.empty() && heap_.front()->priority > 0) {
    std::pop_heap(heap_.begin(), heap_.end(), runs_later);
    OpBlock* op = heap_.back();
    heap_.pop_back();
    heaped_.fetch_sub(1, std::memory_order_relaxed);
    prioritized_.fetch_sub(1, std::memory_order_relaxed);
    return op;
  }
  if (prioritized_only) return nullptr;
  // The ring holds older operations than the overflow list: it goes first.
  if (OpBlock* op = ring_pop()) return op;
  if (overflow_head_ != nullptr) {
    OpBlock* op = overflow_head_;
    overflow_head_ = op->next;
    if (overflow_head_ == nullptr) overflow_tail_ = nullptr;
    overflowed_.fetch_sub(1, std::memory_order_release);
    return op;
  }
  if (!heap_.empty()) {  // what is left has priority < 0
    std::pop_heap(heap_.begin(), heap_.end(), runs_later);
    OpBlock* op = heap_.back();
    heap_.pop_back();
    heaped_.fetch_sub(1, std::memory_order_relaxed);
    return op;
  }
  return nullptr;
}

bool ReadyQueue::ring_push(OpBlock* op) {
  std::uint64_t pos = tail_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & kMask];
    const std::uint64_t seq = cell.seq.load(std::memory_order_acquire);
    const auto diff = static_cast<std::int64_t>(seq - pos);
    if (diff == 0) {
      if (tail_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        cell.op = op;
        cell.seq.store(pos + 1, std::memory_order_release);
        return true;
      }
    } else if (diff < 0) {
      return false;  // full
    } else {
      pos = tail_.load(std::memory_order_relaxed);
    }
  }
}

OpBlock* ReadyQueue::ring_pop() {
  std::uint64_t pos = head_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& cell = cells_[pos & kMask];
    const std::uint64_t seq = cell.seq.load(std::memory_order_acquire);
    const auto diff = static_cast<std::int64_t>(seq - (pos + 1));
    if (diff == 0) {
      if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        OpBlock* op = cell.op;
        cell.seq.store(pos + kCapacity, std::memory_order_release);
        return op;
      }
    } else if (diff < 0) {
      return nullptr;  // empty
    } else {
      pos = head_.load(std::memory_order_relaxed);
    }
  }
}

bool ReadyQueue::maybe_nonempty() const {
  const std::uint64_t pos = head_.load(std::memory_order_relaxed);
  return cells_[pos & kMask].seq.load(std::memory_order_relaxed) == pos + 1 ||
         overflowed_.load(std::memory_order_relaxed) > 0 ||
         heaped_.load(std::memory_order_relaxed) > 0;
}

bool ReadyQueue::has_priority_above(int priority) const {
  if (priority == 0) return prioritized_.load(std::memory_order_relaxed) > 0;
  if (priority < 0) return maybe_nonempty();
  if (prioritized_.load(std::memory_order_relaxed) == 0) return false;
  std::lock_guard lock(lock_);
  return !heap_.empty() && heap_.front()->priority > priority;
}

}  // namespace tagflow::detail
