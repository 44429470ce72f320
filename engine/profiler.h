#pragma once
// The profiler: what every operation did and when, for seeing how work
// overlaps (compute with transfers, one device with another, the host
// running ahead of the devices).
//
//   {
//     profiler::Scope profiling;          // or TAGFLOW_PROFILER=1 for the whole run
//     ... push work, train a few batches ...
//     Engine::get().wait_for_all();
//   }
//   profiler::write_chrome_trace(profiler::collect(), "trace.json");  // chrome://tracing, Perfetto
//
// Recording is on while a Scope lives or when TAGFLOW_PROFILER=1; off, the
// engine pays one predictable branch per operation. Each operation gives an
// OpEvent when it has completed (its device work included); collect()
// returns the events recorded so far and clear() drops them.
//
// Threads: safe to call concurrently. Recording, collect(), clear(),
// set_rank() and mark_sync() take one lock; a Scope may live on any thread
// and turns recording on for every thread while it lives.
// Threads: concurrent reads, exclusive writes. OpEvent, Trace and the other
// structs are values (as a std::vector).
//
// Note [Profiler times]
// Times are nanoseconds on the steady clock since the profiler's epoch (its
// first use). An operation is *pushed* when push() is called, *ready* when
// its dependencies (and the device work it must wait for on the host) are
// done, *started* and *ended* around its closure on a worker. On a GPU, the
// closure only enqueues work: the device work's start and end come from the
// stream itself, as marks it reaches in order: CUDA timing events on a real
// GPU (measured from an origin event whose profiler time is known), host
// functions run by a simulated GPU's stream thread.
//
// Note [Aligning traces]
// Each process records on its own clock. A trace keeps what aligns it with
// the traces of the other processes of a run (Trace::origin): the host, the
// steady clock's reading at the profiler's epoch (processes on one host
// share that clock, so their traces align exactly), and, when the program
// marks one (mark_sync, after a barrier every process leaves together), the
// profiler time of that shared moment, which aligns traces of processes on
// different hosts to within the barrier's exit skew (one message latency).
// `tagflow train --profile` under MPI marks one at the start of the window.
// A trace merged from several processes (`tagflow profile` of several
// files) numbers them in `process`; a process's own recording has 0 there.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/operation.h"

namespace tagflow::profiler {

/// One operation, from push to completion (Note [Profiler times]).
struct OpEvent {
  std::string name;
  /// Which process of a merged trace (Note [Aligning traces]).
  int process = 0;
  Context ctx;
  QueueKind queue = QueueKind::kCompute;
  /// The worker of the device pool that ran it.
  int worker = 0;
  /// Push order in its engine; flows refer to it.
  std::uint64_t seq = 0;
  int priority = 0;
  /// It threw, or was skipped for an error it read.
  bool failed = false;
  std::int64_t pushed_ns = 0;
  std::int64_t ready_ns = 0;
  std::int64_t started_ns = 0;
  std::int64_t ended_ns = 0;
  /// GPU operations: the stream's work, or -1 when there is none.
  std::int64_t device_started_ns = -1;
  std::int64_t device_ended_ns = -1;
  /// Asynchronous operations: when the closure returned, leaving its
  /// worker free while the work went on elsewhere (a collective on the
  /// network, another thread) until ended_ns; -1 for synchronous ones.
  std::int64_t returned_ns = -1;
};

/// "`to` reads what `from` wrote": operation `from` was the last writer of
/// a variable `to` reads, when `to` was pushed.
struct FlowEvent {
  std::uint64_t from_seq = 0;
  std::uint64_t to_seq = 0;
  int process = 0;  ///< both operations are of this process
};

/// A host thread blocked in a wait.
struct WaitEvent {
  /// "wait_to_read", "wait_to_write" or "wait_for_all".
  std::string what;
  /// The operation waited for (the variable's last writer), when known.
  std::string waited_for;
  std::uint64_t waited_for_seq = 0;
  int process = 0;  ///< of a merged trace; the operation waited for is of it too
  /// A small number per host thread, in order of first appearance.
  int thread = 0;
  std::int64_t started_ns = 0;
  std::int64_t ended_ns = 0;
};

/// A block of device memory handed out to an array (or given back).
struct AllocationEvent {
  Context ctx;
  int process = 0;          ///< of a merged trace
  std::uint64_t bytes = 0;  ///< the block's size (its size class)
  bool release = false;
  std::int64_t at_ns = 0;
};

/// Where and when a trace was recorded (Note [Aligning traces]).
struct Origin {
  std::string host;
  /// The boot the steady clock counts from (Linux's boot_id), or empty:
  /// hosts of one name (containers, clones) share a clock only within one boot.
  std::string boot_id;
  /// The steady clock's reading (ns since its own epoch) at the profiler's epoch.
  std::int64_t steady_epoch_ns = 0;
  /// The profiler time of the last mark_sync(), or -1.
  std::int64_t sync_ns = -1;
  /// This process's rank among `ranks` (set_rank; 0 of 1 unless set).
  int rank = 0;
  int ranks = 1;
  /// Recorded on simulated GPUs keeping modelled time: the device model's
  /// name, and every time of the trace is its prediction (Note [Modelled
  /// traces] in engine/detail/model_clock.h); empty for measured traces.
  std::string device_model;
};

/// Everything recorded.
struct Trace {
  std::vector<OpEvent> ops;  ///< in completion order
  std::vector<FlowEvent> flows;
  std::vector<WaitEvent> waits;
  std::vector<AllocationEvent> allocations;  ///< in time order per device
  Origin origin;
  /// A merged trace's processes, by their `process` number ("rank 0", ...);
  /// empty for a process's own recording.
  std::vector<std::string> processes;
};

/// True while recording.
bool enabled();

/// Records while it lives (scopes nest, from any thread).
class Scope {
 public:
  Scope();
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
};

/// A copy of what has been recorded so far. Operations still in flight are
/// not in it: wait for them first.
Trace collect();
/// Drops everything recorded so far (and the sync mark; not the rank).
void clear();

/// This process is `rank` of `ranks` (a distributed run); traces say so.
void set_rank(int rank, int ranks);
/// Marks now as a moment every process of the run shares: call it right
/// after a barrier that all of them leave together (Note [Aligning traces]).
void mark_sync();

/// The Chrome trace format (JSON; chrome://tracing, Perfetto): a process per
/// device and one for the host threads, a track per worker and per stream,
/// an event per operation (its device work on the stream's track), an arrow
/// per flow, an event per wait, and a counter per device of the memory
/// allocated since recording began (net of releases). Each operation's args keep what the viewers
/// do not show (seq, priority, pushed and ready times, queue, worker, the
/// seqs it reads from), and the trace's origin under "otherData", so that
/// `tagflow profile` can read the file back. A trace of one process: a
/// merged one is refused with tagflow::Error.
std::string to_chrome_trace(const Trace& trace);
/// Writes to_chrome_trace(trace) to `path`; throws tagflow::Error when the
/// file cannot be written.
void write_chrome_trace(const Trace& trace, const std::filesystem::path& path);

}  // namespace tagflow::profiler
