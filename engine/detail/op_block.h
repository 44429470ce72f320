#pragma once
// OpBlock: an operation as the engine keeps it between push and completion.
// Internal to engine/.
//
// Note [The record's size]
// Every operation's record is built by the pushing thread, then read, run
// and freed by a worker on another core, and the pool hands it back to the
// pusher: each of its cache lines crosses between the cores twice per
// operation. When closures are small the pusher sets the engine's pace, and
// it waits for those lines. So the record, with the pool's header behind
// it, is kept to four lines (256 bytes, a static_assert below):
//  - what few operations use lives in OpExtras, made when first needed: an
//    asynchronous operation's two errors, a GPU operation's fence and its
//    waits on other streams, a wait's signal, a tracked operation's handle,
//    the profiler's marks, overflow edges, and the engine where the record
//    does not say it (OpBlock::owner: a user operation's pool does);
//  - OpFunction keeps "asynchronous" in its body's type, not in a field;
//  - the pool's header is sixteen bytes for types without a generation;
//  - the record is not declared line-aligned (its size would round up to
//    whole lines); its pool's slots start on a line.
// Four lines, not five: with five, `chain` ran a quarter slower than with
// six, most likely because every other record then shares an aligned pair
// of lines with its neighbour, which adjacent-line prefetching moves as one.
// Measured with `tagflow bench engine` (2 workers, alternating invocations;
// see the README for the figures).

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/dependency_state.h"
#include "engine/detail/object_pool.h"
#include "engine/detail/profile_marks.h"
#include "engine/detail/var_block.h"
#include "engine/operation.h"

namespace tagflow::detail {

class WorkerPool;
class EngineCore;
class OperationState;

/// What the engine does with an operation once it may run.
enum class OpKind : std::uint8_t {
  kUser,    ///< run its closure on a worker of its device
  kWait,    ///< wake a host thread blocked in wait_to_read / wait_to_write
  kDelete,  ///< free its (only) variable
};

/// A blocked host thread's rendezvous with a kWait operation. Notified
/// under its mutex, so the waiter may destroy it as soon as it wakes.
struct WaitSignal {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  /// Modelled time: when what was waited for finished.
  std::int64_t modelled_ns = 0;

  void notify(std::exception_ptr e) {
    std::lock_guard lock(mutex);
    error = std::move(e);
    done = true;
    cv.notify_one();
  }
  void wait() {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return done; });
  }
};

/// An edge that did not fit in its predecessor's inline successor slots:
/// pooled, owned by the operation it leads to.
struct OverflowEdge : Pooled<OverflowEdge> {
  Edge edge;
  OverflowEdge* owned_next = nullptr;
};

/// The fields of an operation record that few operations use, out of the
/// record (Note [The record's size]).
struct OpExtras : Pooled<OpExtras> {
  /// What an asynchronous operation's closure threw, and what its
  /// Completion reported.
  std::exception_ptr launch_error;
  std::exception_ptr async_error;
  /// Device fences its stream must wait on first (GPU operations fed by
  /// another stream).
  std::vector<Fence> stream_waits;
  /// The blocked host thread of a kWait operation (and of the naive
  /// engine's asynchronous operations).
  WaitSignal* signal = nullptr;
  /// The state of the handle push_tracked returned (one reference), told
  /// the outcome when the operation completes; null for untracked pushes
  /// (Note [Operation handles] in engine/detail/operation_state.h).
  OperationState* tracker = nullptr;
  /// Set while the profiler records (engine/detail/profile_marks.h).
  ProfileMarks* profile = nullptr;
  /// The end of the operation's device work (GPU operations).
  Fence fence;
  /// Overflow edges into the operation, freed with it.
  OverflowEdge* owned_edges = nullptr;
  /// The engine that runs it, where its record alone does not say: set for
  /// asynchronous operations, whose Completion calls it, and for a threaded
  /// engine's waits and deletions (OpBlock::owner).
  EngineCore* engine = nullptr;

  OpExtras() = default;
  OpExtras(const OpExtras&) = delete;
  OpExtras& operator=(const OpExtras&) = delete;
  /// Frees the overflow edges; gives back the handle's reference of an
  /// operation dropped before it was pushed (a pushed one's is given back
  /// when it completes).
  ~OpExtras();
};

/// Not declared cache-line aligned: its size would then round up to whole
/// lines, and the pool's header behind it would take a fifth. Its pool's
/// slots start on a line, which is what the first line's layout needs.
struct OpBlock : Pooled<OpBlock> {
  /// Successors kept inline; more go to the overflow stack.
  static constexpr std::uint32_t kInlineSuccessors = 5;
  /// Set in `successor_count` once the operation has completed.
  static constexpr std::uint32_t kCompleted = 1u << 31;
  /// Marks the closed overflow stack.
  static inline Edge* const kClosed = reinterpret_cast<Edge*>(std::uintptr_t{1});

  // First cache line: what later pushes look at and fill in (Note
  // [Dependencies as edges]), and what this operation reads when it
  // completes: its successors, in push order, then the overflow stack.
  std::atomic<std::uint32_t> successor_count{0};
  /// Edges not yet satisfied (+1 while being pushed); then, for a host
  /// operation, device fences not yet finished; for an asynchronous one, the
  /// references of its launcher and its Completion.
  std::atomic<std::int32_t> pending{0};
  std::uint64_t seq = 0;  ///< push sequence number, unique per engine
  std::atomic<OpBlock*> inline_successors[kInlineSuccessors] = {};
  std::atomic<Edge*> overflow{nullptr};

  int priority = 0;
  OpKind kind = OpKind::kUser;
  /// Which of the two push epochs it was counted in (Note [Waiting for all]).
  std::uint8_t epoch_slot = 0;
  QueueKind queue = QueueKind::kCompute;
  /// What it is doing, for the dependency dump only (relaxed stores).
  std::atomic<OperationStage> stage{OperationStage::kWaiting};
  Context ctx;
  const char* name = "op";
  /// Where it runs (threaded engine); null for host operations.
  WorkerPool* pool = nullptr;
  /// Ready-queue link.
  OpBlock* next = nullptr;
  OpFunction fn;
  SmallVector<Dep, 3> deps;
  /// Failure of this operation, or the error it inherited (then it is skipped).
  std::exception_ptr error;
  /// What few operations need, or null (Note [The record's size]).
  OpExtras* extras = nullptr;

  /// True once the operation has completed (its record may since have been
  /// recycled: check `seq` first).
  bool completed() const {
    return (successor_count.load(std::memory_order_acquire) & kCompleted) != 0;
  }
  ~OpBlock() {
    if (extras != nullptr) [[unlikely]]
      delete extras;
  }
  OpBlock() = default;
  /// A user operation's record, its fields and closure taken from `op`
  /// (each written once: this is on every push); its dependencies are
  /// filled next, by set_deps.
  OpBlock(Operation& op, WorkerPool* where, EngineCore* owner)
      : priority(op.priority),
        queue(op.queue),
        ctx(op.ctx),
        name(op.name),
        pool(where),
        fn(std::move(op.fn)) {
    // Its Completion and its launcher write their errors from two threads,
    // and the Completion finds the engine there.
    if (fn.is_async()) [[unlikely]] {
      extras = new OpExtras;
      extras->engine = owner;
    }
  }
  OpBlock(const OpBlock&) = delete;
  /// The operation's extras, made on first use by the thread that owns the
  /// operation at that moment (an asynchronous one's are made with it).
  OpExtras& extra() {
    if (extras == nullptr) extras = new OpExtras;
    return *extras;
  }
  /// For the dependency dump, the threaded engine it was pushed to: a user
  /// operation's pool's, a wait's or a deletion's extras' (null for the
  /// naive engine's records, which have no pool).
  EngineCore* owner() const;
  /// The handle to tell, or null.
  OperationState* tracker() const { return extras != nullptr ? extras->tracker : nullptr; }
  /// The profiler's marks, or null (engine/detail/profile_marks.h).
  ProfileMarks* profile() const { return extras != nullptr ? extras->profile : nullptr; }
  /// The end of its device work (GPU operations), or no fence.
  Fence fence() const { return extras != nullptr ? extras->fence : Fence{}; }
  OpBlock& operator=(const OpBlock&) = delete;

  /// Fills `deps` from the operation's lists, which hold no null variable:
  /// duplicates merged, a variable in both lists becomes kReadWrite. Short
  /// lists keep the order listed (writes first), long ones come out sorted
  /// by address. Inline: it is on every push.
  ///
  /// `visit(var, handle, is_write)` is called first for each handle listed
  /// (repeats included, writes first), in the same pass for short lists: the
  /// threaded engine checks generations and asks for the earlier operations'
  /// records there. If it throws, `deps` is left empty: the caller then
  /// drops the record.
  template <typename Visit>
  void set_deps(const VarList& reads, const VarList& writes, Visit&& visit) {
    const std::size_t listed = reads.size() + writes.size();
    // A repeat is found by looking back over what is kept: a handful of
    // compares and no sort. Long lists are sorted instead, so that an
    // operation on thousands of variables stays n log n.
    if (listed > 16) [[unlikely]] {
      for (VarHandle v : writes) visit(var_block(v), v, true);
      for (VarHandle v : reads) visit(var_block(v), v, false);
      set_deps_sorted(reads, writes);
      return;
    }
    deps.reserve(listed);
    Dep* kept = deps.data();
    std::size_t n = 0;
    // Handles of one record at two generations keep the older one: at most
    // the newer is live, so a stale one is still refused (Note [Variable
    // generations] in var_block.h).
    auto find = [&](VarBlock* var, std::uint32_t generation) {
      std::size_t i = 0;
      while (i < n && kept[i].var != var) ++i;
      if (i < n && generation < kept[i].generation) kept[i].generation = generation;
      return i;
    };
    for (VarHandle v : writes) {
      VarBlock* var = var_block(v);
      visit(var, v, true);
      if (find(var, v.generation()) == n) {
        std::construct_at(kept + n++, Dep{var, Access::kWrite, v.generation()});
      }
    }
    const std::size_t written = n;
    for (VarHandle v : reads) {
      VarBlock* var = var_block(v);
      visit(var, v, false);
      const std::size_t i = find(var, v.generation());
      if (i == n) {
        std::construct_at(kept + n++, Dep{var, Access::kRead, v.generation()});
      } else if (i < written) {
        kept[i].access = Access::kReadWrite;  // modified in place
      }
    }
    deps.resize_within_capacity(n);
  }
  void set_deps(const VarList& reads, const VarList& writes) {
    set_deps(reads, writes, [](VarBlock*, VarHandle, bool) {});
  }
  /// Wraps an exception thrown by this operation into an OperationError
  /// naming it (errors it inherited are passed on unchanged).
  std::exception_ptr wrap(std::exception_ptr cause) const;
  /// set_deps for long lists (sorted, then merged).
  void set_deps_sorted(const VarList& reads, const VarList& writes);
  /// Completion handed to an asynchronous closure.
  static Completion make_completion(OpBlock* op) { return Completion(op); }
};

static_assert(ObjectPool<OpBlock>::stride() == 4 * 64,
              "an operation's record and its pool header: four cache lines (Note [The record's "
              "size])");

/// What the rest of engine/ asks of an engine beyond its public interface
/// (implemented by each engine).
class EngineCore {
 public:
  /// Called by Completion::done / fail.
  virtual void complete_async(OpBlock* op, std::exception_ptr error) = 0;
  /// For the exit hook (Note [Engine lifetime] in engine.h): waits until
  /// every operation pushed so far has completed and the device work has
  /// finished, and logs an operation error never waited for. Returns false,
  /// as soon as no operation has completed for `stall`, if that comes first.
  virtual bool finish_pending(std::chrono::milliseconds stall) = 0;
  /// For the exit hook, when exit() was called from inside an operation:
  /// the workers start no further operation.
  virtual void stop_workers() = 0;

 protected:
  ~EngineCore() = default;
};

}  // namespace tagflow::detail
