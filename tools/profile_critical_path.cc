#include "tools/profile_critical_path.h"

#include <algorithm>
#include <limits>
#include <map>
#include <utility>

#include "tools/profile_report.h"

namespace tagflow::tools {

namespace {

constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();
/// Host waits looked at, latest first, for the one that held a push.
constexpr int kMaxWaitsLooked = 64;

double to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

}  // namespace

std::vector<CriticalStep> critical_path(const profiler::Trace& trace) {
  const std::vector<profiler::OpEvent>& ops = trace.ops;
  const std::size_t n = ops.size();
  if (n == 0) return {};

  std::vector<BusyInterval> busy(n);
  // When each operation let its track go: its busy end, or for an
  // asynchronous one on a worker, when its closure returned.
  std::vector<std::int64_t> track_end(n);
  std::vector<std::string> tracks(n);
  std::map<std::pair<int, std::uint64_t>, std::size_t> index;  // seqs count per process
  for (std::size_t i = 0; i < n; ++i) {
    const profiler::OpEvent& e = ops[i];
    busy[i] = busy_interval(e);
    const bool on_stream = e.device_started_ns >= 0 && e.device_ended_ns >= e.device_started_ns;
    track_end[i] = !on_stream && e.returned_ns >= 0 ? e.returned_ns : busy[i].end_ns;
    tracks[i] = track_of(trace, e);
    index[{e.process, e.seq}] = i;
  }
  const auto find = [&](int process, std::uint64_t seq) {
    const auto it = index.find({process, seq});
    return it != index.end() ? it->second : kNone;
  };

  std::vector<std::vector<std::size_t>> producers(n);
  for (const profiler::FlowEvent& f : trace.flows) {
    const std::size_t from = find(f.process, f.from_seq), to = find(f.process, f.to_seq);
    if (from != kNone && to != kNone) producers[to].push_back(from);
  }

  // Each operation's predecessor on its track: the one that started before it.
  std::vector<std::size_t> before(n, kNone);
  {
    std::map<std::string, std::vector<std::size_t>> by_track;
    for (std::size_t i = 0; i < n; ++i) by_track[tracks[i]].push_back(i);
    for (auto& [track, members] : by_track) {
      std::sort(members.begin(), members.end(), [&](std::size_t a, std::size_t b) {
        return std::pair(busy[a].begin_ns, track_end[a]) <
               std::pair(busy[b].begin_ns, track_end[b]);
      });
      for (std::size_t k = 1; k < members.size(); ++k) before[members[k]] = members[k - 1];
    }
  }

  // Per process, its host waits on a known operation, by when they ended.
  std::map<int, std::vector<const profiler::WaitEvent*>> waits;
  for (const profiler::WaitEvent& w : trace.waits) {
    if (!w.waited_for.empty()) waits[w.process].push_back(&w);
  }
  for (auto& [process, list] : waits) {
    std::sort(list.begin(), list.end(),
              [](const auto* a, const auto* b) { return a->ended_ns < b->ended_ns; });
  }

  std::size_t at = 0;
  for (std::size_t i = 1; i < n; ++i) {
    if (busy[i].end_ns > busy[at].end_ns) at = i;
  }
  std::vector<bool> visited(n, false);
  std::vector<CriticalStep> path;
  // Where the step being looked at ends on the path: when it released the
  // step after it (its track, for an asynchronous operation followed on its
  // worker, before its result came).
  std::int64_t end_on_path = busy[at].end_ns;
  while (at != kNone) {
    visited[at] = true;
    const profiler::OpEvent& e = ops[at];
    const std::int64_t start = busy[at].begin_ns;
    std::size_t next = kNone;
    std::int64_t released = std::numeric_limits<std::int64_t>::min();
    CriticalGate gate = CriticalGate::kFirst;
    // A candidate that let go after `e` started did not hold it.
    for (const std::size_t p : producers[at]) {
      if (!visited[p] && busy[p].end_ns > released && busy[p].end_ns <= start) {
        next = p;
        released = busy[p].end_ns;
        gate = CriticalGate::kData;
      }
    }
    const std::size_t q = before[at];
    if (q != kNone && !visited[q] && track_end[q] > released && track_end[q] <= start) {
      next = q;
      released = track_end[q];
      gate = CriticalGate::kTrack;
    }
    if (e.pushed_ns > released) {  // the host released it last
      const std::int64_t others = released;
      next = kNone;
      released = e.pushed_ns;
      gate = CriticalGate::kFirst;
      const auto& list = waits[e.process];
      auto it = std::upper_bound(list.begin(), list.end(), e.pushed_ns,
                                 [](std::int64_t t, const auto* w) { return t < w->ended_ns; });
      for (int looked = 0; it != list.begin() && looked < kMaxWaitsLooked; ++looked) {
        const profiler::WaitEvent& w = **--it;
        if (w.ended_ns <= others) break;
        const std::size_t held = find(w.process, w.waited_for_seq);
        if (held != kNone && !visited[held]) {
          next = held;
          released = w.ended_ns;
          gate = CriticalGate::kHostWait;
          break;
        }
      }
    }
    path.push_back({.name = e.name,
                    .process = e.process,
                    .seq = e.seq,
                    .device = device_name(trace, {e.process, e.ctx}),
                    .track = tracks[at],
                    .gate = gate,
                    .begin_ns = start,
                    .busy_us = to_us(end_on_path - start),
                    .waited_us = to_us(std::max<std::int64_t>(0, start - released))});
    if (next != kNone)
      end_on_path = gate == CriticalGate::kTrack ? track_end[next] : busy[next].end_ns;
    at = next;
  }
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<CriticalStretch> critical_stretches(const std::vector<CriticalStep>& path) {
  std::vector<CriticalStretch> stretches;
  for (std::size_t i = 0; i < path.size(); ++i) {
    if (i == 0 || path[i].track != path[i - 1].track || path[i].gate == CriticalGate::kHostWait) {
      stretches.push_back({.first = i, .count = 0});
    }
    ++stretches.back().count;
  }
  return stretches;
}

}  // namespace tagflow::tools
