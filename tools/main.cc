// The tagflow command line: info, bench.

#include <cstdio>
#include <exception>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "tagflow/tagflow.h"
#include "tools/bench_engine.h"
#include "tools/bench_ops.h"
#include "tools/info.h"

int main(int argc, char** argv) {
  using namespace tagflow;
  CLI::App app{"tagflow: a deep-learning runtime on an asynchronous dependency engine"};
  app.require_subcommand(1);

  app.add_subcommand("info", "Devices, configuration and build");

  auto* bench = app.add_subcommand("bench", "Benchmarks that print JSON lines and a table");
  bench->require_subcommand(1);
  auto* bench_engine = bench->add_subcommand(
      "engine", "Engine overhead on the four yardstick workloads, verified against a serial loop");
  tools::EngineBenchOptions engine_options;
  std::string engine_kind = "threaded";
  bench_engine->add_option("--ops", engine_options.ops, "Operations per workload")
      ->check(CLI::Range(1L, 1'000'000'000L))
      ->capture_default_str();
  bench_engine
      ->add_option("--workers", engine_options.workers,
                   "Worker threads of cpu(0) (default: TAGFLOW_CPU_WORKERS or cores)")
      ->check(CLI::Range(1, 1024));
  bench_engine
      ->add_option("--runs", engine_options.runs, "Runs per workload; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bench_engine->add_option("--workload", engine_options.workloads, "Workloads to run")
      ->check(CLI::IsMember(tools::engine_workloads()))
      ->delimiter(',')
      ->capture_default_str();
  bench_engine->add_option("--engine", engine_kind, "threaded or naive")
      ->check(CLI::IsMember({"threaded", "naive"}))
      ->capture_default_str();

  auto* bench_ops = bench->add_subcommand(
      "ops", "Operators through the whole stack: small-op cost, matrix products, sync-log");
  tools::OpsBenchOptions ops_options;
  std::string ops_device = "cpu:0";
  bench_ops->add_option("--case", ops_options.cases, "Cases to run")
      ->check(CLI::IsMember(tools::ops_bench_cases()))
      ->delimiter(',')
      ->capture_default_str();
  bench_ops->add_option("--runs", ops_options.runs, "Runs per case; the median is reported")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bench_ops->add_option("--ops", ops_options.small_ops, "Operations per small-add run")
      ->check(CLI::Range(1L, 1'000'000'000L))
      ->capture_default_str();
  bench_ops->add_option("--size", ops_options.gemm_size, "Matrix size of the gemm case")
      ->check(CLI::Range(1, 16384))
      ->capture_default_str();
  bench_ops->add_option("--products", ops_options.products, "Matrix products of sync-log")
      ->check(CLI::Range(1, 1'000'000))
      ->capture_default_str();
  bench_ops->add_option("--device", ops_device, "Device of small-add and sync-log, e.g. gpu:0")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  try {
    if (app.got_subcommand("info")) return tools::run_info();
    if (bench_engine->parsed()) {
      engine_options.engine = engine_kind == "naive" ? EngineKind::kNaive : EngineKind::kThreaded;
      const bool ok = tools::run_engine_bench(engine_options, EngineConfig::from_env());
      return ok ? 0 : 1;
    }
    if (bench_ops->parsed()) {
      ops_options.device = Context::parse(ops_device);
      check_device(ops_options.device);
      return tools::run_ops_bench(ops_options) ? 0 : 1;
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "tagflow: {}\n", e.what());
    return 1;
  }
  return 0;
}
