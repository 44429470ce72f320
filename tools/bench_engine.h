#pragma once
// `tagflow bench engine`: the four workloads of the engine yardstick
// (indep, chain, readers, random), each verified against a serial loop.

#include <string>
#include <vector>

#include "engine/config.h"

namespace tagflow::tools {

struct EngineBenchOptions {
  long ops = 1'000'000;
  int workers = 0;  ///< 0: the configuration's (cores by default)
  int runs = 5;
  std::vector<std::string> workloads = {"indep", "chain", "readers", "random"};
  EngineKind engine = EngineKind::kThreaded;
};

/// Runs the benchmark; prints one JSON line per workload, then a table.
/// Returns false if any result differed from the serial loop.
bool run_engine_bench(const EngineBenchOptions& options, const EngineConfig& base);

/// The names `--workload` accepts.
const std::vector<std::string>& engine_workloads();

}  // namespace tagflow::tools
