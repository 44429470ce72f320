#include "tools/profile_page.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <string_view>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "tools/profile_page_assets.h"

namespace tagflow::tools {

namespace {

using nlohmann::json;
using profiler::OpEvent;
/// An operation of one process of the trace.
using SeqKey = std::pair<int, std::uint64_t>;

std::string escape_html(const std::string& text) {
  std::string out;
  out.reserve(text.size());
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

/// JSON inside a <script> element: "</script" or "<!--" in a name must not
/// end or change it, so no '<' is left (JSON escapes it as \u003c).
std::string script_safe(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (char c : json_text) {
    if (c == '<') {
      out += "\\u003c";
    } else {
      out += c;
    }
  }
  return out;
}

/// Where a track sits among its device's rows: streams before workers,
/// compute before copy, workers in order.
std::tuple<Place, int, int, int> track_order(const OpEvent& e) {
  if (!e.ctx.is_gpu()) return {Place{e.process, e.ctx}, 0, 0, e.worker};  // one row per worker
  const int queue = e.queue == QueueKind::kCopy ? 1 : 0;
  const int stream = e.device_started_ns >= 0 ? 0 : 1;
  return {Place{e.process, e.ctx}, queue, stream, 0};
}

/// A step series: `deltas` at their times, summed in time order.
json counter(const std::string& name, const std::string& unit,
             std::vector<std::pair<std::int64_t, std::int64_t>> deltas) {
  std::stable_sort(deltas.begin(), deltas.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  json t = json::array(), v = json::array();
  std::int64_t value = 0;
  for (std::size_t i = 0; i < deltas.size(); ++i) {
    value += deltas[i].second;
    if (i + 1 < deltas.size() && deltas[i + 1].first == deltas[i].first) continue;
    t.push_back(deltas[i].first);
    v.push_back(value);
  }
  return {{"name", name}, {"unit", unit}, {"t", t}, {"v", v}};
}

/// The page's data (Note [The profile page]).
json page_data(const profiler::Trace& trace, const ProfileSummary& summary,
               const std::string& title, std::map<SeqKey, std::size_t>& index_of_seq) {
  std::int64_t first = 0, last = 0;
  bool any = false;
  const auto extend = [&](std::int64_t begin, std::int64_t end) {
    first = any ? std::min(first, begin) : begin;
    last = any ? std::max(last, end) : end;
    any = true;
  };
  for (const OpEvent& e : trace.ops) {
    const BusyInterval b = busy_interval(e);
    extend(std::min({e.pushed_ns, e.started_ns, b.begin_ns}), std::max(e.ended_ns, b.end_ns));
  }
  for (const profiler::WaitEvent& w : trace.waits) extend(w.started_ns, w.ended_ns);
  for (const profiler::AllocationEvent& a : trace.allocations) extend(a.at_ns, a.at_ns);
  // Times count from where the text report's span starts (its "at" times
  // read on the axis); waits or allocations before it are negative.
  const std::int64_t extent_begin = first, extent_end = last;
  if (!trace.ops.empty()) first = summary.start_ns;

  // Tracks in device order, each device's in track_order.
  std::map<std::tuple<Place, int, int, int>, std::string> track_names;
  for (const OpEvent& e : trace.ops) track_names.emplace(track_order(e), track_of(trace, e));
  std::map<Place, int> device_index;
  for (const auto& [key, name] : track_names) device_index.emplace(std::get<0>(key), 0);
  for (const profiler::AllocationEvent& a : trace.allocations) {
    device_index.emplace(Place{a.process, a.ctx}, 0);
  }
  json tracks = json::array(), devices = json::array();
  for (auto& [place, index] : device_index) {  // in process, then device, order
    index = static_cast<int>(devices.size());
    devices.push_back(device_name(trace, place));
  }
  std::map<std::string, int> track_index;
  for (const auto& [key, name] : track_names) {
    if (track_index.emplace(name, static_cast<int>(tracks.size())).second) {
      tracks.push_back({{"name", name}, {"device", device_index[std::get<0>(key)]}});
    }
  }

  std::map<std::string, int> name_index;
  json names = json::array();
  const auto name_of = [&](const std::string& name) {
    const auto [it, added] = name_index.emplace(name, static_cast<int>(names.size()));
    if (added) names.push_back(name);
    return it->second;
  };
  const std::vector<const char*> fields = {"track",  "name",  "seq",   "kind",   "device", "prio",
                                           "failed", "begin", "end",   "ret",    "push",   "ready",
                                           "start",  "stop",  "queue", "worker", "process"};
  std::map<std::string, json> ops;
  for (const char* f : fields) ops[f] = json::array();
  for (std::size_t i = 0; i < trace.ops.size(); ++i) {
    const OpEvent& e = trace.ops[i];
    const BusyInterval b = busy_interval(e);
    index_of_seq[{e.process, e.seq}] = i;
    ops["track"].push_back(track_index.at(track_of(trace, e)));
    ops["name"].push_back(name_of(e.name));
    ops["seq"].push_back(e.seq);
    ops["kind"].push_back(static_cast<int>(kind_of(e)));
    ops["device"].push_back(device_index.at({e.process, e.ctx}));
    ops["prio"].push_back(e.priority);
    ops["failed"].push_back(e.failed ? 1 : 0);
    ops["begin"].push_back(b.begin_ns - first);
    ops["end"].push_back(b.end_ns - first);
    // The time in flight: only where the busy interval is the closure's.
    const bool in_flight = e.returned_ns >= 0 && e.device_started_ns < 0;
    ops["ret"].push_back(in_flight ? e.returned_ns - first : -1);
    ops["push"].push_back(e.pushed_ns - first);
    ops["ready"].push_back(e.ready_ns - first);
    ops["start"].push_back(e.started_ns - first);
    ops["stop"].push_back(e.ended_ns - first);
    ops["queue"].push_back(e.queue == QueueKind::kCopy ? 1 : 0);
    ops["worker"].push_back(e.worker);
    ops["process"].push_back(e.process);
  }

  json flows = {{"from", json::array()}, {"to", json::array()}};
  for (const profiler::FlowEvent& f : trace.flows) {
    const auto from = index_of_seq.find({f.process, f.from_seq});
    const auto to = index_of_seq.find({f.process, f.to_seq});
    if (from == index_of_seq.end() || to == index_of_seq.end()) continue;
    flows["from"].push_back(from->second);
    flows["to"].push_back(to->second);
  }

  std::map<std::pair<int, int>, int> thread_index;  // (process, thread)
  json threads = json::array();
  json waits = {{"thread", json::array()}, {"begin", json::array()}, {"end", json::array()},
                {"what", json::array()},   {"for", json::array()},   {"label", json::array()}};
  for (const profiler::WaitEvent& w : trace.waits)
    thread_index.emplace(std::pair{w.process, w.thread}, 0);
  for (auto& [key, index] : thread_index) {
    index = static_cast<int>(threads.size());
    const auto process = static_cast<std::size_t>(key.first);
    threads.push_back(process < trace.processes.size()
                          ? fmt::format("{} host thread {}", trace.processes[process], key.second)
                          : fmt::format("host thread {}", key.second));
  }
  for (const profiler::WaitEvent& w : trace.waits) {
    const auto op = index_of_seq.find({w.process, w.waited_for_seq});
    const bool known = !w.waited_for.empty() && op != index_of_seq.end();
    waits["thread"].push_back(thread_index.at({w.process, w.thread}));
    waits["begin"].push_back(w.started_ns - first);
    waits["end"].push_back(w.ended_ns - first);
    waits["what"].push_back(w.what);
    waits["for"].push_back(known ? static_cast<std::int64_t>(op->second) : -1);
    waits["label"].push_back(!w.waited_for.empty()      ? w.waited_for
                             : w.what == "wait_for_all" ? "everything"
                                                        : "a finished operation");
  }

  // Counters per device: memory in use, and operations ready but not started.
  json counters = json::array();
  std::map<Place, std::vector<std::pair<std::int64_t, std::int64_t>>> memory, queued;
  for (const profiler::AllocationEvent& a : trace.allocations) {
    const auto bytes = static_cast<std::int64_t>(a.bytes);
    memory[{a.process, a.ctx}].push_back({a.at_ns - first, a.release ? -bytes : bytes});
  }
  for (const OpEvent& e : trace.ops) {
    const std::int64_t ready = std::min(e.ready_ns, e.started_ns);
    queued[{e.process, e.ctx}].push_back({ready - first, 1});
    queued[{e.process, e.ctx}].push_back({e.started_ns - first, -1});
  }
  for (const auto& [place, index] : device_index) {
    const std::string device = device_name(trace, place);
    if (memory.count(place)) {
      counters.push_back(counter(device + " memory", "bytes", memory[place]));
      counters.back()["device"] = index;
      counters.back()["kind"] = "allocation";
    }
    if (queued.count(place)) {
      counters.push_back(counter(device + " ready, not started", "operations", queued[place]));
      counters.back()["device"] = index;
      counters.back()["kind"] = "queue";
    }
  }

  json critical = json::array();
  for (const CriticalStep& step : summary.critical_path) {
    const auto op = index_of_seq.find({step.process, step.seq});
    if (op != index_of_seq.end()) critical.push_back(op->second);
  }
  json breakdown = json::array();
  for (const TimeBreakdown& t : summary.breakdown) {
    breakdown.push_back({{"device", t.device},
                         {"compute_us", t.compute_us},
                         {"copy_us", t.copy_us},
                         {"communication_us", t.communication_us},
                         {"overlapped_us", t.overlapped_us},
                         {"idle_us", t.idle_us}});
  }
  json op_columns = json::object();
  for (auto& [field, column] : ops) op_columns[field] = std::move(column);
  return {{"title", title},
          {"extent_begin_ns", any ? extent_begin - first : 0},
          {"extent_end_ns", any ? extent_end - first : 0},
          {"span_us", summary.span_us},
          {"operation_devices", summary.devices.size()},
          {"processes", trace.processes},
          {"devices", devices},
          {"tracks", tracks},
          {"threads", threads},
          {"names", names},
          {"ops", op_columns},
          {"flows", flows},
          {"waits", waits},
          {"counters", counters},
          {"critical", critical},
          {"breakdown", breakdown}};
}

/// The figure tables as HTML; a critical path stretch's row names its first
/// operation's index in the data, so that clicking it selects it.
std::string figures_html(const std::vector<FigureTable>& tables, const ProfileSummary& summary,
                         const std::map<SeqKey, std::size_t>& index_of_seq) {
  const std::vector<CriticalStretch> stretches = critical_stretches(summary.critical_path);
  std::string out;
  for (const FigureTable& table : tables) {
    out += fmt::format("<div class=\"figure\" id=\"figure-{}\"><h3>{}</h3>\n", table.id,
                       escape_html(table.title));
    if (table.id == "breakdown") out += "<div id=\"breakdown-bars\"></div>\n";
    out += fmt::format("<table data-figure=\"{}\"><thead><tr>", table.id);
    for (std::size_t c = 0; c < table.columns.size(); ++c) {
      out += fmt::format("<th{}>{}</th>", table.numeric[c] ? "" : " class=\"text\"",
                         escape_html(table.columns[c]));
    }
    out += "</tr></thead><tbody>\n";
    for (std::size_t r = 0; r < table.rows.size(); ++r) {
      std::string attributes;
      if (table.id == "critical-path" && r < stretches.size()) {
        const CriticalStep& step = summary.critical_path[stretches[r].first];
        const auto op = index_of_seq.find({step.process, step.seq});
        if (op != index_of_seq.end()) attributes = fmt::format(" data-op=\"{}\"", op->second);
      } else if (table.id == "operations" || table.id == "critical-operations") {
        attributes = fmt::format(" data-name=\"{}\"", escape_html(table.rows[r][0]));
      }
      out += fmt::format("<tr{}>", attributes);
      for (std::size_t c = 0; c < table.rows[r].size(); ++c) {
        out += fmt::format("<td{}>{}</td>", table.numeric[c] ? "" : " class=\"text\"",
                           escape_html(table.rows[r][c]));
      }
      out += "</tr>\n";
    }
    out += "</tbody></table></div>\n";
  }
  return out;
}

constexpr const char* kKinds[][2] = {{"compute", "Compute"},
                                     {"copy", "Copies"},
                                     {"communication", "Communication"},
                                     {"wait", "Host waits"},
                                     {"allocation", "Memory"}};

}  // namespace

std::string profile_page(const profiler::Trace& trace, const ProfileSummary& summary,
                         const PageText& text) {
  const std::string& title = text.title;
  std::map<SeqKey, std::size_t> index_of_seq;
  const json data = page_data(trace, summary, title, index_of_seq);
  std::string legend;
  for (const auto& [kind, label] : kKinds) {
    legend += fmt::format(
        "<label class=\"legend-item\" data-kind=\"{0}\"><input type=\"checkbox\" checked> "
        "<span class=\"swatch kind-{0}\"></span>{1}</label>\n",
        kind, label);
  }
  std::string out;
  out += "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n";
  out += fmt::format("<title>tagflow profile: {}</title>\n", escape_html(title));
  out += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<style>\n";
  out += assets::profile_page_css();
  out += "</style></head><body>\n<header><h1>tagflow profile <span class=\"file\">";
  out += escape_html(title);
  out += "</span></h1><p id=\"headline\"></p>";
  if (!text.note.empty()) out += "<p id=\"note\">" + escape_html(text.note) + "</p>";
  out += "</header>\n";
  out += "<div id=\"toolbar\"><div id=\"legend\">\n" + legend + "</div>\n";
  out +=
      "<input id=\"search\" type=\"search\" placeholder=\"Search operations ( / )\" "
      "autocomplete=\"off\"><span id=\"search-count\"></span>\n"
      "<button id=\"critical-path-toggle\" type=\"button\" aria-pressed=\"false\">Critical "
      "path</button>\n<button id=\"reset-view\" type=\"button\">Whole run</button>\n"
      "<span id=\"axis-range\"></span></div>\n"
      "<p class=\"help\">Wheel or W/S: zoom (over the row names: scroll). Drag or A/D: pan. "
      "Click: select, and see what it read and who read it. F: fit the selection. Esc: clear. "
      "Search: a name in quotes matches exactly.</p>\n"
      "<div id=\"minimap-wrap\"><canvas id=\"minimap\"></canvas></div>\n"
      "<div id=\"main\"><div id=\"timeline-column\"><canvas id=\"axis\"></canvas>\n"
      "<div id=\"timeline\"><canvas></canvas></div><div id=\"tooltip\" hidden></div></div>\n"
      "<aside id=\"details\"><h2 id=\"details-name\">Nothing selected</h2>\n"
      "<p class=\"hint\" id=\"details-hint\">Click an operation on the timeline.</p>\n"
      "<dl id=\"details-fields\"></dl>\n"
      "<h3>Reads the results of</h3><ul id=\"details-producers\"></ul>\n"
      "<h3>Its results are read by</h3><ul id=\"details-consumers\"></ul>\n"
      "<h3>Host waits on it</h3><ul id=\"details-waits\"></ul></aside></div>\n";
  out += "<section id=\"figures\"><h2>Figures</h2>\n";
  out += figures_html(text.tables.empty() ? figure_tables(summary) : text.tables, summary,
                      index_of_seq);
  out += "</section>\n<script type=\"application/json\" id=\"tagflow-data\">";
  out += script_safe(data.dump(-1, ' ', false, json::error_handler_t::replace));
  out += "</script>\n<script>\n(function () {\n\"use strict\";\n";
  for (std::string_view part : {assets::profile_page_data_js(), assets::profile_page_drawing_js(),
                                assets::profile_page_interaction_js()}) {
    out += part;
  }
  out += "})();\n</script>\n</body></html>\n";
  return out;
}

void write_profile_page(const profiler::Trace& trace, const ProfileSummary& summary,
                        const PageText& text, const std::filesystem::path& path) {
  const std::string page = profile_page(trace, summary, text);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  TAGFLOW_CHECK(out.good(), "profile: cannot open {} for writing", path.string());
  out << page;
  out.close();
  TAGFLOW_CHECK(out.good(), "profile: writing {} failed", path.string());
}

}  // namespace tagflow::tools
