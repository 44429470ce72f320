#pragma once
// ThreadedEngine: the default engine. Dependencies per variable, one worker
// pool per device queue, completion on GPUs tracked by stream fences.
// Internal to engine/; reach it through make_engine().
//
// Note [Completion on device queues]
// A GPU operation's closure only enqueues work on its stream. When it
// returns, the engine records a fence (a CUDA event, or a counter on a
// simulated stream) and releases the operation's variables at once: this is
// the *launched* moment. The fence is stored on the variables (the last
// writer's, and the readers' since, one per stream). When a later operation
// is granted its variables, the fences still pending decide how it starts:
//  - on the same stream: nothing, stream order protects it;
//  - on another stream or GPU: its worker enqueues a device-side wait on the
//    fence before its work (Stream::wait), the host does not block;
//  - on the host (a CPU operation, a wait, a variable deletion): it is held
//    back until the fence has *finished*, through Stream::when_finished, so
//    no worker thread blocks on a device.
// wait_for_all() additionally synchronises every stream. Simulated and real
// GPUs share this logic; only the Stream implementation differs.
//
// Note [Skipped operations on device queues]
// An operation skipped because it inherited an error still leaves its fence
// on what it writes, and whatever comes next waits on that fence only. So
// its stream must still wait on the fences of the operations it follows:
// otherwise a host reader, or a variable's deleter, would go ahead while the
// device work of an earlier writer on another stream is still to run, and
// see a stale value, or free memory that work then writes (found by
// `tagflow stress --faults` on simulated GPUs).
//
// Note [Idle workers]
// A worker whose queue is empty polls it for a while before it sleeps on a
// futex: work pushed in the meantime is picked up without a wake-up system
// call. Only one worker per pool polls; the others sleep at once, and the
// poller wakes one of them when it finds more work than it can take. Pushes
// wake a sleeper only when no worker polls. Polling only pays when a core is
// free for it: several pollers, or pollers on a machine with more worker
// threads than cores (several cpu(i) devices, simulated GPUs), take the core
// from the threads that produce the work, so the budget shrinks there.
//
// Note [Bounded run-ahead]
// A client thread that pushes faster than the devices run would otherwise
// queue without limit: memory grows with the backlog, and a backlog larger
// than the caches makes every operation a cache miss for the workers (the
// engine then runs several times slower). Every 64 pushes a client thread
// checks the backlog; above `max_pending` it pauses until the backlog is
// half that. Workers never pause (they are what drains the backlog). If
// nothing completes for a while, the pause ends anyway: the backlog may be
// waiting for something the client itself will do later (an asynchronous
// operation it completes), and a throttle must never turn into a deadlock.
// The default, 16,384 operations (about 4 MB of records), is measured: with
// 4,096 the records the pushing thread reuses are still in the workers'
// private caches, and taking each line back from another core costs more
// than finding it in the shared cache (bench engine, 2 workers, medians of
// 5 invocations: readers 8.0 against 9.5, random 7.6 against 8.6 million
// operations per second); with no limit the backlog outgrows the caches.
// That bound suits operations that run roughly in push order (chains,
// independent operations, many readers of one variable): the workers then
// stream through the backlog. Operations with many dependencies on recent
// ones (the random workload: two reads and a write make about four edges)
// become ready all over the backlog, so the workers' accesses scatter
// across all of it. There a large backlog is a trap: once it has grown past
// what the caches hold, every operation misses, the workers slow down, and
// the backlog stays large (sampled every 64 pushes on random: 40% of the
// samples above 4,096 operations with the bound at 16,384, against 0.02%
// with the bound below, where 90% are under 512). So the bound is
// `max_pending` divided by the edges per operation pushed lately (counted
// under the push lock over windows of 64 pushes; taken as at least one and
// at most 16, so an operation on thousands of variables does not stop the
// client for long): 16,384
// operations for the three other workloads, about 4,000 for random (bench
// engine, 2 workers, medians of 5 alternating invocations: random 5.5 with
// the fixed bound, 6.4 with this one; the three others unchanged, where a
// fixed bound of 4,096 costs them 10 to 20%).
//
// Note [Linking cannot fail]
// Once an operation is counted and its first edge published, it must be
// linked whole: a push that stopped half-way would leave it waiting for
// edges never made, and with it every later operation on its variables and
// every wait_for_all. Linking allocates in three places: an overflow edge
// when a predecessor's inline slots are full, the extras that own those
// edges, and a variable's reader list growing past its inline capacity. So
// before anything is counted or linked, reserve_links() takes what the link
// may need: the reader lists' room, one spare extras, and spare overflow
// edges, as many as the operation has predecessors at most (one for each
// read; for each write, the readers pushed since the last writer, and that
// writer). When memory runs out there, std::bad_alloc leaves the push with
// nothing changed but the spares. The spares are the engine's, under the
// push lock, and kept at the largest count asked so far: a push takes from
// them only when it makes an overflow edge, so the check is all that most
// pushes pay. (Memory a worker needs while completing operations, on device
// queues for instance, is not covered.)
//
// Note [Waiting for all]
// wait_for_all() waits for the operations pushed before it was called, not
// for those pushed while it waits: with a producer that never pauses, "until
// nothing is pending" would never come. Pushes are counted in epochs: each
// operation is counted, with the epoch's parity (its slot), when it is
// pushed, and again when it completes. A waiter takes the epoch open when it
// was called as its target. To close an epoch (and open the next) the
// other slot must have drained: it holds only older epochs, all closed, so
// no push adds to it and the wait for it ends. Then the target's slot stops
// growing, and once it has drained, every epoch up to the target has
// completed (complete_below_). Waiters that come while another waits share
// its work: a closed target only needs its slot to drain, and a target two
// epochs back is known complete. The counters stay per worker (relaxed, on
// its own line), as before; the epoch is read under the push lock only.
//
// Note [Deletion after the last writer]
// Arrays die at the rate of operations, usually while the operation that
// wrote them is still pending (`c = a + b` in a loop drops the previous c).
// A deletion operation for each would double the records pushed and run.
// When the variable's only pending operation is its last writer, and that
// writer runs on a CPU (it leaves no device fence, and it was held until
// the device work before it had finished), the deleter goes into the
// variable's record and the variable into one of the writer's successor
// slots, tagged (deletion_successor): the writer's completion, after it has
// left its marks on the variable, frees it and runs the deleter, before it
// is counted as completed, so wait_for_all covers the deletion as it covers
// a deletion operation. If the slots are full, or the writer is on a GPU,
// a deletion operation is pushed as before. So it is when the writer has
// completed but the variable is still busy (a GPU writer's device work, a
// reader's fence): the writer's record may by then carry another operation,
// and a deletion riding on that one freed the memory of an array whose
// device work was still queued (found by `tagflow stress --faults` under
// ThreadSanitizer: a simulated GPU's fill wrote freed memory). Dependency
// dumps list such a deletion as the "delete_var" operation it stands for,
// with a push number of its own, waiting for the writer.
//
// Note [Successors fetched ahead]
// Completing an operation decrements the counter of each successor, on the
// successor's first line, which the pushing thread wrote last (or another
// worker, completing another predecessor): a miss per successor, paid with
// a locked instruction that waits for it. A worker asks for those lines, for
// writing, as it starts the operation, so the transfers overlap with the
// closure and with leave_on instead of following them. It pays where one
// operation feeds the next in a chain run inline (bench engine, 2 workers,
// medians of 5 alternating invocations, million operations per second:
// chain 11.4 and 13.3 before, 13.5 and 14.4 after; readers 9.3 and 9.7
// before, 11.1 and 12.0 after); indep and random stay within the noise.
//
// Note [Closures die before waits return]
// A completing operation destroys its closure, and with it what the closure
// captured (arrays and their memory), before it marks itself completed, and
// frees its record before it releases any successor: a wait_to_read or
// wait_to_write it releases or that finds the variable idle, an operation
// ordered after it, and wait_for_all (the completion is counted last) all
// find the captures gone. A program that reads the memory in use after a
// wait sees the operation's arrays let go, and the waiting thread's next use
// of something the record shared, such as the exception object of its error,
// is ordered after the record dropped it by the hand-over itself. (Released
// straight from the record's slots, with the record freed last, a wait
// returned while the closure was still being destroyed, and ThreadSanitizer
// reported the error's exception object.) So the slots are copied out
// first. A tracked operation's handle is told right after the closure is
// destroyed, so its wait() and on_done() find the captures gone too (on
// the naive engine as well).
//
// Note [Dependency state]
// The engine keeps no list of pending operations: that would cost every push
// and completion a shared write. The dump finds them where they live, in the
// operation records' pool (Note [Inspecting pooled records] in
// object_pool.h), and takes what they wait for from their successor edges.
// Two things make reading records that workers complete meanwhile sound:
//  - no record is built during the walk: records are only allocated under a
//    push lock, and the dump holds the push lock of every threaded engine of
//    the process (found in a registry, locked in address order);
//  - no record it reads is destroyed during the walk: the dump raises a
//    process-wide count before it looks, and a completing operation checks
//    the count after marking itself completed (both sequentially
//    consistent). A record seen not completed will therefore see the count
//    raised when it completes, and is parked instead of freed (its closure
//    and errors released at once); parked records are freed as soon as no
//    dump runs. A record seen completed is skipped and never read further.
// Each record's stage is a relaxed store on a line its worker writes anyway.

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "engine/detail/device_backend.h"
#include "engine/detail/error_report.h"
#include "engine/detail/lifetime.h"
#include "engine/detail/op_block.h"
#include "engine/detail/worker_pool.h"
#include "engine/engine.h"

namespace tagflow::detail {

class ThreadedEngine final : public Engine, public EngineCore {
 public:
  explicit ThreadedEngine(const EngineConfig& config);
  ~ThreadedEngine() override;

  VarHandle new_var() override;
  using Engine::delete_var;
  void delete_var(VarHandle var, VarDeleter on_deleted) override;
  void push(Operation op) override;
  /// Pushes each part to its device's pool, ordered there after the parts
  /// of earlier groups (Note [Launch groups] in engine/engine.h).
  void push_group(LaunchGroup group) override;
  OperationHandle push_tracked(Operation op) override;
  void wait_to_read(VarHandle var) override;
  void wait_to_write(VarHandle var) override;
  void wait_for_all() override;
  OperationCounts operation_counts() const override;
  DependencyState dependency_state() override;
  const EngineConfig& config() const override { return config_; }
  const std::vector<GpuInfo>& gpus() const override { return backend_->devices(); }
  std::int64_t modelled_time_ns() const override;
  std::string device_status() const override { return backend_->status(); }

  /// Runs `op` on worker `index` of `pool`; returns a follower to run next
  /// on the same worker, if one became ready.
  OpBlock* execute(OpBlock* op, WorkerPool& pool, int index);
  /// A worker found its queue empty: wake wait_for_all() if it waits.
  void notify_idle();
  /// Polls of an empty queue before a worker sleeps (Note [Idle workers]).
  int spin_budget() const;
  void complete_async(OpBlock* op, std::exception_ptr error) override;
  bool finish_pending(std::chrono::milliseconds stall) override;
  void stop_workers() override { workers_stopped_.store(true, std::memory_order_relaxed); }

 private:
  /// Operations made ready while completing one: at most one is kept to run
  /// inline on the completing worker, the others go to their queues.
  struct Followers {
    WorkerPool* current = nullptr;
    OpBlock* inline_next = nullptr;
  };

  static constexpr int kMaxGpus = 64;
  static constexpr int kMaxPools = kMaxCpuDevices + 2 * kMaxGpus;

  /// push, with the state of a handle to tell when the operation completes
  /// (null for untracked pushes).
  void push_block(Operation& op, OperationState* tracker);
  /// Tells `op`'s handle the outcome, now or once its device work has
  /// finished, and gives back the reference it held (Note [Operation handles]).
  void notify_tracker(OpBlock& op) noexcept;
  WorkerPool* pool_for(const char* op_name, Context ctx, QueueKind queue);
  WorkerPool* create_pool(int slot, Context ctx, QueueKind queue);
  /// Takes from the allocator what linking `op` may need (Note [Linking
  /// cannot fail]); throws std::bad_alloc, having changed nothing the
  /// engine's state depends on, when memory runs out. Push lock held.
  void reserve_links(const OpBlock& op) {
    // A write may follow each reader pushed since the last writer, and that
    // writer; a read follows one writer, and keeps room for itself in the
    // reader list (pruning, in submit(), only shrinks it).
    std::size_t most_edges = op.deps.size();
    for (const Dep& d : op.deps) {
      const auto& readers = d.var->readers;
      if (is_write(d.access)) {
        most_edges += readers.size();
      } else if (readers.size() == readers.capacity()) [[unlikely]] {
        make_room_for_reader(*d.var);
      }
    }
    if (num_spare_edges_ < most_edges || (spare_extras_ == nullptr && op.extras == nullptr))
        [[unlikely]]
      add_spares(most_edges);
  }
  /// reserve_links' allocations, out of its way.
  [[gnu::noinline]] static void make_room_for_reader(VarBlock& var);
  [[gnu::noinline]] void add_spares(std::size_t most_edges);
  /// Makes `op` known: edges from the operations it must follow. Takes
  /// ownership; the caller holds `push_lock_`, allocated `op` under it and
  /// called reserve_links() since. Throws nothing.
  void submit(OpBlock* op) noexcept;
  /// delete_var's short way, when the last writer of `var` is the only
  /// operation pending on it: true if the deletion is attached to it (or
  /// done), false to push a deletion operation (Note [Deletion after the
  /// last writer]).
  bool delete_after_writer(VarBlock* var, VarDeleter& on_deleted, std::unique_lock<SpinLock>& lock);
  /// Frees `var` and runs the deleter it holds.
  static void delete_now(VarBlock* var);
  // The five below are small and on every push or completion: inlined,
  // each defined in the one file that calls it (threaded_engine.cc for the
  // push, threaded_engine_completion.cc for the completion).
  /// Asks for `var`'s record and generation (push, before its lock).
  [[gnu::always_inline]] inline static void prefetch_variable(VarHandle var);
  /// Starts fetching the records `var`'s next claim will look at.
  [[gnu::always_inline]] inline static void prefetch_predecessors(const VarBlock& var, bool write);
  /// Links `op` after `pred` unless `pred` has completed; true if linked.
  /// Takes an overflow edge from the spares (Note [Linking cannot fail]).
  [[gnu::always_inline]] inline bool add_edge(const OpRef& pred, OpBlock* op, std::int32_t& edges);
  /// add_edge once `pred`'s inline slots are full.
  bool add_overflow_edge(OpBlock& pred, OpBlock* op, std::int32_t& edges);
  /// Starts fetching, for writing, the successors `op` will release.
  [[gnu::always_inline]] inline static void prefetch_successors(const OpBlock& op);
  /// Records on `var` what the completing `op` leaves there (error, fences).
  [[gnu::always_inline]] inline static void leave_on(const Dep& dep, const OpBlock& op);
  /// True when no operation on `var` is pending and its device work has
  /// finished (push lock held).
  static bool idle(VarBlock& var);
  /// Forgets the readers of `var` that have completed.
  static void drop_completed_readers(VarBlock& var);
  /// One edge of a completed operation satisfied: `successor` runs once it
  /// was the last, or, tagged, a variable is deleted.
  void release_successor(OpBlock* successor, Followers* followers);
  void on_ready(OpBlock* op, Followers* followers);
  /// Records the device fences `op` must respect; true if it is held back
  /// until fences finish (it is then handed on from the stream's thread).
  bool hold_for_fences(OpBlock* op);
  /// The error of a finished fence's device work, as an OperationError
  /// naming its stream, or null (Note [Errors of device work] in engine/stream.h).
  static std::exception_ptr fence_error(const Fence& fence);
  /// `cause`, raised by work on `stream`, as an OperationError naming the stream.
  static std::exception_ptr device_work_error(const Stream& stream, std::exception_ptr cause);
  /// Makes `op` inherit the failure of a finished write fence of what it reads.
  static void take_fence_errors(OpBlock* op);
  void run_or_enqueue(OpBlock* op, Followers* followers);
  void finish_host_op(OpBlock* op, Followers* followers);
  // Modelled time (threaded_engine_modelled.cc), only while model_ is set:
  /// Keeps the pusher's clock for `op` when the pusher has waited (push lock held).
  void note_modelled_issue(const OpBlock& op);
  /// Sets the running thread's clock to when `op` could start: its issue,
  /// and what the variables it uses were last written or finished at.
  void enter_modelled_time(const OpBlock& op);
  /// Records, on what `op` writes, the time its host side ended.
  void leave_modelled_time(const OpBlock& op);
  /// The modelled time at which `var`'s last write (or, for `write`, also
  /// its reads) finished, as far as known.
  static std::int64_t modelled_time_of(const VarBlock& var, bool write);
  void finish(OpBlock* op, Followers* followers);
  void complete(OpBlock* op, Followers* followers);
  void count_completion(int slot);
  void record_error(const std::exception_ptr& error);
  void wait_on(VarHandle var, Access access, const char* what);
  /// Profiling: the flows into `op` from the last writers of what it reads
  /// (push lock held).
  void note_flows(const OpBlock& op) noexcept;
  static void profile_start(OpBlock& op, Stream* stream, int worker);
  static void profile_device_end(OpBlock& op, Stream* stream);
  static void profile_end(OpBlock& op, Stream* stream);
  void drain();
  /// Operations of epoch slot `slot` completed, or of both when -1.
  std::uint64_t completed_count(int slot = -1) const;
  /// Operations of epoch slot `slot` pushed, or of both when -1.
  std::uint64_t pushed_count(int slot = -1) const {
    if (slot >= 0) return pushed_[slot].load(std::memory_order_seq_cst);
    return pushed_[0].load(std::memory_order_seq_cst) + pushed_[1].load(std::memory_order_seq_cst);
  }
  /// True when every operation counted in `slot` has completed.
  bool slot_drained(int slot) const;
  /// Frees `op`, or parks it while a dump may read it (Note [Dependency state]).
  static void release(OpBlock* op) {
    if (inspections_.load(std::memory_order_seq_cst) == 0) [[likely]] {
      delete op;
    } else {
      park(op);
    }
  }
  static void park(OpBlock* op);
  static void free_parked();
  /// Adds this engine to / removes it from the registry the dump locks.
  void enroll();
  void withdraw();
  /// The dump's walk over this engine's records (every push lock held).
  void collect_pending(DependencyState& state) const;
  void throttle();

  /// Dumps under way in the process (Note [Dependency state]).
  static inline std::atomic<int> inspections_{0};

  EngineConfig config_;
  /// Tells a forked child, where the workers do not exist (Note [Engine lifetime]).
  ForkCheck fork_check_;
  /// Set by stop_workers(); read by the workers before each operation.
  std::atomic<bool> workers_stopped_{false};
  /// Profiling: the last profiled writer of each variable (push lock).
  std::unordered_map<const VarBlock*, std::uint64_t> profiled_writers_;
  std::unique_ptr<DeviceBackend> backend_;
  /// Simulated GPUs keeping modelled time, else null (Note [Modelled time]
  /// in engine/device_model.h; threaded_engine_modelled.cc).
  sim::ModelClock* model_ = nullptr;
  /// The pusher's modelled clock of operations pushed after it waited.
  std::mutex modelled_mutex_;
  std::unordered_map<const OpBlock*, std::int64_t> modelled_issue_;
  int cores_;
  std::atomic<int> worker_threads_{0};
  std::array<std::atomic<WorkerPool*>, kMaxPools> pools_{};
  std::mutex pools_mutex_;
  std::vector<std::unique_ptr<WorkerPool>> owned_pools_;
  /// The pools started so far, readable without the mutex.
  std::array<WorkerPool*, kMaxPools> started_{};
  std::atomic<int> num_started_{0};

  /// Note [Launch groups]: held while a group's parts are pushed; the
  /// variable each device's group parts write, in push order.
  std::mutex group_mutex_;
  std::map<Context, VarHandle> group_order_;

  /// Guards the pusher's side of every variable and the allocation of
  /// operation records (Note [Dependencies as edges]).
  alignas(64) SpinLock push_lock_;
  std::uint64_t next_seq_ = 1;
  /// Edges made by the pushes since the bound was last set (Note [Bounded
  /// run-ahead]), and the bound in operations, set every kEdgeWindow pushes.
  static constexpr std::uint64_t kEdgeWindow = 64;
  static constexpr std::uint64_t kMaxEdgeWeight = 16;
  std::uint64_t window_edges_ = 0;
  std::atomic<std::uint64_t> run_ahead_limit_;
  /// What reserve_links() keeps for links (push lock): overflow edges
  /// (chained through owned_next), and one extras to own them.
  OverflowEdge* spare_edges_ = nullptr;
  std::size_t num_spare_edges_ = 0;
  OpExtras* spare_extras_ = nullptr;
  /// The push epoch (Note [Waiting for all]): changed under the push lock.
  std::atomic<std::uint64_t> epoch_{0};
  /// Every epoch below this one has completed.
  std::atomic<std::uint64_t> complete_below_{0};
  alignas(64) std::atomic<std::uint64_t> pushed_[2] = {0, 0};
  alignas(64) std::atomic<std::uint64_t> external_completed_[2] = {0, 0};
  alignas(64) std::atomic<std::uint32_t> all_waiters_{0};
  std::atomic<std::uint32_t> completers_inside_{0};
  WakeWord all_done_;
  std::mutex drain_mutex_;  ///< serialises the stream checks of drain()
  /// Shared with the handles of failed operations, which may outlive the engine.
  const std::shared_ptr<ErrorReport> errors_ = std::make_shared<ErrorReport>();
};

}  // namespace tagflow::detail
