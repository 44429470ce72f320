#pragma once
// VarBlock: the engine's record of one variable, and Dep, one operation's
// claim on it. Internal to engine/.
//
// Note [Variable queues]
// Each variable keeps the claims that cannot run yet in a FIFO threaded
// through the Dep records embedded in the operations (no allocation per
// claim). Granted claims are counted: either one writer is active, or
// `running_reads` readers are. A claim is granted when it reaches the front
// and does not conflict with the active ones: consecutive reads are granted
// together; a write waits until it is alone. Each variable has its own spin
// lock; an operation's variables are locked together, in address order, while
// it is appended, so concurrent pushers agree on one order everywhere.

#include <cstdint>
#include <exception>

#include "tagflow/engine/object_pool.h"
#include "tagflow/engine/small_vector.h"
#include "tagflow/engine/spin_lock.h"
#include "tagflow/engine/stream.h"

namespace tagflow::detail {

struct OpBlock;
struct VarBlock;

/// How an operation uses one variable.
enum class Access : std::uint8_t {
  kRead,       ///< reads it
  kWrite,      ///< overwrites it (a success clears its error)
  kReadWrite,  ///< modifies it in place: scheduled as a write, fails on its error
};

constexpr bool is_write(Access a) { return a != Access::kRead; }
constexpr bool reads_value(Access a) { return a != Access::kWrite; }

/// One operation's claim on one variable; also the link of the variable's queue.
struct Dep {
  Dep* next;
  OpBlock* op;
  VarBlock* var;
  Access access;
};

struct alignas(64) VarBlock : Pooled<VarBlock> {
  SpinLock lock;
  bool writer_active = false;
  std::uint32_t running_reads = 0;
  Dep* head = nullptr;  ///< first claim not yet granted
  Dep* tail = nullptr;
  /// Set by the last writer; read by claims granted after it.
  std::exception_ptr error;
  /// Device work of the last writer and of the readers since (see Note
  /// [Completion on device queues] in threaded_engine.h). The readers'
  /// fences sit on the second cache line: only GPU readers touch them.
  Fence write_fence;
  alignas(64) SmallVector<Fence, 2> read_fences;

  /// True when no claim is active or queued (the caller holds `lock`).
  bool idle() const { return !writer_active && running_reads == 0 && head == nullptr; }

  /// Keeps, per stream, only the latest fence: later marks cover earlier ones.
  void add_read_fence(const Fence& fence) {
    for (Fence& f : read_fences) {
      if (f.stream == fence.stream) {
        if (f.seq < fence.seq) f.seq = fence.seq;
        return;
      }
    }
    read_fences.push_back(fence);
  }
};

}  // namespace tagflow::detail
