#include "tools/profile_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "ops/priority.h"

namespace tagflow::tools {

namespace {

using nlohmann::json;
using profiler::OpEvent;

std::int64_t to_ns(double us) { return static_cast<std::int64_t>(us * 1000.0 + 0.5); }
double to_us(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

struct Interval {
  std::int64_t begin = 0, end = 0;
};

bool has_device_span(const OpEvent& e) {
  return e.device_started_ns >= 0 && e.device_ended_ns >= e.device_started_ns;
}

/// Where `e`'s work ran (Note [Profile figures]).
Interval busy(const OpEvent& e) {
  if (has_device_span(e)) return {e.device_started_ns, e.device_ended_ns};
  return {e.started_ns, e.ended_ns};
}

/// Where `e` kept its device busy: its device span on a GPU, else the time
/// its closure ran, which for an asynchronous operation ends when the
/// closure returned (Note [Profile figures]).
Interval device_busy(const OpEvent& e) {
  if (has_device_span(e)) return busy(e);
  return {e.started_ns, e.returned_ns >= 0 ? e.returned_ns : e.ended_ns};
}

profiler::Trace parse_events(const std::string& text);

bool is_copy(const OpEvent& e) { return e.queue == QueueKind::kCopy || e.name == "copy"; }

/// `intervals` merged into disjoint ones, in order.
std::vector<Interval> merged(std::vector<Interval> intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : intervals) {
    if (!out.empty() && i.begin <= out.back().end) {
      out.back().end = std::max(out.back().end, i.end);
    } else {
      out.push_back(i);
    }
  }
  return out;
}

std::int64_t length(const std::vector<Interval>& disjoint) {
  std::int64_t total = 0;
  for (const Interval& i : disjoint) total += i.end - i.begin;
  return total;
}

/// Length of `i` inside the disjoint, sorted `cover`.
std::int64_t overlap(const Interval& i, const std::vector<Interval>& cover) {
  std::int64_t total = 0;
  for (const Interval& c : cover) {
    if (c.begin >= i.end) break;
    total += std::max<std::int64_t>(0, std::min(i.end, c.end) - std::max(i.begin, c.begin));
  }
  return total;
}

/// The track an operation's busy interval lies on, as shown to people.
std::string track_of(const OpEvent& e) {
  if (e.ctx.is_gpu()) {
    const bool device = e.device_started_ns >= 0;
    const char* queue = e.queue == QueueKind::kCopy ? "copy" : "compute";
    return fmt::format("{} {} {}", e.ctx.str(), queue, device ? "stream" : "worker");
  }
  return fmt::format("{} worker {}", e.ctx.str(), e.worker);
}

template <typename T>
T field(const json& e, const char* key, std::size_t index) {
  const auto it = e.find(key);
  TAGFLOW_CHECK(it != e.end(), "trace event {}: expected a \"{}\" field, got {}", index, key,
                e.dump());
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    detail::throw_error("trace event {}: the field \"{}\" has the wrong type: {}", index, key,
                        it->dump());
  }
}

std::string escape_html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

}  // namespace

profiler::Trace parse_chrome_trace(const std::string& text) {
  try {
    return parse_events(text);
  } catch (const json::exception& e) {  // a field of an unexpected type
    detail::throw_error("trace: malformed event: {}", e.what());
  }
}

namespace {

profiler::Trace parse_events(const std::string& text) {
  json root;
  try {
    root = json::parse(text);
  } catch (const json::parse_error& e) {
    detail::throw_error("trace: not JSON: {}", e.what());
  }
  TAGFLOW_CHECK(root.is_object() && root.contains("traceEvents") && root["traceEvents"].is_array(),
                "trace: expected an object with a \"traceEvents\" array (the Chrome trace format)");
  const json& events = root["traceEvents"];
  std::map<int, Context> devices;
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (e.value("ph", "") == "M" && e.value("name", "") == "process_name") {
      const int pid = field<int>(e, "pid", i);
      const std::string name = e.contains("args") ? e["args"].value("name", "") : "";
      if (pid != 0) devices[pid] = Context::parse(name);
    }
  }
  profiler::Trace trace;
  std::map<std::uint64_t, std::size_t> op_index;
  std::vector<std::pair<std::uint64_t, Interval>> device_spans;
  std::map<int, std::int64_t> allocated;  // per pid: the counter's last value
  for (std::size_t i = 0; i < events.size(); ++i) {
    const json& e = events[i];
    if (e.value("ph", "") == "C" && e.value("name", "") == "allocated bytes") {
      const int pid = field<int>(e, "pid", i);
      const auto device = devices.find(pid);
      TAGFLOW_CHECK(device != devices.end(), "trace event {}: no process is named for pid {}", i,
                    pid);
      const auto bytes = field<std::int64_t>(field<json>(e, "args", i), "bytes", i);
      std::int64_t& previous = allocated[pid];
      if (bytes != previous) {
        trace.allocations.push_back(
            {.ctx = device->second,
             .bytes = static_cast<std::uint64_t>(std::abs(bytes - previous)),
             .release = bytes < previous,
             .at_ns = to_ns(field<double>(e, "ts", i))});
      }
      previous = bytes;
      continue;
    }
    if (e.value("ph", "") != "X") continue;
    const std::string cat = e.value("cat", "");
    const json args = e.value("args", json::object());
    const auto begin = to_ns(field<double>(e, "ts", i));
    const double duration = field<double>(e, "dur", i);
    TAGFLOW_CHECK(duration >= 0, "trace event {}: expected a duration of at least 0, got {}", i,
                  duration);
    const auto end = begin + to_ns(duration);
    if (cat == "op") {
      const int pid = field<int>(e, "pid", i);
      const auto device = devices.find(pid);
      TAGFLOW_CHECK(device != devices.end(), "trace event {}: no process is named for pid {}", i,
                    pid);
      OpEvent op{.name = field<std::string>(e, "name", i),
                 .ctx = device->second,
                 .queue = args.value("queue", "compute") == "copy" ? QueueKind::kCopy
                                                                   : QueueKind::kCompute,
                 .worker = args.value("worker", 0),
                 .seq = field<std::uint64_t>(args, "seq", i),
                 .priority = args.value("priority", 0),
                 .failed = args.value("failed", false),
                 .pushed_ns = to_ns(args.value("pushed_us", 0.0)),
                 .ready_ns = to_ns(args.value("ready_us", 0.0)),
                 .started_ns = begin,
                 .ended_ns = end,
                 // Within the operation's span, whatever the file says.
                 .returned_ns = args.contains("returned_us")
                                    ? std::clamp(to_ns(args.value("returned_us", 0.0)), begin, end)
                                    : -1};
      for (const json& from : args.value("reads_from", json::array())) {
        trace.flows.push_back({from.get<std::uint64_t>(), op.seq});
      }
      op_index[op.seq] = trace.ops.size();
      trace.ops.push_back(std::move(op));
    } else if (cat == "device") {
      device_spans.push_back({field<std::uint64_t>(args, "seq", i), {begin, end}});
    } else if (cat == "wait") {
      trace.waits.push_back({.what = field<std::string>(e, "name", i),
                             .waited_for = args.value("waited_for", ""),
                             .waited_for_seq = args.value("seq", std::uint64_t{0}),
                             .thread = field<int>(e, "tid", i),
                             .started_ns = begin,
                             .ended_ns = end});
    }
  }
  for (const auto& [seq, span] : device_spans) {
    const auto op = op_index.find(seq);
    TAGFLOW_CHECK(op != op_index.end(),
                  "trace: a device span names operation {}, which is not "
                  "in the trace",
                  seq);
    trace.ops[op->second].device_started_ns = span.begin;
    trace.ops[op->second].device_ended_ns = span.end;
  }
  return trace;
}

}  // namespace

profiler::Trace read_chrome_trace(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  TAGFLOW_CHECK(in.good(), "profile: cannot open {}", path.string());
  std::ostringstream text;
  text << in.rdbuf();
  try {
    return parse_chrome_trace(text.str());
  } catch (const Error& e) {
    detail::throw_error("profile: {}: {}", path.string(), e.what());
  }
}

ProfileSummary summarize(const profiler::Trace& trace) {
  ProfileSummary s;
  if (trace.ops.empty()) return s;
  std::int64_t first = trace.ops[0].pushed_ns;
  std::int64_t last = busy(trace.ops[0]).end;
  for (const OpEvent& e : trace.ops) {
    first = std::min({first, e.pushed_ns, e.started_ns});
    last = std::max({last, e.ended_ns, busy(e).end});
  }
  s.span_us = to_us(last - first);

  std::map<std::string, OperationStats> by_name;
  std::map<Context, std::vector<Interval>> by_device;
  std::map<Context, std::vector<Interval>> in_flight;
  std::vector<Interval> compute;
  for (const OpEvent& e : trace.ops) {
    const Interval b = busy(e);
    const double us = to_us(b.end - b.begin);
    OperationStats& n = by_name[e.name];
    n.name = e.name;
    ++n.count;
    n.total_us += us;
    n.max_us = std::max(n.max_us, us);
    by_device[e.ctx].push_back(device_busy(e));
    in_flight[e.ctx];  // every device gets a row
    if (e.returned_ns >= 0 && !has_device_span(e)) {
      in_flight[e.ctx].push_back({e.returned_ns, e.ended_ns});
    }
    if (!is_copy(e)) compute.push_back(device_busy(e));
  }
  for (auto& [name, n] : by_name) {
    n.mean_us = n.total_us / static_cast<double>(n.count);
    s.operations.push_back(n);
  }
  std::sort(s.operations.begin(), s.operations.end(), [](const auto& a, const auto& b) {
    return a.total_us != b.total_us ? a.total_us > b.total_us : a.name < b.name;
  });
  for (auto& [device, intervals] : by_device) {
    const double busy_us = to_us(length(merged(intervals)));
    const double flight_us = to_us(length(merged(in_flight[device])));
    s.devices.push_back({.device = device.str(),
                         .busy_us = busy_us,
                         .busy_fraction = s.span_us > 0 ? busy_us / s.span_us : 0,
                         .in_flight_us = flight_us,
                         .in_flight_fraction = s.span_us > 0 ? flight_us / s.span_us : 0});
  }

  std::map<Context, std::array<std::vector<Interval>, 3>> kinds;  // compute, copy, communication
  for (const OpEvent& e : trace.ops) {
    auto& lists = kinds[e.ctx];
    const std::size_t kind = is_copy(e) ? 1 : (e.priority >= kCommunicationPriority ? 2 : 0);
    lists[kind].push_back(device_busy(e));
    if (e.returned_ns >= 0 && !has_device_span(e)) {
      lists[kind].push_back({e.returned_ns, e.ended_ns});  // in flight, as its kind
    }
  }
  std::vector<Interval> host_waits;
  for (const profiler::WaitEvent& w : trace.waits) host_waits.push_back({w.started_ns, w.ended_ns});
  host_waits = merged(std::move(host_waits));
  std::map<std::uint64_t, const OpEvent*> by_seq;
  for (const OpEvent& e : trace.ops) by_seq[e.seq] = &e;
  std::map<std::uint64_t, std::vector<std::uint64_t>> producers;
  for (const profiler::FlowEvent& f : trace.flows) producers[f.to_seq].push_back(f.from_seq);
  /// Whether `e` waited on a producer on another device: the one it read
  /// from that ended last.
  const auto waited_elsewhere = [&](const OpEvent& e) {
    const OpEvent* last_producer = nullptr;
    for (std::uint64_t from : producers[e.seq]) {
      const auto p = by_seq.find(from);
      if (p == by_seq.end()) continue;
      if (last_producer == nullptr || busy(*p->second).end > busy(*last_producer).end) {
        last_producer = p->second;
      }
    }
    return last_producer != nullptr && last_producer->ctx != e.ctx;
  };
  for (auto& [device, lists] : kinds) {
    const std::vector<Interval> compute_time = merged(lists[0]);
    std::vector<Interval> other = lists[1];
    other.insert(other.end(), lists[2].begin(), lists[2].end());
    std::vector<Interval> everything = other;
    everything.insert(everything.end(), lists[0].begin(), lists[0].end());
    std::int64_t overlapped = 0;
    for (const Interval& i : merged(other)) overlapped += overlap(i, compute_time);
    TimeBreakdown idle_causes;
    std::vector<const OpEvent*> own;
    for (const OpEvent& e : trace.ops) {
      if (e.ctx == device) own.push_back(&e);
    }
    const std::vector<Interval> active = merged(everything);
    std::int64_t cursor = first;
    const auto charge = [&](std::int64_t a, std::int64_t b) {  // the idle stretch [a, b)
      if (b <= a) return;
      const OpEvent* next = nullptr;  // the operation whose activity ends the stretch
      for (const OpEvent* e : own) {
        const std::int64_t begin = device_busy(*e).begin;
        if (begin >= b && (next == nullptr || begin < device_busy(*next).begin)) next = e;
      }
      const std::int64_t pushed = next != nullptr ? std::clamp(next->pushed_ns, a, b) : b;
      const std::int64_t ready = next != nullptr ? std::clamp(next->ready_ns, pushed, b) : b;
      const std::int64_t waiting = overlap({a, pushed}, host_waits);
      idle_causes.idle_host_waiting_us += to_us(waiting);
      idle_causes.idle_nothing_pushed_us += to_us(pushed - a - waiting);
      if (next != nullptr && waited_elsewhere(*next)) {
        idle_causes.idle_other_device_us += to_us(ready - pushed);
      } else {
        idle_causes.idle_dependency_us += to_us(ready - pushed);
      }
      idle_causes.idle_ready_us += to_us(b - ready);
    };
    for (const Interval& i : active) {
      charge(cursor, std::min(i.begin, last));
      cursor = std::max(cursor, i.end);
    }
    charge(cursor, last);
    s.breakdown.push_back({.device = device.str(),
                           .compute_us = to_us(length(compute_time)),
                           .copy_us = to_us(length(merged(lists[1]))),
                           .communication_us = to_us(length(merged(lists[2]))),
                           .overlapped_us = to_us(overlapped),
                           .idle_us = s.span_us - to_us(length(active)),
                           .idle_host_waiting_us = idle_causes.idle_host_waiting_us,
                           .idle_nothing_pushed_us = idle_causes.idle_nothing_pushed_us,
                           .idle_other_device_us = idle_causes.idle_other_device_us,
                           .idle_dependency_us = idle_causes.idle_dependency_us,
                           .idle_ready_us = idle_causes.idle_ready_us});
  }

  const std::vector<Interval> compute_cover = merged(compute);
  for (const OpEvent& e : trace.ops) {
    if (!is_copy(e)) continue;
    const Interval b = busy(e);
    s.copy_us += to_us(b.end - b.begin);
    s.copy_overlapped_us += to_us(overlap(b, compute_cover));
  }

  std::map<std::pair<std::string, std::string>, WaitStats> waits;
  for (const profiler::WaitEvent& w : trace.waits) {
    WaitStats& st = waits[{w.what, w.waited_for}];
    st.what = w.what;
    st.waited_for = w.waited_for;
    ++st.count;
    st.total_us += to_us(w.ended_ns - w.started_ns);
    s.wait_us += to_us(w.ended_ns - w.started_ns);
  }
  for (auto& [key, st] : waits) s.waits.push_back(st);
  std::sort(s.waits.begin(), s.waits.end(),
            [](const auto& a, const auto& b) { return a.total_us > b.total_us; });

  std::map<std::string, std::vector<const OpEvent*>> tracks;
  for (const OpEvent& e : trace.ops) tracks[track_of(e)].push_back(&e);
  for (auto& [track, ops] : tracks) {
    std::sort(ops.begin(), ops.end(), [](const OpEvent* a, const OpEvent* b) {
      return device_busy(*a).begin < device_busy(*b).begin;
    });
    const OpEvent* previous = ops[0];
    std::int64_t reach = device_busy(*ops[0]).end;
    for (const OpEvent* e : ops) {
      const Interval b = device_busy(*e);
      if (b.begin > reach) {
        s.gaps.push_back(
            {track, to_us(reach - first), to_us(b.begin - reach), previous->name, e->name});
      }
      if (b.end >= reach) {
        reach = b.end;
        previous = e;
      }
    }
  }
  std::sort(s.gaps.begin(), s.gaps.end(),
            [](const auto& a, const auto& b) { return a.length_us > b.length_us; });
  if (s.gaps.size() > 10) s.gaps.resize(10);

  const OpEvent* at = &trace.ops[0];
  for (const OpEvent& e : trace.ops) {
    if (busy(e).end > busy(*at).end) at = &e;
  }
  std::vector<std::string> path;
  while (at != nullptr) {
    const Interval b = busy(*at);
    path.push_back(fmt::format("{} #{}", at->name, at->seq));
    s.critical_path_us += to_us(b.end - b.begin);
    const OpEvent* next = nullptr;
    for (std::uint64_t from : producers[at->seq]) {
      const auto it = by_seq.find(from);
      if (it == by_seq.end()) continue;
      if (next == nullptr || busy(*it->second).end > busy(*next).end) next = it->second;
    }
    at = next;
  }
  s.critical_path.assign(path.rbegin(), path.rend());

  std::map<Context, MemoryFigures> memory;
  for (const profiler::AllocationEvent& a : trace.allocations) {
    MemoryFigures& m = memory[a.ctx];
    m.device = a.ctx.str();
    const auto bytes = static_cast<std::int64_t>(a.bytes);
    if (a.release) {
      ++m.releases;
      m.end_bytes -= bytes;
    } else {
      ++m.allocations;
      m.end_bytes += bytes;
    }
    m.peak_bytes = std::max(m.peak_bytes, m.end_bytes);
  }
  for (auto& [ctx, m] : memory) s.memory.push_back(m);
  return s;
}

void print_summary(const ProfileSummary& s) {
  fmt::print("trace span {:.1f} us\n\n", s.span_us);
  fmt::print("{:<28} {:>7} {:>12} {:>10} {:>10}\n", "operation", "count", "total us", "mean us",
             "max us");
  for (const OperationStats& o : s.operations) {
    fmt::print("{:<28} {:>7} {:>12.1f} {:>10.1f} {:>10.1f}\n", o.name, o.count, o.total_us,
               o.mean_us, o.max_us);
  }
  fmt::print("\n{:<16} {:>12} {:>6} {:>14} {:>10}\n", "device", "busy us", "busy", "in flight us",
             "in flight");
  for (const DeviceStats& d : s.devices) {
    fmt::print("{:<16} {:>12.1f} {:>5.1f}% {:>14.1f} {:>9.1f}%\n", d.device, d.busy_us,
               100 * d.busy_fraction, d.in_flight_us, 100 * d.in_flight_fraction);
  }
  fmt::print("\n{:<16} {:>12} {:>12} {:>14} {:>12} {:>12}\n", "time per device", "compute us",
             "copies us", "communication", "overlap us", "idle us");
  for (const TimeBreakdown& t : s.breakdown) {
    fmt::print("{:<16} {:>12.1f} {:>12.1f} {:>14.1f} {:>12.1f} {:>12.1f}\n", t.device, t.compute_us,
               t.copy_us, t.communication_us, t.overlapped_us, t.idle_us);
  }
  fmt::print("\n{:<16} {:>14} {:>14} {:>14} {:>14} {:>14}\n", "idle by cause", "host waiting",
             "nothing pushed", "other device", "dependency", "ready");
  for (const TimeBreakdown& t : s.breakdown) {
    fmt::print("{:<16} {:>14.1f} {:>14.1f} {:>14.1f} {:>14.1f} {:>14.1f}\n", t.device,
               t.idle_host_waiting_us, t.idle_nothing_pushed_us, t.idle_other_device_us,
               t.idle_dependency_us, t.idle_ready_us);
  }
  fmt::print("\ncopies: {:.1f} us, of which {:.1f} us ({:.1f}%) overlapped compute\n", s.copy_us,
             s.copy_overlapped_us, s.copy_us > 0 ? 100 * s.copy_overlapped_us / s.copy_us : 0.0);
  fmt::print("host threads blocked in waits: {:.1f} us\n", s.wait_us);
  for (const WaitStats& w : s.waits) {
    const std::string waited_for = !w.waited_for.empty()      ? w.waited_for
                                   : w.what == "wait_for_all" ? "(everything)"
                                                              : "(a finished operation)";
    fmt::print("  {:<14} for {:<28} {:>5}x {:>12.1f} us\n", w.what, waited_for, w.count,
               w.total_us);
  }
  fmt::print("\nlongest idle gaps:\n");
  for (const IdleGap& g : s.gaps) {
    fmt::print("  {:<28} {:>10.1f} us at {:>10.1f} us, between {} and {}\n", g.track, g.length_us,
               g.start_us, g.before, g.after);
  }
  fmt::print("\nmemory while recording:\n");
  for (const MemoryFigures& m : s.memory) {
    fmt::print("  {:<16} {:>7} blocks out, {:>7} back, peak {:>12} bytes, at the end {:>12}\n",
               m.device, m.allocations, m.releases, m.peak_bytes, m.end_bytes);
  }
  fmt::print("\ncritical path: {} operations, {:.1f} us busy ({:.1f}% of the span)\n",
             s.critical_path.size(), s.critical_path_us,
             s.span_us > 0 ? 100 * s.critical_path_us / s.span_us : 0.0);
  for (const std::string& step : s.critical_path) fmt::print("  {}\n", step);
}

std::string html_timeline(const profiler::Trace& trace) {
  std::map<std::string, std::vector<const OpEvent*>> tracks;
  std::int64_t first = 0, last = 1;
  bool any = false;
  for (const OpEvent& e : trace.ops) {
    tracks[track_of(e)].push_back(&e);
    const Interval b = busy(e);
    first =
        any ? std::min(first, std::min(e.started_ns, b.begin)) : std::min(e.started_ns, b.begin);
    last = any ? std::max(last, std::max(e.ended_ns, b.end)) : std::max(e.ended_ns, b.end);
    any = true;
  }
  for (const profiler::WaitEvent& w : trace.waits) {
    first = any ? std::min(first, w.started_ns) : w.started_ns;
    last = std::max(last, w.ended_ns);
    any = true;
  }
  constexpr double kWidth = 1600, kLabel = 220, kRow = 22;
  const double scale =
      (kWidth - kLabel) / static_cast<double>(std::max<std::int64_t>(1, last - first));
  std::map<int, bool> threads;
  for (const profiler::WaitEvent& w : trace.waits) threads[w.thread] = true;
  const double height = kRow * static_cast<double>(tracks.size() + threads.size() + 1);

  std::string out = fmt::format(
      "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>tagflow trace</title>\n"
      "<style>body{{font:13px sans-serif;margin:16px}} rect.op:hover{{stroke:#000}} "
      "text{{font:12px monospace}}</style></head><body>\n"
      "<h1>tagflow trace</h1><p>{} operations, {} waits, {:.1f} us. Hover a box for its name "
      "and times.</p>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\n",
      trace.ops.size(), trace.waits.size(), to_us(last - first), kWidth, height);
  auto color = [](const std::string& name) {
    return fmt::format("hsl({},60%,60%)", std::hash<std::string>{}(name) % 360);
  };
  double y = 0;
  for (const auto& [track, ops] : tracks) {
    out += fmt::format("<text x=\"4\" y=\"{}\">{}</text>\n", y + 15, escape_html(track));
    for (const OpEvent* e : ops) {
      const Interval b = busy(*e);
      out += fmt::format(
          "<rect class=\"op\" data-seq=\"{}\" x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" "
          "height=\"{}\" fill=\"{}\"><title>{} #{}: {:.1f} us at {:.1f} us (pushed {:.1f}, "
          "ready {:.1f})</title></rect>\n",
          e->seq, kLabel + static_cast<double>(b.begin - first) * scale, y + 3,
          std::max(1.0, static_cast<double>(b.end - b.begin) * scale), kRow - 6, color(e->name),
          escape_html(e->name), e->seq, to_us(b.end - b.begin), to_us(b.begin - first),
          to_us(e->pushed_ns - first), to_us(e->ready_ns - first));
    }
    y += kRow;
  }
  for (const auto& [thread, unused] : threads) {
    out += fmt::format("<text x=\"4\" y=\"{}\">host thread {}</text>\n", y + 15, thread);
    for (const profiler::WaitEvent& w : trace.waits) {
      if (w.thread != thread) continue;
      out += fmt::format(
          "<rect class=\"wait\" x=\"{:.2f}\" y=\"{}\" width=\"{:.2f}\" height=\"{}\" "
          "fill=\"#bbb\"><title>{} for {}: {:.1f} us</title></rect>\n",
          kLabel + static_cast<double>(w.started_ns - first) * scale, y + 3,
          std::max(1.0, static_cast<double>(w.ended_ns - w.started_ns) * scale), kRow - 6,
          escape_html(w.what), escape_html(w.waited_for.empty() ? "everything" : w.waited_for),
          to_us(w.ended_ns - w.started_ns));
    }
    y += kRow;
  }
  out += "</svg>\n</body></html>\n";
  return out;
}

void run_profile(const std::filesystem::path& trace_file, const std::filesystem::path& html_file) {
  const profiler::Trace trace = read_chrome_trace(trace_file);
  print_summary(summarize(trace));
  std::ofstream out(html_file, std::ios::binary | std::ios::trunc);
  TAGFLOW_CHECK(out.good(), "profile: cannot open {} for writing", html_file.string());
  out << html_timeline(trace);
  out.close();
  TAGFLOW_CHECK(out.good(), "profile: writing {} failed", html_file.string());
  fmt::print("\ntimeline: {}\n", html_file.string());
}

}  // namespace tagflow::tools
