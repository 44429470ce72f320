#pragma once
// ReadyQueue: the operations of one pool that may run now. Internal to engine/.
//
// Note [Ready queue]
// Most operations have priority 0 and go through a bounded lock-free ring
// (Vyukov's multi-producer multi-consumer queue): the pushing thread and the
// workers touch different cache lines (tail, head, the cells between) and
// never wait for one another. Operations with another priority go to a
// small heap under a spin lock: higher first, then push order; priority > 0
// runs before the ring, priority < 0 after it. When the ring is full, or
// while earlier operations still wait outside it, priority-0 operations queue
// in an overflow list under the same lock, so order is kept. The ring holds
// 16,384 operations, the default run-ahead bound (Note [Bounded run-ahead]
// in threaded_engine.h): a client pushing operations that are ready at once
// (each `c = a + b` on arrays computed long ago) keeps up to that many in
// the queue, and with a smaller ring every push and pop beyond it went
// through the lock the pushing thread and the workers then contend for
// (4,096: small-add 0.31 µs, 16,384: 0.29, medians of 5 invocations).

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/detail/op_block.h"
#include "engine/detail/spin_lock.h"

namespace tagflow::detail {

class ReadyQueue {
 public:
  ReadyQueue();

  /// Any thread.
  void push(OpBlock* op);
  /// Any thread; null when nothing is ready.
  OpBlock* pop();
  /// A racy "is anything ready?", for polling workers.
  bool maybe_nonempty() const;
  /// True when an operation of priority above `priority` may be waiting
  /// (errs on the side of yes for negative priorities).
  bool has_priority_above(int priority) const;

 private:
  struct alignas(16) Cell {
    std::atomic<std::uint64_t> seq;
    OpBlock* op;
  };
  static constexpr std::uint64_t kCapacity = 16384;  // a power of two
  static constexpr std::uint64_t kMask = kCapacity - 1;

  bool ring_push(OpBlock* op);
  OpBlock* ring_pop();
  OpBlock* locked_pop(bool prioritized_only);

  std::unique_ptr<Cell[]> cells_;
  alignas(64) std::atomic<std::uint64_t> tail_{0};  ///< next cell to fill
  alignas(64) std::atomic<std::uint64_t> head_{0};  ///< next cell to take
  alignas(64) mutable SpinLock lock_;               ///< heap and overflow
  OpBlock* overflow_head_ = nullptr;
  OpBlock* overflow_tail_ = nullptr;
  std::vector<OpBlock*> heap_;
  std::atomic<std::uint32_t> overflowed_{0};   ///< entries in the overflow list
  std::atomic<std::uint32_t> heaped_{0};       ///< entries in the heap
  std::atomic<std::uint32_t> prioritized_{0};  ///< heap entries with priority > 0
};

}  // namespace tagflow::detail
