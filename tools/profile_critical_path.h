#pragma once
// The critical path of a trace: the chain of operations, each released by
// the one before it, that ends where the recording's work ends.
//
// Note [The critical path]
// The path is walked backwards from the operation whose work ends last. At
// each operation X it asks what let X start, among three things:
// - a producer: an operation whose result X read (a recorded flow), which
//   releases X when its work ends;
// - X's predecessor on its own track (the operation that ran before it on
//   its worker or stream), which releases X when it ends (an asynchronous
//   operation on a worker, when its closure returned): X was ready but its
//   worker or stream was still busy;
// - the host, which released X when it pushed it.
// The one that released X last is the step before X. When that is the host,
// and a host thread's wait (on an operation W) ended after every other
// candidate released X and before X was pushed, the host was held by W: the
// path goes on at W. Otherwise the path starts at X. A candidate that let go
// only after X started did not hold it and is not taken.
// This follows resource order as well as data, as Nsight Systems' and
// Holistic Trace Analysis' critical paths do: on a busy stream the path is
// the stream's own sequence, and the busy time along it explains the span.
// A path that only followed results read would start again at every
// operation that was pushed early but waited for its stream (the head
// gradient `fill` of every backward pass) and explain a few percent of it.
// Each step keeps how long it waited after it was released (the gap to its
// start: dispatch, or a host that had not yet pushed it), and counts as busy
// from its start to when it released the next step (an asynchronous
// operation followed on its worker: until its closure returned).
// Two limits of what a trace records: the thread that pushed an operation
// is not recorded, so a wait on any host thread of the process that ended
// just before the push is taken for what held it; and dependencies between
// processes (a collective waiting for the slowest rank) are not recorded,
// so in a merged trace the path stays within the process of the operation
// that ends last.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "engine/profiler.h"

namespace tagflow::tools {

/// What released a step of the critical path (Note [The critical path]).
enum class CriticalGate {
  kFirst,     ///< the path's first step: nothing recorded released it but the host
  kData,      ///< it read the result of the step before
  kTrack,     ///< the step before ran just before it on its worker or stream
  kHostWait,  ///< a host thread's wait for the step before ended, and then it was pushed
};

/// One operation of the critical path.
struct CriticalStep {
  std::string name;
  int process = 0;  ///< of a merged trace
  std::uint64_t seq = 0;
  std::string device;
  std::string track;  ///< as tools::track_of names it
  CriticalGate gate = CriticalGate::kFirst;
  std::int64_t begin_ns = 0;  ///< its busy interval, in the trace's nanoseconds
  double busy_us = 0;
  /// From the moment the step before released it to its start.
  double waited_us = 0;
};

/// The critical path of `trace`, first operation first; empty when the
/// trace has no operation.
std::vector<CriticalStep> critical_path(const profiler::Trace& trace);

/// A stretch of the path on one track: steps [first, first + count) of
/// it. A new stretch starts where the track changes or a host wait released
/// the step.
struct CriticalStretch {
  std::size_t first = 0;
  std::size_t count = 0;
};
std::vector<CriticalStretch> critical_stretches(const std::vector<CriticalStep>& path);

}  // namespace tagflow::tools
