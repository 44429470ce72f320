#include "tools/profile_merge.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "engine/error.h"

namespace tagflow::tools {

namespace {

constexpr std::int64_t kNone = std::numeric_limits<std::int64_t>::max();

/// The earliest time of an operation in `trace` (its push or start), or
/// with `everything` of any event; kNone for none.
std::int64_t first_time(const profiler::Trace& trace, bool everything) {
  std::int64_t first = kNone;
  for (const profiler::OpEvent& e : trace.ops) {
    first = std::min({first, e.pushed_ns, e.started_ns});
    if (e.device_started_ns >= 0) first = std::min(first, e.device_started_ns);
  }
  if (!everything) return first;
  for (const profiler::WaitEvent& w : trace.waits) first = std::min(first, w.started_ns);
  for (const profiler::AllocationEvent& a : trace.allocations) first = std::min(first, a.at_ns);
  return first;
}

/// Where a run starts, to line runs up: its first operation, else its
/// first event, else 0.
std::int64_t start_of(const profiler::Trace& trace) {
  const std::int64_t ops = first_time(trace, false);
  if (ops != kNone) return ops;
  const std::int64_t any = first_time(trace, true);
  return any != kNone ? any : 0;
}

/// a - b, refused when it would not fit (times from a hostile file).
std::int64_t difference(std::int64_t a, std::int64_t b) {
  std::int64_t out = 0;
  TAGFLOW_CHECK(!__builtin_sub_overflow(a, b, &out) && out > -(std::int64_t{1} << 62) &&
                    out < (std::int64_t{1} << 62),
                "merge_traces: the traces' clocks are too far apart to align ({} and {})", a, b);
  return out;
}

void shift(profiler::Trace& trace, std::int64_t by, int process) {
  const auto moved = [by](std::int64_t& ns) {
    if (ns >= 0) ns += by;
  };
  for (profiler::OpEvent& e : trace.ops) {
    e.process = process;
    e.pushed_ns += by;
    e.ready_ns += by;
    e.started_ns += by;
    e.ended_ns += by;
    moved(e.device_started_ns);  // -1: none
    moved(e.device_ended_ns);
    moved(e.returned_ns);
  }
  for (profiler::FlowEvent& f : trace.flows) f.process = process;
  for (profiler::WaitEvent& w : trace.waits) {
    w.process = process;
    w.started_ns += by;
    w.ended_ns += by;
  }
  for (profiler::AllocationEvent& a : trace.allocations) {
    a.process = process;
    a.at_ns += by;
  }
}

}  // namespace

MergedTrace merge_traces(std::vector<profiler::Trace> traces, const std::vector<std::string>& names,
                         Alignment alignment) {
  TAGFLOW_CHECK(!traces.empty() && traces.size() == names.size(),
                "merge_traces: expected as many names as traces, at least one; got {} traces and "
                "{} names",
                traces.size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    TAGFLOW_CHECK(std::count(names.begin(), names.end(), names[i]) == 1,
                  "merge_traces: expected a different name for each trace, got \"{}\" twice",
                  names[i]);
  }
  std::vector<std::int64_t> offsets(traces.size(), 0);
  MergedTrace merged;
  const profiler::Origin& first = traces[0].origin;
  // One host and one boot: one steady clock.
  const bool one_host = std::all_of(traces.begin(), traces.end(), [&](const profiler::Trace& t) {
    return !first.host.empty() && t.origin.host == first.host &&
           t.origin.boot_id == first.boot_id && t.origin.steady_epoch_ns != 0;
  });
  const bool synced = std::all_of(traces.begin(), traces.end(),
                                  [](const profiler::Trace& t) { return t.origin.sync_ns >= 0; });
  if (alignment == Alignment::kSameRun && one_host) {
    // Times on the host's steady clock are epoch + t: shift each trace by
    // how much later its epoch was than the first trace's.
    for (std::size_t i = 0; i < traces.size(); ++i) {
      offsets[i] = difference(traces[i].origin.steady_epoch_ns, first.steady_epoch_ns);
    }
    merged.alignment =
        fmt::format("on the steady clock of {}, which every process shares", first.host);
  } else if (alignment == Alignment::kSameRun && synced) {
    for (std::size_t i = 0; i < traces.size(); ++i) {
      offsets[i] = difference(first.sync_ns, traces[i].origin.sync_ns);
    }
    merged.alignment =
        "at the barrier every process left together (sync marks), to within its exit skew";
  } else {
    const std::int64_t start = start_of(traces[0]);
    for (std::size_t i = 0; i < traces.size(); ++i) {
      offsets[i] = difference(start, start_of(traces[i]));
    }
    merged.alignment = alignment == Alignment::kStarts
                           ? "each from its first event"
                           : "at their first events: the traces share no clock (different hosts "
                             "and no sync mark)";
  }
  // No time before 0: -1 marks "none" in an operation's device span and
  // return time, so every trace moves later if one would start earlier.
  std::int64_t earliest = 0;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    const std::int64_t t = first_time(traces[i], true);
    if (t != kNone) earliest = std::min(earliest, t + offsets[i]);
  }
  for (std::int64_t& offset : offsets) offset -= earliest;
  merged.trace.origin = first;
  merged.trace.processes = names;
  for (std::size_t i = 0; i < traces.size(); ++i) {
    profiler::Trace& t = traces[i];
    shift(t, offsets[i], static_cast<int>(i));
    auto& out = merged.trace;
    std::move(t.ops.begin(), t.ops.end(), std::back_inserter(out.ops));
    out.flows.insert(out.flows.end(), t.flows.begin(), t.flows.end());
    std::move(t.waits.begin(), t.waits.end(), std::back_inserter(out.waits));
    out.allocations.insert(out.allocations.end(), t.allocations.begin(), t.allocations.end());
  }
  return merged;
}

std::filesystem::path rank_trace_file(const std::filesystem::path& file, int rank, int ranks) {
  if (ranks <= 1) return file;
  std::filesystem::path path = file;
  path.replace_extension(fmt::format(".rank{}.json", rank));
  return path;
}

std::vector<std::filesystem::path> trace_files(const std::filesystem::path& file) {
  std::error_code error;
  if (std::filesystem::exists(file, error)) return {file};
  std::vector<std::filesystem::path> files;
  for (int rank = 0;; ++rank) {
    const std::filesystem::path path = rank_trace_file(file, rank, 2);
    if (!std::filesystem::exists(path, error)) break;
    files.push_back(path);
  }
  TAGFLOW_CHECK(!files.empty(), "profile: no trace {}, nor one per process ({} and on)",
                file.string(), rank_trace_file(file, 0, 2).string());
  return files;
}

}  // namespace tagflow::tools
