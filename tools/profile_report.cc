#include "tools/profile_report.h"

#include <algorithm>
#include <array>
#include <cctype>
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
#include "tools/profile_merge.h"
#include "tools/profile_page.h"

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

/// Length of `i` inside the disjoint, sorted `cover` (whose ends are sorted
/// too: the first that can overlap is found by bisection).
std::int64_t overlap(const Interval& i, const std::vector<Interval>& cover) {
  std::int64_t total = 0;
  const auto first = std::partition_point(cover.begin(), cover.end(),
                                          [&](const Interval& c) { return c.end <= i.begin; });
  for (auto it = first; it != cover.end(); ++it) {
    const Interval& c = *it;
    if (c.begin >= i.end) break;
    total += std::max<std::int64_t>(0, std::min(i.end, c.end) - std::max(i.begin, c.begin));
  }
  return total;
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

}  // namespace

BusyInterval busy_interval(const OpEvent& e) {
  const Interval b = busy(e);
  return {b.begin, b.end};
}

std::string device_name(const profiler::Trace& trace, const Place& place) {
  const auto process = static_cast<std::size_t>(place.first);
  if (trace.processes.empty()) return place.second.str();
  const std::string name =
      process < trace.processes.size() ? trace.processes[process] : fmt::format("#{}", process);
  return name + " " + place.second.str();
}

std::string track_of(const profiler::Trace& trace, const OpEvent& e) {
  const std::string device = device_name(trace, {e.process, e.ctx});
  if (e.ctx.is_gpu()) {
    const bool stream = e.device_started_ns >= 0;
    const char* queue = e.queue == QueueKind::kCopy ? "copy" : "compute";
    return fmt::format("{} {} {}", device, queue, stream ? "stream" : "worker");
  }
  return fmt::format("{} worker {}", device, e.worker);
}

OpKind kind_of(const OpEvent& e) {
  // A gradient sum is communication on whichever queue it runs.
  if (e.priority >= kCommunicationPriority) return OpKind::kCommunication;
  return is_copy(e) ? OpKind::kCopy : OpKind::kCompute;
}

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
  if (root.contains("otherData") && root["otherData"].is_object() &&
      root["otherData"].contains("tagflow")) {
    const json& o = root["otherData"]["tagflow"];
    TAGFLOW_CHECK(o.is_object(), "trace: expected otherData.tagflow to be an object, got {}",
                  o.dump());
    // Integers within ±2^62, so that aligning traces cannot overflow.
    const auto integer = [&](const char* key, std::int64_t otherwise) {
      if (!o.contains(key)) return otherwise;
      const json& v = o[key];
      TAGFLOW_CHECK(v.is_number_integer() && v.get<std::int64_t>() > -(std::int64_t{1} << 62) &&
                        v.get<std::int64_t>() < (std::int64_t{1} << 62),
                    "trace: expected otherData.tagflow.{} to be an integer within 2^62, got {}",
                    key, v.dump());
      return v.get<std::int64_t>();
    };
    const auto string_field = [&](const char* key) {
      if (!o.contains(key)) return std::string();
      TAGFLOW_CHECK(o[key].is_string(),
                    "trace: expected otherData.tagflow.{} to be a string, got {}", key,
                    o[key].dump());
      return o[key].get<std::string>();
    };
    trace.origin = {
        .host = string_field("host"),
        .boot_id = string_field("boot_id"),
        .steady_epoch_ns = integer("steady_epoch_ns", 0),
        .sync_ns = integer("sync_ns", -1),
        .rank = static_cast<int>(std::clamp<std::int64_t>(integer("rank", 0), 0, 1 << 20)),
        .ranks = static_cast<int>(std::clamp<std::int64_t>(integer("ranks", 1), 1, 1 << 20)),
        .device_model = string_field("device_model")};
  }
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

namespace {

/// Host waits, by call and what they waited for.
void add_waits(const profiler::Trace& trace, ProfileSummary& s) {
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
}

/// Memory handed out per device.
void add_memory(const profiler::Trace& trace, ProfileSummary& s) {
  std::map<Place, MemoryFigures> memory;
  for (const profiler::AllocationEvent& a : trace.allocations) {
    MemoryFigures& m = memory[{a.process, a.ctx}];
    m.device = device_name(trace, {a.process, a.ctx});
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
}

}  // namespace

ProfileSummary summarize(const profiler::Trace& trace) {
  ProfileSummary s;
  s.device_model = trace.origin.device_model;
  if (trace.ops.empty()) {  // no span, no device time: what waits and memory there are
    add_waits(trace, s);
    add_memory(trace, s);
    return s;
  }
  std::int64_t first = trace.ops[0].pushed_ns;
  std::int64_t last = busy(trace.ops[0]).end;
  for (const OpEvent& e : trace.ops) {
    first = std::min({first, e.pushed_ns, e.started_ns});
    last = std::max({last, e.ended_ns, busy(e).end});
  }
  s.start_ns = first;
  s.span_us = to_us(last - first);

  std::map<std::string, OperationStats> by_name;
  std::map<Place, std::vector<Interval>> by_device;
  std::map<Place, std::vector<Interval>> in_flight;
  std::vector<Interval> compute;
  for (const OpEvent& e : trace.ops) {
    const Interval b = busy(e);
    const double us = to_us(b.end - b.begin);
    OperationStats& n = by_name[e.name];
    n.name = e.name;
    ++n.count;
    n.total_us += us;
    n.max_us = std::max(n.max_us, us);
    const Place place{e.process, e.ctx};
    by_device[place].push_back(device_busy(e));
    in_flight[place];  // every device gets a row
    if (e.returned_ns >= 0 && !has_device_span(e)) {
      in_flight[place].push_back({e.returned_ns, e.ended_ns});
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
    s.devices.push_back({.device = device_name(trace, device),
                         .busy_us = busy_us,
                         .busy_fraction = s.span_us > 0 ? busy_us / s.span_us : 0,
                         .in_flight_us = flight_us,
                         .in_flight_fraction = s.span_us > 0 ? flight_us / s.span_us : 0});
  }

  std::map<Place, std::array<std::vector<Interval>, 3>> kinds;  // compute, copy, communication
  for (const OpEvent& e : trace.ops) {
    auto& lists = kinds[{e.process, e.ctx}];
    const auto kind = static_cast<std::size_t>(kind_of(e));
    lists[kind].push_back(device_busy(e));
    if (e.returned_ns >= 0 && !has_device_span(e)) {
      lists[kind].push_back({e.returned_ns, e.ended_ns});  // in flight, as its kind
    }
  }
  std::map<int, std::vector<Interval>> host_waits;  // per process
  for (const profiler::WaitEvent& w : trace.waits) {
    host_waits[w.process].push_back({w.started_ns, w.ended_ns});
  }
  for (auto& [process, waits] : host_waits) waits = merged(std::move(waits));
  using SeqKey = std::pair<int, std::uint64_t>;  // seqs count per process
  std::map<SeqKey, const OpEvent*> by_seq;
  for (const OpEvent& e : trace.ops) by_seq[{e.process, e.seq}] = &e;
  std::map<SeqKey, std::vector<SeqKey>> producers;
  for (const profiler::FlowEvent& f : trace.flows) {
    producers[{f.process, f.to_seq}].push_back({f.process, f.from_seq});
  }
  /// Whether `e` waited on a producer on another device: the one it read
  /// from that ended last.
  const auto waited_elsewhere = [&](const OpEvent& e) {
    const OpEvent* last_producer = nullptr;
    for (const SeqKey& from : producers[{e.process, e.seq}]) {
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
    const std::vector<Interval> communication = merged(lists[2]);
    std::int64_t communication_overlapped = 0;
    for (const Interval& i : communication) communication_overlapped += overlap(i, compute_time);
    TimeBreakdown idle_causes;
    std::vector<const OpEvent*> own;  // by the start of their activity
    for (const OpEvent& e : trace.ops) {
      if (Place{e.process, e.ctx} == device) own.push_back(&e);
    }
    std::stable_sort(own.begin(), own.end(), [](const OpEvent* x, const OpEvent* y) {
      return device_busy(*x).begin < device_busy(*y).begin;
    });
    const std::vector<Interval> active = merged(everything);
    const std::vector<Interval>& own_host_waits = host_waits[device.first];  // its process's
    std::int64_t cursor = first;
    const auto charge = [&](std::int64_t a, std::int64_t b) {  // the idle stretch [a, b)
      if (b <= a) return;
      // The operation whose activity ends the stretch: the first to start at
      // or after its end.
      const auto found = std::partition_point(
          own.begin(), own.end(), [&](const OpEvent* e) { return device_busy(*e).begin < b; });
      const OpEvent* next = found != own.end() ? *found : nullptr;
      const std::int64_t pushed = next != nullptr ? std::clamp(next->pushed_ns, a, b) : b;
      const std::int64_t ready = next != nullptr ? std::clamp(next->ready_ns, pushed, b) : b;
      const std::int64_t waiting = overlap({a, pushed}, own_host_waits);
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
    s.breakdown.push_back({.device = device_name(trace, device),
                           .compute_us = to_us(length(compute_time)),
                           .copy_us = to_us(length(merged(lists[1]))),
                           .communication_us = to_us(length(communication)),
                           .overlapped_us = to_us(overlapped),
                           .communication_overlapped_us = to_us(communication_overlapped),
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

  add_waits(trace, s);

  std::map<std::string, std::vector<const OpEvent*>> tracks;
  for (const OpEvent& e : trace.ops) tracks[track_of(trace, e)].push_back(&e);
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

  s.critical_path = critical_path(trace);
  for (const CriticalStep& step : s.critical_path) {
    s.critical_path_us += step.busy_us;
    s.critical_path_waited_us += step.waited_us;
  }

  add_memory(trace, s);
  return s;
}

namespace {

std::string us(double value) { return fmt::format("{:.1f}", value); }
std::string percent(double part, double whole) {
  return fmt::format("{:.1f}%", whole > 0 ? 100 * part / whole : 0.0);
}

/// "12", "-3.5", "+45.2%", "3.0 us".
bool is_number(const std::string& cell) {
  std::size_t i = cell.size() > 0 && (cell[0] == '-' || cell[0] == '+') ? 1 : 0;
  std::size_t digits = 0;
  for (; i < cell.size() && ((cell[i] >= '0' && cell[i] <= '9') || cell[i] == '.'); ++i) {
    digits += cell[i] != '.' ? 1 : 0;
  }
  if (digits == 0) return false;
  if (i == cell.size() || (cell[i] == '%' && i + 1 == cell.size())) return true;
  if (cell[i] != ' ' || i + 1 == cell.size()) return false;
  for (++i; i < cell.size(); ++i) {
    if (!std::isalpha(static_cast<unsigned char>(cell[i]))) return false;
  }
  return true;
}

}  // namespace

void mark_numeric_columns(FigureTable& table) {
  table.numeric.assign(table.columns.size(), true);
  for (std::size_t c = 0; c < table.columns.size(); ++c) {
    for (const auto& row : table.rows) table.numeric[c] = table.numeric[c] && is_number(row[c]);
  }
}

namespace {}  // namespace

std::vector<FigureTable> figure_tables(const ProfileSummary& s) {
  std::vector<FigureTable> tables;
  tables.push_back({.id = "summary", .title = "Summary", .columns = {"figure", "value"}});
  std::int64_t operations = 0;
  for (const OperationStats& o : s.operations) operations += o.count;
  tables.back().rows = {
      {"times", s.device_model.empty()
                    ? std::string("measured")
                    : "predicted by the device model " + s.device_model + ", not measured"},
      {"trace span", us(s.span_us) + " us"},
      {"operations", std::to_string(operations)},
      {"copies", fmt::format("{} us, {} us ({}) overlapped compute", us(s.copy_us),
                             us(s.copy_overlapped_us), percent(s.copy_overlapped_us, s.copy_us))},
      {"host threads blocked in waits", us(s.wait_us) + " us"},
      {"critical path",
       fmt::format("{} operations, {} us busy ({} of the span), {} us between them",
                   s.critical_path.size(), us(s.critical_path_us),
                   percent(s.critical_path_us, s.span_us), us(s.critical_path_waited_us))}};

  tables.push_back(
      {.id = "devices",
       .title = "Devices: their workers busy, and operations in flight",
       .columns = {"device", "worker busy us", "worker busy", "in flight us", "in flight"}});
  for (const DeviceStats& d : s.devices) {
    tables.back().rows.push_back({d.device, us(d.busy_us), percent(d.busy_us, s.span_us),
                                  us(d.in_flight_us), percent(d.in_flight_us, s.span_us)});
  }

  tables.push_back({.id = "breakdown",
                    .title = "Time per device",
                    .columns = {"device", "compute us", "copies us", "communication us",
                                "overlap us", "idle us", "idle"}});
  for (const TimeBreakdown& t : s.breakdown) {
    tables.back().rows.push_back({t.device, us(t.compute_us), us(t.copy_us), us(t.communication_us),
                                  us(t.overlapped_us), us(t.idle_us),
                                  percent(t.idle_us, s.span_us)});
  }

  tables.push_back({.id = "idle",
                    .title = "Idle time by cause",
                    .columns = {"device", "host waiting us", "nothing pushed us", "other device us",
                                "dependency us", "ready us"}});
  for (const TimeBreakdown& t : s.breakdown) {
    tables.back().rows.push_back({t.device, us(t.idle_host_waiting_us),
                                  us(t.idle_nothing_pushed_us), us(t.idle_other_device_us),
                                  us(t.idle_dependency_us), us(t.idle_ready_us)});
  }

  tables.push_back({.id = "critical-path",
                    .title = "Critical path, by stretch of one track",
                    .columns = {"steps", "track", "from", "to", "at us", "busy us", "share",
                                "waited us", "released by"}});
  for (const CriticalStretch& stretch : critical_stretches(s.critical_path)) {
    const CriticalStep& first = s.critical_path[stretch.first];
    const CriticalStep& last = s.critical_path[stretch.first + stretch.count - 1];
    double busy_us = 0, waited_us = 0;
    for (std::size_t i = 0; i < stretch.count; ++i) {
      busy_us += s.critical_path[stretch.first + i].busy_us;
      waited_us += s.critical_path[stretch.first + i].waited_us;
    }
    std::string released_by = "its push";
    if (stretch.first > 0) {
      const CriticalStep& before = s.critical_path[stretch.first - 1];
      released_by =
          first.gate == CriticalGate::kHostWait
              ? fmt::format("a host wait for {} #{}", before.name, before.seq)
              : fmt::format("the result of {} #{} ({})", before.name, before.seq, before.track);
    }
    tables.back().rows.push_back(
        {std::to_string(stretch.count), first.track, fmt::format("{} #{}", first.name, first.seq),
         fmt::format("{} #{}", last.name, last.seq), us(to_us(first.begin_ns - s.start_ns)),
         us(busy_us), percent(busy_us, s.span_us), us(waited_us), released_by});
  }

  tables.push_back({.id = "critical-operations",
                    .title = "Critical path, by operation",
                    .columns = {"operation", "device", "steps", "busy us", "share"}});
  {
    std::map<std::pair<std::string, std::string>, std::pair<std::int64_t, double>> by_name;
    for (const CriticalStep& step : s.critical_path) {
      auto& [count, busy_us] = by_name[{step.name, step.device}];
      ++count;
      busy_us += step.busy_us;
    }
    std::vector<std::vector<std::string>> rows;
    std::vector<std::pair<double, std::size_t>> order;
    for (const auto& [key, figures] : by_name) {
      order.emplace_back(-figures.second, rows.size());
      rows.push_back({key.first, key.second, std::to_string(figures.first), us(figures.second),
                      percent(figures.second, s.span_us)});
    }
    std::stable_sort(order.begin(), order.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [negative_busy, row] : order) tables.back().rows.push_back(rows[row]);
  }

  tables.push_back({.id = "operations",
                    .title = "Operations by total time",
                    .columns = {"operation", "count", "total us", "mean us", "max us"}});
  for (const OperationStats& o : s.operations) {
    tables.back().rows.push_back(
        {o.name, std::to_string(o.count), us(o.total_us), us(o.mean_us), us(o.max_us)});
  }

  tables.push_back({.id = "waits",
                    .title = "Host threads blocked in waits",
                    .columns = {"wait", "for", "count", "total us"}});
  for (const WaitStats& w : s.waits) {
    const std::string waited_for = !w.waited_for.empty()      ? w.waited_for
                                   : w.what == "wait_for_all" ? "(everything)"
                                                              : "(a finished operation)";
    tables.back().rows.push_back({w.what, waited_for, std::to_string(w.count), us(w.total_us)});
  }

  tables.push_back({.id = "gaps",
                    .title = "Longest idle gaps",
                    .columns = {"track", "length us", "at us", "after", "before"}});
  for (const IdleGap& g : s.gaps) {
    tables.back().rows.push_back({g.track, us(g.length_us), us(g.start_us), g.before, g.after});
  }

  tables.push_back({.id = "memory",
                    .title = "Memory while recording",
                    .columns = {"device", "blocks out", "blocks back", "highest net bytes",
                                "net bytes at the end"}});
  for (const MemoryFigures& m : s.memory) {
    tables.back().rows.push_back({m.device, std::to_string(m.allocations),
                                  std::to_string(m.releases), std::to_string(m.peak_bytes),
                                  std::to_string(m.end_bytes)});
  }
  for (FigureTable& table : tables) mark_numeric_columns(table);
  return tables;
}

std::string format_summary(const ProfileSummary& summary) {
  return format_tables(figure_tables(summary));
}

std::string format_tables(const std::vector<FigureTable>& tables) {
  std::string out;
  for (const FigureTable& table : tables) {
    std::vector<std::size_t> width(table.columns.size());
    for (std::size_t c = 0; c < width.size(); ++c) width[c] = table.columns[c].size();
    for (const auto& row : table.rows) {
      for (std::size_t c = 0; c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
    }
    const auto line = [&](const std::vector<std::string>& cells) {
      std::string text = " ";
      for (std::size_t c = 0; c < cells.size(); ++c) {
        text += c == 0 ? " " : "  ";
        text += table.numeric[c] ? fmt::format("{:>{}}", cells[c], width[c])
                                 : fmt::format("{:<{}}", cells[c], width[c]);
      }
      while (!text.empty() && text.back() == ' ') text.pop_back();
      out += text + "\n";
    };
    out += (out.empty() ? "" : "\n") + table.title + "\n";
    line(table.columns);
    for (const auto& row : table.rows) line(row);
  }
  return out;
}

void run_profile(const std::vector<std::filesystem::path>& trace_files,
                 const std::filesystem::path& html_file) {
  std::vector<std::filesystem::path> files;
  for (const std::filesystem::path& file : trace_files) {
    for (const std::filesystem::path& found : tools::trace_files(file)) files.push_back(found);
  }
  TAGFLOW_CHECK(!files.empty(), "profile: expected at least one trace");
  std::vector<profiler::Trace> traces;
  for (const std::filesystem::path& file : files) traces.push_back(read_chrome_trace(file));
  std::string title = files[0].filename().string();
  std::string note;
  profiler::Trace trace;
  if (traces.size() == 1) {
    trace = std::move(traces[0]);
  } else {
    // Ranks of one run are named by rank; other files by their names; a
    // name twice gets the file's place in the list.
    std::vector<std::string> names;
    for (std::size_t i = 0; i < traces.size(); ++i) {
      const profiler::Origin& o = traces[i].origin;
      names.push_back(o.ranks > 1 ? fmt::format("rank {}", o.rank) : files[i].stem().string());
      if (o.ranks > 1 &&
          (o.ranks != static_cast<int>(traces.size()) || o.rank != static_cast<int>(i))) {
        fmt::print(stderr,
                   "profile: warning: {} says it is rank {} of {}, but it is trace {} of the {} "
                   "given: files of another run?\n",
                   files[i].string(), o.rank, o.ranks, i, traces.size());
      }
    }
    std::map<std::string, int> uses;
    for (const std::string& name : names) ++uses[name];
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (uses[names[i]] > 1) names[i] += fmt::format(" ({})", i);
    }
    MergedTrace merged = merge_traces(std::move(traces), names, Alignment::kSameRun);
    note = fmt::format("{} processes on one timeline, aligned {}", files.size(), merged.alignment);
    title = fmt::format("{} and {} more", title, files.size() - 1);
    trace = std::move(merged.trace);
    fmt::print("{}\n\n", note);
  }
  const ProfileSummary summary = summarize(trace);
  fmt::print("{}", format_summary(summary));
  write_profile_page(trace, summary, {.title = title, .note = note}, html_file);
  fmt::print("\npage: {}\n", html_file.string());
}

}  // namespace tagflow::tools
