// The tagflow command line: info, train, bench.

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "tagflow/tagflow.h"
#include "tools/bench_engine.h"
#include "tools/bench_ops.h"
#include "tools/bench_train.h"
#include "tools/info.h"
#include "tools/profile_report.h"
#include "tools/train.h"

int main(int argc, char** argv) {
  using namespace tagflow;
  CLI::App app{"tagflow: a deep-learning runtime on an asynchronous dependency engine"};
  app.require_subcommand(1);

  app.add_subcommand("info", "Devices, configuration and build");

  auto* train = app.add_subcommand(
      "train", "Train the tutorials' LeNet (or an MLP) on Fashion-MNIST and report each epoch");
  tools::TrainOptions train_options;
  std::string train_devices = "all";
  std::string data_dir;
  std::string save_path;
  std::string load_path;
  std::string profile_path;
  bool no_progress = false;
  bool train_json = false;
  train->add_option("--model", train_options.model, "Network")
      ->check(CLI::IsMember({"lenet", "mlp"}))
      ->capture_default_str();
  train
      ->add_option("--devices", train_devices,
                   "Devices the batch is split across: all (every GPU, else cpu:0), or a list "
                   "such as gpu:0,gpu:1 or cpu:0,cpu:1")
      ->capture_default_str();
  train->add_option("--epochs", train_options.epochs, "Epochs (0: evaluate only)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  train->add_option("--batch-size", train_options.batch_size, "Samples per batch")
      ->check(CLI::Range(1L, 1'000'000L))
      ->capture_default_str();
  train->add_option("--lr", train_options.learning_rate, "Learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  train->add_option("--optimizer", train_options.optimizer, "Optimizer")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  train->add_option("--data", data_dir,
                    "Directory of the Fashion-MNIST files (default: the dataset-fashion-mnist "
                    "package's, /usr/share/datasets/fashion-mnist)");
  train->add_option("--save", save_path, "Write the trained parameters to this file");
  train->add_option("--load", load_path, "Start from the parameters of this file");
  train->add_option("--seed", train_options.seed, "Seed of the initial parameters and shuffle")
      ->capture_default_str();
  train->add_option("--workers", train_options.num_workers, "Data loader threads")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  train->add_option("--limit", train_options.limit, "Train on the first N images only (0: all)")
      ->check(CLI::NonNegativeNumber);
  train->add_option("--profile", profile_path,
                    "Write a Chrome trace (chrome://tracing, Perfetto) of batches 5-9 here");
  train->add_flag("--no-progress", no_progress, "No progress bar");
  train->add_flag("--json", train_json, "JSON lines instead of text (for tagflow bench train)");

  auto* profile = app.add_subcommand(
      "profile", "Summarise a trace of `train --profile` or profiler::write_chrome_trace");
  std::string profile_trace;
  std::string profile_html;
  profile->add_option("trace", profile_trace, "The Chrome trace (JSON)")->required();
  profile->add_option("--html", profile_html,
                      "Where the timeline goes (default: the trace's name with .html)");

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

  auto* bench_train = bench->add_subcommand(
      "train", "Images per second of training LeNet on 1 and 2 devices, next to PyTorch's");
  tools::TrainBenchOptions train_bench;
  bench_train
      ->add_option("--devices", train_bench.device_sets,
                   "A device list to train on (repeatable; default: one device, then two)")
      ->take_all();
  bench_train->add_option("--epochs", train_bench.epochs, "Epochs per configuration")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bench_train->add_option("--batch-size", train_bench.batch_size, "Samples per batch")
      ->check(CLI::Range(1L, 1'000'000L))
      ->capture_default_str();
  bench_train->add_option("--lr", train_bench.learning_rate, "Learning rate")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  bench_train->add_option("--limit", train_bench.limit, "Train on the first N images only (0: all)")
      ->check(CLI::NonNegativeNumber);
  bench_train->add_option("--data", train_bench.data_dir, "Directory of the Fashion-MNIST files");
  bench_train->add_option("--pytorch", train_bench.pytorch_script,
                          "The PyTorch script to run alongside (tools/pytorch_train.py)");
  bench_train->add_option("--python", train_bench.python, "The Python with torch")
      ->capture_default_str();

  CLI11_PARSE(app, argc, argv);

  try {
    if (app.got_subcommand("info")) return tools::run_info();
    if (train->parsed()) {
      // Training is a chain of operations that each use every core (oneTBB
      // loops, the BLAS's threads): one worker per CPU device does not
      // oversubscribe them (MXNet's default too), and measured ~20% faster
      // than a worker per core. TAGFLOW_CPU_WORKERS still decides when set.
      setenv("TAGFLOW_CPU_WORKERS", "1", /*overwrite=*/0);
      train_options.devices = tools::parse_devices(train_devices);
      train_options.data_dir = data_dir;
      train_options.save = save_path;
      train_options.load = load_path;
      train_options.profile = profile_path;
      train_options.progress = !no_progress;
      train_options.json = train_json;
      (void)tools::run_train(train_options);
      return 0;
    }
    if (bench_engine->parsed()) {
      engine_options.engine = engine_kind == "naive" ? EngineKind::kNaive : EngineKind::kThreaded;
      const bool ok = tools::run_engine_bench(engine_options, EngineConfig::from_env());
      return ok ? 0 : 1;
    }
    if (profile->parsed()) {
      std::filesystem::path html = profile_html;
      if (html.empty()) html = std::filesystem::path(profile_trace).replace_extension(".html");
      tools::run_profile(profile_trace, html);
      return 0;
    }
    if (bench_train->parsed()) return tools::run_train_bench(train_bench) ? 0 : 1;
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
