// Modelled time on simulated GPUs (Note [Modelled time] in
// engine/device_model.h), on hand-built graphs whose times are worked by
// hand from a card of round figures: compute overlapping a copy, waits
// across streams and devices, a host wait, a CPU operation between two
// GPUs, timing-only GPUs. Times are read as a user reads them, from the
// profiler's device spans, and are exact: they do not depend on how the
// host's threads happened to run. Each graph runs on the threaded engine
// with 1 and 3 workers per CPU device; the naive engine, which waits for
// each operation's device work before the next, gets a timeline of its own.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/config.h"
#include "engine/detail/model_clock.h"
#include "engine/detail/sim_collective.h"
#include "engine/detail/sim_runtime.h"
#include "engine/device_model.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/profiler.h"
#include "engine/stream.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::run_with_timeout;

/// 1 TFLOP/s float32, 100 GB/s memory, 1 us launches; host 10 GB/s pinned
/// (2 us), 5 GB/s pageable; peers 50 GB/s (1 us).
DeviceModel test_card() {
  return DeviceModel::from_json(R"({
    "name": "test-card",
    "peak_tflops": {"float32": 1, "tf32": 2, "float16": 4, "bfloat16": 4},
    "memory_gb_per_s": 100, "launch_latency_us": 1, "memory_gib": 1,
    "host_link": {"kind": "host", "pinned_gb_per_s": 10, "pageable_gb_per_s": 5,
                  "latency_us": 2},
    "peer_link": {"kind": "peer", "gb_per_s": 50, "latency_us": 1}})");
}

using Span = std::pair<std::int64_t, std::int64_t>;

/// A kernel of 1e9 flops: 1 ms + 1 us.
constexpr KernelWork kMillisecond{.flops = 1e9, .bytes = 0};
constexpr std::int64_t kKernelNs = 1'001'000;

struct Param {
  const char* label;
  EngineKind kind;
  int workers;
};

class ModelledTimeTest : public ::testing::TestWithParam<Param> {
 protected:
  void SetUp() override { engine_ = make(false); }
  void TearDown() override { engine_.reset(); }

  std::unique_ptr<Engine> make(bool timing_only) const {
    EngineConfig c = EngineConfig::defaults();
    c.kind = GetParam().kind;
    c.cpu_workers = GetParam().workers;
    c.sim_gpus = 4;
    c.sim_model = test_card();
    c.sim_timing_only = timing_only;
    return make_engine(c);
  }

  /// Pushes an operation on `ctx` whose device work is one kernel of `work`.
  static void kernel(Engine& engine, const char* name, Context ctx, VarList reads, VarList writes,
                     KernelWork work = kMillisecond, QueueKind queue = QueueKind::kCompute) {
    engine.push({.name = name,
                 .ctx = ctx,
                 .reads = std::move(reads),
                 .writes = std::move(writes),
                 .queue = queue,
                 .fn = [work](const RunContext& rc) {
                   detail::sim::launch_kernel(*rc.stream, work, [] {});
                   detail::sim::check_status(detail::sim::get_last_error(), "kernel launch",
                                             rc.ctx);
                 }});
  }
  /// Pushes a copy of `bytes` from `from` to `to` on the GPU's copy queue.
  static void copy(Engine& engine, const char* name, Context from, Context to, double bytes,
                   VarList reads, VarList writes) {
    engine.push({.name = name,
                 .ctx = to.is_gpu() ? to : from,
                 .reads = std::move(reads),
                 .writes = std::move(writes),
                 .queue = QueueKind::kCopy,
                 .fn = [=](const RunContext& rc) {
                   detail::sim::enqueue_copy(*rc.stream, from, to,
                                             static_cast<std::uint64_t>(bytes), [] {});
                 }});
  }

  /// Runs `build` under the profiler; the device span of each operation by name.
  template <typename Build>
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> spans(Build build) {
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> out;
    run_with_timeout(30s, [&] {
      profiler::clear();
      {
        profiler::Scope profiling;
        build(*engine_);
        engine_->wait_for_all();
      }
      for (const profiler::OpEvent& e : profiler::collect().ops) {
        out[e.name] = {e.device_started_ns, e.device_ended_ns};
      }
      profiler::clear();
    });
    return out;
  }

  std::unique_ptr<Engine> engine_;
};

TEST_P(ModelledTimeTest, ComputeAndCopyOverlap) {
  VarHandle a = engine_->new_var(), b = engine_->new_var(), c = engine_->new_var();
  const auto t = spans([&](Engine& e) {
    kernel(e, "k1", gpu(0), {}, {a});
    kernel(e, "k2", gpu(0), {a}, {a});  // same stream: after k1
    // Independent: on the copy stream, at once. 1e7 bytes pinned: 2 us + 1 ms.
    copy(e, "upload", cpu_pinned(0), gpu(0), 1e7, {}, {b});
    // Pageable host memory: 5 GB/s.
    copy(e, "upload pageable", cpu(0), gpu(0), 1e7, {}, {c});
  });
  EXPECT_EQ(t.at("k1"), Span(0, kKernelNs));
  EXPECT_EQ(t.at("k2"), Span(kKernelNs, 2 * kKernelNs));
  EXPECT_EQ(t.at("upload"), Span(0, 1'002'000));
  EXPECT_EQ(t.at("upload pageable"), Span(1'002'000, 1'002'000 + 2'002'000));
  for (VarHandle v : {a, b, c}) engine_->delete_var(v);
}

TEST_P(ModelledTimeTest, CrossStreamAndCrossDeviceWaitsFollowTheMarks) {
  VarHandle x = engine_->new_var(), y = engine_->new_var(), z = engine_->new_var();
  const auto t = spans([&](Engine& e) {
    kernel(e, "produce", gpu(0), {}, {x});
    // The copy stream waits for the compute stream's mark: 5e7 bytes over
    // the peer link, 1 us + 1 ms.
    copy(e, "send", gpu(0), gpu(1), 5e7, {x}, {y});
    // gpu(1)'s compute stream waits for its copy stream.
    kernel(e, "consume", gpu(1), {y}, {z});
    // Another device with no dependency starts at 0.
    kernel(e, "elsewhere", gpu(2), {}, {});
  });
  EXPECT_EQ(t.at("produce"), Span(0, kKernelNs));
  EXPECT_EQ(t.at("send"), Span(kKernelNs, kKernelNs + 1'001'000));
  EXPECT_EQ(t.at("consume"), Span(2'002'000, 2'002'000 + kKernelNs));
  EXPECT_EQ(t.at("elsewhere"), Span(0, kKernelNs));
  for (VarHandle v : {x, y, z}) engine_->delete_var(v);
}

TEST_P(ModelledTimeTest, AHostWaitDelaysWhatTheHostIssuesNext) {
  VarHandle x = engine_->new_var(), y = engine_->new_var();
  const auto t = spans([&](Engine& e) {
    kernel(e, "first", gpu(0), {}, {x});
    e.wait_to_read(x);  // the host now stands at 1.001 ms
    // Unrelated to x, on another GPU: still issued after the wait.
    kernel(e, "after the wait", gpu(3), {}, {y});
  });
  EXPECT_EQ(t.at("after the wait"), Span(kKernelNs, 2 * kKernelNs));
  for (VarHandle v : {x, y}) engine_->delete_var(v);
}

TEST_P(ModelledTimeTest, ACpuOperationBetweenTwoGpusPassesTheTimeOn) {
  VarHandle x = engine_->new_var(), y = engine_->new_var(), z = engine_->new_var();
  const auto t = spans([&](Engine& e) {
    kernel(e, "gpu work", gpu(0), {}, {x});
    e.push({.name = "host step",
            .ctx = cpu(0),
            .reads = {x},
            .writes = {y},
            .fn = [](const RunContext&) {}});
    kernel(e, "next gpu", gpu(1), {y}, {z});
  });
  EXPECT_EQ(t.at("next gpu"), Span(kKernelNs, 2 * kKernelNs));
  for (VarHandle v : {x, y, z}) engine_->delete_var(v);
}

TEST_P(ModelledTimeTest, RepeatedRunsGiveTheSameTimes) {
  // Many operations over four GPUs and both queues: the modelled spans are
  // the same on every run, whatever the host threads did.
  auto build = [](Engine& e) {
    std::vector<VarHandle> vars;
    for (int i = 0; i < 8; ++i) vars.push_back(e.new_var());
    for (int step = 0; step < 50; ++step) {
      const int g = step % 4;
      VarHandle in = vars[static_cast<std::size_t>(step % 8)];
      VarHandle out = vars[static_cast<std::size_t>((step * 3 + 1) % 8)];
      kernel(e, intern_name(fmt::format("op {}", step)), gpu(g), {in}, {out},
             {.flops = 1e6 * (step % 7 + 1), .bytes = 1e5 * (step % 5)});
    }
    for (VarHandle v : vars) e.delete_var(v);
  };
  const auto first = spans(build);
  engine_ = make(false);  // a new engine: its clocks start again at 0
  const auto second = spans(build);
  EXPECT_EQ(first, second);
  EXPECT_EQ(first.size(), 50u);
}

TEST_P(ModelledTimeTest, ARingAllReduceStartsWithItsLastPartAndLastsTheRingsTime) {
  // gpu(i) first computes for (i + 1) ms, so the parts arrive at 1, 2, 3 and
  // 4 ms (+1 us each); the all-reduce of 4e7 bytes over the ring 0-1-2-3-0
  // then takes 1 us + 2·3·(1 us + 4e7 / (4 · 50 GB/s)) = 1.207 ms on every
  // GPU, and what follows it on each GPU starts when it ends.
  std::atomic<int> combined{0};
  const std::vector<int> ring = {0, 1, 2, 3};
  const double seconds = test_card().allreduce_seconds(ring, 4e7);
  EXPECT_NEAR(seconds, 1.207e-3, 1e-12);
  auto collective = std::make_shared<detail::sim::Collective>(
      4, detail::sim::ModelClock::to_ns(seconds), [&combined] { ++combined; });
  std::vector<VarHandle> grads;
  for (int i = 0; i < 4; ++i) grads.push_back(engine_->new_var());
  const auto t = spans([&](Engine& e) {
    for (int i = 0; i < 4; ++i) {
      kernel(e, intern_name(fmt::format("backward {}", i)), gpu(i), {}, {grads[i]},
             {.flops = 1e9 * (i + 1)});
    }
    for (int i = 0; i < 4; ++i) {
      e.push({.name = intern_name(fmt::format("allreduce {}", i)),
              .ctx = gpu(i),
              .writes = {grads[i]},
              .fn = [collective](const RunContext& rc) {
                detail::sim::enqueue_collective(*rc.stream, collective);
              }});
    }
    for (int i = 0; i < 4; ++i) {
      kernel(e, intern_name(fmt::format("update {}", i)), gpu(i), {grads[i]}, {});
    }
  });
  EXPECT_EQ(combined.load(), 1);
  for (int i = 0; i < 4; ++i) {
    const std::int64_t arrived = (i + 1) * 1'000'000 + 1'000;
    EXPECT_EQ(t.at(fmt::format("allreduce {}", i)), Span(arrived, 4'001'000 + 1'207'000)) << i;
    EXPECT_EQ(t.at(fmt::format("update {}", i)), Span(5'208'000, 5'208'000 + kKernelNs)) << i;
  }
  for (VarHandle v : grads) engine_->delete_var(v);
}

TEST_P(ModelledTimeTest, TimingOnlyGpusSkipKernelsAndRefuseHostReads) {
  engine_ = make(true);
  std::atomic<int> ran{0};
  VarHandle x = engine_->new_var(), host = engine_->new_var();
  run_with_timeout(30s, [&] {
    engine_->push(
        {.name = "kernel", .ctx = gpu(0), .writes = {x}, .fn = [&ran](const RunContext& rc) {
           detail::sim::launch_kernel(*rc.stream, kMillisecond, [&ran] { ++ran; });
         }});
    copy(*engine_, "download", gpu(0), cpu(0), 1e6, {x}, {host});
    engine_->wait_to_read(x);  // device work is waited for as usual
    try {
      engine_->wait_to_read(host);
      ADD_FAILURE() << "a host copy of a timing-only GPU's values was readable";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("timing-only"), std::string::npos) << e.what();
    }
    try {
      engine_->wait_for_all();
    } catch (const Error&) {  // the copy's failure, reported once
    }
  });
  EXPECT_EQ(ran.load(), 0);
  for (VarHandle v : {x, host}) engine_->delete_var(v);
}

using NaiveModelledTimeTest = ModelledTimeTest;

TEST_P(NaiveModelledTimeTest, TheNaiveEngineSerialisesDeviceWork) {
  VarHandle a = engine_->new_var(), b = engine_->new_var(), c = engine_->new_var();
  const auto t = spans([&](Engine& e) {
    kernel(e, "k1", gpu(0), {}, {a});
    // Independent of k1, but issued once push() of k1 returned: after it.
    copy(e, "upload", cpu_pinned(0), gpu(0), 1e7, {}, {b});
    kernel(e, "k2", gpu(1), {}, {c});
  });
  EXPECT_EQ(t.at("k1"), Span(0, kKernelNs));
  EXPECT_EQ(t.at("upload"), Span(kKernelNs, kKernelNs + 1'002'000));
  EXPECT_EQ(t.at("k2"), Span(kKernelNs + 1'002'000, 2 * kKernelNs + 1'002'000));
  for (VarHandle v : {a, b, c}) engine_->delete_var(v);
}

INSTANTIATE_TEST_SUITE_P(Naive, NaiveModelledTimeTest,
                         ::testing::Values(Param{"naive", EngineKind::kNaive, 1}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.label);
                         });

INSTANTIATE_TEST_SUITE_P(Engines, ModelledTimeTest,
                         ::testing::Values(Param{"threaded1", EngineKind::kThreaded, 1},
                                           Param{"threaded3", EngineKind::kThreaded, 3}),
                         [](const auto& param_info) {
                           return std::string(param_info.param.label);
                         });

}  // namespace
}  // namespace tagflow
