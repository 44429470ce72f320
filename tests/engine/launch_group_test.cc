// Engine::push_group (Note [Launch groups] in engine/engine.h): the parts of
// a simulated collective, which meet on their GPUs' streams, finish on every
// engine and controlled schedule; collectives over overlapping cliques of
// GPUs pushed by several threads at once all finish (every GPU runs them in
// one order) and sum what a plain loop sums; the naive engine launches a
// group through `together` from one thread, the threaded engine each part
// from its own device's worker; a bad group is refused whole.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/sim_collective.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::engine_param_name;
using testing::EngineParam;
using testing::run_with_timeout;

class LaunchGroupTest : public ::testing::TestWithParam<EngineParam> {
 protected:
  void SetUp() override {
    EngineConfig config = testing::config_for(GetParam());
    config.sim_gpus = 3;
    engine_ = make_engine(config);
  }
  void TearDown() override { engine_.reset(); }

  /// One part per device of `devices`, each adding its value to the
  /// others' on the devices: values[i] is what devices[i] holds, and holds
  /// the sum once the collective has run. Each part writes `writes[i]`.
  LaunchGroup all_reduce(const std::vector<Context>& devices, std::vector<double>* values,
                         const std::vector<VarHandle>& writes) {
    auto collective =
        std::make_shared<detail::sim::Collective>(static_cast<int>(devices.size()), 0, [values] {
          double sum = 0;
          for (double v : *values) sum += v;
          for (double& v : *values) v = sum;
        });
    LaunchGroup group;
    for (std::size_t i = 0; i < devices.size(); ++i) {
      group.parts.push_back({.name = "all_reduce part",
                             .ctx = devices[i],
                             .writes = {writes[i]},
                             .fn = [collective](const RunContext& rc) {
                               detail::sim::enqueue_collective(*rc.stream, collective);
                             }});
    }
    return group;
  }

  std::unique_ptr<Engine> engine_;
};

TEST_P(LaunchGroupTest, ACollectiveOverThreeGpusFinishesWithTheSumOnEach) {
  // Each GPU first writes its value in stream order, then the collective
  // sums them, then a host read after the wait sees the sum: were the parts
  // pushed one by one, the naive engine would wait on gpu(0)'s part for
  // parts it has not launched yet.
  const std::vector<Context> devices = {gpu(0), gpu(1), gpu(2)};
  std::vector<VarHandle> vars;
  for (std::size_t i = 0; i < devices.size(); ++i) vars.push_back(engine_->new_var());
  run_with_timeout(60s, [&] {
    for (int round = 0; round < 5; ++round) {
      std::vector<double> values(devices.size());
      for (std::size_t i = 0; i < devices.size(); ++i) {
        engine_->push({.name = "fill",
                       .ctx = devices[i],
                       .writes = {vars[i]},
                       .fn = [&values, i, round](const RunContext& rc) {
                         testing::on_device(rc, [&values, i, round] {
                           values[i] = static_cast<double>(round * 10) + static_cast<double>(i);
                         });
                       }});
      }
      engine_->push_group(all_reduce(devices, &values, vars));
      for (VarHandle v : vars) engine_->wait_to_read(v);
      const double expected = 3.0 * round * 10 + 0 + 1 + 2;
      for (double v : values) EXPECT_EQ(v, expected) << "round " << round;
    }
    engine_->wait_for_all();
  });
  for (VarHandle v : vars) engine_->delete_var(v);
}

TEST_P(LaunchGroupTest, OverlappingCliquesPushedFromThreeThreadsAllFinish) {
  // Three threads push all-reduces over the cliques {0,1}, {1,2} and {2,0},
  // each starting with another, so that without one order per GPU, gpu(0)
  // could run {2,0} before {0,1}, gpu(1) {0,1} before {1,2} and gpu(2)
  // {1,2} before {2,0}: a cycle, each GPU waiting for the next. Every
  // collective writes only its own variables, produced on the CPU for
  // different times, so nothing but the group order keeps the GPUs in step.
  const std::vector<std::vector<Context>> cliques = {
      {gpu(0), gpu(1)}, {gpu(1), gpu(2)}, {gpu(2), gpu(0)}};
  constexpr int kThreads = 3;
  constexpr int kRounds = 40;
  struct Collective {
    std::vector<double> values;
    std::vector<VarHandle> vars;
  };
  std::vector<std::vector<Collective>> made(kThreads);
  run_with_timeout(90s, [&] {
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      made[static_cast<std::size_t>(t)].resize(kRounds);
      threads.emplace_back([&, t] {
        for (int k = 0; k < kRounds; ++k) {
          const auto& clique = cliques[static_cast<std::size_t>(t + k) % cliques.size()];
          Collective& c = made[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)];
          for (std::size_t i = 0; i < clique.size(); ++i) {
            c.values.push_back(t * 1000.0 + k + 0.5 * static_cast<double>(i));
            c.vars.push_back(engine_->new_var());
            // Produced on the CPU for a while first, so that the parts
            // become ready on their GPUs in an order of their own.
            const auto pause = std::chrono::microseconds((t * 7919 + k * 613 + i * 211) % 300);
            engine_->push(
                {.name = "produce",
                 .ctx = cpu(0),
                 .writes = {c.vars.back()},
                 .fn = [pause](const RunContext&) { std::this_thread::sleep_for(pause); }});
          }
          engine_->push_group(all_reduce(clique, &c.values, c.vars));
        }
      });
    }
    for (std::thread& thread : threads) thread.join();
    engine_->wait_for_all();
  });
  for (int t = 0; t < kThreads; ++t) {
    for (int k = 0; k < kRounds; ++k) {
      Collective& c = made[static_cast<std::size_t>(t)][static_cast<std::size_t>(k)];
      const double expected = 2 * (t * 1000.0 + k) + 0.5;
      EXPECT_EQ(c.values[0], expected) << t << " " << k;
      EXPECT_EQ(c.values[1], expected) << t << " " << k;
      for (VarHandle v : c.vars) engine_->delete_var(v);
    }
  }
}

TEST_P(LaunchGroupTest, TogetherLaunchesTheNaiveEnginesGroupAndWorkersLaunchTheThreadeds) {
  // The naive engine calls `together` once, from one thread, with every
  // part's context in order and its stream; the threaded engine never calls
  // it and launches each part from a worker of the part's device.
  const std::vector<Context> devices = {gpu(0), gpu(1), gpu(2)};
  std::vector<double> values = {1, 2, 3};
  std::vector<VarHandle> vars;
  for (std::size_t i = 0; i < devices.size(); ++i) vars.push_back(engine_->new_var());
  auto collective = std::make_shared<detail::sim::Collective>(3, 0, [&values] {
    const double sum = values[0] + values[1] + values[2];
    for (double& v : values) v = sum;
  });
  std::mutex mutex;
  std::set<std::thread::id> part_threads;
  std::atomic<int> parts_called{0};
  LaunchGroup group;
  for (std::size_t i = 0; i < devices.size(); ++i) {
    group.parts.push_back({.name = "recorded part",
                           .ctx = devices[i],
                           .writes = {vars[i]},
                           .fn = [&, collective](const RunContext& rc) {
                             {
                               const std::lock_guard lock(mutex);
                               part_threads.insert(std::this_thread::get_id());
                             }
                             ++parts_called;
                             detail::sim::enqueue_collective(*rc.stream, collective);
                           }});
  }
  int together_calls = 0;
  std::vector<Context> together_contexts;
  group.together = [&, collective](std::span<const RunContext> contexts) {
    ++together_calls;
    for (const RunContext& rc : contexts) {
      together_contexts.push_back(rc.ctx);
      ASSERT_NE(rc.stream, nullptr);
      detail::sim::enqueue_collective(*rc.stream, collective);
    }
  };
  run_with_timeout(60s, [&] {
    engine_->push_group(std::move(group));
    engine_->wait_for_all();
  });
  EXPECT_EQ(values, (std::vector<double>{6, 6, 6}));
  if (GetParam().kind == EngineKind::kNaive) {
    EXPECT_EQ(together_calls, 1);
    EXPECT_EQ(together_contexts, devices);
    EXPECT_EQ(parts_called.load(), 0);
  } else {
    EXPECT_EQ(together_calls, 0);
    EXPECT_EQ(parts_called.load(), 3);
    EXPECT_EQ(part_threads.size(), 3u) << "two parts launched from one thread";
  }
  for (VarHandle v : vars) engine_->delete_var(v);
}

TEST_P(LaunchGroupTest, ABadGroupIsRefusedWholeAndPushesNothing) {
  VarHandle a = engine_->new_var();
  VarHandle b = engine_->new_var();
  std::atomic<int> ran{0};
  const auto part = [&](Context ctx, VarHandle v) {
    return Operation{
        .name = "part", .ctx = ctx, .writes = {v}, .fn = [&ran](const RunContext&) { ++ran; }};
  };
  const std::uint64_t pushed = engine_->operation_counts().pushed;
  const auto expect_refused = [&](LaunchGroup group, const char* expected_words) {
    try {
      engine_->push_group(std::move(group));
      ADD_FAILURE() << "accepted a group that should be refused: " << expected_words;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(expected_words), std::string::npos) << e.what();
    }
  };
  {
    LaunchGroup g;
    g.parts.push_back(part(gpu(0), a));
    g.parts.push_back(part(gpu(0), b));
    expect_refused(std::move(g), "parts 0 and 1 are both on gpu(0)");
  }
  {
    LaunchGroup g;
    g.parts.push_back(part(gpu(0), a));
    g.parts.push_back(part(gpu(7), b));
    expect_refused(std::move(g), "gpu(7)");
  }
  {
    LaunchGroup g;
    g.parts.push_back(part(gpu(0), a));
    g.parts.push_back({.name = "async part",
                       .ctx = gpu(1),
                       .writes = {b},
                       .fn = [](const RunContext&, Completion c) { c.done(); }});
    expect_refused(std::move(g), "part 1 ('async part') is asynchronous");
  }
  {
    LaunchGroup g;
    g.parts.push_back(part(gpu(0), a));
    g.parts.push_back(part(gpu(1), VarHandle{}));
    expect_refused(std::move(g), "lists a null variable in writes");
  }
  {
    LaunchGroup g;
    g.parts.push_back(part(gpu(0), a));
    g.parts.push_back({.name = "empty", .ctx = gpu(1), .writes = {b}});
    expect_refused(std::move(g), "part 1 ('empty') has no closure");
  }
  engine_->wait_for_all();
  EXPECT_EQ(engine_->operation_counts().pushed, pushed);
  EXPECT_EQ(ran.load(), 0);
  engine_->delete_var(a);
  engine_->delete_var(b);
}

INSTANTIATE_TEST_SUITE_P(Engines, LaunchGroupTest, testing::engine_params_with_schedules(),
                         engine_param_name);

}  // namespace
}  // namespace tagflow
