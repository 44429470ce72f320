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
//
// Note [Variable generations]
// Variable records are pooled and recycled (object_pool.h): a handle kept
// after delete_var would name whatever variable reuses its record, and a push
// on it would order against that variable, inherit its errors, or free it.
// So a VarHandle carries, next to the record's address, the record's
// generation when new_var made it, and the engine compares the two wherever a
// handle comes in (push, for reads and writes; wait_to_read; wait_to_write;
// delete_var, where a double delete is the commonest misuse), in release
// builds too: one compare, under the lock that orders the engine's pushes
// and deletions, so that no deletion can come between the check and the
// claim. A mismatch throws StaleVariableError and changes nothing.
//  - The record's generation lives in its pool slot's header, not in
//    VarBlock: a field would be reset when the record is built again for the
//    next variable, and could not be read once the record is freed, which is
//    just when a stale handle comes. The header is never freed and neither
//    the pool nor construction writes it; a fresh slot starts at zero.
//  - delete_var advances it at once, under that lock, before the deletion
//    waits for the operations pending on the variable: the handle is stale
//    from the moment delete_var returns.
//  - Generations only grow (a delete_var that fails for want of memory
//    takes its step back before any handle could see it). A handle keeps
//    22 bits for one (the address takes the other 42: a user-space address
//    has 48 bits, and the low 6 are zero for cache-line aligned records).
//    A record whose generation reaches
//    kRetiredGeneration is retired when its deletion completes: destroyed,
//    never handed back to the pool. So no generation is ever used twice,
//    and a stale handle never matches a later variable; a slot retires once
//    per four million variables it held. new_var refuses (Error) a record
//    above 48 bits, which Linux hands out only to programs that ask for it.
//  - The pool is the process's: each engine writes generations under its own
//    lock, so they are relaxed atomics. A handle used on another engine than
//    the one that made it is not detected.

#include <atomic>
#include <cstdint>
#include <exception>

#include "engine/detail/object_pool.h"
#include "engine/detail/spin_lock.h"
#include "engine/error.h"
#include "engine/inline_function.h"
#include "engine/operation.h"
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
  /// The generation of the handle it was claimed through (Note [Variable
  /// generations]), for the check and for the dependency dump.
  std::uint32_t generation;
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
  /// Its pool slot keeps a generation (Note [Variable generations]).
  static constexpr bool kSlotGeneration = true;

  // --- the pusher's, under the engine's push lock ---
  OpRef last_writer;
  /// Readers pushed since `last_writer`; some may have completed.
  SmallVector<OpRef, 3> readers;
  /// Size above which `readers` is pruned of completed operations.
  std::uint32_t prune_at = 8;
  /// A deletion riding on the last writer (Note [Deletion after the last
  /// writer]): its push number and the generation it was given, for dumps.
  std::uint32_t deleted_generation = 0;
  std::uint64_t deletion_seq = 0;
  /// Modelled time: when the host side of its last writer ended (Note
  /// [Modelled time] in engine/device_model.h); its device work's end is the
  /// write fence's.
  std::atomic<std::int64_t> modelled_ns{0};

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

/// The last generation: a record that reaches it is retired, not recycled
/// (Note [Variable generations]).
inline constexpr std::uint32_t kRetiredGeneration = (1u << 22) - 1;

/// The engine's side of VarHandle: the record a handle names, and the handle
/// of a record at a generation.
struct VarHandleBits {
  static_assert(VarHandle::kAlignmentBits + VarHandle::kAddressBits == 48,
                "a handle encodes 48-bit addresses");
  static_assert(kRetiredGeneration == ~std::uint64_t{0} >> VarHandle::kAddressBits,
                "generations fill the bits above the address");
  static constexpr std::uint64_t kAddressMask = (std::uint64_t{1} << VarHandle::kAddressBits) - 1;

  /// The record of `var` (null for a null handle), alive or not.
  static VarBlock* record(VarHandle var) {
    return reinterpret_cast<VarBlock*>((var.bits_ & kAddressMask) << VarHandle::kAlignmentBits);
  }
  /// True when `record`'s address can be encoded in a handle.
  static bool encodable(const VarBlock* record) {
    return (reinterpret_cast<std::uintptr_t>(record) >> 48) == 0;
  }
  /// The handle of `record` (encodable) at `generation`.
  static VarHandle make(const VarBlock* record, std::uint32_t generation) {
    VarHandle var;
    var.bits_ = (reinterpret_cast<std::uintptr_t>(record) >> VarHandle::kAlignmentBits) |
                (std::uint64_t{generation} << VarHandle::kAddressBits);
    return var;
  }
};

/// The record `var` names (null for a null handle).
inline VarBlock* var_block(VarHandle var) { return VarHandleBits::record(var); }

/// The handle of the variable `dep` claims, as its operation was given it.
inline VarHandle var_handle(const Dep& dep) { return VarHandleBits::make(dep.var, dep.generation); }

/// The current generation of `record`, freed or not (Note [Variable generations]).
inline std::atomic<std::uint32_t>& generation_of(const VarBlock* record) {
  return ObjectPool<VarBlock>::header(record).generation;
}

/// True when `generation` is `record`'s current one: the variable it was
/// handed out for has not been deleted.
inline bool is_live(const VarBlock* record, std::uint32_t generation) {
  return generation_of(record).load(std::memory_order_relaxed) == generation;
}

/// Throws StaleVariableError for a handle that failed is_live. `call` and,
/// for a push, the operation's name and the list that holds the handle
/// (reads, writes) say where it came.
[[noreturn, gnu::noinline, gnu::cold]] inline void throw_stale(VarHandle var, const char* call,
                                                               const char* op_name = nullptr,
                                                               const char* list = nullptr) {
  const std::uint32_t now = generation_of(var_block(var)).load(std::memory_order_relaxed);
  const std::string facts =
      fmt::format("stale handle: generation {}, the variable's record {} is at generation {}{}",
                  var.generation(), static_cast<const void*>(var_block(var)), now,
                  now == kRetiredGeneration ? " (retired)" : " and may hold another variable now");
  if (op_name != nullptr) {
    throw_error<StaleVariableError>(
        "{}: operation '{}' lists in its {} a variable that was deleted ({})", call, op_name, list,
        facts);
  }
  throw_error<StaleVariableError>("{}: the variable was already deleted ({})", call, facts);
}

/// Throws StaleVariableError unless `var` (not null) names a live variable.
/// The caller holds the lock its engine's delete_var holds.
inline void check_live(VarHandle var, const char* call) {
  if (!is_live(var_block(var), var.generation())) [[unlikely]]
    throw_stale(var, call);
}

/// A new record, and its handle at the record's current generation.
inline VarHandle make_var() {
  auto* record = new VarBlock;
  if (!VarHandleBits::encodable(record)) [[unlikely]] {
    delete record;
    throw_error(
        "new_var: the variable's record lies at {}, above the 48-bit user-space addresses a "
        "VarHandle encodes (memory mapped above 2^47 on request, with 5-level paging?)",
        static_cast<const void*>(record));
  }
  return VarHandleBits::make(record, generation_of(record).load(std::memory_order_relaxed));
}

/// Makes every handle of `record` stale (the caller holds the lock of
/// check_live): the first step of delete_var.
inline void end_generation(VarBlock* record) {
  std::atomic<std::uint32_t>& generation = generation_of(record);
  generation.store(generation.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

/// Undoes end_generation for a deletion that failed for want of memory
/// (Note [Linking cannot fail] in threaded_engine.h), the lock of check_live
/// still held: no handle at the next generation was handed out.
inline void reopen_generation(VarBlock* record, std::uint32_t generation) {
  generation_of(record).store(generation, std::memory_order_relaxed);
}

/// Frees a deleted variable's record: back to the pool, or, once its
/// generations are used up, retired (Note [Variable generations]).
inline void free_var(VarBlock* record) {
  if (generation_of(record).load(std::memory_order_relaxed) == kRetiredGeneration) [[unlikely]] {
    record->~VarBlock();  // the slot is never handed out again
    return;
  }
  delete record;
}

}  // namespace tagflow::detail
