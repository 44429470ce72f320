#pragma once
// The workloads of `tagflow stress`: what one client thread pushes in one
// round, generated from a seed, and the serial replay that says what every
// variable must hold afterwards, injected faults included.
//
// Note [Stress workload]
// Each client owns `slots` variables; slot s lives on device s mod D (its
// cells are host memory on every device, touched from the device's worker,
// or in stream order from a simulated or real GPU's stream). Steps:
//  - compute on device d: mixes up to two variables of d, and possibly d's
//    shared constant, into one variable of d; read-modify-write (it lists the
//    variable it writes as read too) or overwrite;
//  - copy: one variable onto one on another device, on a copy queue;
//  - allocate: an array of some kilobytes on a device, kept for a few steps
//    and dropped with its fill still pending; or, as an injected fault, a
//    request beyond the device's memory limit, which must fail with a typed
//    out-of-memory error and change nothing;
//  - delete: the variable of a slot is deleted with its work still pending
//    and replaced by a fresh one; the deleter checks the value it guarded.
// Any compute or copy step may be asynchronous (finished by a completer
// thread), carry a priority, or fail as an injected fault (throw, or
// Completion::fail). The replay follows the engine's error rules (Note
// [Errors on variables] in engine.h): a step that reads a variable holding
// an error is skipped and passes that error on to what it writes; a step
// that fails leaves its values alone and stores its own error; a successful
// overwrite clears an error. When a step reads two variables holding
// different errors, which one it passes on is the engine's choice, so the
// replay keeps the set of errors a variable may hold.

#include <array>
#include <cstdint>
#include <vector>

namespace tagflow::tools::stress {

/// Two words: a step writing them one after the other leaves a window in
/// which a conflicting step running at the same time would see them torn.
struct Value {
  std::uint64_t lo = 0;
  std::uint64_t hi = 0;
  bool operator==(const Value&) const = default;
};

enum class StepKind : std::uint8_t { kCompute, kCopy, kAllocate, kDelete };

/// The rates of each kind of step and fault, in percent of the steps.
struct Mix {
  int copy = 20;       ///< copies between devices
  int allocate = 5;    ///< array allocations
  int remove = 1;      ///< deletions of a variable with pending work
  int async = 15;      ///< of compute and copy steps: completed by a completer thread
  int priority = 20;   ///< of compute and copy steps: a priority other than 0
  int fail = 0;        ///< of compute and copy steps: an injected failure
  int alloc_fail = 0;  ///< of allocations: an injected out-of-memory request
};

struct Step {
  StepKind kind = StepKind::kCompute;
  std::uint64_t id = 0;  ///< unique across clients and rounds; names injected faults
  int device = 0;        ///< where it runs: index in the device list
  /// Compute: the slots it reads (-1: none) and whether it reads the
  /// device's shared constant. Copy: reads[0] is the source.
  std::array<int, 2> reads = {-1, -1};
  bool reads_shared = false;
  int write = -1;  ///< the slot it writes (compute, copy) or deletes
  bool read_modify_write = false;
  bool async = false;
  bool fails = false;  ///< injected: the step fails instead of running
  int priority = 0;
  std::uint64_t bytes = 0;  ///< allocate: request size (an injected fault when `fails`)
};

struct ClientShape {
  int slots = 48;
  int num_devices = 1;
  int steps = 4000;  ///< per round
};

/// The steps of `client`'s round `round`. Deterministic in its arguments.
std::vector<Step> generate_round(std::uint64_t seed, int client, int round,
                                 const ClientShape& shape, const Mix& mix);

/// The value a fresh variable of a slot starts with.
Value initial_value(std::uint64_t seed, int client, std::uint64_t generation, int slot);

/// What a compute step writes, from the values it reads (in list order:
/// reads[0], reads[1], then the shared constant) and, for a
/// read-modify-write, the old value.
Value mix_values(const Step& step, const Value* inputs, int num_inputs, const Value* old);

/// The expected state of one slot.
struct SlotState {
  Value value;
  /// Ids of the failed steps whose error the variable may hold; empty: none.
  std::vector<std::uint64_t> errors;
  std::uint64_t generation = 0;  ///< bumped when the slot's variable is replaced
};

/// The serial replay of one client: applies steps in push order.
class Replay {
 public:
  Replay(std::uint64_t seed, int client, int slots, std::vector<Value> shared);

  /// Applies `step`; returns true when it runs (false: skipped or failed).
  bool apply(const Step& step);
  const SlotState& slot(int s) const { return slots_[static_cast<std::size_t>(s)]; }
  int num_slots() const { return static_cast<int>(slots_.size()); }

 private:
  std::uint64_t seed_;
  int client_;
  std::vector<SlotState> slots_;
  std::vector<Value> shared_;
};

/// The shared constant of device `d` (read by every client, written once).
Value shared_value(std::uint64_t seed, int device);

}  // namespace tagflow::tools::stress
