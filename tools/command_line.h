#pragma once
// CommandLine: the `tagflow` command line, its subcommands (info, train,
// profile, bench engine|ops|train, stress) and their options, parsed into
// each tool's option struct, then run. Apart from main() so that parsing
// alone can be tested and fuzzed:
//
//   tools::CommandLine cli;
//   cli.parse(argc, argv);   // throws CLI::ParseError or tagflow::Error
//   return cli.run();

#include <memory>
#include <string>

namespace CLI {
class ParseError;
}

namespace tagflow::tools {

struct TrainOptions;
struct StressOptions;

class CommandLine {
 public:
  CommandLine();
  ~CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  /// Parses the arguments (argv[0] is the program's name) and checks the
  /// values CLI11 cannot: device lists and names. Throws CLI::ParseError
  /// for what CLI11 rejects (and for --help), tagflow::Error (DeviceError
  /// for a device that does not exist) for values that are wrong.
  void parse(int argc, const char* const* argv);
  /// The parsed subcommand, e.g. "train" or "bench engine"; empty before parse().
  std::string subcommand() const;
  /// Runs the parsed subcommand; returns the process's exit code.
  int run();
  /// Prints what CLI11 says about `error` (usage, help) and returns the exit
  /// code: 0 for --help and --version, 2 for a usage error.
  int exit(const CLI::ParseError& error);

  /// What parse() made of the options of `train` and `stress`.
  const TrainOptions& train_options() const;
  const StressOptions& stress_options() const;

 private:
  struct Parts;
  std::unique_ptr<Parts> parts_;
};

}  // namespace tagflow::tools
