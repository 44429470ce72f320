#pragma once
// DependencyState: a snapshot of every operation an engine has not completed
// yet, what each one is doing, and which earlier operations it waits for on
// which variables. What the watchdog, the dump signal and `tagflow stress`
// print when work stops moving:
//
//   const DependencyState state = Engine::get().dependency_state();
//   for (const PendingOperation* op : state.blockers()) { ... }
//   std::fputs(state.describe().c_str(), stderr);
//
// Threads: concurrent reads, exclusive writes. A DependencyState is a
// snapshot, a value (as a std::vector), as are the structs in it.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/operation.h"

namespace tagflow {

/// Where an operation the engine has not completed stands.
enum class OperationStage : std::uint8_t {
  kWaiting,        ///< follows earlier operations on its variables that have not completed
  kHeldForDevice,  ///< may run once device work it depends on has finished
  kQueued,         ///< ready; waits for a worker of its device
  kRunning,        ///< its closure runs on a worker
  kLaunched,       ///< asynchronous: its closure returned, its Completion was not called yet
};

const char* to_string(OperationStage stage);

/// How many operations an engine has been given and has completed (waits and
/// deletions of variables with pending work count as operations).
struct OperationCounts {
  std::uint64_t pushed = 0;
  std::uint64_t completed = 0;
  std::uint64_t pending() const { return pushed > completed ? pushed - completed : 0; }
};

/// One operation listed in `waits_for`: the earlier operation, and the
/// variable they both claim.
struct Blocker {
  std::uint64_t seq = 0;  ///< the earlier operation's push number
  VarHandle var = nullptr;
};

/// An operation pushed and not completed.
struct PendingOperation {
  std::uint64_t seq = 0;  ///< push number, unique per engine, increasing
  std::string name;       ///< "wait_to_read" and "delete_var" for the engine's own
  Context ctx;
  QueueKind queue = QueueKind::kCompute;
  int priority = 0;
  OperationStage stage = OperationStage::kWaiting;
  /// The handles as the operation was given them (a pending deletion's is
  /// already stale). Merged: a variable read and written is in `writes` only.
  std::vector<VarHandle> reads;
  std::vector<VarHandle> writes;
  /// The uncompleted operations it follows directly, oldest first; one entry
  /// per variable when it follows the same operation on several.
  std::vector<Blocker> waits_for;
};

struct DependencyState {
  OperationCounts counts;
  /// Every pending operation, in push order. Empty when the engine cannot
  /// tell (the naive engine lists only the one it runs).
  std::vector<PendingOperation> operations;

  /// The operation with push number `seq`, or null.
  const PendingOperation* find(std::uint64_t seq) const;
  /// The pending operations that wait for no other: what everything else is
  /// stuck behind when nothing moves.
  std::vector<const PendingOperation*> blockers() const;
  /// How many pending operations wait on `seq`, directly or through others.
  std::size_t waiting_behind(std::uint64_t seq) const;
  /// A report for people: counts; each blocker, its stage and how many
  /// operations wait behind it; then up to `max_waiting` waiting operations
  /// with the variables they wait on and the operation holding each.
  std::string describe(std::size_t max_waiting = 40) const;
};

}  // namespace tagflow
