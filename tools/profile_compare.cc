#include "tools/profile_compare.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

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

std::string format_comparison(const ProfileComparison& c, const std::string& a_name,
                              const std::string& b_name) {
  std::string out = fmt::format("A: {}\nB: {}\n\n", a_name, b_name);
  out += fmt::format("{:<34} {:>14} {:>14} {:>9}\n", "figure", "A", "B", "change");
  const auto row = [&](const std::string& what, double x, double y, const char* unit) {
    out += fmt::format("{:<34} {:>12.1f}{:2} {:>12.1f}{:2} {:>9}\n", what, x, unit, y, unit,
                       relative_change(x, y));
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
  out += fmt::format("\n{:<28} {:>7} {:>7} {:>12} {:>12} {:>9} {:>10} {:>10}\n", "operation",
                     "count A", "count B", "total A us", "total B us", "change", "mean A us",
                     "mean B us");
  for (const OperationChange& o : c.operations) {
    out += fmt::format("{:<28} {:>7} {:>7} {:>12.1f} {:>12.1f} {:>9} {:>10.1f} {:>10.1f}\n", o.name,
                       o.count_a, o.count_b, o.total_a_us, o.total_b_us,
                       relative_change(o.total_a_us, o.total_b_us), o.mean_a_us, o.mean_b_us);
  }
  return out;
}

void run_profile_comparison(const std::filesystem::path& a, const std::filesystem::path& b) {
  const ProfileComparison c =
      compare(summarize(read_chrome_trace(a)), summarize(read_chrome_trace(b)));
  fmt::print("{}", format_comparison(c, a.string(), b.string()));
}

}  // namespace tagflow::tools
