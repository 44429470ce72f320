#include "tools/profile_compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "tools/profile_merge.h"
#include "tools/profile_page.h"

namespace tagflow::tools {

ProfileComparison compare(const ProfileSummary& a, const ProfileSummary& b) {
  ProfileComparison c{.a = a, .b = b, .operations = {}};
  std::map<std::string, OperationChange> by_name;
  for (const OperationStats& o : a.operations) {
    OperationChange& change = by_name[o.name];
    change.name = o.name;
    change.count_a = o.count;
    change.total_a_us = o.total_us;
    change.mean_a_us = o.mean_us;
  }
  for (const OperationStats& o : b.operations) {
    OperationChange& change = by_name[o.name];
    change.name = o.name;
    change.count_b = o.count;
    change.total_b_us = o.total_us;
    change.mean_b_us = o.mean_us;
  }
  for (auto& [name, change] : by_name) c.operations.push_back(change);
  std::stable_sort(c.operations.begin(), c.operations.end(),
                   [](const OperationChange& x, const OperationChange& y) {
                     return std::abs(x.total_b_us - x.total_a_us) >
                            std::abs(y.total_b_us - y.total_a_us);
                   });
  return c;
}

namespace {

/// "+12.5%", "-3.0%", or "new" / "gone" / "" where a side is zero.
std::string relative_change(double a, double b) {
  if (a == 0 && b == 0) return "";
  if (a == 0) return "new";
  if (b == 0) return "gone";
  return fmt::format("{:+.1f}%", 100 * (b - a) / a);
}

double percent_of(double part, double whole) { return whole > 0 ? 100 * part / whole : 0.0; }

}  // namespace

std::vector<FigureTable> comparison_tables(const ProfileComparison& c) {
  std::vector<FigureTable> tables;
  tables.push_back({.id = "comparison",
                    .title = "Figures of A and B",
                    .columns = {"figure", "A", "B", "change"}});
  const auto row = [&](const std::string& what, double x, double y, const char* unit) {
    tables.back().rows.push_back({what, fmt::format("{:.1f} {}", x, unit),
                                  fmt::format("{:.1f} {}", y, unit), relative_change(x, y)});
  };
  row("trace span", c.a.span_us, c.b.span_us, "us");
  std::map<std::string, std::pair<double, double>> busy;
  for (const DeviceStats& d : c.a.devices) busy[d.device].first = 100 * d.busy_fraction;
  for (const DeviceStats& d : c.b.devices) busy[d.device].second = 100 * d.busy_fraction;
  for (const auto& [device, fractions] : busy) {
    row(device + " busy", fractions.first, fractions.second, "%");
  }
  row("copies", c.a.copy_us, c.b.copy_us, "us");
  row("copies overlapping compute", percent_of(c.a.copy_overlapped_us, c.a.copy_us),
      percent_of(c.b.copy_overlapped_us, c.b.copy_us), "%");
  row("host threads blocked in waits", c.a.wait_us, c.b.wait_us, "us");
  row("critical path", c.a.critical_path_us, c.b.critical_path_us, "us");
  row("critical path, share of the span", percent_of(c.a.critical_path_us, c.a.span_us),
      percent_of(c.b.critical_path_us, c.b.span_us), "%");

  tables.push_back({.id = "operation-changes",
                    .title = "Operations, the largest change of total time first",
                    .columns = {"operation", "count A", "count B", "total A us", "total B us",
                                "change", "mean A us", "mean B us"}});
  for (const OperationChange& o : c.operations) {
    tables.back().rows.push_back(
        {o.name, std::to_string(o.count_a), std::to_string(o.count_b),
         fmt::format("{:.1f}", o.total_a_us), fmt::format("{:.1f}", o.total_b_us),
         relative_change(o.total_a_us, o.total_b_us), fmt::format("{:.1f}", o.mean_a_us),
         fmt::format("{:.1f}", o.mean_b_us)});
  }
  for (FigureTable& table : tables) mark_numeric_columns(table);
  return tables;
}

std::string format_comparison(const ProfileComparison& c, const std::string& a_name,
                              const std::string& b_name) {
  return fmt::format("A: {}\nB: {}\n\n", a_name, b_name) + format_tables(comparison_tables(c));
}

void run_profile_comparison(const std::filesystem::path& a, const std::filesystem::path& b,
                            const std::filesystem::path& html_file) {
  profiler::Trace trace_a = read_chrome_trace(a);
  profiler::Trace trace_b = read_chrome_trace(b);
  const ProfileComparison c = compare(summarize(trace_a), summarize(trace_b));
  fmt::print("{}", format_comparison(c, a.string(), b.string()));
  if (html_file.empty()) return;
  // Both runs on one page, each from its first event: A's devices, then B's.
  std::vector<profiler::Trace> traces;
  traces.push_back(std::move(trace_a));
  traces.push_back(std::move(trace_b));
  const MergedTrace merged = merge_traces(std::move(traces), {"A", "B"}, Alignment::kStarts);
  ProfileSummary summary = summarize(merged.trace);
  summary.critical_path.clear();  // each run has its own: in the tables
  // Each run's device figures from its own summary (its own span), the
  // devices named as on the timeline.
  std::vector<FigureTable> tables = comparison_tables(c);
  const std::vector<FigureTable> of_a = figure_tables(c.a), of_b = figure_tables(c.b);
  for (std::size_t t = 0; t < of_a.size(); ++t) {
    const std::string& id = of_a[t].id;
    if (id != "devices" && id != "breakdown" && id != "idle" && id != "memory") continue;
    FigureTable table = of_a[t];
    table.rows.clear();
    for (const auto& [run, source] : {std::pair{"A ", &of_a[t]}, std::pair{"B ", &of_b[t]}}) {
      for (std::vector<std::string> row : source->rows) {
        row[0] = run + row[0];
        table.rows.push_back(std::move(row));
      }
    }
    mark_numeric_columns(table);
    tables.push_back(std::move(table));
  }
  write_profile_page(
      merged.trace, summary,
      {.title = fmt::format("{} against {}", a.filename().string(), b.filename().string()),
       .note = fmt::format("A: {}; B: {}; each from its first event", a.string(), b.string()),
       .tables = std::move(tables)},
      html_file);
  fmt::print("\npage: {}\n", html_file.string());
}

}  // namespace tagflow::tools
