#pragma once
// `tagflow profile A --compare B`: what changed from one run to another
// (one device against two, a bucket size, priorities on or off), from the
// figures of tools/profile_report.h.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "tools/profile_report.h"

namespace tagflow::tools {

/// One operation name in two runs.
struct OperationChange {
  std::string name;
  std::int64_t count_a = 0, count_b = 0;
  double total_a_us = 0, total_b_us = 0;
  double mean_a_us = 0, mean_b_us = 0;
};

/// What changed from run A to run B (`tagflow profile A --compare B`): the
/// figures of both summaries side by side, and per operation name the
/// count, total and mean in each; names in either run, the largest change
/// of total time first.
struct ProfileComparison {
  ProfileSummary a, b;
  std::vector<OperationChange> operations;
};

ProfileComparison compare(const ProfileSummary& a, const ProfileSummary& b);
/// The comparison as tables: span, busy fraction per device, copies and
/// their overlap, waits, critical path; then the operation names.
std::vector<FigureTable> comparison_tables(const ProfileComparison& comparison);
/// The tables as text, after the names of A and B.
std::string format_comparison(const ProfileComparison& comparison, const std::string& a_name,
                              const std::string& b_name);

/// `tagflow profile A --compare B [--html FILE]`: prints format_comparison
/// of the two and, given a file, writes a page with both runs on one
/// timeline (A's devices, then B's, each from its first event) and the
/// comparison's tables with each device's figures.
void run_profile_comparison(const std::filesystem::path& a, const std::filesystem::path& b,
                            const std::filesystem::path& html_file);

}  // namespace tagflow::tools
