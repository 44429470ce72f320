#include "tools/usage_errors.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tagflow::tools {

namespace {

/// Levenshtein distance between `a` and `b`, for suggesting an option.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

void check_subcommand_given(const CLI::App& app) {
  const CLI::App* level = &app;
  while (!level->get_subcommands().empty()) level = level->get_subcommands().front();
  if (level->get_require_subcommand_min() == 0) return;
  std::vector<std::string> known;
  for (const CLI::App* sub : level->get_subcommands([](const CLI::App*) { return true; })) {
    known.push_back(sub->get_name());
  }
  const std::string prefix = level == &app ? "" : level->get_name() + ": ";
  for (const std::string& word : level->remaining()) {
    if (!word.empty() && word.front() != '-') {
      throw CLI::ExtrasError(fmt::format("{}unknown subcommand '{}'; expected one of {}", prefix,
                                         word, fmt::join(known, ", ")),
                             CLI::ExitCodes::ExtrasError);
    }
  }
  throw CLI::RequiredError(
      fmt::format("{}a subcommand is required: one of {}", prefix, fmt::join(known, ", ")),
      CLI::ExitCodes::RequiredError);
}

void check_options_known(const CLI::App& app) {
  const CLI::App* level = &app;
  std::string where = "tagflow";  // "tagflow bench engine"
  while (!level->get_subcommands().empty()) {
    level = level->get_subcommands().front();
    where += " " + level->get_name();
  }
  for (const std::string& word : level->remaining()) {
    if (word.size() < 2 || word.front() != '-') continue;
    const std::string name = word.substr(0, word.find('='));
    const std::size_t letters = name.find_first_not_of('-');
    if (letters == std::string::npos) continue;  // "-", "---": not an option name
    const std::string bare = name.substr(letters);
    std::vector<std::string> close;
    std::size_t best = 3;  // at most two edits away
    for (const CLI::Option* option : level->get_options()) {
      for (const std::string& known : option->get_lnames()) {
        // One is the start of the other ("--epo", "--checkpoint-dir"), or a
        // misspelling of it.
        const bool starts =
            known.rfind(bare, 0) == 0 || (known.size() >= 4 && bare.rfind(known, 0) == 0);
        const std::size_t d = starts ? 1 : edit_distance(bare, known);
        if (d < best) {
          best = d;
          close.clear();
        }
        if (d == best && d < 3) close.push_back("--" + known);
      }
    }
    throw CLI::ExtrasError(
        close.empty() ? fmt::format("{}: unknown option '{}' (--help lists them)", where, name)
                      : fmt::format("{}: unknown option '{}'; did you mean {}?", where, name,
                                    fmt::join(close, " or ")),
        CLI::ExitCodes::ExtrasError);
  }
}

}  // namespace tagflow::tools
