#include "tools/bench_ops.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <fmt/format.h>

#include "tagflow/tagflow.h"

namespace tagflow::tools {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Row {
  std::string name;
  std::string figure;  ///< the headline, formatted for the table
  std::string detail;
  bool ok = true;
};

/// `c = a + b` on 4 elements, `ops` times, then one wait: the per-operation
/// cost of the whole stack.
Row small_add(const OpsBenchOptions& o) {
  NDArray a = array({1, 2, 3, 4}, o.device);
  NDArray b = array({10, 20, 30, 40}, o.device);
  NDArray c;
  std::vector<double> us_per_op;
  for (int run = 0; run < o.runs; ++run) {
    const auto start = Clock::now();
    for (long i = 0; i < o.small_ops; ++i) c = a + b;
    c.wait_to_read();
    us_per_op.push_back(seconds_since(start) / static_cast<double>(o.small_ops) * 1e6);
  }
  const bool ok = c.to_vector<float>() == std::vector<float>{11, 22, 33, 44};
  const auto [lo, hi] = std::minmax_element(us_per_op.begin(), us_per_op.end());
  fmt::print(
      "{{\"bench\":\"ops\",\"case\":\"small-add\",\"device\":\"{}\",\"ops\":{},\"runs\":{},"
      "\"us_per_op\":{:.3f},\"us_per_op_min\":{:.3f},\"us_per_op_max\":{:.3f},\"ok\":{}}}\n",
      o.device.str(), o.small_ops, o.runs, median(us_per_op), *lo, *hi, ok);
  return {"small-add", fmt::format("{:.3f} us/op", median(us_per_op)),
          fmt::format("4-element c = a + b on {}, {} ops, range {:.3f}-{:.3f}", o.device.str(),
                      o.small_ops, *lo, *hi),
          ok};
}

}  // namespace

const std::vector<std::string>& ops_bench_cases() {
  static const std::vector<std::string> names = {"small-add", "gemm", "sync-log"};
  return names;
}

bool run_ops_bench(const OpsBenchOptions& options) {
  std::vector<Row> rows;
  for (const std::string& name : options.cases) {
    if (name == "small-add") rows.push_back(small_add(options));
    std::fflush(stdout);
  }
  fmt::print("\n{:<10} {:>22}  {}\n", "case", "median", "what");
  bool all_ok = true;
  for (const Row& row : rows) {
    fmt::print("{:<10} {:>22}  {}{}\n", row.name, row.figure, row.detail,
               row.ok ? "" : "  WRONG RESULT");
    all_ok = all_ok && row.ok;
  }
  fmt::print("(median of {} runs)\n", options.runs);
  return all_ok;
}

}  // namespace tagflow::tools
