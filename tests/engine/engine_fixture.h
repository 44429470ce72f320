#pragma once
// The fixture of the engine contract tests: every engine kind and worker
// count (naive; threaded with 1, 2 and 4 workers), two simulated GPUs, and
// the devices each test loops over.

#include <chrono>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/sim_runtime.h"
#include "engine/engine.h"
#include "engine/schedule.h"
#include "engine/stream.h"

namespace tagflow::testing {

struct EngineParam {
  const char* label;
  EngineKind kind;
  int workers;
  /// A controlled schedule (engine/schedule.h) for the naive engine, or null.
  const char* schedule = nullptr;
};

// Readable names in test listings ("naive", "threaded2") instead of bytes.
inline void PrintTo(const EngineParam& p, std::ostream* os) { *os << p.label; }

inline EngineConfig config_for(const EngineParam& p) {
  EngineConfig c = EngineConfig::defaults();
  c.kind = p.kind;
  c.cpu_workers = p.workers;
  c.sim_gpus = 2;
  if (p.schedule != nullptr) c.schedule = ScheduleOptions::parse(p.schedule);
  return c;
}

/// Runs `body` where the device's work runs: directly on a CPU, in stream
/// order on a (simulated) GPU, so GPU fences are exercised.
template <typename F>
void on_device(const RunContext& rc, F&& body) {
  if (rc.stream != nullptr) {
    rc.stream->enqueue_host(std::forward<F>(body));
  } else {
    body();
  }
}

class EngineTest : public ::testing::TestWithParam<EngineParam> {
 protected:
  void SetUp() override { engine_ = make_engine(config_for(GetParam())); }
  void TearDown() override {
    engine_.reset();
    // A test that faults a simulated GPU loses it for the process, as on a
    // real one (Note [Simulated CUDA rules]): bring it back for the next.
    for (int i = 0; i < detail::sim::device_count(); ++i) detail::sim::reset_device(i);
  }
  bool threaded() const { return GetParam().kind == EngineKind::kThreaded; }
  static std::vector<Context> devices() { return {cpu(0), cpu(1), gpu(0)}; }

  std::unique_ptr<Engine> engine_;
};

/// The engines every contract test runs on, named for test listings.
inline auto engine_params() {
  return ::testing::Values(EngineParam{"naive", EngineKind::kNaive, 1},
                           EngineParam{"threaded1", EngineKind::kThreaded, 1},
                           EngineParam{"threaded2", EngineKind::kThreaded, 2},
                           EngineParam{"threaded4", EngineKind::kThreaded, 4});
}
/// Same, and the naive engine under two controlled schedules, whose waits
/// run the kept operations themselves (Note [Controlled schedules]).
inline auto engine_params_with_schedules() {
  return ::testing::Values(EngineParam{"naive", EngineKind::kNaive, 1},
                           EngineParam{"threaded1", EngineKind::kThreaded, 1},
                           EngineParam{"threaded2", EngineKind::kThreaded, 2},
                           EngineParam{"threaded4", EngineKind::kThreaded, 4},
                           EngineParam{"naive_random", EngineKind::kNaive, 1, "random:1"},
                           EngineParam{"naive_pct", EngineKind::kNaive, 1, "pct:3"});
}
inline std::string engine_param_name(const ::testing::TestParamInfo<EngineParam>& info) {
  return info.param.label;
}

}  // namespace tagflow::testing
