#pragma once
// Random workloads for the differential tests (differential_test.cc): a
// seeded generator of operations over cpu(0..2) and two simulated GPUs, the
// order-sensitive mix every operation applies to its cells, and the serial
// replay in push order that gives the cells every engine must reproduce.

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "engine/context.h"
#include "engine/operation.h"
#include "engine/splitmix.h"

namespace tagflow::testing {

// --- deterministic randomness and the mix ----------------------------------------

/// A tiny portable generator, so a seed means the same workload everywhere:
/// SplitMix64's mixer over a counter that starts at the mixed seed.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(splitmix64(seed)) {}
  std::uint64_t next() { return splitmix64(state_++); }
  /// Uniform in [0, n).
  int below(int n) { return static_cast<int>(next() % static_cast<std::uint64_t>(n)); }
  /// True with probability percent / 100.
  bool chance(int percent) { return below(100) < percent; }

 private:
  std::uint64_t state_;
};

/// The data a variable guards. Several words, written one after the other, so
/// an operation overlapping a conflicting one has a window to tear them.
constexpr int kWords = 4;
struct alignas(64) Cell {
  std::array<std::uint64_t, kWords> words{};
  bool operator==(const Cell&) const = default;
};

// --- workloads --------------------------------------------------------------------

/// How an operation finishes.
enum class Finish : std::uint8_t {
  kSync,           ///< work in the closure (or enqueued on the stream by it)
  kDoneElsewhere,  ///< async: work in the closure, done() from a completer thread
  kWorkElsewhere,  ///< async: work (or the stream enqueue) and done() on a completer thread
};

struct OpSpec {
  std::uint64_t id = 0;     ///< salts the mix; unique across every workload of a test
  std::uint32_t index = 0;  ///< position in its workload
  Context ctx;
  QueueKind queue = QueueKind::kCompute;
  int priority = 0;
  Finish finish = Finish::kSync;
  bool slow = false;        ///< its work sleeps first: widens the window of an ordering bug
  std::vector<int> reads;   ///< may repeat, may overlap `writes`
  std::vector<int> writes;  ///< may repeat
};

/// A wait issued after an operation is pushed; the cell it guards is then
/// compared with the replay's value at that point.
struct Checkpoint {
  std::size_t after_op = 0;
  int var = 0;
  bool for_write = false;
};

/// Variables 0..num_vars-1 are the workload's own (read and written);
/// num_vars..num_vars+num_shared-1 are shared with other clients, read only.
struct Workload {
  int num_vars = 0;
  int num_shared = 0;
  std::vector<OpSpec> ops;
  std::vector<Checkpoint> checkpoints;  ///< sorted by after_op
  /// Per own variable: delete_var right after pushing this op (and its
  /// checkpoints), while work on it is still pending; -1: once the final cells
  /// have been checked.
  std::vector<std::ptrdiff_t> delete_after;
  std::vector<Cell> initial;  ///< own cells before the first operation
};

struct WorkloadShape {
  int num_vars = 16;
  int num_shared = 0;
  std::size_t num_ops = 3000;
  std::uint64_t id_base = 0;
};

/// What a workload exercises, so the tests can check the generator did its job.
struct Coverage {
  int gpu_ops = 0, copy_queue_ops = 0, async_done_elsewhere = 0, async_work_elsewhere = 0;
  int read_modify_write = 0, repeated_listing = 0, prioritized = 0, no_reads = 0;
  int early_deletes = 0, checkpoints = 0, slow = 0;
};

Workload generate(std::uint64_t seed, const WorkloadShape& shape);

Coverage coverage_of(const Workload& w);

/// The body of every operation, on every engine and in the replay: all reads
/// are summed first, then each write (in list order) is mixed with that sum
/// and the operation's id. `table[v]` is variable v's cell.
void apply(const OpSpec& op, Cell* const* table);

/// The serial replay: the expected own cells, and each checkpoint's cell.
struct Expected {
  std::vector<Cell> cells;
  std::vector<Cell> at_checkpoint;
};

Expected replay(const Workload& w, const std::vector<Cell>& shared);

}  // namespace tagflow::testing
