#include "tools/bench_train.h"

#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <optional>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tagflow/tagflow.h"

extern char** environ;

namespace tagflow::tools {

namespace {

/// What a child process printed and used.
struct ChildRun {
  std::string output;  ///< its standard output
  int exit_code = -1;  ///< -1 when it did not exit normally
  double peak_rss_mib = 0;
  std::string error;  ///< why it could not be started, if it could not
};

/// Runs `argv` with its standard output captured (standard error passes
/// through) and waits for it.
ChildRun run_child(const std::vector<std::string>& argv) {
  ChildRun run;
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    run.error = fmt::format("pipe: {}", std::strerror(errno));
    return run;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    run.error = fmt::format("cannot run {}: {}", argv[0], std::strerror(spawned));
    return run;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof buffer);
    if (n > 0) {
      run.output.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      break;
    }
  }
  close(pipe_fds[0]);
  int status = 0;
  rusage usage{};
  while (wait4(pid, &status, 0, &usage) < 0 && errno == EINTR) {
  }
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.peak_rss_mib = static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB
  return run;
}

/// One configuration's figures.
struct Result {
  std::string framework;
  std::string devices;
  double images_per_second = 0;  ///< median over the epochs
  double test_accuracy = 0;      ///< after the last epoch
  double loss = 0;               ///< of the last epoch
  double peak_rss_mib = 0;
  std::string problem;  ///< empty when the run succeeded
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/// Reads the epoch lines (objects with "images_per_second") of a child's output.
Result parse(const ChildRun& run, std::string framework, std::string devices) {
  Result result{.framework = std::move(framework), .devices = std::move(devices)};
  result.peak_rss_mib = run.peak_rss_mib;
  if (!run.error.empty()) {
    result.problem = run.error;
    return result;
  }
  std::vector<double> rates;
  std::istringstream lines(run.output);
  std::string line;
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (!j.is_object() || !j.contains("images_per_second")) continue;
    rates.push_back(j.value("images_per_second", 0.0));
    result.test_accuracy = j.value("test_accuracy", 0.0);
    result.loss = j.value("loss", 0.0);
  }
  result.images_per_second = median(rates);
  if (run.exit_code != 0) {
    result.problem = fmt::format("exited with {}", run.exit_code);
  } else if (rates.empty()) {
    result.problem = "printed no epoch";
  }
  return result;
}

std::string self_path() {
  std::vector<char> path(4096);
  const ssize_t n = readlink("/proc/self/exe", path.data(), path.size() - 1);
  return n > 0 ? std::string(path.data(), static_cast<std::size_t>(n)) : "tagflow";
}

std::vector<std::string> default_device_sets() {
  if (num_gpus() >= 2) return {"gpu:0", "gpu:0,gpu:1"};
  if (num_gpus() == 1) return {"gpu:0"};
  return {"cpu:0", "cpu:0,cpu:1"};
}

}  // namespace

bool run_train_bench(const TrainBenchOptions& o) {
  const std::vector<std::string> device_sets =
      o.device_sets.empty() ? default_device_sets() : o.device_sets;
  std::vector<std::string> common = {"--model",      o.model,
                                     "--epochs",     std::to_string(o.epochs),
                                     "--batch-size", std::to_string(o.batch_size),
                                     "--lr",         fmt::format("{}", o.learning_rate)};
  if (o.limit > 0) common.insert(common.end(), {"--limit", std::to_string(o.limit)});
  if (o.test_limit > 0) {
    common.insert(common.end(), {"--test-limit", std::to_string(o.test_limit)});
  }
  if (!o.data_dir.empty()) common.insert(common.end(), {"--data", o.data_dir});

  std::vector<Result> results;
  auto report = [&](const Result& r) {
    fmt::print(
        "{{\"bench\":\"train\",\"framework\":\"{}\",\"devices\":\"{}\",\"epochs\":{},"
        "\"images_per_second\":{:.1f},\"test_accuracy\":{:.4f},\"loss\":{:.4f},"
        "\"peak_rss_mib\":{:.1f},\"ok\":{}}}\n",
        r.framework, r.devices, o.epochs, r.images_per_second, r.test_accuracy, r.loss,
        r.peak_rss_mib, r.problem.empty());
    std::fflush(stdout);
    results.push_back(r);
  };
  for (const std::string& devices : device_sets) {
    std::vector<std::string> argv = {self_path(), "train",  "--devices",
                                     devices,     "--json", "--no-progress"};
    argv.insert(argv.end(), common.begin(), common.end());
    report(parse(run_child(argv), "tagflow", devices));
  }
  if (!o.pytorch_script.empty()) {
    std::vector<std::string> argv = {o.python, o.pytorch_script};
    argv.insert(argv.end(), common.begin(), common.end());
    report(parse(run_child(argv), "pytorch", "cpu, all cores"));
  }

  fmt::print("\n{:<8} {:<22} {:>10} {:>9} {:>9} {:>10}  {}\n", "", "devices", "images/s",
             "test acc", "loss", "peak RSS", "vs PyTorch");
  std::optional<double> pytorch;
  for (const Result& r : results) {
    if (r.framework == "pytorch" && r.problem.empty()) pytorch = r.images_per_second;
  }
  bool ok = true;
  for (const Result& r : results) {
    if (!r.problem.empty()) {
      ok = false;
      fmt::print("{:<8} {:<22} failed: {}\n", r.framework, r.devices, r.problem);
      continue;
    }
    const std::string ratio =
        pytorch ? fmt::format("{:.2f}x", r.images_per_second / *pytorch) : std::string("-");
    fmt::print("{:<8} {:<22} {:>10.0f} {:>9.4f} {:>9.4f} {:>7.0f} MiB  {}\n", r.framework,
               r.devices, r.images_per_second, r.test_accuracy, r.loss, r.peak_rss_mib, ratio);
  }
  fmt::print(
      "{} epoch(s) of {} on Fashion-MNIST, batch {}, SGD learning rate {}; images/s is "
      "the median over the epochs (training only)\n",
      o.epochs, o.model == "resnet18" ? "ResNet-18" : "LeNet", o.batch_size, o.learning_rate);
  if (o.pytorch_script.empty()) {
    fmt::print("PyTorch not run: add --pytorch tools/pytorch_train.py (Debian: python3-torch)\n");
  }
  return ok;
}

}  // namespace tagflow::tools
