// The tagflow command line: info, train, profile, bench, stress
// (tools/command_line.h).

#include <exception>

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "tools/command_line.h"

int main(int argc, char** argv) {
  // The library logs through spdlog's default logger; the command line's
  // standard output is for its results (tables, JSON lines), so logs go to
  // standard error.
  spdlog::set_default_logger(spdlog::stderr_color_mt("tagflow"));
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
