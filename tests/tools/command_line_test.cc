// The command line (tools/command_line.h) parsed without running anything:
// each subcommand is recognised, options land in the tools' option structs,
// and bad arguments give CLI11's parse errors or typed tagflow errors.

#include "tools/command_line.h"

#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <CLI/CLI.hpp>

#include "tagflow/tagflow.h"
#include "tools/stress.h"
#include "tools/train.h"

namespace tagflow::tools {
namespace {

void parse(CommandLine& cli, std::vector<std::string> args) {
  args.insert(args.begin(), "tagflow");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  cli.parse(static_cast<int>(argv.size()), argv.data());
}

TEST(CommandLine, RecognisesEverySubcommand) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"info"}, "info"},
      {{"train", "--devices", "cpu:0"}, "train"},
      {{"profile", "trace.json"}, "profile"},
      {{"bench", "engine"}, "bench engine"},
      {{"bench", "ops", "--device", "gpu:1"}, "bench ops"},
      {{"bench", "train"}, "bench train"},
      {{"stress"}, "stress"},
  };
  for (const auto& [args, name] : cases) {
    CommandLine cli;
    parse(cli, args);
    EXPECT_EQ(cli.subcommand(), name);
  }
}

TEST(CommandLine, VersionPrintsTheLibrarysVersion) {
  CommandLine cli;
  try {
    parse(cli, {"--version"});
    ADD_FAILURE() << "--version should end the parse";
  } catch (const CLI::CallForVersion& version) {
    testing::internal::CaptureStdout();
    EXPECT_EQ(cli.exit(version), 0);
    EXPECT_EQ(testing::internal::GetCapturedStdout(),
              std::string("tagflow ") + TAGFLOW_VERSION_STRING + "\n");
  }
  EXPECT_STREQ(version_string(), TAGFLOW_VERSION_STRING);
}

TEST(CommandLine, StressOptionsReachTheRun) {
  CommandLine cli;
  parse(cli, {"stress", "--devices",         "cpu:1,gpu:2", "--clients", "5",      "--vars",
              "40",     "--round",           "100",         "--seed",    "9",      "--copy-rate",
              "30",     "--faults",          "--oom-rate",  "50",        "--hang", "--watchdog",
              "2.5",    "--memory-limit-mb", "64"});
  const StressOptions& o = cli.stress_options();
  EXPECT_EQ(o.devices, (std::vector<Context>{cpu(1), gpu(2)}));
  EXPECT_EQ(o.clients, 5);
  EXPECT_EQ(o.slots, 40);
  EXPECT_EQ(o.round_steps, 100);
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.mix.copy, 30);
  EXPECT_EQ(o.mix.fail, 2) << "--faults' default failure rate";
  EXPECT_EQ(o.mix.alloc_fail, 50) << "an explicit rate wins over --faults";
  EXPECT_TRUE(o.hang);
  EXPECT_EQ(o.watchdog_seconds, 2.5);
  EXPECT_EQ(o.memory_limit, std::uint64_t{64} << 20);
  EXPECT_EQ(o.duration.count(), 0);
  EXPECT_EQ(o.steps, 200'000u);

  CommandLine timed;
  parse(timed, {"stress", "--duration", "1.5"});
  EXPECT_EQ(timed.stress_options().duration, std::chrono::milliseconds(1500));
  EXPECT_GT(timed.stress_options().steps, std::uint64_t{1} << 40) << "time decides, not a count";
  EXPECT_TRUE(timed.stress_options().devices.empty()) << "all: decided when the run starts";
}

TEST(CommandLine, TrainOptionsReachTheRun) {
  CommandLine cli;
  parse(cli, {"train", "--devices", "cpu:0,cpu:1", "--epochs", "3", "--model", "mlp", "--json"});
  const TrainOptions& o = cli.train_options();
  EXPECT_EQ(o.devices, (std::vector<Context>{cpu(0), cpu(1)}));
  EXPECT_EQ(o.epochs, 3);
  EXPECT_EQ(o.model, "mlp");
  EXPECT_TRUE(o.json);
}

TEST(CommandLine, BadArgumentsGiveParseErrorsOrTypedErrors) {
  const std::vector<std::vector<std::string>> parse_errors = {
      {},
      {"fly"},
      {"stress", "--clients", "0"},
      {"stress", "--fail-rate", "101"},
      {"stress", "--watchdog", "0"},
      {"stress", "--unknown"},
      {"train", "--epochs", "many"},
      {"train", "--model", "resnet"},
      {"bench", "engine", "--workload", "nonsense"},
      {"profile"},
      {"stress", "--help"},
  };
  for (const auto& args : parse_errors) {
    CommandLine cli;
    EXPECT_THROW(parse(cli, args), CLI::ParseError) << ::testing::PrintToString(args);
  }
  const std::vector<std::pair<std::vector<std::string>, std::string>> typed = {
      {{"train", "--devices", "gpu:9"}, "gpu(9)"},
      {{"train", "--devices", "cpu:0,cpu:0"}, "train: the device cpu(0) is listed twice"},
      {{"stress", "--devices", "cpu:0,cpu:0"}, "stress: the device cpu(0) is listed twice"},
      {{"stress", "--devices", "tpu:0"}, "tpu:0"},
      {{"bench", "ops", "--device", "gpu:7"}, "gpu(7)"},
  };
  for (const auto& [args, text] : typed) {
    CommandLine cli;
    try {
      parse(cli, args);
      ADD_FAILURE() << "no error for " << ::testing::PrintToString(args);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace tagflow::tools
