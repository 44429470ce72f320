#include "tools/command_line.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include "tagflow/dist.h"
#include "tagflow/tagflow.h"
#include "tools/bench_engine.h"
#include "tools/bench_ops.h"
#include "tools/bench_train.h"
#include "tools/info.h"
#include "tools/profile_compare.h"
#include "tools/profile_report.h"
#include "tools/selftest.h"
#include "tools/stress.h"
#include "tools/train.h"
#include "tools/train_prediction.h"
#include "tools/usage_errors.h"

namespace tagflow::tools {

namespace {

// Note [Checks of numbers on the command line]
// CLI11's Range prints its bounds with std::to_string, so a check against
// std::numeric_limits<double> answered `--lr abc` with a 300-digit range, and
// an option without a check said "Could not convert". The checks below run
// on the text before CLI11 converts it (a value they accept always
// converts), and say what the option expected and what came, as every
// tagflow message does; CLI11 puts the option's name in front:
// "--lr: expected a positive number, got 'abc'".

/// `text` as a finite number, all of it; none for anything else.
std::optional<double> as_number(const std::string& text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end || !std::isfinite(value)) return std::nullopt;
  return value;
}

/// `text` as a decimal integer of type T, all of it; none for anything else
/// (a fraction, a sign T cannot hold, a value T cannot hold).
template <typename T>
std::optional<T> as_integer(const std::string& text) {
  T value = 0;
  const char* end = text.data() + text.size();
  const auto [stop, error] = std::from_chars(text.data(), end, value);
  if (error != std::errc() || stop != end) return std::nullopt;
  return value;
}

/// A check that accepts what `accepts` accepts and otherwise says
/// "expected <expected>, got '<text>'"; `description` is what --help shows
/// after the type, e.g. INT:[1, 256].
CLI::Validator check_text(const std::string& description, const std::string& expected,
                          std::function<bool(const std::string&)> accepts) {
  return CLI::Validator(
      [expected, accepts = std::move(accepts)](std::string& text) {
        return accepts(text) ? std::string() : fmt::format("expected {}, got '{}'", expected, text);
      },
      description);
}

CLI::Validator positive_number() {
  return check_text("POSITIVE", "a positive number", [](const std::string& text) {
    const std::optional<double> x = as_number(text);
    return x && *x > 0;
  });
}

CLI::Validator number_in(double low, double high) {
  const std::string range = fmt::format("[{}, {}]", low, high);
  return check_text(range, "a number in " + range, [low, high](const std::string& text) {
    const std::optional<double> x = as_number(text);
    return x && *x >= low && *x <= high;
  });
}

template <typename T>
CLI::Validator integer_in(T low, T high) {
  const std::string range = fmt::format("[{}, {}]", low, high);
  return check_text(range, "an integer in " + range, [low, high](const std::string& text) {
    const std::optional<T> n = as_integer<T>(text);
    return n && *n >= low && *n <= high;
  });
}

template <typename T>
CLI::Validator integer_at_least(T low) {
  const std::string description = low == 0   ? "NONNEGATIVE"
                                  : low == 1 ? "POSITIVE"
                                             : fmt::format(">= {}", low);
  return check_text(description, fmt::format("an integer at least {}", low),
                    [low](const std::string& text) {
                      const std::optional<T> n = as_integer<T>(text);
                      return n && *n >= low;
                    });
}

/// A rate of `tagflow stress`: a probability in [0, 1] such as 0.02, or a
/// percentage such as 2%, rewritten into the whole percent that stress::Mix
/// holds (a finer probability is refused rather than rounded).
CLI::Validator probability_in_percent() {
  return CLI::Validator(
      [](std::string& text) {
        std::optional<int> percent;
        if (!text.empty() && text.back() == '%') {
          percent = as_integer<int>(text.substr(0, text.size() - 1));
          if (percent && (*percent < 0 || *percent > 100)) percent.reset();
        } else if (const std::optional<double> p = as_number(text); p && *p >= 0 && *p <= 1) {
          const double whole = std::round(*p * 100);
          if (std::abs(*p * 100 - whole) > 1e-9) {
            return fmt::format(
                "expected a probability in steps of 0.01 (whole percents), such as 0.02, got '{}'",
                text);
          }
          percent = static_cast<int>(whole);
        }
        if (!percent) {
          return fmt::format(
              "expected a probability in [0, 1] such as 0.02, or a percentage such as 2%, got "
              "'{}'",
              text);
        }
        text = std::to_string(*percent);
        return std::string();
      },
      "");
}

/// Adds the rate `name` of `tagflow stress`, held in whole percents by
/// `percent` and given as a probability (probability_in_percent).
void add_rate(CLI::App& app, const std::string& name, int& percent, const std::string& help) {
  app.add_option(name, percent, help + " (0 to 1, or a percentage such as 2%)")
      ->transform(probability_in_percent())
      ->type_name("PROBABILITY")
      ->default_str(fmt::format("{}", percent / 100.0));
}

}  // namespace

/// The CLI11 application and the values its options fill in.
struct CommandLine::Parts {
  Parts();

  CLI::App app{"tagflow: a deep-learning runtime on an asynchronous dependency engine"};
  CLI::App* info = nullptr;
  CLI::App* selftest = nullptr;
  SelftestOptions selftest_options;
  std::string selftest_devices = "all";
  CLI::App* stress = nullptr;
  StressOptions stress_options;
  std::string stress_devices = "all";
  double stress_duration = 0;
  std::uint64_t stress_memory_mb = 256;
  bool stress_faults = false;
  bool stress_json = false;
  /// A controlled schedule (Note [Controlled schedules] in engine/schedule.h).
  std::string stress_schedule = "none";
  int stress_depth = 3;
  std::string stress_record;
  std::string stress_replay;
  /// The command as given, for the line that replays a failing run.
  std::string command;
  CLI::App* train = nullptr;
  TrainOptions train_options;
  std::string train_devices = "all";
  std::string train_dtype = "float32";
  std::string data_dir;
  std::string save_path;
  std::string load_path;
  std::string checkpoint_dir;
  std::string resume_dir;
  std::string profile_path;
  bool no_progress = false;
  bool train_json = false;
  double dist_timeout = dist::MpiOptions{}.timeout_seconds;
  std::int64_t bucket_kb = 1024;
  CLI::App* profile = nullptr;
  std::vector<std::string> profile_traces;
  std::string profile_html;
  std::string profile_compare;
  CLI::App* bench = nullptr;
  CLI::App* bench_engine = nullptr;
  EngineBenchOptions engine_options;
  std::string engine_kind = "threaded";
  CLI::App* bench_ops = nullptr;
  OpsBenchOptions ops_options;
  std::string ops_device = "cpu:0";
  CLI::App* bench_train = nullptr;
  TrainBenchOptions train_bench;
};

CommandLine::Parts::Parts() {
  app.set_version_flag("--version", fmt::format("tagflow {}", version_string()),
                       "Print the version and exit");
  app.require_subcommand(1);

  info = app.add_subcommand("info", "Devices, configuration and build");

  selftest = app.add_subcommand(
      "selftest",
      "Check every operator (forward and gradient) on every device against a double-precision "
      "reference, copies between every pair of devices, the order of work on each device's "
      "queues and that memory returns: the first thing to run on a new machine");
  selftest
      ->add_option("--devices", selftest_devices,
                   "Devices whose operators are checked: all (cpu:0 and every GPU) or a "
                   "list such as gpu:0,gpu:1")
      ->capture_default_str();
  selftest
      ->add_option("--trials", selftest_options.trials,
                   "Random shapes and values per operator and device")
      ->capture_default_str()
      ->check(integer_at_least(1));
  selftest->add_option("--seed", selftest_options.seed, "Seed of the shapes and values")
      ->check(integer_at_least<std::uint64_t>(0))
      ->capture_default_str();
  selftest->add_flag("--json", selftest_options.json, "One JSON line per check instead of a table");

  train = app.add_subcommand(
      "train",
      "Train the tutorials' LeNet (or an MLP, or ResNet-18) on Fashion-MNIST and report each "
      "epoch");
  train->add_option("--model", train_options.model, "Network")
      ->check(CLI::IsMember({"lenet", "mlp", "resnet18"}))
      ->capture_default_str();
  train
      ->add_option("--dtype", train_dtype,
                   "Precision of the layers: float32, or float16 or bfloat16 with float32 master "
                   "weights (float16 with dynamic loss scaling)")
      ->check(CLI::IsMember({"float32", "float16", "bfloat16"}))
      ->capture_default_str();
  train
      ->add_option("--devices", train_devices,
                   "Devices the batch is split across: all (every GPU, else cpu:0), or a list "
                   "such as gpu:0,gpu:1 or cpu:0,cpu:1 (cpu:N are logical devices, each with "
                   "its own worker: any N is accepted, whatever the number of cores)")
      ->capture_default_str();
  train->add_option("--epochs", train_options.epochs, "Epochs (0: evaluate only)")
      ->check(integer_in(0, 100000))
      ->capture_default_str();
  train->add_option("--batch-size", train_options.batch_size, "Samples per batch")
      ->check(integer_in<std::int64_t>(1, 1'000'000))
      ->capture_default_str();
  train
      ->add_option("--lr", train_options.learning_rate,
                   fmt::format("Learning rate (default: {} with sgd, {} with adam)",
                               default_learning_rate("sgd"), default_learning_rate("adam")))
      ->check(positive_number());
  train->add_option("--optimizer", train_options.optimizer, "Optimizer")
      ->check(CLI::IsMember({"sgd", "adam"}))
      ->capture_default_str();
  train->add_option("--momentum", train_options.momentum, "SGD momentum (0: none)")
      ->check(number_in(0, 0.999))
      ->capture_default_str();
  train->add_flag("--nesterov", train_options.nesterov, "Nesterov's momentum (with --momentum)");
  train->add_option("--wd", train_options.weight_decay, "Weight decay (L2 penalty)")
      ->check(number_in(0, 1))
      ->capture_default_str();
  train
      ->add_option("--clip-grad-norm", train_options.clip_grad_norm,
                   "Scale the gradients together so that their global norm is at most this")
      ->check(positive_number());
  train
      ->add_option("--lr-schedule", train_options.lr_schedule,
                   "Learning rate over training: constant; factor (times --lr-factor every "
                   "--lr-steps epochs); multifactor (times --lr-factor after each of the "
                   "--lr-steps epochs); cosine or poly (to --final-lr at the end)")
      ->check(CLI::IsMember({"constant", "factor", "multifactor", "cosine", "poly"}))
      ->capture_default_str();
  train->add_option("--lr-factor", train_options.lr_factor, "factor, multifactor: the factor")
      ->check(number_in(1e-9, 1))
      ->capture_default_str();
  train
      ->add_option("--lr-steps", train_options.lr_steps,
                   "factor: epochs between changes; multifactor: the epochs after which the "
                   "rate changes (e.g. 30,60)")
      ->delimiter(',')
      ->check(positive_number());
  train->add_option("--final-lr", train_options.final_lr, "cosine, poly: the last rate")
      ->check(number_in(0, 1e6))
      ->capture_default_str();
  train->add_option("--lr-power", train_options.lr_power, "poly: the power")
      ->check(positive_number())
      ->capture_default_str();
  train
      ->add_option("--warmup-epochs", train_options.warmup_epochs,
                   "Epochs (a fraction too) of linear warm-up from 0 to the rate, first")
      ->check(number_in(0, 100000))
      ->capture_default_str();
  train->add_option("--data", data_dir,
                    "Directory of the Fashion-MNIST files (default: the dataset-fashion-mnist "
                    "package's, /usr/share/datasets/fashion-mnist)");
  train->add_option("--save", save_path, "Write the trained parameters to this file");
  train->add_option("--checkpoint", checkpoint_dir,
                    "Write a checkpoint here after every epoch, and on SIGINT/SIGTERM at the next "
                    "batch, then stop");
  train
      ->add_option("--keep-checkpoints", train_options.keep_checkpoints,
                   "Checkpoints kept, the newest")
      ->check(integer_in(1, 1000000))
      ->capture_default_str();
  train->add_option("--resume", resume_dir,
                    "Continue exactly from the newest checkpoint in this directory that loads");
  train->add_option("--load", load_path, "Start from the parameters of this file");
  train->add_option("--seed", train_options.seed, "Seed of the initial parameters and shuffle")
      ->check(integer_at_least<std::uint64_t>(0))
      ->capture_default_str();
  train->add_option("--workers", train_options.num_workers, "Data loader threads")
      ->check(integer_in(0, 64))
      ->capture_default_str();
  train->add_option("--limit", train_options.limit, "Train on the first N images only (0: all)")
      ->check(integer_at_least<std::int64_t>(0));
  train
      ->add_option("--test-limit", train_options.test_limit,
                   "Evaluate on the first N test images only (0: all)")
      ->check(integer_at_least<std::int64_t>(0));
  train->add_option("--profile", profile_path,
                    "Write a Chrome trace (chrome://tracing, Perfetto) of batches 5-9 here");
  train->add_flag("--no-progress", no_progress, "No progress bar");
  train->add_flag("--json", train_json, "JSON lines instead of text (for tagflow bench train)");
  train
      ->add_option("--dist", train_options.dist,
                   "Across the processes of `mpirun`: gradients summed with MPI in host memory, "
                   "or with NCCL between GPUs")
      ->check(CLI::IsMember({"none", "mpi", "nccl"}))
      ->capture_default_str();
  train
      ->add_option("--dist-timeout", dist_timeout,
                   "Seconds a collective may take before the run ends with an error")
      ->check(number_in(0.001, 1e6))
      ->capture_default_str();
  train
      ->add_option("--bucket-kb", bucket_kb,
                   "With --dist mpi: gradients travel in messages of about this many KiB")
      ->check(integer_in<std::int64_t>(1, dist::kMaxMessageBytes >> 10))
      ->capture_default_str();

  profile = app.add_subcommand(
      "profile", "Summarise a trace of `train --profile` or profiler::write_chrome_trace");
  profile
      ->add_option("trace", profile_traces,
                   "The Chrome trace (JSON); several: the processes of one run on one timeline "
                   "(a name that does not exist stands for its FILE.rankN.json files)")
      ->required();
  profile->add_option("--compare", profile_compare,
                      "A second run's trace: both runs' figures side by side and the change of "
                      "each operation name's count, total and mean time; a page only with --html");
  profile->add_option("--html", profile_html,
                      "Where the page goes: timeline, selection, figures; one file, opens offline "
                      "(default: the trace's name with .html)");

  bench = app.add_subcommand("bench", "Benchmarks that print JSON lines and a table");
  bench->require_subcommand(1);
  bench_engine = bench->add_subcommand(
      "engine", "Engine overhead on the four yardstick workloads, verified against a serial loop");
  bench_engine->add_option("--ops", engine_options.ops, "Operations per workload")
      ->check(integer_in<std::int64_t>(1, 1'000'000'000))
      ->capture_default_str();
  bench_engine
      ->add_option("--workers", engine_options.workers,
                   "Worker threads of cpu(0) (default: TAGFLOW_CPU_WORKERS or cores)")
      ->check(integer_in(1, 1024));
  bench_engine
      ->add_option("--runs", engine_options.runs, "Runs per workload; the median is reported")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  bench_engine->add_option("--workload", engine_options.workloads, "Workloads to run")
      ->check(CLI::IsMember(engine_workloads()))
      ->delimiter(',')
      ->capture_default_str();
  bench_engine->add_option("--engine", engine_kind, "threaded or naive")
      ->check(CLI::IsMember({"threaded", "naive"}))
      ->capture_default_str();

  bench_ops = bench->add_subcommand(
      "ops", "Operators through the whole stack: small-op cost, matrix products, sync-log");
  bench_ops->add_option("--case", ops_options.cases, "Cases to run")
      ->check(CLI::IsMember(ops_bench_cases()))
      ->delimiter(',')
      ->capture_default_str();
  bench_ops->add_option("--runs", ops_options.runs, "Runs per case; the median is reported")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  bench_ops->add_option("--ops", ops_options.small_ops, "Operations per small-add run")
      ->check(integer_in<std::int64_t>(1, 1'000'000'000))
      ->capture_default_str();
  bench_ops->add_option("--size", ops_options.gemm_size, "Matrix size of the gemm case")
      ->check(integer_in(1, 16384))
      ->capture_default_str();
  bench_ops->add_option("--products", ops_options.products, "Matrix products of sync-log")
      ->check(integer_in(1, 1'000'000))
      ->capture_default_str();
  bench_ops->add_option("--device", ops_device, "Device of small-add and sync-log, e.g. gpu:0")
      ->capture_default_str();

  bench_train = bench->add_subcommand(
      "train", "Images per second of training LeNet on 1 and 2 devices, next to PyTorch's");
  bench_train
      ->add_option("--devices", train_bench.device_sets,
                   "A device list to train on (repeatable; default: one device, then two)")
      ->take_all();
  bench_train->add_option("--epochs", train_bench.epochs, "Epochs per configuration")
      ->check(integer_in(1, 1000))
      ->capture_default_str();
  bench_train->add_option("--batch-size", train_bench.batch_size, "Samples per batch")
      ->check(integer_in<std::int64_t>(1, 1'000'000))
      ->capture_default_str();
  bench_train->add_option("--lr", train_bench.learning_rate, "Learning rate")
      ->check(positive_number())
      ->capture_default_str();
  bench_train->add_option("--limit", train_bench.limit, "Train on the first N images only (0: all)")
      ->check(integer_at_least<std::int64_t>(0));
  bench_train
      ->add_option("--test-limit", train_bench.test_limit,
                   "Evaluate on the first N test images only (0: all)")
      ->check(integer_at_least<long>(0));
  bench_train->add_option("--model", train_bench.model, "Network")
      ->check(CLI::IsMember({"lenet", "resnet18"}))
      ->capture_default_str();
  bench_train->add_option("--data", train_bench.data_dir, "Directory of the Fashion-MNIST files");
  bench_train->add_option("--pytorch", train_bench.pytorch_script,
                          "The PyTorch script to run alongside (tools/pytorch_train.py)");
  bench_train->add_option("--python", train_bench.python, "The Python with torch")
      ->capture_default_str();

  stress = app.add_subcommand(
      "stress",
      "Random workloads over every device from several threads, checked against a "
      "serial replay; optional injected faults and a watchdog");
  stress
      ->add_option("--devices", stress_devices,
                   "Devices the variables live on: all (cpu:0, cpu:1 and every GPU) or a list "
                   "such as cpu:0,gpu:0,gpu:1 (cpu:N are logical devices, each with its own "
                   "worker: any N is accepted, whatever the number of cores)")
      ->capture_default_str();
  stress->add_option("--clients", stress_options.clients, "Threads pushing work")
      ->check(integer_in(1, 256))
      ->capture_default_str();
  stress
      ->add_option("--completers", stress_options.completers,
                   "Threads completing asynchronous operations")
      ->check(integer_in(1, 64))
      ->capture_default_str();
  stress->add_option("--vars", stress_options.slots, "Variables per client")
      ->check(integer_in(2, 100000))
      ->capture_default_str();
  stress->add_option("--round", stress_options.round_steps, "Steps per client between checks")
      ->check(integer_in(1, 1 << 24))
      ->capture_default_str();
  stress->add_option("--steps", stress_options.steps, "Steps in all (over every client)")
      ->check(integer_in<std::uint64_t>(1, std::uint64_t{1} << 50))
      ->capture_default_str();
  stress
      ->add_option("--duration", stress_duration,
                   "Stop after this many seconds (0: when --steps are done)")
      ->check(number_in(0, 1e7));
  stress->add_option("--seed", stress_options.seed, "Seed of the workload")
      ->check(integer_at_least<std::uint64_t>(0))
      ->capture_default_str();
  add_rate(*stress, "--copy-rate", stress_options.mix.copy,
           "Probability that a step copies between devices");
  add_rate(*stress, "--alloc-rate", stress_options.mix.allocate,
           "Probability that a step allocates an array");
  add_rate(*stress, "--delete-rate", stress_options.mix.remove,
           "Probability that a step deletes a variable with pending work");
  add_rate(*stress, "--async-rate", stress_options.mix.async,
           "Probability that an operation is completed from another thread");
  add_rate(*stress, "--priority-rate", stress_options.mix.priority,
           "Probability that an operation has a priority");
  add_rate(*stress, "--fail-rate", stress_options.mix.fail,
           "Probability that an operation fails (injected)");
  add_rate(*stress, "--oom-rate", stress_options.mix.alloc_fail,
           "Probability that an allocation asks for more than the memory limit (injected)");
  stress->add_flag("--faults", stress_faults,
                   "Inject faults at the default rates: 2% of operations fail (--fail-rate 0.02), "
                   "25% of allocations run out of memory (--oom-rate 0.25)");
  stress->add_flag("--hang", stress_options.hang,
                   "Inject an asynchronous operation that never completes: the watchdog names it "
                   "and the run exits with status 3");
  stress
      ->add_option("--watchdog", stress_options.watchdog_seconds,
                   "Seconds without a completed operation before the dependency state is "
                   "printed and the run stops")
      ->check(number_in(0.001, 1e6))
      ->capture_default_str();
  stress
      ->add_option("--memory-limit-mb", stress_memory_mb,
                   "Memory limit of each device during the run")
      ->check(integer_in<std::uint64_t>(1, std::uint64_t{1} << 30))
      ->capture_default_str();
  stress->add_flag("--json", stress_json, "A JSON line after the report");
  stress
      ->add_option("--schedule", stress_schedule,
                   "Run one operation at a time in an order picked by a seeded policy (with "
                   "--seed): random, or pct (probabilistic concurrency testing); one client")
      ->check(CLI::IsMember({"none", "random", "pct"}));
  stress->add_option("--depth", stress_depth, "PCT's bug depth (--schedule pct)")
      ->check(CLI::Range(1, 100));
  stress->add_option("--record", stress_record,
                     "Write the order the controlled schedule took to this file");
  stress->add_option("--replay", stress_replay,
                     "Run in the order recorded in this file (one client)");
}

CommandLine::CommandLine() : parts_(std::make_unique<Parts>()) {}

CommandLine::~CommandLine() = default;

void CommandLine::parse(int argc, const char* const* argv) {
  for (int i = 0; i < argc; ++i) {
    parts_->command += (i > 0 ? " " : "") + std::string(argv[i]);
  }
  Parts& p = *parts_;
  try {
    p.app.parse(argc, argv);
  } catch (const CLI::RequiredError&) {
    check_subcommand_given(p.app);
    throw;
  } catch (const CLI::ExtrasError&) {
    check_options_known(p.app);
    throw;
  }
  if (p.train->parsed()) {
    // Training is a chain of operations that each use every core (oneTBB
    // loops, the BLAS's threads): one worker per CPU device does not
    // oversubscribe them (MXNet's default too), and measured ~20% faster
    // than a worker per core. TAGFLOW_CPU_WORKERS still decides when set.
    // Set before the device list makes the engine.
    setenv("TAGFLOW_CPU_WORKERS", "1", /*overwrite=*/0);
    p.train_options.devices = parse_devices(p.train_devices);
    p.train_options.dtype = p.train_dtype == "float16"    ? DType::kFloat16
                            : p.train_dtype == "bfloat16" ? DType::kBFloat16
                                                          : DType::kFloat32;
    p.train_options.data_dir = p.data_dir;
    p.train_options.save = p.save_path;
    p.train_options.load = p.load_path;
    p.train_options.checkpoint_dir = p.checkpoint_dir;
    p.train_options.resume_dir = p.resume_dir;
    p.train_options.profile = p.profile_path;
    p.train_options.progress = !p.no_progress;
    p.train_options.json = p.train_json;
    p.train_options.bucket_bytes = p.bucket_kb << 10;
    if (p.train->count("--lr") == 0) {
      p.train_options.learning_rate = default_learning_rate(p.train_options.optimizer);
    }
  }
  if (p.selftest->parsed() && p.selftest_devices != "all") {
    p.selftest_options.devices = parse_devices(p.selftest_devices, "selftest");
  }
  if (p.bench_engine->parsed()) {
    p.engine_options.engine = p.engine_kind == "naive" ? EngineKind::kNaive : EngineKind::kThreaded;
  }
  if (p.bench_ops->parsed()) {
    p.ops_options.device = Context::parse(p.ops_device);
    check_device(p.ops_options.device);
  }
  if (p.stress->parsed()) {
    StressOptions& o = p.stress_options;
    // A controlled schedule: set before the device list makes the engine.
    const bool controlled =
        p.stress_schedule != "none" || !p.stress_replay.empty() || !p.stress_record.empty();
    if (controlled) {
      TAGFLOW_CHECK(p.stress_schedule == "none" || p.stress_replay.empty(),
                    "stress: --replay runs a recorded order; expected no --schedule with it, got "
                    "--schedule {}",
                    p.stress_schedule);
      TAGFLOW_CHECK(p.stress->count("--clients") == 0 || o.clients == 1,
                    "stress: a controlled schedule reproduces runs of one client thread; "
                    "expected --clients 1, got {}",
                    o.clients);
      o.clients = 1;
      const std::string schedule =
          !p.stress_replay.empty() ? "replay:" + p.stress_replay
          : p.stress_schedule == "pct"
              ? fmt::format("pct:{}:{}:{}", o.seed, p.stress_depth,
                            std::clamp<std::uint64_t>(o.steps, 1, std::uint64_t{1} << 30))
          : p.stress_schedule == "random" ? fmt::format("random:{}", o.seed)
                                          : std::string("none");
      (void)ScheduleOptions::parse(schedule);  // refused here, before anything runs
      setenv("TAGFLOW_SCHEDULE", schedule.c_str(), /*overwrite=*/1);
      if (!p.stress_record.empty()) {
        setenv("TAGFLOW_SCHEDULE_RECORD", p.stress_record.c_str(), /*overwrite=*/1);
      }
    }
    if (p.stress_devices != "all") o.devices = parse_devices(p.stress_devices, "stress");
    o.duration = std::chrono::milliseconds(static_cast<std::int64_t>(p.stress_duration * 1000));
    if (p.stress_duration > 0 && p.stress->count("--steps") == 0) o.steps = std::uint64_t{1} << 50;
    o.memory_limit = p.stress_memory_mb << 20;
    if (p.stress_faults) {
      if (p.stress->count("--fail-rate") == 0) o.mix.fail = 2;
      if (p.stress->count("--oom-rate") == 0) o.mix.alloc_fail = 25;
    }
  }
}

std::string CommandLine::subcommand() const {
  const Parts& p = *parts_;
  for (CLI::App* sub : {p.bench_engine, p.bench_ops, p.bench_train}) {
    if (sub->parsed()) return "bench " + sub->get_name();
  }
  for (CLI::App* sub : {p.info, p.selftest, p.train, p.profile, p.stress}) {
    if (sub->parsed()) return sub->get_name();
  }
  return "";
}

int CommandLine::exit(const CLI::ParseError& error) {
  // --help and --version end with 0; a usage error with 2, as shells' tools
  // do (CLI11's own codes, 105 to 109, say which kind).
  return parts_->app.exit(error) == 0 ? 0 : 2;
}

const TrainOptions& CommandLine::train_options() const { return parts_->train_options; }

const StressOptions& CommandLine::stress_options() const { return parts_->stress_options; }

namespace {

int run_stress_command(const StressOptions& options, bool json, const std::string& command) {
  // The command line's watchdog: print what is stuck, then stop, since the
  // engine cannot be shut down cleanly around an operation that never ends.
  const StressReport report = run_stress(options, [&](const DependencyState& state) {
    fmt::print(stderr, "tagflow stress: watchdog: no operation completed for {} s\n{}",
               options.watchdog_seconds, state.describe());
    std::fflush(stderr);
    std::_Exit(3);
    return false;
  });
  fmt::print("{}", format_report(report));
  if (json) fmt::print("{}\n", report_json(report));
  if (!report.passed()) {
    const ScheduleOptions& schedule = Engine::get().config().schedule;
    if (schedule.controlled()) {
      fmt::print(stderr, "tagflow stress: this run replays exactly with: {}\n", command);
    } else {
      fmt::print(stderr,
                 "tagflow stress: threads interleaved as the OS ran them; to search orders "
                 "reproducibly: {} --schedule pct --clients 1\n",
                 command);
    }
  }
  return report.passed() ? 0 : 1;
}

/// `tagflow train`; with --dist, in each process of the job: says which
/// process it is (to stderr, for whoever has to find it), and on an error
/// ends the whole job (the others would wait for this one until their
/// timeout otherwise).
int run_train_command(TrainOptions options, double dist_timeout) {
  // Stopped as asked: the checkpoint to resume from, and the status of a
  // process ended by that signal.
  const auto stopped = [](const TrainingStopped& e, bool speaks) {
    if (speaks) {
      fmt::print(stderr, "{}\n", e.what());
      if (!e.checkpoint().empty()) {
        fmt::print(stderr, "train: continue with --resume {}\n",
                   e.checkpoint().parent_path().string());
      }
    }
    return e.signal() > 0 ? 128 + e.signal() : 0;
  };
  if (timing_only_devices(options.devices)) {
    (void)predict_training(options);  // Note [Predicted training]
    return 0;
  }
  if (options.dist == "none") {
    try {
      (void)run_train(options);
    } catch (const TrainingStopped& e) {
      return stopped(e, true);
    }
    return 0;
  }
  options.processes = dist::MpiCommunicator::world({.timeout_seconds = dist_timeout});
  const dist::MpiCommunicator& processes = *options.processes;
  fmt::print(stderr, "train: rank {} of {} on {}, pid {}\n", processes.rank(), processes.size(),
             processes.host(), getpid());
  std::fflush(stderr);
  try {
    (void)run_train(options);
  } catch (const TrainingStopped& e) {
    return stopped(e, processes.rank() == 0);  // every rank stops at the same epoch
  } catch (const std::exception& e) {
    fmt::print(stderr, "tagflow: rank {} of {}: {}\n", processes.rank(), processes.size(),
               e.what());
    std::fflush(stderr);
    if (processes.size() > 1) options.processes->abort(1);
    throw;
  }
  return 0;
}

}  // namespace

int CommandLine::run() {
  Parts& p = *parts_;
  if (p.info->parsed()) return run_info();
  if (p.selftest->parsed()) return run_selftest(p.selftest_options);
  if (p.train->parsed()) return run_train_command(p.train_options, p.dist_timeout);
  if (p.bench_engine->parsed()) {
    return run_engine_bench(p.engine_options, EngineConfig::from_env()) ? 0 : 1;
  }
  if (p.profile->parsed() && !p.profile_compare.empty()) {
    TAGFLOW_CHECK(p.profile_traces.size() == 1,
                  "profile: --compare compares two traces, expected one before it, got {}",
                  p.profile_traces.size());
    if (!p.profile_html.empty()) check_output_file(p.profile_html, "profile: --html");
    run_profile_comparison(p.profile_traces[0], p.profile_compare, p.profile_html);
    return 0;
  }
  if (p.profile->parsed()) {
    std::filesystem::path html = p.profile_html;
    if (html.empty()) html = std::filesystem::path(p.profile_traces[0]).replace_extension(".html");
    check_output_file(html, "profile: --html");
    run_profile({p.profile_traces.begin(), p.profile_traces.end()}, html);
    return 0;
  }
  if (p.bench_train->parsed()) return run_train_bench(p.train_bench) ? 0 : 1;
  if (p.bench_ops->parsed()) return run_ops_bench(p.ops_options) ? 0 : 1;
  if (p.stress->parsed()) return run_stress_command(p.stress_options, p.stress_json, p.command);
  return 0;
}

}  // namespace tagflow::tools
