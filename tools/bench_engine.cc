#include "tools/bench_engine.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

#include <fmt/format.h>

#include "tagflow/tagflow.h"

namespace tagflow::tools {

namespace {

constexpr int kVars = 1024;

/// One operation of a workload: the cell it mutates, the (0..2) it reads.
struct BenchOp {
  std::uint32_t write;
  std::uint32_t reads[2];
  std::uint32_t num_reads;
};

std::vector<BenchOp> make_workload(const std::string& name, long n) {
  std::vector<BenchOp> ops(static_cast<std::size_t>(n));
  std::mt19937_64 gen(42);
  for (long i = 0; i < n; ++i) {
    BenchOp& op = ops[static_cast<std::size_t>(i)];
    op.num_reads = 0;
    if (name == "indep") {
      op.write = static_cast<std::uint32_t>(i % kVars);
    } else if (name == "chain") {
      op.write = 0;
    } else if (name == "readers") {
      if (i == 0) {
        op.write = 0;
      } else {
        op.write = static_cast<std::uint32_t>(1 + i % (kVars - 1));
        op.reads[op.num_reads++] = 0;
      }
    } else {  // random: r1, r2, w drawn in that order; reads form a set without w
      const auto r1 = static_cast<std::uint32_t>(gen() % kVars);
      const auto r2 = static_cast<std::uint32_t>(gen() % kVars);
      op.write = static_cast<std::uint32_t>(gen() % kVars);
      if (r1 != op.write) op.reads[op.num_reads++] = r1;
      if (r2 != op.write && r2 != r1) op.reads[op.num_reads++] = r2;
    }
  }
  return ops;
}

inline void apply(std::uint64_t* cells, const BenchOp& op, std::uint64_t i) {
  std::uint64_t sum = 0;
  for (std::uint32_t k = 0; k < op.num_reads; ++k) sum += cells[op.reads[k]];
  cells[op.write] = cells[op.write] * 31 + sum + i;
}

std::vector<std::uint64_t> serial_result(const std::vector<BenchOp>& ops) {
  std::vector<std::uint64_t> cells(kVars);
  for (int v = 0; v < kVars; ++v)
    cells[static_cast<std::size_t>(v)] = static_cast<std::uint64_t>(v);
  for (std::size_t i = 0; i < ops.size(); ++i) apply(cells.data(), ops[i], i);
  return cells;
}

struct RunResult {
  double seconds;
  bool ok;
};

RunResult run_once(Engine& engine, const std::vector<BenchOp>& ops,
                   const std::vector<std::uint64_t>& expected) {
  std::vector<std::uint64_t> cells(kVars);
  for (int v = 0; v < kVars; ++v)
    cells[static_cast<std::size_t>(v)] = static_cast<std::uint64_t>(v);
  std::vector<VarHandle> vars(kVars);
  for (auto& v : vars) v = engine.new_var();
  // Start the worker pool outside the timed region.
  engine.push({.name = "warm-up", .ctx = cpu(0), .fn = [](const RunContext&) {}});
  engine.wait_for_all();

  std::uint64_t* data = cells.data();
  const auto start = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < ops.size(); ++i) {
    const BenchOp& op = ops[i];
    VarList reads;
    for (std::uint32_t k = 0; k < op.num_reads; ++k) reads.push_back(vars[op.reads[k]]);
    // Built in place as the argument, the way an application writes it.
    engine.push({.name = "bench",
                 .ctx = cpu(0),
                 .reads = std::move(reads),
                 .writes = {vars[op.write]},
                 .fn = [data, op, i](const RunContext&) { apply(data, op, i); }});
  }
  engine.wait_for_all();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (VarHandle v : vars) engine.delete_var(v);
  engine.wait_for_all();
  return {seconds, cells == expected};
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

const std::vector<std::string>& engine_workloads() {
  static const std::vector<std::string> names = {"indep", "chain", "readers", "random"};
  return names;
}

bool run_engine_bench(const EngineBenchOptions& options, const EngineConfig& base) {
  EngineConfig config = base;
  config.kind = options.engine;
  if (options.workers > 0) config.cpu_workers = options.workers;

  struct Row {
    std::string workload;
    double ops_per_s, best, worst;
    bool ok;
  };
  std::vector<Row> rows;
  bool all_ok = true;
  for (const std::string& name : options.workloads) {
    const std::vector<BenchOp> ops = make_workload(name, options.ops);
    const std::vector<std::uint64_t> expected = serial_result(ops);
    std::vector<double> rates;
    bool ok = true;
    for (int r = 0; r < options.runs; ++r) {
      auto engine = make_engine(config);
      const RunResult result = run_once(*engine, ops, expected);
      ok = ok && result.ok;
      rates.push_back(static_cast<double>(options.ops) / result.seconds);
    }
    const auto [lo, hi] = std::minmax_element(rates.begin(), rates.end());
    rows.push_back({name, median(rates), *hi, *lo, ok});
    all_ok = all_ok && ok;
    fmt::print(
        "{{\"bench\":\"engine\",\"workload\":\"{}\",\"engine\":\"{}\",\"ops\":{},\"workers\":{},"
        "\"runs\":{},\"ops_per_s\":{:.0f},\"ops_per_s_min\":{:.0f},\"ops_per_s_max\":{:.0f},"
        "\"ok\":{}}}\n",
        name, to_string(config.kind), options.ops, config.cpu_workers, options.runs, median(rates),
        *lo, *hi, ok ? "true" : "false");
    std::fflush(stdout);
  }
  fmt::print("\n{:<10} {:>16} {:>12} {:>12}  {}\n", "workload", "median Mops/s", "min", "max",
             "verified");
  for (const Row& row : rows) {
    fmt::print("{:<10} {:>16.2f} {:>12.2f} {:>12.2f}  {}\n", row.workload, row.ops_per_s / 1e6,
               row.worst / 1e6, row.best / 1e6, row.ok ? "yes" : "NO: result differs");
  }
  fmt::print("({} engine, {} worker(s) on cpu(0), {} ops, median of {} runs)\n",
             to_string(config.kind), config.cpu_workers, options.ops, options.runs);
  return all_ok;
}

}  // namespace tagflow::tools
