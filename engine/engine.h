#pragma once
// Engine: the asynchronous dependency engine every piece of work goes
// through. Push operations tagged with the variables they read and write;
// the engine runs each one on a worker of its device as soon as every
// earlier conflicting operation has completed.
//
//   Engine& engine = Engine::get();
//   VarHandle x = engine.new_var();
//   engine.push({.name = "fill", .ctx = cpu(0), .writes = {x},
//                .fn = [&](const RunContext&) { value = 42; }});
//   engine.wait_to_read(x);   // value is 42 from here on
//   engine.delete_var(x);
//
// To learn when one operation has completed, without a variable of its own
// to wait on, push it tracked and keep the handle (engine/operation_handle.h):
//
//   OperationHandle flushed = engine.push_tracked(
//       {.name = "flush", .ctx = cpu(0), .reads = {x}, .fn = flush_to_disk});
//   flushed.on_done([](std::exception_ptr error) { /* small, must not wait */ });
//   if (flushed.done()) { ... }   // polls
//   flushed.wait();               // blocks; rethrows what wait_to_read would
//
// Threads: safe to call concurrently. push, new_var, delete_var and the waits
// may be called from any thread, and pushing from inside an operation is
// fine; a wait from inside an operation throws WaitInsideOperationError
// instead of deadlocking.
//
// Note [Errors on variables]
// An operation that throws has its exception, wrapped in OperationError with
// the operation's name and context, stored on every variable it writes.
// Operations that read such a variable (including those listing it in both
// `reads` and `writes`) are skipped and store the same error on what they
// write, so the error reaches exactly the waits that depend on the failure.
// `wait_to_read` / `wait_to_write` rethrow the variable's error, each time
// they are asked; `wait_for_all` rethrows the first error raised since the
// previous `wait_for_all` returned that no wait has rethrown (every thread
// waiting at that moment sees it), so an error caught from `wait_to_read`
// does not come back from it, nor from the warning at exit (Note [Errors
// seen by wait_for_all] in engine/detail/error_report.h).
// An operation that only writes a variable overwrites it: when it succeeds,
// the variable's error is cleared. Device work that fails after its GPU
// operation completed reaches the variables the same way (Note [Errors of
// device work] in engine/stream.h).
//
// Note [Engine lifetime]
// The process-wide engine (Engine::get()) is made on first use and never
// destroyed, like the storage (storage/storage.cc). Arrays, networks and data
// loaders kept in globals or function statics are destroyed after main()
// returns, in an order no library controls, and each array hands its memory
// back through the engine (delete_var): the engine must still be there. A
// static pointer keeps it reachable, so LeakSanitizer does not report it.
//  - Normal exit: a hook registered with std::atexit when the engine is made
//    waits for the work pushed so far, device work included. Hooks and
//    statics go in reverse order, so everything made before the engine
//    (spdlog's registry, globals default-constructed before main) is
//    destroyed after the wait, never while an operation still uses it. If no
//    operation completes for TAGFLOW_EXIT_TIMEOUT seconds (default 10; 0
//    does not wait), the hook logs the dependency state and lets the process
//    exit without the rest. Arrays destroyed after the hook still push their
//    deletions to the live engine, whose workers run until the process ends;
//    from the hook on, the engine's own messages bypass spdlog
//    (detail::log_error), which may be destroyed by then.
//  - exit() called from inside an operation (an error handler in a closure,
//    or a simulated GPU's device work): the hook runs on an engine thread
//    and cannot wait for itself. It only stops the engine's workers from
//    starting anything new: operations not yet started are dropped, the ones
//    running finish or end with the process, and memory whose last operation
//    never runs is not given back (the process is ending). Waits from the
//    destructors that then run on that thread throw
//    WaitInsideOperationError.
//  - Engines made with make_engine() belong to their caller: destroying one
//    waits for its work and joins its workers, at exit too; the hook neither
//    waits for them nor stops them.
//  - fork(): only the calling thread exists in the child, so an engine
//    started before the fork has no workers there, and its locks may be held
//    by threads that do not exist. In the child, such an engine refuses
//    every call that would need them (push, new_var and so every new array,
//    the waits, dependency_state) with ForkError instead of hanging;
//    delete_var does nothing (the variable and the memory its deleter would
//    free are the child's copies of the parent's: kept unused, as the child
//    exits anyway); destroying it keeps its workers' and streams' records
//    instead of joining them; the exit hook does nothing. A DataLoader or a
//    Watchdog made before the fork likewise lets go of its threads in the
//    child. A child that does not use the parent's engine, and a child
//    forked before any engine was made (it makes its own), run and exit
//    normally. Telling a child costs one relaxed load per call: a
//    pthread_atfork handler counts forks in the child, and each engine
//    remembers the count it was made under (ForkCheck, engine/detail/lifetime.h).

// Note [Launch groups]
// The parts of a collective across GPUs meet on the devices: NCCL's kernel
// for one rank, or a simulated GPU's part (engine/detail/sim_collective.h),
// waits on its stream until every rank's part has been launched and reached.
// Pushed one by one, such parts deadlock wherever one thread launches a
// part and then waits for its device work: the naive engine does so for
// every operation. And two collectives over overlapping sets of GPUs
// deadlock if one GPU runs its parts in one order and another in the other.
// push_group(LaunchGroup) says which operations meet, and every engine keeps
// both rules:
// - the threaded engine launches each part from its device's worker (never
//   two from one thread), so the parts meet whatever order they run in;
// - the naive engine runs a group as one operation: it launches every part
//   (through LaunchGroup::together when given, e.g. inside ncclGroupStart
//   and ncclGroupEnd), then waits for each part's device work;
// - on every device, the parts of groups run in the order the groups were
//   pushed: a push_group is atomic with respect to the others, and the
//   threaded engine orders each device's parts through one variable of its
//   own per device. Collectives pushed this way cannot wait on each other in
//   a cycle, whatever threads push them.
// A group's part that fails to launch leaves the launched ones waiting for
// it on their devices (as NCCL's would: NcclAggregator's monitor then
// aborts the clique); the engine reports the failure on what the part writes.

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/config.h"
#include "engine/context.h"
#include "engine/dependency_state.h"
#include "engine/gpu_info.h"
#include "engine/operation.h"
#include "engine/operation_handle.h"

namespace tagflow {

class Engine {
 public:
  virtual ~Engine() = default;
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  /// The process-wide engine, built on first use from the configuration
  /// given to configure(), or else from EngineConfig::from_env(), and never
  /// destroyed; at exit it first finishes the work pushed so far (Note
  /// [Engine lifetime]).
  static Engine& get();
  /// Sets the configuration the process-wide engine starts with, in place
  /// of the environment's: call it before anything uses get() (an array, a
  /// network, num_gpus()). Start from EngineConfig::from_env() to keep the
  /// environment's values as defaults (engine/config.h). Throws ConfigError
  /// naming the setting for a value out of range, and, once the engine has
  /// started, naming each setting that differs from what it runs with (the
  /// same settings again change nothing). Safe to call from several threads:
  /// the last call before the engine starts is the one it takes.
  ///
  ///   EngineConfig config = EngineConfig::from_env();
  ///   config.set_sim_gpus("2");
  ///   Engine::configure(config);
  static void configure(const EngineConfig& config);
  /// Whether the process-wide engine has started. Never starts it.
  static bool started();
  /// The process-wide engine's settings (starting it), each with where its
  /// value came from: "code", "environment" or "default" (`tagflow info`).
  static std::vector<ConfigSetting> settings();

  /// A new variable, with no pending operation. Throws ForkError in a child
  /// forked after the engine started (Note [Engine lifetime]), as do push,
  /// the waits and dependency_state.
  virtual VarHandle new_var() = 0;
  /// Called once a deleted variable's last operation has completed.
  using VarDeleter = detail::InlineFunction<void(), 40>;

  /// Deletes `var` once every operation pushed on it so far has completed.
  /// The handle must not be used after this call. Does nothing in a child
  /// forked after the engine started.
  void delete_var(VarHandle var) { delete_var(var, nullptr); }
  /// Same, then calls `on_deleted` (from whichever thread completes the
  /// deletion; it must not throw or wait). On GPUs "completed" means the
  /// device work has finished, not merely been launched, so `on_deleted` may
  /// hand the memory the variable guarded back to any stream.
  ///
  ///   engine.delete_var(var, [block] { allocator.release(block); });
  virtual void delete_var(VarHandle var, VarDeleter on_deleted) = 0;

  /// Schedules `op`. Returns at once (the naive engine runs it first, except
  /// when pushed from inside an operation, or from another thread while an
  /// asynchronous one awaits its Completion or a GPU one its stream: then
  /// later, Note [Naive engine order]).
  /// Safe to call from several threads, and from inside operations.
  /// Throws tagflow::Error for an operation that cannot run (no closure, a
  /// device that does not exist), and std::bad_alloc when the memory to
  /// schedule it runs out; either way nothing was pushed. (The same holds
  /// for the waits and delete_var: one that throws std::bad_alloc leaves
  /// the variable as it was, its handle live; the deleter is dropped unrun.)
  virtual void push(Operation op) = 0;
  /// Schedules the parts of `group`, each ordered and run as if pushed alone
  /// in turn, so that none of them is waited for before all are launched,
  /// and on every device in the order the groups were pushed (Note [Launch
  /// groups]). Checks every part before it pushes any, and throws as push
  /// does, pushing nothing; a part that is asynchronous, or a second part
  /// on one device, is refused too. Safe to call from several threads and
  /// from inside operations.
  virtual void push_group(LaunchGroup group) = 0;
  /// Same as push, and returns a handle on the operation: polled with
  /// done(), waited on with wait() (rethrowing the error wait_to_read on a
  /// variable it writes would), or given callbacks with on_done(). Costs one
  /// small allocation; untracked pushes pay one null-pointer test for it
  /// (Note [Operation handles] in engine/detail/operation_state.h). An error
  /// rethrown by the handle's wait() is not reported again by wait_for_all.
  ///
  ///   OperationHandle h = engine.push_tracked({.name = "step", .ctx = gpu(0), ...});
  ///   h.wait();
  virtual OperationHandle push_tracked(Operation op) = 0;

  /// Blocks until every write pushed on `var` so far has completed; rethrows
  /// the error stored on `var`, if any.
  virtual void wait_to_read(VarHandle var) = 0;
  /// Blocks until every read and write pushed on `var` so far has completed;
  /// rethrows the error stored on `var`, if any.
  virtual void wait_to_write(VarHandle var) = 0;
  /// Blocks until every operation pushed before the call has completed (and
  /// device work has finished); operations other threads push meanwhile do
  /// not hold it up. Rethrows the first error raised since the previous
  /// wait_for_all returned, on any thread, that no wait_to_read,
  /// wait_to_write or handle wait() has rethrown; threads waiting at the same
  /// time all see it (Note [Errors seen by wait_for_all] in
  /// detail/error_report.h).
  virtual void wait_for_all() = 0;

  /// Operations pushed and completed so far; cheap, for progress checks.
  virtual OperationCounts operation_counts() const = 0;
  /// Every pending operation, its stage and what it waits for (see
  /// DependencyState). Callable from any thread that is not running an
  /// operation, at any time; pushes to every engine of the process pause
  /// while it looks (Note [Dependency state] in engine/detail/threaded_engine.h).
  ///
  ///   spdlog::error("stuck:\n{}", engine.dependency_state().describe());
  virtual DependencyState dependency_state() = 0;

  /// The configuration the engine was built with.
  virtual const EngineConfig& config() const = 0;
  /// GPUs this engine schedules on (real or simulated), in index order.
  virtual const std::vector<GpuInfo>& gpus() const = 0;
  /// One line on where the GPUs come from, e.g. "no GPU: CUDA driver not found".
  virtual std::string device_status() const = 0;
  /// Number of GPUs (real or simulated).
  int num_gpus() const { return static_cast<int>(gpus().size()); }
  /// On simulated GPUs with a device model (TAGFLOW_SIM_GPUS=N:MODEL): the
  /// calling thread's modelled time in nanoseconds, which moves only when
  /// it waits for modelled work (Note [Modelled time] in
  /// engine/device_model.h); -1 without a device model. The span between
  /// two readings around a wait_for_all() is what the work took on the
  /// modelled GPUs:
  ///
  ///   engine.wait_for_all();
  ///   const std::int64_t start = engine.modelled_time_ns();
  ///   ... push a training step ...
  ///   engine.wait_for_all();
  ///   const double step_seconds = (engine.modelled_time_ns() - start) * 1e-9;
  virtual std::int64_t modelled_time_ns() const = 0;

 protected:
  Engine() = default;
};

/// Builds an engine of the configured kind. Tests use this to run the same
/// workload on several engines side by side. Destroying it waits for the
/// work pushed so far and joins its workers (Note [Engine lifetime]).
std::unique_ptr<Engine> make_engine(const EngineConfig& config);

/// Number of GPUs of the process-wide engine (the tutorials' `num_gpus()`).
int num_gpus();

/// Facts about this build for `tagflow info`: CUDA on or off, and the
/// versions of CUDA, cuBLAS, cuDNN, oneTBB and spdlog.
std::vector<std::pair<std::string, std::string>> build_info();

/// True when called from a thread running an engine operation (where
/// waiting would deadlock).
bool inside_engine_operation();

}  // namespace tagflow
