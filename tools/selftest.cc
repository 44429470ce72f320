#include "tools/selftest.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <random>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tagflow/dist.h"
#include "tagflow/tagflow.h"
#include "tools/selftest_cases.h"

namespace tagflow::tools {

namespace {

/// Elements of each input whose gradient is compared with central
/// differences (evenly spaced), and the tolerance of that comparison:
/// |analytic - numeric| <= kGradientTolerance * max(1, |numeric|).
constexpr std::size_t kGradientSamples = 8;
constexpr double kGradientTolerance = 2e-3;

std::vector<Context> operator_devices(const SelftestOptions& options) {
  if (!options.devices.empty()) return options.devices;
  std::vector<Context> devices{cpu(0)};
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  return devices;
}

/// Every device copies go between: two CPU devices, pinned host memory and
/// the GPUs.
std::vector<Context> copy_devices() {
  std::vector<Context> devices{cpu(0), cpu(1), cpu_pinned(0)};
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  return devices;
}

std::vector<float> uniform(std::mt19937_64& rng, std::int64_t n, double low, double high) {
  std::uniform_real_distribution<double> dist(low, high);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = static_cast<float>(dist(rng));
  return v;
}

/// How far `got` is from `expected`, as a multiple of what `tolerance`
/// allows (exact equality when the tolerance is 0); NaN is infinitely far.
double error_ratio(double got, double expected, double tolerance) {
  if (std::isnan(got) != std::isnan(expected)) return std::numeric_limits<double>::infinity();
  if (std::isnan(got) || got == expected) return 0;
  if (tolerance == 0) return std::numeric_limits<double>::infinity();
  return std::abs(got - expected) / (tolerance * (1 + std::abs(expected)));
}

std::string shapes_text(const std::vector<Shape>& shapes) {
  std::string text;
  for (const Shape& s : shapes) text += (text.empty() ? "(" : ", (") + s.str() + ")";
  return text;
}

/// One trial of `c` on `ctx`: forward against the reference and, when the
/// case has one, every input's gradient against central differences.
void check_trial(const OperatorCase& c, Context ctx, std::mt19937_64& rng, SelftestResult& result) {
  const std::vector<Shape> shapes = c.shapes(rng);
  std::vector<std::vector<double>> x;
  std::vector<NDArray> inputs;
  for (const Shape& s : shapes) {
    std::vector<float> values = uniform(rng, s.size(), c.low, c.high);
    if (is_half(c.dtype)) {  // the inputs the operator will see, for the reference too
      for (float& v : values) {
        v = c.dtype == DType::kFloat16 ? static_cast<float>(Half(v))
                                       : static_cast<float>(BFloat16(v));
      }
    }
    x.emplace_back(values.begin(), values.end());
    inputs.push_back(array(values, s, ctx));
    if (c.gradient) inputs.back().attach_grad();
  }
  NDArray out;
  std::vector<float> projection;
  {
    auto recording = autograd::record();
    out = c.run(inputs);
    projection = uniform(rng, out.size(), -1, 1);
    if (c.gradient) sum(out * array(projection, out.shape(), ctx)).backward();
  }
  const std::string where = fmt::format("inputs {}", shapes_text(shapes));
  TAGFLOW_CHECK(out.context() == ctx, "the result is on {}, expected {}", out.context().str(),
                ctx.str());
  const Values expected = c.reference(x, shapes);
  const std::vector<float> got =
      (out.dtype() == DType::kFloat32 ? out : out.astype(DType::kFloat32)).to_vector<float>();
  TAGFLOW_CHECK(got.size() == expected.size(), "{}: {} values, the reference has {}", where,
                got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double ratio = error_ratio(got[i], expected[i], c.tolerance);
    if (ratio > result.worst) result.worst = ratio;
    if (ratio > 1 && result.passed) {
      result.passed = false;
      result.detail =
          fmt::format("{}: element {} is {}, expected {}", where, i, got[i], expected[i]);
    }
  }
  if (!c.gradient) return;
  for (std::size_t input = 0; input < inputs.size(); ++input) {
    const std::vector<float> grad = inputs[input].grad().to_vector<float>();
    std::vector<double>& xi = x[input];
    const std::size_t stride = std::max<std::size_t>(1, xi.size() / kGradientSamples);
    for (std::size_t j = 0; j < xi.size(); j += stride) {
      const double saved = xi[j];
      const double step = 1e-6 * std::max(1.0, std::abs(saved));
      double sums[2];
      for (int side = 0; side < 2; ++side) {
        xi[j] = saved + (side == 0 ? step : -step);
        const Values y = c.reference(x, shapes);
        double total = 0;
        for (std::size_t k = 0; k < y.size(); ++k) total += y[k] * projection[k];
        sums[side] = total;
      }
      xi[j] = saved;
      const double numeric = (sums[0] - sums[1]) / (2 * step);
      double ratio =
          std::abs(grad[j] - numeric) / (kGradientTolerance * std::max(1.0, std::abs(numeric)));
      if (!std::isfinite(ratio)) ratio = std::numeric_limits<double>::infinity();  // NaN fails
      if (ratio > result.worst) result.worst = ratio;
      if (ratio > 1 && result.passed) {
        result.passed = false;
        result.detail = fmt::format("{}: gradient of input {} at element {} is {}, expected {}",
                                    where, input, j, grad[j], numeric);
      }
    }
  }
}

void check_operators(const SelftestOptions& options, std::vector<SelftestResult>& results) {
  std::vector<OperatorCase> cases = operator_cases();
  cases.insert(cases.end(), options.extra_operators.begin(), options.extra_operators.end());
  for (Context ctx : operator_devices(options)) {
    for (std::size_t index = 0; index < cases.size(); ++index) {
      const OperatorCase& c = cases[index];
      SelftestResult result{.check = "operator " + c.name, .device = ctx.str()};
      for (int trial = 0; trial < options.trials && result.passed; ++trial) {
        // The same shapes and values on every device.
        std::mt19937_64 rng(options.seed * 1000003 + index * 1009 +
                            static_cast<std::uint64_t>(trial));
        try {
          check_trial(c, ctx, rng, result);
        } catch (const std::exception& e) {
          result.passed = false;
          result.detail = e.what();
        }
        ++result.cases;
      }
      results.push_back(std::move(result));
    }
  }
}

/// Every direction: each pair of devices, into new memory and into an
/// existing array; the values must arrive exactly.
void check_copies(const SelftestOptions& options, std::vector<SelftestResult>& results) {
  const std::vector<Context> devices = copy_devices();
  std::mt19937_64 rng(options.seed);
  for (Context from : devices) {
    for (Context to : devices) {
      if (from == to) continue;
      SelftestResult result{.check = "copy", .device = from.str() + " -> " + to.str()};
      try {
        const std::vector<float> values = uniform(rng, 4099, -1e6, 1e6);
        const NDArray source = array(values, {4099}, from);
        const NDArray fresh = source.copyto(to);
        NDArray existing = zeros({4099}, to);
        source.copyto(existing);
        TAGFLOW_CHECK(fresh.context() == to, "the copy is on {}", fresh.context().str());
        for (const NDArray& copy : {fresh, existing}) {
          const std::vector<float> got = copy.to_vector<float>();
          for (std::size_t i = 0; i < got.size() && result.passed; ++i) {
            if (got[i] != values[i]) {
              result.passed = false;
              result.worst = std::numeric_limits<double>::infinity();
              result.detail = fmt::format("element {} is {}, sent {}", i, got[i], values[i]);
            }
          }
          result.cases += static_cast<int>(got.size());
        }
      } catch (const std::exception& e) {
        result.passed = false;
        result.detail = e.what();
      }
      results.push_back(std::move(result));
    }
  }
}

/// Work on a device's compute queue and copy queue, and on another device,
/// that must run in push order: a += 1 there, copied out, doubled, copied
/// back into a, twenty times; a ends at exactly 2^21 - 2.
void check_ordering(const SelftestOptions& options, std::vector<SelftestResult>& results) {
  for (Context ctx : operator_devices(options)) {
    const Context other = ctx == cpu(1) ? cpu(0) : (ctx.is_gpu() ? cpu(0) : cpu(1));
    SelftestResult result{.check = "ordering: compute, copies and waits across queues",
                          .device = ctx.str() + " with " + other.str()};
    try {
      NDArray a = zeros({257}, ctx);
      double expected = 0;
      for (int round = 0; round < 20; ++round) {
        a += 1.f;
        NDArray b = a.copyto(other);
        b *= 2.f;
        b.copyto(a);
        expected = 2 * (expected + 1);
        ++result.cases;
      }
      const std::vector<float> got = a.to_vector<float>();
      for (std::size_t i = 0; i < got.size() && result.passed; ++i) {
        if (got[i] != expected) {
          result.passed = false;
          result.worst = std::numeric_limits<double>::infinity();
          result.detail = fmt::format("element {} is {}, expected {}", i, got[i], expected);
        }
      }
    } catch (const std::exception& e) {
      result.passed = false;
      result.detail = e.what();
    }
    results.push_back(std::move(result));
  }
}

/// Random arrays and dropout: the same seed gives the same values on every
/// device (bit for bit, as cpu(0)'s), with the distribution asked for.
void check_random(const SelftestOptions& options, std::vector<SelftestResult>& results) {
  constexpr std::int64_t kCount = 1 << 14;
  const auto moments = [](const std::vector<float>& v) {
    double total = 0, squares = 0;
    for (float x : v) total += x;
    const double mean = total / static_cast<double>(v.size());
    for (float x : v) squares += (x - mean) * (x - mean);
    return std::pair{mean, std::sqrt(squares / static_cast<double>(v.size()))};
  };
  const std::uint64_t seed = options.seed + 17;
  const std::vector<float> uniform_on_cpu =
      random::uniform(-1, 3, {kCount}, seed, cpu(0)).to_vector<float>();
  const std::vector<float> normal_on_cpu =
      random::normal(2, 0.5, {kCount}, seed, cpu(0)).to_vector<float>();
  const std::vector<float> dropout_on_cpu =
      dropout(ones({kCount}, cpu(0)), 0.25, true, seed).to_vector<float>();
  for (Context ctx : operator_devices(options)) {
    SelftestResult result{.check = "random: uniform, normal, dropout (same seed, same values)",
                          .device = ctx.str(),
                          .cases = 3};
    try {
      const std::vector<float> u = random::uniform(-1, 3, {kCount}, seed, ctx).to_vector<float>();
      const std::vector<float> n = random::normal(2, 0.5, {kCount}, seed, ctx).to_vector<float>();
      const std::vector<float> d =
          dropout(ones({kCount}, ctx), 0.25, true, seed).to_vector<float>();
      const auto [u_mean, u_std] = moments(u);
      const auto [n_mean, n_std] = moments(n);
      const double dropped = static_cast<double>(std::count(d.begin(), d.end(), 0.f)) / kCount;
      const bool kept_scaled = std::all_of(
          d.begin(), d.end(), [](float v) { return v == 0.f || std::abs(v - 1 / 0.75f) < 1e-6f; });
      // Five standard errors of each statistic.
      const std::pair<bool, std::string> facts[] = {
          {u == uniform_on_cpu, "uniform values differ from cpu(0)'s for the same seed"},
          {n == normal_on_cpu, "normal values differ from cpu(0)'s for the same seed"},
          {d == dropout_on_cpu, "the dropout mask differs from cpu(0)'s for the same seed"},
          {std::all_of(u.begin(), u.end(), [](float v) { return v >= -1 && v < 3; }),
           "a uniform value outside [-1, 3)"},
          {std::abs(u_mean - 1) < 5 * 1.1547 / std::sqrt(kCount),
           fmt::format("uniform mean {}, expected 1", u_mean)},
          {std::abs(u_std - 1.1547) < 0.03,
           fmt::format("uniform deviation {}, expected 1.1547", u_std)},
          {std::abs(n_mean - 2) < 5 * 0.5 / std::sqrt(kCount),
           fmt::format("normal mean {}, expected 2", n_mean)},
          {std::abs(n_std - 0.5) < 0.015, fmt::format("normal deviation {}, expected 0.5", n_std)},
          {std::abs(dropped - 0.25) < 5 * std::sqrt(0.25 * 0.75 / kCount),
           fmt::format("dropout dropped {} of the elements, expected 0.25", dropped)},
          {kept_scaled, "dropout kept an element without scaling it by 1 / (1 - p)"},
      };
      for (const auto& [holds, what] : facts) {
        if (!holds && result.passed) {
          result.passed = false;
          result.worst = std::numeric_limits<double>::infinity();
          result.detail = what;
        }
      }
    } catch (const std::exception& e) {
      result.passed = false;
      result.detail = e.what();
    }
    results.push_back(std::move(result));
  }
}

/// The sum of one array over every GPU, as data-parallel training sums
/// gradients: NCCL when every GPU is real (and the build has NCCL), engine
/// copies through a root device otherwise.
void check_gpu_sums(const SelftestOptions& options, std::vector<SelftestResult>& results) {
  std::vector<Context> gpus;
  bool all_real = true;
  for (Context ctx : operator_devices(options)) {
    if (!ctx.is_gpu()) continue;
    gpus.push_back(ctx);
    all_real = all_real && !Engine::get().gpus().at(static_cast<std::size_t>(ctx.index)).simulated;
  }
  all_real = all_real && dist::nccl_available();
  SelftestResult result{.check = all_real ? "sums across GPUs (NCCL)"
                                          : "sums across GPUs (engine copies; NCCL on real GPUs)",
                        .device = fmt::format("{} GPUs", gpus.size())};
  if (gpus.size() < 2) {
    result.skipped = true;
    result.detail = "needs two GPUs";
    results.push_back(std::move(result));
    return;
  }
  try {
    constexpr std::int64_t kCount = 10007;
    std::mt19937_64 rng(options.seed + 29);
    std::vector<NDArray> copies;
    std::vector<double> expected(kCount, 0.0);
    for (Context ctx : gpus) {
      const std::vector<float> values = uniform(rng, kCount, -1, 1);
      for (std::size_t i = 0; i < values.size(); ++i) expected[i] += values[i];
      copies.push_back(array(values, {kCount}, ctx));
    }
    const std::unique_ptr<dist::GradientAggregator> aggregator = dist::make_local_aggregator();
    aggregator->allreduce(copies, /*key=*/0);
    aggregator->flush();
    const double tolerance = 1e-6 * static_cast<double>(gpus.size());
    for (const NDArray& copy : copies) {
      const std::vector<float> got = copy.to_vector<float>();
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double ratio = error_ratio(got[i], expected[i], tolerance);
        result.worst = std::max(result.worst, ratio);
        if (ratio > 1 && result.passed) {
          result.passed = false;
          result.detail = fmt::format("on {}: element {} is {}, the sum is {}",
                                      copy.context().str(), i, got[i], expected[i]);
        }
      }
      result.cases += static_cast<int>(got.size());
    }
  } catch (const std::exception& e) {
    result.passed = false;
    result.detail = e.what();
  }
  results.push_back(std::move(result));
}

std::vector<SelftestResult> run_checks_and_memory(const SelftestOptions& options) {
  std::vector<SelftestResult> results;
  const std::vector<Context> devices = copy_devices();
  Engine::get().wait_for_all();
  std::vector<std::uint64_t> before;
  for (Context ctx : devices) before.push_back(memory_stats(ctx).in_use);
  check_operators(options, results);
  check_random(options, results);
  check_copies(options, results);
  check_ordering(options, results);
  check_gpu_sums(options, results);
  try {
    Engine::get().wait_for_all();
  } catch (const std::exception&) {
    // An operation failed: its check has said so already.
  }
  for (std::size_t i = 0; i < devices.size(); ++i) {
    const std::uint64_t after = memory_stats(devices[i]).in_use;
    SelftestResult result{
        .check = "memory back to where it started", .device = devices[i].str(), .cases = 1};
    if (after != before[i]) {
      result.passed = false;
      result.worst = std::numeric_limits<double>::infinity();
      result.detail = fmt::format("{} bytes in use after the checks, {} before", after, before[i]);
    }
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace

std::vector<SelftestResult> run_selftest_checks(const SelftestOptions& options) {
  return run_checks_and_memory(options);
}

int run_selftest(const SelftestOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  const std::vector<SelftestResult> results = run_selftest_checks(options);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  int failed = 0, skipped = 0;
  for (const SelftestResult& r : results) {
    failed += !r.skipped && !r.passed ? 1 : 0;
    skipped += r.skipped ? 1 : 0;
  }
  if (options.json) {
    for (const SelftestResult& r : results) {
      nlohmann::json line = {{"check", r.check},
                             {"device", r.device},
                             {"cases", r.cases},
                             {"result", r.skipped ? "skipped" : (r.passed ? "passed" : "failed")}};
      if (std::isfinite(r.worst)) line["worst_error_over_tolerance"] = r.worst;
      if (!r.detail.empty()) line["detail"] = r.detail;
      std::puts(line.dump().c_str());
    }
  } else {
    std::printf("%-58s %-22s %6s %9s  %s\n", "check", "device", "cases", "error/tol", "result");
    for (const SelftestResult& r : results) {
      const std::string worst =
          r.skipped ? "" : (std::isfinite(r.worst) ? fmt::format("{:.3f}", r.worst) : "inf");
      const std::string verdict =
          r.skipped ? "skipped: " + r.detail : (r.passed ? "ok" : "FAILED: " + r.detail);
      std::printf("%-58s %-22s %6d %9s  %s\n", r.check.c_str(), r.device.c_str(), r.cases,
                  worst.c_str(), verdict.c_str());
    }
    std::printf("%zu checks: %zu passed, %d failed, %d skipped, in %.1f s\n", results.size(),
                results.size() - static_cast<std::size_t>(failed + skipped), failed, skipped,
                seconds);
  }
  return failed == 0 ? 0 : 1;
}

}  // namespace tagflow::tools
