#pragma once
// `tagflow selftest`: what to run first on a new machine. Every operator
// (forward and gradient) on every device present against an independent
// double-precision reference on the host, on random shapes (broadcasting,
// odd and empty sizes); copies between every pair of devices; the order of
// work on each device's queues (compute and copy streams, waits across
// them); the sum of an array over every GPU (NCCL on real GPUs); memory back
// to where it started. A table on stdout (or JSON lines),
// and a non-zero exit status on any mismatch.

#include <cstdint>
#include <string>
#include <vector>

#include "engine/context.h"
#include "tools/selftest_cases.h"

namespace tagflow::tools {

struct SelftestOptions {
  /// The devices whose operators are checked; empty: cpu(0) and every GPU.
  std::vector<Context> devices;
  /// Random trials (shapes and values) per operator and device.
  int trials = 3;
  std::uint64_t seed = 1;
  /// JSON lines instead of the table.
  bool json = false;
  /// Operators checked besides the built-in ones (custom operators of an
  /// embedding program, or a planted wrong kernel in the tests).
  std::vector<OperatorCase> extra_operators;
};

/// One line of the report.
struct SelftestResult {
  std::string check;   ///< "operator exp", "copy cpu(0) -> gpu(1)", ...
  std::string device;  ///< where it ran ("gpu(0)", "cpu(0) -> gpu(1)")
  int cases = 0;       ///< trials or elements checked
  double worst = 0;    ///< largest error relative to the tolerance (<= 1 passes)
  bool passed = true;
  std::string detail;  ///< the first mismatch, or why it was skipped
  bool skipped = false;
};

/// Runs every check and returns one result per check and device.
std::vector<SelftestResult> run_selftest_checks(const SelftestOptions& options);

/// Runs the checks and prints the report; the exit status is 0 when every
/// check passed, 1 otherwise.
int run_selftest(const SelftestOptions& options);

}  // namespace tagflow::tools
