// The command line (tools/command_line.h) parsed without running anything:
// each subcommand is recognised, options land in the tools' option structs,
// and bad arguments give CLI11's parse errors or typed tagflow errors.

#include "tools/command_line.h"

#include <filesystem>
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
              "0.3",    "--faults",          "--oom-rate",  "0.5",       "--hang", "--watchdog",
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

/// What parsing `args` throws as a CLI11 error, and what CommandLine::exit
/// prints of it on stderr; "(no error)" when it parses.
std::pair<std::string, std::string> parse_error_of(std::vector<std::string> args) {
  CommandLine cli;
  try {
    parse(cli, std::move(args));
  } catch (const CLI::ParseError& e) {
    testing::internal::CaptureStderr();
    testing::internal::CaptureStdout();
    EXPECT_EQ(cli.exit(e), 2) << "a usage error: " << e.what();
    EXPECT_EQ(testing::internal::GetCapturedStdout(), "") << "messages go to stderr";
    return {e.what(), testing::internal::GetCapturedStderr()};
  }
  return {"(no error)", ""};
}

/// What `tagflow <args> --help` prints.
std::string help_of(std::vector<std::string> args) {
  args.push_back("--help");
  CommandLine cli;
  try {
    parse(cli, args);
  } catch (const CLI::CallForHelp& help) {
    testing::internal::CaptureStdout();
    EXPECT_EQ(cli.exit(help), 0);
    return testing::internal::GetCapturedStdout();
  }
  ADD_FAILURE() << "--help should end the parse";
  return "";
}

TEST(CommandLine, EachOptimizerHasItsOwnDefaultLearningRate) {
  auto learning_rate_of = [](std::vector<std::string> args) {
    args.insert(args.begin(), {"train", "--devices", "cpu:0"});
    CommandLine cli;
    parse(cli, args);
    return cli.train_options().learning_rate;
  };
  EXPECT_EQ(learning_rate_of({}), 0.1);
  EXPECT_EQ(learning_rate_of({"--optimizer", "sgd"}), 0.1);
  EXPECT_EQ(learning_rate_of({"--optimizer", "adam"}), 0.001) << "SGD's 0.1 makes Adam diverge";
  EXPECT_EQ(learning_rate_of({"--optimizer", "adam", "--lr", "0.01"}), 0.01) << "--lr wins";
  EXPECT_EQ(learning_rate_of({"--lr", "0.5", "--optimizer", "adam"}), 0.5);
  const std::string help = help_of({"train"});
  EXPECT_NE(help.find("default: 0.1 with sgd, 0.001 with adam"), std::string::npos) << help;
}

TEST(CommandLine, RefusedNumbersSayWhatWasExpectedAndWhatCame) {
  // Note [Checks of numbers on the command line]
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"train", "--lr", "abc"}, "--lr: expected a positive number, got 'abc'"},
      {{"train", "--lr", "0"}, "--lr: expected a positive number, got '0'"},
      {{"train", "--lr", "nan"}, "--lr: expected a positive number, got 'nan'"},
      {{"train", "--epochs", "many"}, "--epochs: expected an integer in [0, 100000], got 'many'"},
      {{"train", "--epochs", "2.5"}, "--epochs: expected an integer in [0, 100000], got '2.5'"},
      {{"train", "--batch-size", "0"},
       "--batch-size: expected an integer in [1, 1000000], got '0'"},
      {{"train", "--seed", "x"}, "--seed: expected an integer at least 0, got 'x'"},
      {{"train", "--seed", "-1"}, "--seed: expected an integer at least 0, got '-1'"},
      {{"train", "--workers", "65"}, "--workers: expected an integer in [0, 64], got '65'"},
      {{"train", "--limit", "x"}, "--limit: expected an integer at least 0, got 'x'"},
      {{"train", "--dist-timeout", "0"},
       "--dist-timeout: expected a number in [0.001, 1000000], got '0'"},
      {{"train", "--bucket-kb", "0"}, "--bucket-kb: expected an integer in [1, 1048576], got '0'"},
      {{"bench", "engine", "--ops", "0"}, "--ops: expected an integer in [1, 1000000000], got '0'"},
      {{"bench", "ops", "--size", "big"}, "--size: expected an integer in [1, 16384], got 'big'"},
      {{"bench", "train", "--lr", "-1"}, "--lr: expected a positive number, got '-1'"},
      {{"bench", "train", "--limit", "1e3"}, "--limit: expected an integer at least 0, got '1e3'"},
      {{"stress", "--clients", "0"}, "--clients: expected an integer in [1, 256], got '0'"},
      {{"stress", "--steps", "0"},
       "--steps: expected an integer in [1, 1125899906842624], got '0'"},
      {{"stress", "--duration", "x"}, "--duration: expected a number in [0, 10000000], got 'x'"},
      {{"stress", "--watchdog", "0"}, "--watchdog: expected a number in [0.001, 1000000], got '0'"},
      {{"stress", "--seed", "x"}, "--seed: expected an integer at least 0, got 'x'"},
      {{"stress", "--memory-limit-mb", "0"},
       "--memory-limit-mb: expected an integer in [1, 1073741824], got '0'"},
      {{"selftest", "--trials", "0"}, "--trials: expected an integer at least 1, got '0'"},
  };
  for (const auto& [args, message] : cases) {
    const auto [what, printed] = parse_error_of(args);
    EXPECT_EQ(what, message) << ::testing::PrintToString(args);
    EXPECT_EQ(printed.substr(0, printed.find('\n')), message);
  }
}

TEST(CommandLine, StressRatesAreProbabilitiesOrPercentages) {
  CommandLine cli;
  parse(cli, {"stress", "--fail-rate", "0.02", "--oom-rate", "25%", "--copy-rate", "0",
              "--async-rate", "1", "--priority-rate", "0.07"});
  const stress::Mix& mix = cli.stress_options().mix;
  EXPECT_EQ(mix.fail, 2);
  EXPECT_EQ(mix.alloc_fail, 25);
  EXPECT_EQ(mix.copy, 0);
  EXPECT_EQ(mix.async, 100);
  EXPECT_EQ(mix.priority, 7) << "0.07 * 100 is 7.000000000000001 in doubles";
  EXPECT_EQ(mix.allocate, stress::Mix{}.allocate) << "unchanged when not given";
  const std::string expected =
      "expected a probability in [0, 1] such as 0.02, or a percentage such as 2%, got ";
  const std::vector<std::pair<std::vector<std::string>, std::string>> refused = {
      {{"stress", "--fail-rate", "50"}, "--fail-rate: " + expected + "'50'"},
      {{"stress", "--fail-rate", "-0.1"}, "--fail-rate: " + expected + "'-0.1'"},
      {{"stress", "--oom-rate", "101%"}, "--oom-rate: " + expected + "'101%'"},
      {{"stress", "--copy-rate", "often"}, "--copy-rate: " + expected + "'often'"},
      {{"stress", "--fail-rate", "0.025"},
       "--fail-rate: expected a probability in steps of 0.01 (whole percents), such as 0.02, got "
       "'0.025'"},
  };
  for (const auto& [args, message] : refused) {
    EXPECT_EQ(parse_error_of(args).first, message) << ::testing::PrintToString(args);
  }
  const std::string help = help_of({"stress"});
  EXPECT_NE(help.find("--fail-rate PROBABILITY=0 "), std::string::npos) << help;
  EXPECT_NE(help.find("--copy-rate PROBABILITY=0.2 "), std::string::npos) << help;
}

TEST(CommandLine, AnUnknownSubcommandIsNamedWithTheKnownOnes) {
  const auto [what, printed] = parse_error_of({"frobnicate"});
  EXPECT_EQ(what,
            "unknown subcommand 'frobnicate'; expected one of info, selftest, train, profile, "
            "bench, stress");
  EXPECT_EQ(printed.substr(0, printed.find('\n')), what);
  EXPECT_EQ(parse_error_of({"--version-of-nothing", "frobnicate"}).first.substr(0, 31),
            "unknown subcommand 'frobnicate'")
      << "after an unknown option";
  EXPECT_EQ(parse_error_of({"bench", "frob"}).first,
            "bench: unknown subcommand 'frob'; expected one of engine, ops, train");
  EXPECT_EQ(parse_error_of({}).first,
            "a subcommand is required: one of info, selftest, train, profile, bench, stress");
  EXPECT_EQ(parse_error_of({"bench"}).first,
            "bench: a subcommand is required: one of engine, ops, train");
  EXPECT_EQ(parse_error_of({"profile"}).first, "trace is required") << "not a subcommand";
}

TEST(CommandLine, AMisspeltOptionIsNamedWithTheClosestOnes) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"train", "--epoch", "1"},
       "tagflow train: unknown option '--epoch'; did you mean --epochs?"},
      {{"train", "--lr-shedule", "cosine"},
       "tagflow train: unknown option '--lr-shedule'; did you mean --lr-schedule?"},
      {{"train", "--checkpoint-dir", "d"},
       "tagflow train: unknown option '--checkpoint-dir'; did you mean --checkpoint?"},
      {{"stress", "--stepz=3"}, "tagflow stress: unknown option '--stepz'; did you mean --steps?"},
      {{"bench", "engine", "--opps", "5"},
       "tagflow bench engine: unknown option '--opps'; did you mean --ops?"},
      {{"train", "--zzzzzz"}, "tagflow train: unknown option '--zzzzzz' (--help lists them)"},
      // Dashes alone name no option: CLI11's own message.
      {{"train", "---"}, "The following argument was not expected: ---"},
      {{"train", "-=x"}, "The following argument was not expected: -=x"},
  };
  for (const auto& [args, message] : cases) {
    const auto [what, printed] = parse_error_of(args);
    EXPECT_EQ(what, message) << ::testing::PrintToString(args);
    EXPECT_EQ(printed.substr(0, printed.find('\n')), message);
  }
}

TEST(CommandLine, HelpSaysWhatDevicesAndNumbersAreAccepted) {
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"train"}, std::vector<std::string>{"stress"}}) {
    const std::string help = help_of(command);
    EXPECT_NE(help.find("cpu:N are logical devices"), std::string::npos) << help;
    EXPECT_NE(help.find("any N is accepted, whatever the number of cores"), std::string::npos);
  }
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"train"}, std::vector<std::string>{"stress"},
        std::vector<std::string>{"bench", "train"}, std::vector<std::string>{"bench", "ops"},
        std::vector<std::string>{"bench", "engine"}, std::vector<std::string>{"selftest"}}) {
    const std::string help = help_of(command);
    EXPECT_EQ(help.find("1797693134862315"), std::string::npos) << "no giant ranges:\n" << help;
  }
  EXPECT_NE(help_of({"train"}).find("--epochs INT:[0, 100000]=10"), std::string::npos);
}

TEST(CommandLine, AnOutputFileIsCheckedBeforeItsInputIsRead) {
  const std::filesystem::path missing =
      std::filesystem::temp_directory_path() / "tagflow-no-such-directory";
  CommandLine cli;
  parse(cli, {"profile", (missing / "trace.json").string(), "--html",
              (missing / "timeline.html").string()});
  std::string error = "(no error)";
  try {
    (void)cli.run();
  } catch (const Error& e) {
    error = e.what();
  }
  EXPECT_NE(error.find("profile: --html: expected a file in an existing directory, got '" +
                       (missing / "timeline.html").string() + "' (no directory '" +
                       missing.string() + "')"),
            std::string::npos)
      << error;
}

}  // namespace
}  // namespace tagflow::tools
