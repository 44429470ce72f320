#include "tools/bench_ops.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>

#include <cblas.h>
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

/// A float32 matrix product of `size` x `size` matrices on cpu(0), through
/// tagflow (`dot`, then a wait) and through the BLAS called directly on the
/// same memory.
Row gemm(const OpsBenchOptions& o) {
  const std::int64_t n = o.gemm_size;
  NDArray a = random::uniform(-1, 1, {n, n}, std::uint64_t{1});
  NDArray b = random::uniform(-1, 1, {n, n}, std::uint64_t{2});
  NDArray c = zeros({n, n});
  c.wait_to_read();
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  const auto blas_n = static_cast<blasint>(n);
  auto through_tagflow = [&] {
    c = dot(a, b);
    c.wait_to_read();
  };
  NDArray direct_out = zeros({n, n});
  direct_out.wait_to_read();
  float* pc = direct_out.data<float>();
  auto direct = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_n, blas_n, blas_n, 1.f, pa, blas_n,
                pb, blas_n, 0.f, pc, blas_n);
  };
  // Warm-up, then the two alternate run by run, so that drifts of the
  // machine (frequency, neighbours) weigh on both alike.
  through_tagflow();
  direct();
  std::vector<double> tagflow_rates;
  std::vector<double> direct_rates;
  for (int run = 0; run < o.runs; ++run) {
    auto start = Clock::now();
    through_tagflow();
    tagflow_rates.push_back(flops / seconds_since(start) / 1e9);
    start = Clock::now();
    direct();
    direct_rates.push_back(flops / seconds_since(start) / 1e9);
  }
  const double through = median(tagflow_rates);
  const double blas = median(direct_rates);
  const double ratio = through / blas;
  fmt::print(
      "{{\"bench\":\"ops\",\"case\":\"gemm\",\"device\":\"cpu(0)\",\"size\":{},\"runs\":{},"
      "\"gflops\":{:.1f},\"blas_gflops\":{:.1f},\"ratio\":{:.3f},\"blas\":\"{}\"}}\n",
      n, o.runs, through, blas, ratio, openblas_get_config());
  return {"gemm", fmt::format("{:.1f} GFLOP/s", through),
          fmt::format("{0}x{0} float32 on cpu(0); OpenBLAS direct {1:.1f} GFLOP/s, ratio {2:.3f}",
                      n, blas, ratio),
          true};
}

/// The tutorials' exercise: `products` products of 100x100 matrices, the
/// Frobenius norm of each logged to the host at once (a wait per product)
/// against logged on the device and copied once at the end.
Row sync_log(const OpsBenchOptions& o) {
  NDArray x = random::uniform(-0.1, 0.1, {100, 100}, std::uint64_t{3}, o.device);
  auto each = [&] {
    std::vector<float> log;
    for (int i = 0; i < o.products; ++i) log.push_back(norm(dot(x, x)).asscalar<float>());
    return log;
  };
  auto once = [&] {
    std::vector<NDArray> log;
    for (int i = 0; i < o.products; ++i) log.push_back(norm(dot(x, x)));
    return concat(log).to_vector<float>();
  };
  std::vector<double> each_s;
  std::vector<double> once_s;
  bool ok = true;
  for (int run = 0; run < o.runs; ++run) {
    auto start = Clock::now();
    const std::vector<float> a = each();
    each_s.push_back(seconds_since(start));
    start = Clock::now();
    const std::vector<float> b = once();
    once_s.push_back(seconds_since(start));
    ok = ok && a == b;
  }
  const double t_each = median(each_s);
  const double t_once = median(once_s);
  fmt::print(
      "{{\"bench\":\"ops\",\"case\":\"sync-log\",\"device\":\"{}\",\"products\":{},"
      "\"runs\":{},\"sync_each_s\":{:.4f},\"copy_once_s\":{:.4f},\"ratio\":{:.2f},\"ok\":{}}}\n",
      o.device.str(), o.products, o.runs, t_each, t_once, t_each / t_once, ok);
  return {"sync-log", fmt::format("{:.2f}x", t_each / t_once),
          fmt::format("{} products 100x100 on {}: norm to host each time {:.1f} ms, log on "
                      "device and copy once {:.1f} ms",
                      o.products, o.device.str(), t_each * 1e3, t_once * 1e3),
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
    if (name == "gemm") rows.push_back(gemm(options));
    if (name == "sync-log") rows.push_back(sync_log(options));
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
