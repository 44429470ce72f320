// Controlled schedules (engine/schedule.h, Note [Controlled schedules]):
// the syntax; the same seed giving the same order, and a recorded order
// replaying exactly (and a replay that diverges refused, naming the step);
// the same modelled trace, bitwise, on simulated GPUs; and a planted
// ordering bug (a read the workload forgot to declare) found by PCT far
// more often than by uniform random picks, at rates fixed by the seeds.

#include "engine/schedule.h"

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/config.h"
#include "engine/detail/sim_runtime.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/profiler.h"

namespace tagflow {
namespace {

std::unique_ptr<Engine> scheduled(const std::string& schedule, int sim_gpus = 0,
                                  const std::filesystem::path& record = {}) {
  EngineConfig config = EngineConfig::defaults();
  config.kind = EngineKind::kNaive;
  config.schedule = ScheduleOptions::parse(schedule);
  config.schedule.record = record;
  config.sim_gpus = sim_gpus;
  if (sim_gpus > 0) config.sim_model = DeviceModel::builtin("h100-sxm");
  return make_engine(config);
}

/// A workload of 40 operations over 6 variables from one client thread;
/// each appends its number to `order` when it runs. Returns the order.
std::vector<int> run_workload(Engine& engine) {
  auto order = std::make_shared<std::vector<int>>();
  std::vector<VarHandle> vars;
  for (int i = 0; i < 6; ++i) vars.push_back(engine.new_var());
  for (int i = 0; i < 40; ++i) {
    VarHandle a = vars[static_cast<std::size_t>(i * 7 % 6)];
    VarHandle b = vars[static_cast<std::size_t>(i * 5 % 6)];
    engine.push({.name = "step",
                 .reads = {a},
                 .writes = i % 3 == 0 ? VarList{b} : VarList{},
                 .fn = [order, i](const RunContext&) { order->push_back(i); }});
  }
  engine.wait_for_all();
  for (VarHandle v : vars) engine.delete_var(v);
  engine.wait_for_all();
  return *order;
}

TEST(ScheduleTest, SyntaxIsParsedOrRefusedClearly) {
  EXPECT_EQ(ScheduleOptions::parse("random:7").str(), "random:7");
  EXPECT_EQ(ScheduleOptions::parse("pct:7").str(), "pct:7:3:1000");
  EXPECT_EQ(ScheduleOptions::parse("pct:7:2:50").str(), "pct:7:2:50");
  EXPECT_EQ(ScheduleOptions::parse("replay:/tmp/a:b").replay, "/tmp/a:b");
  EXPECT_FALSE(ScheduleOptions::parse("none").controlled());
  for (const char* bad :
       {"pct", "pct:x", "pct:1:0", "pct:1:2:0", "random", "random:1:2", "replay:", "fifo:1"}) {
    try {
      (void)ScheduleOptions::parse(bad);
      ADD_FAILURE() << "accepted \"" << bad << "\"";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("expected random:SEED"), std::string::npos) << bad;
    }
  }
  EngineConfig threaded = EngineConfig::defaults();
  threaded.schedule = ScheduleOptions::parse("pct:1");
  EXPECT_THROW((void)make_engine(threaded), Error);
}

TEST(ScheduleTest, TheSameSeedGivesTheSameOrderAndOthersDiffer) {
  for (const char* policy : {"random", "pct"}) {
    const std::vector<int> first = run_workload(*scheduled(fmt::format("{}:11", policy)));
    EXPECT_EQ(first.size(), 40u);
    EXPECT_EQ(run_workload(*scheduled(fmt::format("{}:11", policy))), first) << policy;
    int different = 0;
    for (int seed = 12; seed < 17; ++seed) {
      different += run_workload(*scheduled(fmt::format("{}:{}", policy, seed))) != first ? 1 : 0;
    }
    EXPECT_GE(different, 4) << policy << ": other seeds should pick other orders";
  }
  // Without control: push order.
  std::vector<int> push_order(40);
  for (int i = 0; i < 40; ++i) push_order[static_cast<std::size_t>(i)] = i;
  EXPECT_EQ(run_workload(*scheduled("none")), push_order);
}

TEST(ScheduleTest, ARecordedRunReplaysExactlyAndADivergentOneIsRefused) {
  const auto file =
      std::filesystem::temp_directory_path() /
      fmt::format("tagflow-schedule-{}.txt", ::testing::UnitTest::GetInstance()->random_seed());
  const std::vector<int> recorded = run_workload(*scheduled("pct:5:3:40", 0, file));
  const std::vector<int> replayed = run_workload(*scheduled("replay:" + file.string()));
  EXPECT_EQ(replayed, recorded);
  // Another program under the same record: refused at the first pick that
  // is not ready, with the step named.
  auto engine = scheduled("replay:" + file.string());
  VarHandle x = engine->new_var();
  for (int i = 0; i < 3; ++i) {
    engine->push({.name = "other", .writes = {x}, .fn = [](const RunContext&) {}});
  }
  try {
    engine->wait_for_all();
    ADD_FAILURE() << "a divergent replay ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("diverged at step"), std::string::npos) << e.what();
  }
  std::filesystem::remove(file);
}

TEST(ScheduleTest, TheSameSeedGivesTheSameModelledTraceBitwise) {
  // Kernels on four modelled GPUs with cross-device dependencies: the
  // device spans of the trace are a function of the seed.
  auto trace_of = [](const std::string& schedule) {
    auto engine = scheduled(schedule, 4);
    std::vector<VarHandle> vars;
    for (int i = 0; i < 4; ++i) vars.push_back(engine->new_var());
    profiler::clear();
    {
      const profiler::Scope profiling;
      for (int i = 0; i < 24; ++i) {
        const int g = i % 4;
        engine->push({.name = intern_name(fmt::format("kernel {}", i)),
                      .ctx = gpu(g),
                      .reads = {vars[static_cast<std::size_t>((i + 1) % 4)]},
                      .writes = {vars[static_cast<std::size_t>(g)]},
                      .fn = [i](const RunContext& rc) {
                        detail::sim::launch_kernel(*rc.stream, {.flops = 1e9 * (1 + i % 3)}, [] {});
                      }});
      }
      engine->wait_for_all();
    }
    std::vector<std::string> spans;
    for (const profiler::OpEvent& e : profiler::collect().ops) {
      spans.push_back(
          fmt::format("{} {} {} {}", e.name, e.ctx.str(), e.device_started_ns, e.device_ended_ns));
    }
    profiler::clear();
    for (VarHandle v : vars) engine->delete_var(v);
    return spans;
  };
  const std::vector<std::string> first = trace_of("random:3");
  ASSERT_EQ(first.size(), 24u);
  EXPECT_EQ(trace_of("random:3"), first);
  EXPECT_EQ(trace_of("pct:3:2:30"), trace_of("pct:3:2:30"));
}

/// The planted bug: `late` reads a cell that `early` writes, without
/// declaring it; they share no variable. `early` is ready from the start;
/// `late` follows a chain of `chain` operations. The bug shows when `late`
/// runs before `early`. Returns whether it showed under `schedule`.
bool planted_bug_shows(const std::string& schedule, int chain) {
  auto engine = scheduled(schedule);
  auto cell = std::make_shared<int>(0);
  auto seen = std::make_shared<int>(-1);
  VarHandle mine = engine->new_var(), link = engine->new_var();
  engine->push({.name = "early", .writes = {mine}, .fn = [cell](const RunContext&) { *cell = 1; }});
  for (int i = 0; i < chain; ++i) {
    engine->push({.name = "chain", .writes = {link}, .fn = [](const RunContext&) {}});
  }
  engine->push({.name = "late",
                .reads = {link},  // the bug: `mine` is not listed, though its cell is read
                .fn = [cell, seen](const RunContext&) { *seen = *cell; }});
  engine->wait_for_all();
  engine->delete_var(mine);
  engine->delete_var(link);
  engine->wait_for_all();
  return *seen == 0;
}

TEST(ScheduleTest, PctFindsAPlantedOrderingBugThatRandomPicksMiss) {
  constexpr int kRuns = 400;
  constexpr int kChain = 12;
  int pct = 0, random = 0, push_order = 0;
  for (int seed = 1; seed <= kRuns; ++seed) {
    pct += planted_bug_shows(fmt::format("pct:{}:2:{}", seed, kChain + 2), kChain) ? 1 : 0;
    random += planted_bug_shows(fmt::format("random:{}", seed), kChain) ? 1 : 0;
  }
  push_order += planted_bug_shows("none", kChain) ? 1 : 0;
  // Fixed by the seeds (docs/schedules.md quotes them: 24 and 0 of 400): PCT
  // delays `early` past the chain when its priority is below the chain's
  // 13 or the change point lowers it; random picks would have to pass over
  // it 13 times running, one chance in 2^13.
  RecordProperty("pct_found", pct);
  RecordProperty("random_found", random);
  std::printf("planted bug found in %d of %d PCT runs, %d of %d random runs\n", pct, kRuns, random,
              kRuns);
  EXPECT_GE(pct, kRuns / 25);
  EXPECT_LE(random, 1);
  EXPECT_EQ(push_order, 0);
}

}  // namespace
}  // namespace tagflow
