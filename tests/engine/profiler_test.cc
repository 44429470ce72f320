// The profiler: a small known graph on cpu(0), cpu(1) and a simulated GPU
// gives exactly the expected operations, flows (writer to reader) and waits,
// with times in dependency order; nothing is recorded outside a scope; the
// Chrome trace has an event per operation, per device span and per flow,
// on the tracks of their devices.

#include <chrono>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/profiler.h"
#include "engine/stream.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::run_with_timeout;

EngineConfig small_config(EngineKind kind = EngineKind::kThreaded) {
  EngineConfig config = EngineConfig::defaults();
  config.kind = kind;
  config.cpu_workers = 1;
  config.sim_gpus = 1;
  config.profiler = false;
  return config;
}

/// Pushes a host operation that sleeps `pause`.
void push_host(Engine& engine, const char* name, Context ctx, VarList reads, VarList writes,
               std::chrono::microseconds pause = 0us) {
  engine.push({.name = name,
               .ctx = ctx,
               .reads = std::move(reads),
               .writes = std::move(writes),
               .fn = [pause](const RunContext&) { std::this_thread::sleep_for(pause); }});
}

struct Recorded {
  profiler::Trace trace;
  std::map<std::string, profiler::OpEvent> ops;
};

/// The graph, run under a profiler scope:
///   before (not recorded) writes x
///   first reader   cpu(0)  reads x             (no flow: its writer was not recorded)
///   produce        cpu(0)  writes x            2 ms
///   consume        cpu(1)  reads x, writes y   (flow from produce)
///   launch         gpu(0)  reads x, writes z   (flow from produce; 1 ms of device work)
///   overwrite      cpu(0)  writes x            (after both readers; no flow)
///   late reader    cpu(1)  reads x, writes w   (flow from overwrite)
/// then wait_to_read(w) and wait_for_all().
Recorded run_graph(EngineKind kind = EngineKind::kThreaded) {
  auto engine = make_engine(small_config(kind));
  VarHandle x = engine->new_var(), y = engine->new_var(), z = engine->new_var(),
            w = engine->new_var(), v = engine->new_var();
  push_host(*engine, "before", cpu(0), {}, {x});
  engine->wait_for_all();
  profiler::clear();
  {
    profiler::Scope profiling;
    push_host(*engine, "first reader", cpu(0), {x}, {v});
    push_host(*engine, "produce", cpu(0), {}, {x}, 2ms);
    push_host(*engine, "consume", cpu(1), {x}, {y});
    engine->push({.name = "launch",
                  .ctx = gpu(0),
                  .reads = {x},
                  .writes = {z},
                  .fn = [](const RunContext& rc) {
                    rc.stream->enqueue_host([] { std::this_thread::sleep_for(1ms); });
                  }});
    push_host(*engine, "overwrite", cpu(0), {}, {x});
    push_host(*engine, "late reader", cpu(1), {x}, {w});
    engine->wait_to_read(w);
    engine->wait_for_all();
  }
  push_host(*engine, "after", cpu(0), {x}, {y});  // outside the scope: not recorded
  engine->wait_for_all();
  for (VarHandle var : {x, y, z, w, v}) engine->delete_var(var);
  engine.reset();  // every stream callback has run
  Recorded r;
  r.trace = profiler::collect();
  for (const profiler::OpEvent& e : r.trace.ops) r.ops[e.name] = e;
  return r;
}

TEST(ProfilerTest, AKnownGraphGivesExactlyItsOperationsFlowsAndWaits) {
  run_with_timeout(60s, [] {
    const Recorded r = run_graph();
    std::set<std::string> names;
    for (const auto& e : r.trace.ops) names.insert(e.name);
    EXPECT_EQ(names, (std::set<std::string>{"first reader", "produce", "consume", "launch",
                                            "overwrite", "late reader"}));
    ASSERT_EQ(r.trace.ops.size(), 6u) << "each operation once";

    std::set<std::pair<std::string, std::string>> flows;
    std::map<std::uint64_t, std::string> name_of;
    for (const auto& e : r.trace.ops) name_of[e.seq] = e.name;
    for (const auto& f : r.trace.flows) flows.insert({name_of[f.from_seq], name_of[f.to_seq]});
    EXPECT_EQ(flows,
              (std::set<std::pair<std::string, std::string>>{
                  {"produce", "consume"}, {"produce", "launch"}, {"overwrite", "late reader"}}));
    EXPECT_EQ(r.trace.flows.size(), 3u);

    const auto& produce = r.ops.at("produce");
    const auto& consume = r.ops.at("consume");
    const auto& launch = r.ops.at("launch");
    const auto& overwrite = r.ops.at("overwrite");
    EXPECT_EQ(produce.ctx, cpu(0));
    EXPECT_EQ(consume.ctx, cpu(1));
    EXPECT_EQ(launch.ctx, gpu(0));
    for (const auto& e : r.trace.ops) {
      EXPECT_LE(e.pushed_ns, e.ready_ns) << e.name;
      EXPECT_LE(e.ready_ns, e.started_ns) << e.name;
      EXPECT_LE(e.started_ns, e.ended_ns) << e.name;
      EXPECT_FALSE(e.failed) << e.name;
      if (e.ctx.is_gpu()) continue;
      EXPECT_EQ(e.device_started_ns, -1) << e.name << ": host work has no device span";
    }
    EXPECT_GE(produce.ended_ns - produce.started_ns, 2'000'000);
    EXPECT_GE(consume.started_ns, produce.ended_ns);
    EXPECT_GE(launch.started_ns, produce.ended_ns);
    // The GPU's work: from its mark in the stream, 1 ms of sleeping, then the
    // end mark, enqueued after the closure returned.
    EXPECT_GE(launch.device_started_ns, launch.started_ns);
    EXPECT_GE(launch.device_ended_ns - launch.device_started_ns, 1'000'000);
    EXPECT_GE(launch.device_ended_ns, launch.ended_ns);
    // The overwrite waits for both readers, the GPU's device work included.
    EXPECT_GE(overwrite.started_ns, consume.ended_ns);
    EXPECT_GE(overwrite.started_ns, launch.device_started_ns + 1'000'000);

    ASSERT_EQ(r.trace.waits.size(), 2u);
    EXPECT_EQ(r.trace.waits[0].what, "wait_to_read");
    EXPECT_EQ(r.trace.waits[0].waited_for, "late reader");
    EXPECT_EQ(r.trace.waits[0].waited_for_seq, r.ops.at("late reader").seq);
    EXPECT_GE(r.trace.waits[0].ended_ns, r.ops.at("late reader").ended_ns);
    EXPECT_EQ(r.trace.waits[1].what, "wait_for_all");
    EXPECT_EQ(r.trace.waits[0].thread, r.trace.waits[1].thread);
  });
}

TEST(ProfilerTest, TheNaiveEngineRecordsTheSameOperationsAndFlows) {
  run_with_timeout(60s, [] {
    const Recorded r = run_graph(EngineKind::kNaive);
    std::set<std::string> names;
    for (const auto& e : r.trace.ops) names.insert(e.name);
    EXPECT_EQ(names, (std::set<std::string>{"first reader", "produce", "consume", "launch",
                                            "overwrite", "late reader"}));
    std::map<std::uint64_t, std::string> name_of;
    for (const auto& e : r.trace.ops) name_of[e.seq] = e.name;
    std::set<std::pair<std::string, std::string>> flows;
    for (const auto& f : r.trace.flows) flows.insert({name_of[f.from_seq], name_of[f.to_seq]});
    EXPECT_EQ(flows,
              (std::set<std::pair<std::string, std::string>>{
                  {"produce", "consume"}, {"produce", "launch"}, {"overwrite", "late reader"}}));
    // One after the other, in push order; the GPU's work inside its operation.
    const auto& launch = r.ops.at("launch");
    EXPECT_GE(launch.device_ended_ns - launch.device_started_ns, 1'000'000);
    EXPECT_GE(launch.device_started_ns, launch.started_ns);
    EXPECT_LE(launch.device_ended_ns, launch.ended_ns);
    EXPECT_GE(r.ops.at("consume").started_ns, r.ops.at("produce").ended_ns);
  });
}

TEST(ProfilerTest, AnAsynchronousOperationRecordsWhenItsClosureReturned) {
  for (EngineKind kind : {EngineKind::kThreaded, EngineKind::kNaive}) {
    run_with_timeout(60s, [kind] {
      auto engine = make_engine(small_config(kind));
      VarHandle x = engine->new_var();
      profiler::clear();
      std::thread completer;
      {
        profiler::Scope profiling;
        engine->push({.name = "in flight",
                      .ctx = cpu(0),
                      .writes = {x},
                      .fn = [&completer](const RunContext&, Completion done) {
                        completer = std::thread([done = std::move(done)]() mutable {
                          std::this_thread::sleep_for(20ms);
                          done.done();
                        });
                      }});
        push_host(*engine, "synchronous", cpu(0), {x}, {});
        engine->wait_for_all();
      }
      completer.join();
      engine->delete_var(x);
      engine.reset();
      std::map<std::string, profiler::OpEvent> ops;
      for (const profiler::OpEvent& e : profiler::collect().ops) ops[e.name] = e;
      const profiler::OpEvent& async = ops.at("in flight");
      EXPECT_GE(async.returned_ns, async.started_ns) << to_string(kind);
      EXPECT_GE(async.ended_ns - async.returned_ns, 15'000'000) << to_string(kind);
      EXPECT_EQ(ops.at("synchronous").returned_ns, -1) << to_string(kind);
      EXPECT_GE(ops.at("synchronous").started_ns, async.ended_ns) << to_string(kind);
    });
  }
}

TEST(ProfilerTest, NothingIsRecordedOutsideAScope) {
  run_with_timeout(30s, [] {
    auto engine = make_engine(small_config());
    profiler::clear();
    EXPECT_FALSE(profiler::enabled());
    VarHandle x = engine->new_var();
    for (int i = 0; i < 100; ++i) push_host(*engine, "unrecorded", cpu(0), {}, {x});
    engine->wait_to_read(x);
    engine->delete_var(x);
    engine->wait_for_all();
    const profiler::Trace trace = profiler::collect();
    EXPECT_TRUE(trace.ops.empty());
    EXPECT_TRUE(trace.flows.empty());
    EXPECT_TRUE(trace.waits.empty());
    {
      profiler::Scope outer;
      {
        profiler::Scope inner;
        EXPECT_TRUE(profiler::enabled());
      }
      EXPECT_TRUE(profiler::enabled()) << "scopes nest";
    }
    EXPECT_FALSE(profiler::enabled());
  });
}

TEST(ProfilerTest, TheChromeTraceHasEveryEventOnItsDevicesTracks) {
  run_with_timeout(60s, [] {
    const Recorded r = run_graph();
    const nlohmann::json trace = nlohmann::json::parse(profiler::to_chrome_trace(r.trace));
    ASSERT_TRUE(trace.contains("traceEvents"));
    std::map<int, std::string> processes;
    std::map<std::pair<int, int>, std::string> threads;
    std::multiset<std::string> op_events;
    int device_events = 0, flow_starts = 0, flow_ends = 0, waits = 0;
    std::vector<nlohmann::json> ops;
    for (const auto& e : trace["traceEvents"]) {
      const std::string ph = e["ph"];
      if (ph == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
      if (ph == "M" && e["name"] == "thread_name")
        threads[{e["pid"], e["tid"]}] = e["args"]["name"];
      if (ph == "X" && e["cat"] == "op") {
        op_events.insert(e["name"].get<std::string>());
        ops.push_back(e);
      }
      if (ph == "X" && e["cat"] == "device") ++device_events;
      if (ph == "X" && e["cat"] == "wait") ++waits;
      if (ph == "s") ++flow_starts;
      if (ph == "f") ++flow_ends;
    }
    EXPECT_EQ(op_events, (std::multiset<std::string>{"first reader", "produce", "consume", "launch",
                                                     "overwrite", "late reader"}));
    EXPECT_EQ(device_events, 1);
    EXPECT_EQ(flow_starts, 3);
    EXPECT_EQ(flow_ends, 3);
    EXPECT_EQ(waits, 2);
    EXPECT_EQ(processes.size(), 4u);  // host, cpu(0), cpu(1), gpu(0)
    for (const auto& e : ops) {
      const std::string device = processes.at(e["pid"]);
      EXPECT_EQ(device, r.ops.at(e["name"]).ctx.str()) << e;
      EXPECT_TRUE(threads.count({e["pid"], e["tid"]})) << "every track is named: " << e;
    }
    const int gpu_pid = [&] {
      for (const auto& [pid, name] : processes) {
        if (name == "gpu(0)") return pid;
      }
      return -1;
    }();
    EXPECT_EQ(threads.at({gpu_pid, 0}), "compute worker");
    EXPECT_EQ(threads.at({gpu_pid, 2}), "compute stream");
    EXPECT_THROW(profiler::write_chrome_trace(r.trace, "/nonexistent-dir/trace.json"), Error);
    const std::filesystem::path file =
        std::filesystem::temp_directory_path() / "tagflow-trace-test.json";
    profiler::write_chrome_trace(r.trace, file);
    EXPECT_GT(std::filesystem::file_size(file), 100u);
    std::filesystem::remove(file);
  });
}

}  // namespace
}  // namespace tagflow
