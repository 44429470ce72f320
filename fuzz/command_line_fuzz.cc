// Fuzz target: the `tagflow` command line (tools/command_line.h), parsed and
// checked but never run. The input is the argument list, one argument per
// line. Every input must end in success, a CLI11 parse error, or a typed
// tagflow error; anything else (another exception, a crash, a sanitizer
// report) is a finding.

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engine/error.h"
#include "fuzz/fuzz_support.h"
#include "tools/command_line.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  constexpr std::size_t kMaxArguments = 64;
  std::vector<std::string> args = {"tagflow"};
  std::string current;
  for (std::size_t i = 0; i < size && args.size() < kMaxArguments; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\n') {
      args.push_back(current);
      current.clear();
    } else if (c != '\0') {  // argv strings end at the first NUL
      current.push_back(c);
    }
  }
  if (!current.empty() && args.size() < kMaxArguments) args.push_back(current);
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  tagflow::tools::CommandLine cli;
  try {
    cli.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError&) {
  } catch (const tagflow::Error&) {
  } catch (...) {
    tagflow::fuzz::report_unexpected_exception("CommandLine::parse");
  }
  return 0;
}
