#pragma once
// `tagflow stress`: random workloads over every device, pushed by several
// client threads at once, checked against a serial replay after every round
// (Note [Stress workload] in stress_workload.h), with optional injected
// faults and a watchdog that prints the engine's dependency state when work
// stops moving.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/dependency_state.h"
#include "tools/stress_workload.h"

namespace tagflow::tools {

struct StressOptions {
  /// The devices the variables live on; empty: cpu(0), cpu(1) and every GPU.
  std::vector<Context> devices;
  int clients = 3;
  int completers = 2;  ///< threads finishing asynchronous steps
  int slots = 48;      ///< variables per client
  int round_steps = 4000;
  /// Stop after this many steps in all (over every client), or after
  /// `duration` when it is non-zero, whichever comes first.
  std::uint64_t steps = 200'000;
  std::chrono::milliseconds duration{0};
  std::uint64_t seed = 1;
  stress::Mix mix;
  /// Injected: one asynchronous step of client 0 never completes, until
  /// the stall callback asks for it to be released.
  bool hang = false;
  /// Seconds without a completed operation before the stall callback runs.
  double watchdog_seconds = 10;
  /// Each device's memory limit during the run (out-of-memory faults ask
  /// for more than this).
  std::uint64_t memory_limit = std::uint64_t{256} << 20;
  /// For testing the checker itself: the work of the step with this id is
  /// silently not done. 0: none.
  std::uint64_t sabotage_step = 0;
};

struct StressReport {
  std::vector<Context> devices;
  std::uint64_t steps = 0;     ///< pushed to the engine or attempted (allocations)
  std::uint64_t executed = 0;  ///< step bodies that ran
  std::uint64_t rounds = 0;
  double seconds = 0;
  std::map<std::string, std::uint64_t> counts;  ///< steps by kind and feature
  std::vector<std::uint64_t> steps_per_device;
  std::uint64_t faults_injected = 0;          ///< failures and out-of-memory requests
  std::uint64_t errors_expected = 0;          ///< waits the replay says must throw
  std::uint64_t errors_seen = 0;              ///< waits that threw the expected error
  std::uint64_t mismatches = 0;               ///< values, errors, runs or deleters that differ
  std::vector<std::string> first_mismatches;  ///< up to 10, for people
  std::vector<std::uint64_t> memory_before;   ///< bytes in use per device at the start
  std::vector<std::uint64_t> memory_after;    ///< and after the run
  int stalls = 0;
  std::uint64_t operations_per_second() const {
    return seconds > 0 ? static_cast<std::uint64_t>(static_cast<double>(steps) / seconds) : 0;
  }
  bool passed() const { return mismatches == 0 && memory_before == memory_after; }
};

/// Called by the watchdog when nothing has completed for
/// `watchdog_seconds`, with the engine's dependency state. Return true to
/// release the steps held by `hang` and go on; false to stop waiting (the
/// callback of the command line prints the state and exits the process).
using StallHandler = std::function<bool(const DependencyState&)>;

/// Runs the stress workload on the process-wide engine. Throws
/// tagflow::Error for bad options (no device, a repeated device, rates
/// outside 0..100, fewer than one client).
StressReport run_stress(const StressOptions& options, const StallHandler& on_stall);

/// The report as text: throughput, what ran, faults, checks.
std::string format_report(const StressReport& report);
/// The report as one JSON line.
std::string report_json(const StressReport& report);

}  // namespace tagflow::tools
