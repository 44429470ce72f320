#pragma once
// VarBlock: the engine's record of one variable; Dep, an operation's claim on
// one; Edge, a "runs after" link between two operations. Internal to engine/.
//
// Note [Dependencies as edges]
// The pusher turns claims into edges between operations, and the workers only
// follow edges. Each variable remembers, for the pusher, the last operation
// that wrote it and the readers pushed since. A read gets an edge from that
// writer; a write gets edges from those readers (or from the writer when there
// are none). An edge is published in the predecessor: in one of its inline
// successor slots (claimed by advancing a count), or, when those are full, on
// its overflow stack. The predecessor closes both when it completes; a closed
// predecessor means the dependency is already satisfied. The operation counts
// its published edges and runs when the count drops to zero.
//
// The pusher-side fields are guarded by the engine's push lock, so a worker
// never touches them: a variable's first cache line stays with the pushing
// thread. References to earlier operations carry their push sequence number:
// operation records are recycled, and only allocated under the push lock, so
// a reference whose number no longer matches its record points to an
// operation that completed long ago.
//
// What completing operations leave on a variable (an error, the fences of
// device work) sits on its second line, behind its own small lock. Readers of
// those fields are ordered by the edges: when an operation may run, every
// earlier conflicting operation has completed and no later one can have
// started, so they describe exactly the value it will see.

#include <cstdint>
#include <exception>

#include "engine/detail/object_pool.h"
#include "engine/detail/spin_lock.h"
#include "engine/inline_function.h"
#include "engine/small_vector.h"
#include "engine/stream.h"

namespace tagflow::detail {

struct OpBlock;

/// How an operation uses one variable.
enum class Access : std::uint8_t {
  kRead,       ///< reads it
  kWrite,      ///< overwrites it (a success clears its error)
  kReadWrite,  ///< modifies it in place: scheduled as a write, fails on its error
};

constexpr bool is_write(Access a) { return a != Access::kRead; }
constexpr bool reads_value(Access a) { return a != Access::kWrite; }

struct VarBlock;

/// One operation's claim on one variable.
struct Dep {
  VarBlock* var;
  Access access;
};

/// "Run `to` after the operation whose overflow stack holds this edge."
/// Owned by `to`, which outlives every stack it is linked into.
struct Edge {
  Edge* next;
  OpBlock* to;
};

/// An earlier operation, as long as its record has not been recycled.
struct OpRef {
  OpBlock* op = nullptr;
  std::uint64_t seq = 0;
};

struct alignas(64) VarBlock : Pooled<VarBlock> {
  // --- the pusher's, under the engine's push lock ---
  OpRef last_writer;
  /// Readers pushed since `last_writer`; some may have completed.
  SmallVector<OpRef, 3> readers;
  /// Size above which `readers` is pruned of completed operations.
  std::uint32_t prune_at = 8;

  // --- left by completing operations, read once they may run ---
  alignas(64) SpinLock lock;  ///< for concurrent readers adding fences
  /// Error of the last writer, or the error it inherited.
  std::exception_ptr error;
  /// Device work of the last writer and of the readers since (see Note
  /// [Completion on device queues] in threaded_engine.h).
  Fence write_fence;
  SmallVector<Fence, 2> read_fences;

  // --- set by delete_var, run by the completing writer ---
  /// The deleter of a variable whose deletion waits on its last writer
  /// (Note [Deletion after the last writer] in threaded_engine.h).
  InlineFunction<void(), 40> deleter;

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
static_assert(sizeof(VarBlock) == 256, "a variable's record: four cache lines");

/// A successor slot holds an operation or, with the lowest bit set, a
/// variable to delete once the operation has completed (Note [Deletion
/// after the last writer] in threaded_engine.h); records are cache-line
/// aligned, so the bit is free.
inline OpBlock* deletion_successor(VarBlock* var) {
  return reinterpret_cast<OpBlock*>(reinterpret_cast<std::uintptr_t>(var) | 1);
}
/// The variable a successor slot holds for deletion, or null for an operation.
inline VarBlock* as_deletion(const OpBlock* successor) {
  const auto bits = reinterpret_cast<std::uintptr_t>(successor);
  return (bits & 1) != 0 ? reinterpret_cast<VarBlock*>(bits & ~std::uintptr_t{1}) : nullptr;
}

}  // namespace tagflow::detail
