// `tagflow stress` end to end (tools/stress.h) on the process-wide engine with
// two CPU devices and four simulated GPUs: a run with every kind of step and
// injected faults matches its serial replay and gives its memory back; the
// checker catches a step whose work was silently dropped; a hung operation
// is named by the watchdog and the run finishes once it is released.

#include "tools/stress.h"

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow::tools {
namespace {

StressOptions small_run() {
  StressOptions o;
  o.devices = {cpu(0), cpu(1), gpu(0), gpu(1), gpu(2), gpu(3)};
  o.clients = 3;
  o.slots = 24;
  o.round_steps = 1500;
  o.steps = 3 * 3 * 1500;  // three rounds per client
  o.seed = 5;
  o.watchdog_seconds = 60;
  return o;
}

bool no_stall(const DependencyState& state) {
  ADD_FAILURE() << "unexpected stall:\n" << state.describe();
  return true;
}

TEST(Stress, RunWithFaultsOnEveryDeviceMatchesTheSerialReplay) {
  ASSERT_EQ(num_gpus(), 4);
  StressOptions o = small_run();
  o.mix.fail = 3;
  o.mix.alloc_fail = 30;
  const StressReport r = run_stress(o, no_stall);
  SCOPED_TRACE(format_report(r));
  EXPECT_TRUE(r.passed());
  EXPECT_EQ(r.mismatches, 0u);
  EXPECT_EQ(r.rounds, 9u);
  EXPECT_EQ(r.steps, o.steps);
  for (const char* kind :
       {"compute", "copy", "allocate", "deleted with pending work", "asynchronous", "with priority",
        "on GPUs", "injected failures", "injected out-of-memory"}) {
    EXPECT_GT(r.counts.at(kind), 0u) << kind;
  }
  for (std::uint64_t n : r.steps_per_device) EXPECT_GT(n, 0u);
  EXPECT_GT(r.faults_injected, 0u);
  EXPECT_GT(r.errors_expected, 0u);
  EXPECT_EQ(r.errors_seen, r.errors_expected);
  EXPECT_EQ(r.memory_after, r.memory_before);
  EXPECT_EQ(r.stalls, 0);
  // The engine is fine afterwards.
  NDArray a = full(Shape{4}, 2.0, DType::kFloat32, gpu(1));
  EXPECT_EQ((a * 3.0f).to_vector<float>(), std::vector<float>(4, 6.0f));
}

TEST(Stress, CatchesAStepWhoseWorkWasDropped) {
  StressOptions o = small_run();
  o.devices = {cpu(0), gpu(0)};
  o.clients = 1;
  o.steps = o.round_steps;
  o.mix.allocate = o.mix.remove = 0;
  // The last step of the round that runs and whose result nothing replaces.
  const auto steps = stress::generate_round(
      o.seed, 0, 0, {.slots = o.slots, .num_devices = 2, .steps = o.round_steps}, o.mix);
  stress::Replay replay(o.seed, 0, o.slots,
                        {stress::shared_value(o.seed, 0), stress::shared_value(o.seed, 1)});
  std::vector<bool> runs;
  for (const stress::Step& s : steps) runs.push_back(replay.apply(s));
  for (std::size_t i = steps.size(); i-- > 0 && o.sabotage_step == 0;) {
    if (runs[i]) o.sabotage_step = steps[i].id;
  }
  ASSERT_NE(o.sabotage_step, 0u);
  const StressReport r = run_stress(o, no_stall);
  EXPECT_FALSE(r.passed());
  EXPECT_GE(r.mismatches, 1u);
  ASSERT_FALSE(r.first_mismatches.empty());
  EXPECT_NE(r.first_mismatches[0].find("differs from the serial replay"), std::string::npos)
      << r.first_mismatches[0];
}

TEST(Stress, WatchdogNamesTheHungOperationAndTheRunFinishesOnceReleased) {
  StressOptions o = small_run();
  o.clients = 2;
  o.steps = 2 * o.round_steps;
  o.hang = true;
  o.watchdog_seconds = 0.3;
  std::vector<std::string> blockers;
  std::vector<OperationStage> stages;
  std::size_t waiting = 0;
  const StressReport r = run_stress(o, [&](const DependencyState& state) {
    for (const PendingOperation* op : state.blockers()) {
      blockers.push_back(op->name);
      stages.push_back(op->stage);
      waiting = state.waiting_behind(op->seq);
    }
    return true;  // release it
  });
  SCOPED_TRACE(format_report(r));
  EXPECT_EQ(r.stalls, 1);
  EXPECT_EQ(blockers, std::vector<std::string>{"stress_compute"});
  EXPECT_EQ(stages, std::vector<OperationStage>{OperationStage::kLaunched});
  EXPECT_GT(waiting, 0u);
  EXPECT_TRUE(r.passed());
}

TEST(Stress, RefusesBadOptionsWithTypedErrors) {
  auto error_of = [](StressOptions o) {
    return testing::error_of([&] { (void)run_stress(o, no_stall); });
  };
  StressOptions o = small_run();
  o.devices = {cpu(0), cpu(0)};
  EXPECT_NE(error_of(o).find("listed twice"), std::string::npos);
  o = small_run();
  o.devices = {gpu(9)};
  EXPECT_NE(error_of(o).find("gpu(9)"), std::string::npos);
  o = small_run();
  o.devices = {cpu_pinned(0)};
  EXPECT_NE(error_of(o).find("expected cpu:N or gpu:N"), std::string::npos);
  o = small_run();
  o.clients = 0;
  EXPECT_NE(error_of(o).find("expected 1..256 clients, got 0"), std::string::npos);
  o = small_run();
  o.mix.fail = 101;
  EXPECT_NE(error_of(o).find("expected a fail rate in 0..100 (percent), got 101"),
            std::string::npos);
  o = small_run();
  o.slots = 3;
  EXPECT_NE(error_of(o).find("at least two per device"), std::string::npos);
}

}  // namespace
}  // namespace tagflow::tools
