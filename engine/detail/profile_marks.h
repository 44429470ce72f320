#pragma once
// What the engine writes down about an operation while the profiler records
// (engine/profiler.h), and the calls that hand it to the profiler. Internal
// to engine/.

#include <atomic>
#include <cstdint>

#include "engine/context.h"
#include "engine/operation.h"

namespace tagflow::detail {

/// Nanoseconds since the profiler's epoch (Note [Profiler times]).
std::int64_t profiler_now();

extern std::atomic<int> g_profiling;
/// True while the profiler records: one relaxed load.
inline bool profiling() { return g_profiling.load(std::memory_order_relaxed) > 0; }

/// Times and facts of one operation, made at push when profiling, filled in
/// as it runs, handed to the profiler once its work (device work included)
/// has ended. Written by one thread at a time: the engine's hand-overs
/// (queues, edges, stream order) order the writes.
struct ProfileMarks {
  const char* name = "op";
  Context ctx;
  QueueKind queue = QueueKind::kCompute;
  int worker = 0;
  int priority = 0;
  bool failed = false;
  std::uint64_t seq = 0;
  std::int64_t pushed = 0;
  std::int64_t ready = 0;
  std::int64_t started = 0;
  std::int64_t ended = 0;
  std::int64_t device_started = -1;
  std::int64_t device_ended = -1;
  /// Asynchronous operations: when the closure returned (the worker free
  /// again while the work goes on elsewhere); -1 for synchronous ones.
  std::int64_t returned = -1;
};

/// Hands `marks` to the profiler and deletes it.
void record_op(ProfileMarks* marks);
/// Operation `from` (push sequence number) wrote a variable `to` reads.
void record_flow(std::uint64_t from, std::uint64_t to);
/// A block of `bytes` was handed out (or, with `release`, given back) on `ctx`.
void record_allocation(Context ctx, std::uint64_t bytes, bool release);
/// A host thread waited from `started` until now; `waited_for` may be null.
void record_wait(const char* what, const char* waited_for, std::uint64_t waited_for_seq,
                 std::int64_t started);

}  // namespace tagflow::detail
