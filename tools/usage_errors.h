#pragma once
// What the command line says about a usage error CLI11 reports in its own
// words: the unknown subcommand named with the known ones, a misspelt
// option with the closest ones. Internal to tools/.
//
// Threads: functions of no state; call them from any thread.

#include <CLI/CLI.hpp>

namespace tagflow::tools {

/// After CLI11 found something required missing: when it is a subcommand
/// (of the application, or of `bench`), throws an error that names the
/// unknown word given in its place, or says that none was given, and lists
/// the known subcommands. CLI11 itself says "A subcommand is required" in
/// both cases.
void check_subcommand_given(const CLI::App& app);

/// After CLI11 found words it did not expect: when one is an option the
/// subcommand does not have, throws an error naming it and the closest
/// options it has ("--epoch": did you mean --epochs?). CLI11 itself says
/// "The following arguments were not expected: 1 --epoch".
void check_options_known(const CLI::App& app);

}  // namespace tagflow::tools
