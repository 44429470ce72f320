// The tagflow command line: info, train, profile, bench, stress
// (tools/command_line.h).

#include <exception>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "tools/command_line.h"

int main(int argc, char** argv) {
  tagflow::tools::CommandLine cli;
  try {
    cli.parse(argc, argv);
    return cli.run();
  } catch (const CLI::ParseError& e) {
    return cli.exit(e);
  } catch (const std::exception& e) {
    fmt::print(stderr, "tagflow: {}\n", e.what());
    return 1;
  }
}
