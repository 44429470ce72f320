#pragma once
// NaiveEngine: runs every operation synchronously in the pushing thread,
// device work included (each GPU operation synchronises its stream). For
// debugging: a failure then points at the push that caused it. Same
// semantics as the threaded engine, errors on variables included.
// Internal to engine/; reach it through make_engine() with TAGFLOW_ENGINE=naive.
//
// Note [Naive engine order]
// One operation runs at a time, under a lock, in the thread that pushed it.
// Two kinds of push cannot run at once and still keep push order:
// - From inside a running operation (a closure pushing follow-up work, or
//   deleting a variable): running it there would run it inside its parent,
//   before the parent's own later writes. It is deferred, and runs (as does
//   a deletion) as soon as the parent returns, before the lock is let go.
// - From another thread while the running operation is asynchronous, from
//   the moment its closure is called until its Completion comes: that
//   thread may be the one that completes it, after pushing (a completion
//   callback pushing follow-up work). Blocking it would deadlock; its push
//   is handed to the running thread, which runs it once the completion
//   came. A thread already waiting for the engine when such an operation
//   starts hands its push over too, which is why the engine's lock is a
//   flag (busy_) and a condition, not a mutex.
// Such a push returns before its operation ran; a wait for it runs it first.
// Handed-over pushes and deferred ones run in push order (by ticket, Note
// [Naive wait_for_all]) once the completion came, whichever thread pushed
// them. With a controlled schedule (engine/schedule.h), every push is kept
// and a wait runs what it needs in the order the schedule picks (Note
// [Controlled schedules]).
//
// Note [Lending the naive engine]
// While its holder awaits what another thread finishes (an asynchronous
// operation's Completion, or a GPU operation's stream, whose host work may
// push), the engine is lent: the holder is blocked, and what it would run
// (the running operations, `deferred_`, `handed_over_`, `kept_`) stands
// still under `state_mutex_`. Meanwhile:
// - a wait on a variable nothing of that uses (writes, for wait_to_read)
//   returns at once with the variable's error, as on the threaded engine,
//   instead of waiting for the holder, which may wait for the waiter; only
//   what was pushed before the wait began counts (a ticket bound): a later
//   push may itself wait for the awaited operation;
// - awaiting a Completion, the holder runs a push, handed over or its own
//   (deferred), that conflicts with nothing running and nothing pushed
//   before it and not yet run (under a controlled schedule: the kept ones a
//   wait asks for, picked as the schedule says), so that the completing
//   thread may wait for work it pushed itself, or that the running thread
//   pushed; it stops lending while it runs one, and lends again after;
// - such a push may itself be asynchronous: awaits then nest on one stack
//   (`awaits_`), and the inner await finishes an outer operation whose
//   Completion came meanwhile (its variables, its handle, its ticket), as
//   the threaded engine would, so that the inner operation's completing
//   thread may wait for the outer one. The outer frame, once the stack
//   unwinds to it, finds its operation finished.
// A wait on what the awaited operation writes still waits for its
// completion: from the completing thread that is a deadlock on every engine.
//
// Note [Naive wait_for_all]
// wait_for_all waits for what was pushed before it, not for the engine to
// be free: with producers that never pause, the thread holding the engine
// may run handed-over pushes for as long as they keep coming. Every unit of
// work (an operation or a deletion) takes a ticket when it is pushed; the
// thread holding the engine marks tickets finished as it runs them, in a
// window that only the holder touches, and publishes the ticket below which
// all have finished. A waiter takes the next ticket as its target and waits
// until that mark passes it; the holder wakes waiters only when there are
// some (the same handshake as the threaded engine's notify_idle). A thread
// whose push was handed over waits while more than max_pending tickets are
// unfinished, as a client of the threaded engine does (Note [Bounded
// run-ahead] in threaded_engine.h): else the backlog, and with it every
// wait, would grow for as long as producers push. A pause ends once nothing
// finishes for a while (the backlog may wait on the pusher: a completing
// thread pushing while its operation is awaited), and then none begins
// until a ticket finishes (`stalled_below_`), so that such a thread does not
// pause on every push.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/detail/device_backend.h"
#include "engine/detail/error_report.h"
#include "engine/detail/lifetime.h"
#include "engine/detail/op_block.h"
#include "engine/detail/scheduler.h"
#include "engine/engine.h"

namespace tagflow::detail {

class NaiveEngine final : public Engine, public EngineCore {
 public:
  explicit NaiveEngine(const EngineConfig& config);
  ~NaiveEngine() override;

  VarHandle new_var() override;
  using Engine::delete_var;
  void delete_var(VarHandle var, VarDeleter on_deleted) override;
  void push(Operation op) override;
  /// Pushes the group as one operation that launches every part, then
  /// waits for each part's device work (Note [Launch groups] in engine/engine.h).
  void push_group(LaunchGroup group) override;
  OperationHandle push_tracked(Operation op) override;
  void wait_to_read(VarHandle var) override;
  void wait_to_write(VarHandle var) override;
  void wait_for_all() override;
  OperationCounts operation_counts() const override;
  /// Lists the operations running at the moment (several when closures push).
  DependencyState dependency_state() override;
  const EngineConfig& config() const override { return config_; }
  const std::vector<GpuInfo>& gpus() const override { return backend_->devices(); }
  std::int64_t modelled_time_ns() const override;
  std::string device_status() const override { return backend_->status(); }
  void complete_async(OpBlock* op, std::exception_ptr error) override;
  bool finish_pending(std::chrono::milliseconds stall) override;
  /// Nothing to stop: operations run in their pushers.
  void stop_workers() override {}

 private:
  /// A push or deletion that runs later (Note [Naive engine order]).
  struct Deferred {
    std::unique_ptr<OpBlock> op;  ///< null for a deletion
    QueueKind queue = QueueKind::kCompute;
    int priority = 0;
    VarHandle deleted = nullptr;
    VarDeleter on_deleted;
    std::uint64_t ticket = 0;      ///< Note [Naive wait_for_all]
    bool ticket_finished = false;  ///< by an await that finished it (Await)
  };
  /// An asynchronous operation the holder awaits, on the holder's stack
  /// (Note [Lending the naive engine]): the innermost is `awaits_`.
  struct Await {
    Deferred* item = nullptr;
    Stream* stream = nullptr;
    WaitSignal signal;  ///< told by complete_async, under state_mutex_
    std::exception_ptr launch_error;
    bool finished = false;
    Await* outer = nullptr;
  };

  /// push, with the state of a handle to tell once the operation has run
  /// (null for untracked pushes).
  void push_block(Operation& op, OperationState* tracker);
  /// Tells `block`'s handle, if it has one, `error` (null: success), and
  /// gives back the reference it held (Note [Operation handles]).
  void notify_tracker(OpBlock& block, std::exception_ptr error) noexcept;
  /// The closure of a group's operation, run on the first part's device:
  /// `first` is that part's context.
  void launch_group(LaunchGroup& group, const RunContext& first);
  /// Throws DeviceError for a context no operation can run on.
  void check_context(Context ctx) const;
  Stream* stream_for(Context ctx, QueueKind queue);
  /// True when the calling thread runs an operation of this engine.
  bool inside_own_operation() const {
    return owner_.load(std::memory_order_relaxed) == std::this_thread::get_id();
  }
  /// Takes the engine and runs `first`, then everything deferred meanwhile;
  /// or hands `first` over to an operation awaiting its Completion.
  void run_exclusively(Deferred first);
  /// After a push was handed over: waits while the backlog is above
  /// max_pending (the state lock held).
  void throttle_handed_over(std::unique_lock<std::mutex>& lock);
  /// The engine's holder has finished the work of `ticket` (Note [Naive wait_for_all]).
  void finish_ticket(std::uint64_t ticket);
  void release();
  /// Runs one operation (the lock held); an asynchronous one may finish it
  /// and its ticket early (Await).
  void run(Deferred& item);
  /// Calls an asynchronous operation's closure with its Completion; false
  /// (and the operation's error set) when it could not be called.
  bool launch_async(OpBlock& block, const RunContext& rc, Await& await);
  /// After its Completion came: the operation's device work, then complete().
  void finish_async(Await& await);
  /// Fences the operation's device work on `stream` and waits for it.
  void finish_on_device(OpBlock& block, Stream& stream);
  /// An operation has run (on `stream`, or null): its record, its error on
  /// what it writes, its handle.
  void complete(OpBlock& block, Stream* stream);
  /// Takes `block` off the list of running operations.
  void forget_running(const OpBlock& block);
  // Note [Lending the naive engine]:
  /// The holder starts awaiting another thread: pushes are handed over.
  void begin_await();
  /// It stops (nothing to allocate: it cannot fail).
  void end_await();
  /// Lends the engine until the innermost await's operation has completed
  /// and is finished, running what it may, and finishing outer awaits'
  /// operations whose completions came.
  void await_completion(Await& mine);
  /// Lends the engine while the host waits for `stream` to pass `mark`.
  void await_device(Stream& stream, std::uint64_t mark);
  /// Takes a push the lent holder may run now (state_mutex_ held).
  bool take_runnable(Deferred& out);
  /// True when an item not yet run or a running operation uses `var`
  /// (writes it, unless `or_reads`); state_mutex_ held, the engine lent.
  /// Only what was pushed before ticket `below` counts: a wait is for what
  /// was pushed before it began, as on the threaded engine.
  bool pending_use(const VarBlock* var, bool or_reads, std::uint64_t below) const;
  /// True when `item` conflicts with a running operation.
  bool conflicts_with_running(const Deferred& item) const;
  /// Room for one more element in `items`, growing it as push_back would:
  /// so that the push_back after it cannot throw.
  template <typename V>
  static void make_room_for_one(V& items) {
    if (items.size() == items.capacity()) items.reserve(std::max<std::size_t>(8, 2 * items.size()));
  }
  /// Runs a push or a deletion and marks its ticket finished (the lock held).
  void run_item(Deferred& item);
  // Controlled schedules (Note [Controlled schedules] in engine/schedule.h):
  /// Keeps a push or deletion for the schedule to pick; runs some when too
  /// many are kept and the engine is free.
  void keep(Deferred item);
  /// Takes the engine and runs picks among the ready items pushed before
  /// ticket `below` until `done()` (asked under state_mutex_) or nothing is kept.
  void run_kept(const std::function<bool()>& done,
                std::uint64_t below = std::numeric_limits<std::uint64_t>::max());
  /// Waits while too many are kept and another thread runs them (the state
  /// lock held), or until nothing progresses.
  void throttle_kept(std::unique_lock<std::mutex>& lock);
  /// Counts a wait that runs kept items while it lives: pushers then leave
  /// the engine to it.
  class KeptWaiter {
   public:
    explicit KeptWaiter(std::atomic<int>& count) : count_(count) { count_.fetch_add(1); }
    ~KeptWaiter() { count_.fetch_sub(1); }
    KeptWaiter(const KeptWaiter&) = delete;
    KeptWaiter& operator=(const KeptWaiter&) = delete;

   private:
    std::atomic<int>& count_;
  };
  /// The kept items no earlier kept one conflicts with (state_mutex_ held):
  /// among the oldest kMaxKept; or, for the lent holder, the first kMaxKept
  /// of those that also conflict with nothing running, however far back.
  std::vector<std::uint64_t> ready_kept(bool lent) const;
  /// Uses of variables by items not yet run, for the scans above.
  struct KeptUses {
    bool read = false;
    bool written = false;
  };
  using UseMap = std::unordered_map<const VarBlock*, KeptUses>;
  /// True when `item` conflicts with nothing in `earlier`; adds its uses.
  static bool free_after(const Deferred& item, UseMap& earlier);
  /// A wait under a controlled schedule: runs kept items until none uses
  /// `var` (writes it, unless `or_reads`); throws StaleVariableError at once
  /// for a deleted variable.
  void run_kept_using(VarHandle var, const char* what, bool or_reads, std::uint64_t below);
  /// True when a kept item writes `var` (or, with `or_reads`, uses it at all).
  /// Only kept items pushed before ticket `below` count.
  bool kept_uses(const VarBlock* var, bool or_reads, std::uint64_t below) const;
  /// Refuses `item` if it names a deleted variable, and counts it; a deletion
  /// makes its variable's handles stale at once. Under `state_mutex_`, just
  /// before `item` is queued: no deletion comes between the check and the
  /// queueing (Note [Variable generations] in var_block.h).
  void admit(Deferred& item);
  /// Deletes a variable (the lock held): its operations have all completed.
  void delete_now(VarHandle var, VarDeleter& on_deleted);
  /// Waits for what was pushed on `var` (its writes, or every use with
  /// `or_reads`) and rethrows its error. Throws StaleVariableError, before
  /// waiting or once the engine is free, if `var` was deleted (Note
  /// [Variable generations] in var_block.h). Deletions are admitted under
  /// state_mutex_, and none while the engine is held: `var` stays live
  /// until release().
  /// Only what was pushed before ticket `below` (read when the wait began)
  /// is waited for.
  void rethrow_error_of(VarHandle var, const char* what, bool or_reads, std::uint64_t below);
  /// check_not_inside_operation, and no wait from a deleter (it holds the lock).
  void check_not_running_here(const char* what) const;

  EngineConfig config_;
  /// Tells a forked child, where the streams' threads do not exist, and the
  /// mutex may be held by a thread that does not either (Note [Engine lifetime]).
  ForkCheck fork_check_;
  std::unique_ptr<DeviceBackend> backend_;
  // One operation at a time: a lock made of `busy_`, so that a thread
  // waiting for it can instead hand its push over once the running operation
  // awaits its Completion (Note [Naive engine order]).
  std::mutex state_mutex_;
  std::condition_variable state_changed_;
  bool busy_ = false;  // under state_mutex_
  // Note [Lending the naive engine], all under state_mutex_: the holder's
  // nested awaits (pushes are handed over while there are some), whether it
  // is lent now, the threads running kept items that wait for it, and a
  // schedule's pick that failed while lent (for a waiting thread to throw).
  int awaiting_ = 0;
  bool lent_ = false;
  int lent_waiters_ = 0;
  std::exception_ptr lent_failure_;
  /// Pushed by other threads while the holder awaits, in push order: under
  /// state_mutex_ while it awaits, the holder's alone once none is left.
  std::deque<Deferred> handed_over_;
  /// The holder's innermost await, or null (the holder's).
  Await* awaits_ = nullptr;
  /// The thread holding the engine (busy_), while it holds it.
  std::atomic<std::thread::id> owner_{};
  /// Pushed from inside the running operation, in push order (the holder's).
  std::deque<Deferred> deferred_;
  std::map<std::pair<int, QueueKind>, std::unique_ptr<Stream>> streams_;
  /// Shared with the handles of failed operations, which may outlive the engine.
  const std::shared_ptr<ErrorReport> errors_ = std::make_shared<ErrorReport>();
  /// Profiling: push numbers, and the last profiled writer of each variable.
  std::uint64_t next_seq_ = 1;
  std::map<const VarBlock*, std::uint64_t> profiled_writers_;
  /// Note [Naive wait_for_all]: tickets handed out, the mark below which all
  /// have finished, the holder's window from that mark on, and the waiters.
  std::atomic<std::uint64_t> next_ticket_{0};
  std::atomic<std::uint64_t> finished_below_{0};
  std::deque<bool> finished_window_;
  std::atomic<std::uint32_t> all_waiters_{0};
  /// Where a throttled pusher last found nothing finishing (under
  /// state_mutex_): until a ticket finishes past it, pushes do not pause
  /// again, since the backlog may wait on the pusher (a completing thread
  /// pushing while its operation is awaited would pause on every push).
  std::uint64_t stalled_below_ = std::numeric_limits<std::uint64_t>::max();
  /// For the dump: counts, and the operations being run (innermost last).
  std::atomic<std::uint64_t> pushed_{0};
  std::atomic<std::uint64_t> completed_{0};
  std::mutex running_mutex_;
  struct Running {
    const OpBlock* op;
    std::uint64_t ticket;
  };
  std::vector<Running> running_;
  /// A controlled schedule's picks, or null; its kept pushes in push order
  /// (under state_mutex_).
  std::unique_ptr<Scheduler> scheduler_;
  /// A deque: a pick is among the first kMaxKept (or the lent holder's
  /// first kMaxKept ready ones), and erasing it moves only those before it,
  /// however many a stalled throttle let pile up behind.
  std::deque<Deferred> kept_;
  std::atomic<int> kept_waiters_{0};
  /// ready_kept's and take_runnable's scratch (state_mutex_ held).
  mutable UseMap ready_scratch_;
};

}  // namespace tagflow::detail
