#pragma once
// `tagflow profile FILE`: what a trace written by the profiler says, in
// figures (here) and as a page a browser opens offline (tools/profile_page.h).
//
// Note [Profile figures]
// - An operation's *busy interval* is where its work ran: on a GPU the span
//   of its device work on the stream (when recorded), elsewhere the time its
//   closure ran on the worker.
// - Per operation name: count, and the total, mean and largest busy time.
// - A device's busy fraction: the length of the union of its operations'
//   busy intervals over the trace's span (first push to last end), where
//   an asynchronous operation (one that completes later, from another
//   thread: a collective) counts only until its closure returned; its
//   worker is free after that. The time such operations spend in flight
//   afterwards is the device's separate "in flight" fraction (the network
//   or another thread busy, not the device's workers).
// - Copies are the operations on a copy queue, or named "copy". Copy time is
//   the sum of their busy intervals; the overlapped part is what falls
//   inside the union of every other operation's busy intervals.
// - Waits: time host threads spent blocked, by call and by the operation
//   waited for.
// - Idle gaps: per track (a CPU device's worker, a GPU's stream or worker),
//   the time between the end of one busy interval (an asynchronous
//   operation's ending when its closure returned) and the start of the
//   next; the longest overall. Copies overlap the busy intervals, counted
//   the same way, of the other operations.
// - The critical path: Note [The critical path] (tools/profile_critical_path.h).
//   Its length is the sum of the busy times along it.
// - Figures are shown as tables (figure_tables), the same cells in the text
//   report and in the page: one code path, one rounding.
// - Memory: per device, the blocks handed out and given back while
//   recording, and the highest net amount.
// - Time per device (Holistic Trace Analysis' temporal breakdown): over the
//   span, the union of its compute operations' busy intervals, of its
//   copies, and of its communication (operations pushed at
//   kCommunicationPriority, the gradient sums, on whichever queue: a sum's
//   copy is communication here, not a copy); an asynchronous operation's
//   time in flight counts as its kind's (a collective's as communication);
//   how much of copies and communication ran while it computed; and idle,
//   the span outside all three. Each idle stretch is charged to the
//   operation that ends it: before that operation was pushed, to a host
//   thread blocked in a wait (when one was) or to nothing pushed; between
//   its push and the moment it was ready, to the dependency it waited for,
//   on another device (the producer it read from that ended last lives
//   elsewhere) or not; after it was ready, to its worker or stream not
//   having started it. Idle after a device's last operation is nothing
//   pushed (or a host wait).

#include <cstdint>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "engine/profiler.h"
#include "tools/profile_critical_path.h"

namespace tagflow::tools {

/// A trace from the text of a Chrome trace written by
/// profiler::write_chrome_trace. Throws tagflow::Error saying what is
/// malformed.
profiler::Trace parse_chrome_trace(const std::string& text);
/// The same, from a file; the error names the file.
profiler::Trace read_chrome_trace(const std::filesystem::path& path);

/// Where an operation's work ran: its device span on a GPU stream, else the
/// time its closure ran (Note [Profile figures]).
struct BusyInterval {
  std::int64_t begin_ns = 0, end_ns = 0;
};
BusyInterval busy_interval(const profiler::OpEvent& e);
/// A device of one process of the trace (Note [Aligning traces]).
using Place = std::pair<int, Context>;
/// "gpu(0)", or in a trace merged from several processes "rank 1 gpu(0)".
std::string device_name(const profiler::Trace& trace, const Place& place);
/// The track an operation is drawn on: "gpu(0) compute stream", "cpu(1)
/// worker 0" (after the process's name in a merged trace).
std::string track_of(const profiler::Trace& trace, const profiler::OpEvent& e);
/// How Note [Profile figures] counts an operation's time.
enum class OpKind { kCompute, kCopy, kCommunication };
OpKind kind_of(const profiler::OpEvent& e);

struct OperationStats {
  std::string name;
  std::int64_t count = 0;
  double total_us = 0, mean_us = 0, max_us = 0;
};

struct DeviceStats {
  std::string device;
  /// Its workers running closures, or on a GPU its streams running work.
  double busy_us = 0;
  double busy_fraction = 0;
  /// Asynchronous operations in flight after their closures returned (a
  /// collective on the network, work on another thread): not the worker's.
  double in_flight_us = 0;
  double in_flight_fraction = 0;
};

struct WaitStats {
  std::string what;
  std::string waited_for;
  std::int64_t count = 0;
  double total_us = 0;
};

struct IdleGap {
  std::string track;  ///< e.g. "gpu(0) compute stream", "cpu(1) worker 0"
  double start_us = 0;
  double length_us = 0;
  std::string before, after;  ///< the operations on either side
};

/// Memory handed out on one device while the trace was recorded.
struct MemoryFigures {
  std::string device;
  std::int64_t allocations = 0;
  std::int64_t releases = 0;
  std::int64_t peak_bytes = 0;  ///< highest net amount (allocated minus released)
  std::int64_t end_bytes = 0;   ///< net amount at the end
};

/// Where one device's time went over the trace's span, as Holistic Trace
/// Analysis splits it (Note [Profile figures]).
struct TimeBreakdown {
  std::string device;
  double compute_us = 0;                   ///< union of its compute operations' busy time
  double copy_us = 0;                      ///< union of its copies
  double communication_us = 0;             ///< union of its communication, in flight included
  double overlapped_us = 0;                ///< copies or communication while it computed
  double communication_overlapped_us = 0;  ///< communication alone while it computed
  double idle_us = 0;                      ///< none of these
  /// The idle time by cause, summing to idle_us (Note [Profile figures]).
  double idle_host_waiting_us = 0;    ///< nothing pushed yet, a host thread in a wait
  double idle_nothing_pushed_us = 0;  ///< nothing pushed yet, no host thread waiting
  double idle_other_device_us = 0;    ///< pushed, waiting on another device's result
  double idle_dependency_us = 0;      ///< pushed, waiting on one of its own or unrecorded
  double idle_ready_us = 0;           ///< ready, not yet started by a worker or stream
};

struct ProfileSummary {
  /// The device model whose predictions the trace's times are, or empty
  /// (Note [Modelled traces] in engine/detail/model_clock.h).
  std::string device_model;
  /// Where the span starts: the earliest push or start of an operation, in
  /// the trace's nanoseconds; "at" times are from it.
  std::int64_t start_ns = 0;
  double span_us = 0;
  std::vector<OperationStats> operations;  ///< largest total first
  std::vector<DeviceStats> devices;        ///< in device order
  std::vector<TimeBreakdown> breakdown;    ///< in device order
  double copy_us = 0;
  double copy_overlapped_us = 0;
  double wait_us = 0;
  std::vector<WaitStats> waits;             ///< largest total first
  std::vector<IdleGap> gaps;                ///< longest first, at most 10
  std::vector<CriticalStep> critical_path;  ///< first operation first
  double critical_path_us = 0;              ///< busy along it
  double critical_path_waited_us = 0;       ///< between its steps' release and start
  std::vector<MemoryFigures> memory;        ///< in device order
};

/// The figures of Note [Profile figures].
ProfileSummary summarize(const profiler::Trace& trace);

/// A table of figures with its cells formatted, as both the text report and
/// the page show it. No cell holds two spaces in a row (the text report
/// separates columns with two or more), unless an operation's name does.
struct FigureTable {
  std::string id;  ///< "summary", "devices", "breakdown", "idle", ...
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  /// Per column: whether every cell is a number (shown aligned right).
  std::vector<bool> numeric;
};
/// Sets `table.numeric` from its cells.
void mark_numeric_columns(FigureTable& table);
/// The summary's figures, in the order the report shows them.
std::vector<FigureTable> figure_tables(const ProfileSummary& summary);
/// Tables as text: each table's title, then its header and rows with
/// columns aligned.
std::string format_tables(const std::vector<FigureTable>& tables);
/// format_tables(figure_tables(summary)).
std::string format_summary(const ProfileSummary& summary);

/// `tagflow profile`: prints the summary of the traces (one, or one per
/// process of a run, put on one clock: tools/profile_merge.h; a file that
/// does not exist stands for its rank files) and writes the page to
/// `html_file`. Throws tagflow::Error for an unreadable trace.
void run_profile(const std::vector<std::filesystem::path>& trace_files,
                 const std::filesystem::path& html_file);

}  // namespace tagflow::tools
