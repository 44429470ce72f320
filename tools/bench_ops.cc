#include "tools/bench_ops.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>

#include <cblas.h>
#include <fmt/format.h>

#ifdef TAGFLOW_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#endif

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

/// GFLOP/s of `product`, a `flops` product: the median of `runs` after a warm-up.
template <typename Product>
double rate(const OpsBenchOptions& o, double flops, const Product& product) {
  product();
  std::vector<double> rates;
  for (int run = 0; run < o.runs; ++run) {
    const auto start = Clock::now();
    product();
    rates.push_back(flops / seconds_since(start) / 1e9);
  }
  return median(rates);
}

/// Matrix products of `size` x `size` matrices on cpu(0) through tagflow
/// (`dot`, then a wait) in each floating-point dtype, and in float32 through
/// the libraries called directly on the same memory, each with its own
/// threads: the best this machine's libraries do.
std::vector<Row> gemm(const OpsBenchOptions& o) {
  const std::int64_t n = o.gemm_size;
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  NDArray a = random::uniform(-1, 1, {n, n}, std::uint64_t{1});
  NDArray b = random::uniform(-1, 1, {n, n}, std::uint64_t{2});
  NDArray direct_out = zeros({n, n});
  direct_out.wait_to_read();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* pc = direct_out.data<float>();
  const auto blas_n = static_cast<blasint>(n);
  const double openblas = rate(o, flops, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, blas_n, blas_n, blas_n, 1.f, pa, blas_n,
                pb, blas_n, 0.f, pc, blas_n);
  });
  double onednn = 0;
#ifdef TAGFLOW_HAVE_ONEDNN
  onednn = rate(o, flops, [&] {
    const dnnl_status_t status = dnnl_sgemm('N', 'N', n, n, n, 1.f, pa, n, pb, n, 0.f, pc, n);
    TAGFLOW_CHECK(status == dnnl_success, "bench ops: dnnl_sgemm failed with status {}",
                  static_cast<int>(status));
  });
#endif
  const double best = std::max(openblas, onednn);
  std::string kernels;
  for (const auto& [name, value] : cpu_kernel_libraries()) {
    if (name == "matrix products") kernels = value;
  }
  std::vector<Row> rows;
  for (DType dtype : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    const NDArray x = a.astype(dtype);
    const NDArray y = b.astype(dtype);
    NDArray c;
    const double through = rate(o, flops, [&] {
      c = dot(x, y);
      c.wait_to_read();
    });
    const double ratio = through / best;
    fmt::print(
        "{{\"bench\":\"ops\",\"case\":\"gemm\",\"device\":\"cpu(0)\",\"dtype\":\"{}\","
        "\"size\":{},\"runs\":{},\"gflops\":{:.1f},\"openblas_gflops\":{:.1f},"
        "\"onednn_gflops\":{:.1f},\"ratio\":{:.3f},\"kernels\":\"{}\",\"openblas\":\"{}\"}}\n",
        dtype_name(dtype), n, o.runs, through, openblas, onednn, ratio, kernels,
        openblas_get_config());
    rows.push_back(
        {fmt::format("gemm {}", dtype_name(dtype)), fmt::format("{:.1f} GFLOP/s", through),
         dtype == DType::kFloat32
             ? fmt::format("{0}x{0} on cpu(0), {1}; float32 called directly with their own "
                           "threads: OpenBLAS {2:.1f}, oneDNN {3:.1f} GFLOP/s; ratio to the "
                           "best {4:.3f}",
                           n, kernels, openblas, onednn, ratio)
             : fmt::format("{0}x{0} on cpu(0); ratio to the best float32 {1:.3f}", n, ratio),
         true});
  }
  return rows;
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

/// A 100x100 permutation matrix: products with it keep values exact and
/// bounded, and cost what dense products cost.
NDArray permutation(Context ctx) {
  std::vector<float> p(100 * 100, 0.f);
  for (int i = 0; i < 100; ++i) p[static_cast<std::size_t>(i * 100 + (i * 37 + 11) % 100)] = 1.f;
  return array(p, {100, 100}, ctx);
}

/// `steps` dependent products x = x p on `ctx` (a chain: one after the
/// other on any device, as on a GPU's stream); returns x, not waited for.
NDArray chain(NDArray x, const NDArray& p, int steps) {
  for (int i = 0; i < steps; ++i) x = dot(x, p);
  return x;
}

/// The tutorials' scaling exercise: two chains of products, one after the
/// other on one device, against one on each of two devices at once.
Row scaling(const OpsBenchOptions& o) {
  const bool gpus = num_gpus() >= 2;
  const Context a = gpus ? gpu(0) : cpu(0);
  const Context b = gpus ? gpu(1) : cpu(1);
  const int half = std::max(1, o.products / 2);
  const NDArray xa = random::uniform(-1, 1, {100, 100}, std::uint64_t{4}, a);
  const NDArray xb = random::uniform(-1, 1, {100, 100}, std::uint64_t{5}, a);
  const NDArray pa = permutation(a);
  const NDArray pb = permutation(b);
  const NDArray xb_on_b = xb.copyto(b);
  xb_on_b.wait_to_read();
  std::vector<double> one_s;
  std::vector<double> two_s;
  bool ok = true;
  for (int run = 0; run < o.runs; ++run) {
    auto start = Clock::now();
    const NDArray r1 = chain(xa, pa, half);
    const NDArray r2 = chain(xb, pa, half);
    r1.wait_to_read();
    r2.wait_to_read();
    one_s.push_back(seconds_since(start));
    start = Clock::now();
    const NDArray s1 = chain(xa, pa, half);
    const NDArray s2 = chain(xb_on_b, pb, half);
    s1.wait_to_read();
    s2.wait_to_read();
    two_s.push_back(seconds_since(start));
    ok = ok && r1.to_vector<float>() == s1.to_vector<float>() &&
         r2.to_vector<float>() == s2.to_vector<float>();
  }
  const double t_one = median(one_s);
  const double t_two = median(two_s);
  const bool simulated = gpus && !is_real_gpu(a);
  const std::string devices = a.str() + " and " + b.str() +
                              (!gpus       ? " (sharing the cores)"
                               : simulated ? " (simulated: sharing the cores)"
                                           : "");
  fmt::print(
      "{{\"bench\":\"ops\",\"case\":\"scaling\",\"devices\":\"{} {}\",\"products\":{},"
      "\"runs\":{},\"one_device_s\":{:.4f},\"two_devices_s\":{:.4f},\"speedup\":{:.2f},"
      "\"ok\":{}}}\n",
      a.str(), b.str(), 2 * half, o.runs, t_one, t_two, t_one / t_two, ok);
  return {"scaling", fmt::format("{:.2f}x", t_one / t_two),
          fmt::format("2 chains of {} products 100x100: on {} one after the other {:.1f} ms, on {} "
                      "at once {:.1f} ms",
                      half, a.str(), t_one * 1e3, devices, t_two * 1e3),
          ok};
}

/// A large float32 product on cpu(0) and on every GPU present.
std::vector<Row> cpu_vs_gpu(const OpsBenchOptions& o) {
  std::vector<Context> devices = {cpu(0)};
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  const std::int64_t n = o.gemm_size;
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  const std::vector<float> first = [&] {
    NDArray a = random::uniform(-1, 1, {n, n}, std::uint64_t{6});
    return dot(a, a).to_vector<float>();
  }();
  std::vector<Row> rows;
  for (Context ctx : devices) {
    NDArray a = random::uniform(-1, 1, {n, n}, std::uint64_t{6}, ctx);
    NDArray c = dot(a, a);  // warm-up (and cuBLAS handles, pools)
    c.wait_to_read();
    std::vector<double> seconds;
    for (int run = 0; run < o.runs; ++run) {
      const auto start = Clock::now();
      c = dot(a, a);
      c.wait_to_read();
      seconds.push_back(seconds_since(start));
    }
    const bool simulated = ctx.is_gpu() && !is_real_gpu(ctx);
    // The same kernels on the CPU and simulated GPUs give the same bits; a
    // real GPU's sums differ in the last places.
    const std::vector<float> got = c.to_vector<float>();
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      worst = std::max(worst, std::abs(static_cast<double>(got[i]) - first[i]) /
                                  (1.0 + std::abs(static_cast<double>(first[i]))));
    }
    const bool ok = worst <= 1e-3;
    const double t = median(seconds);
    const std::string label = ctx.str() + (simulated ? " (simulated: the CPU kernels)" : "");
    fmt::print(
        "{{\"bench\":\"ops\",\"case\":\"cpu-vs-gpu\",\"device\":\"{}\",\"simulated\":{},"
        "\"size\":{},\"runs\":{},\"seconds\":{:.5f},\"gflops\":{:.1f},\"ok\":{}}}\n",
        ctx.str(), simulated, n, o.runs, t, flops / t / 1e9, ok);
    rows.push_back({"cpu-vs-gpu", fmt::format("{:.1f} GFLOP/s", flops / t / 1e9),
                    fmt::format("{0}x{0} float32 on {1}: {2:.2f} ms", n, label, t * 1e3), ok});
  }
  return rows;
}

}  // namespace

const std::vector<std::string>& ops_bench_cases() {
  static const std::vector<std::string> names = {"small-add", "gemm", "sync-log", "scaling",
                                                 "cpu-vs-gpu"};
  return names;
}

bool run_ops_bench(const OpsBenchOptions& options) {
  std::vector<Row> rows;
  for (const std::string& name : options.cases) {
    if (name == "small-add") rows.push_back(small_add(options));
    if (name == "gemm") {
      for (Row& row : gemm(options)) rows.push_back(std::move(row));
    }
    if (name == "sync-log") rows.push_back(sync_log(options));
    if (name == "scaling") rows.push_back(scaling(options));
    if (name == "cpu-vs-gpu") {
      for (Row& row : cpu_vs_gpu(options)) rows.push_back(std::move(row));
    }
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
