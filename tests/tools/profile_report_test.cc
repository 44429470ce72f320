// `tagflow profile`: the figures of a synthetic trace against values worked
// out by hand (through the Chrome trace file format and back), the HTML
// timeline holds every event, and malformed traces give clear errors.

#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "engine/error.h"
#include "engine/profiler.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"
#include "tools/profile_compare.h"
#include "tools/profile_page.h"
#include "tools/profile_report.h"

namespace tagflow {
namespace {

constexpr std::int64_t us = 1000;  // ns

/// load   cpu(0) worker 0        [0, 100]
/// conv   gpu(0) compute, host [100, 110], device [120, 300]   reads load
/// copy   gpu(0) copy queue, host [105, 106], device [200, 400]
/// sum    cpu(0) worker 0        [500, 600]   reads conv and copy
/// host thread 0: wait_to_read for sum [450, 600], wait_for_all [600, 650]
/// memory: cpu(0) +1000, +512, -1000, +256 (peak 1512, 768 at the end);
/// gpu(0) +4096
profiler::Trace synthetic() {
  profiler::Trace t;
  t.ops.push_back({.name = "load", .ctx = cpu(0), .seq = 1, .ended_ns = 100 * us});
  t.ops.push_back({.name = "conv",
                   .ctx = gpu(0),
                   .seq = 2,
                   .pushed_ns = 50 * us,
                   .ready_ns = 100 * us,
                   .started_ns = 100 * us,
                   .ended_ns = 110 * us,
                   .device_started_ns = 120 * us,
                   .device_ended_ns = 300 * us});
  t.ops.push_back({.name = "copy",
                   .ctx = gpu(0),
                   .queue = QueueKind::kCopy,
                   .seq = 3,
                   .pushed_ns = 60 * us,
                   .ready_ns = 105 * us,
                   .started_ns = 105 * us,
                   .ended_ns = 106 * us,
                   .device_started_ns = 200 * us,
                   .device_ended_ns = 400 * us});
  t.ops.push_back({.name = "sum",
                   .ctx = cpu(0),
                   .seq = 4,
                   .pushed_ns = 70 * us,
                   .ready_ns = 400 * us,
                   .started_ns = 500 * us,
                   .ended_ns = 600 * us});
  t.flows = {{1, 2}, {2, 4}, {3, 4}};
  t.waits.push_back({.what = "wait_to_read",
                     .waited_for = "sum",
                     .waited_for_seq = 4,
                     .thread = 0,
                     .started_ns = 450 * us,
                     .ended_ns = 600 * us});
  t.waits.push_back(
      {.what = "wait_for_all", .thread = 0, .started_ns = 600 * us, .ended_ns = 650 * us});
  t.allocations = {{.ctx = cpu(0), .bytes = 1000, .at_ns = 10 * us},
                   {.ctx = cpu(0), .bytes = 512, .at_ns = 20 * us},
                   {.ctx = cpu(0), .bytes = 1000, .release = true, .at_ns = 30 * us},
                   {.ctx = cpu(0), .bytes = 256, .at_ns = 40 * us},
                   {.ctx = gpu(0), .bytes = 4096, .at_ns = 150 * us}};
  return t;
}

TEST(ProfileReportTest, FiguresOfASyntheticTraceMatchTheHandWorkedOnes) {
  // Through the file format, as `tagflow profile` reads it.
  const tools::ProfileSummary s =
      tools::summarize(tools::parse_chrome_trace(profiler::to_chrome_trace(synthetic())));
  EXPECT_DOUBLE_EQ(s.span_us, 600);
  ASSERT_EQ(s.operations.size(), 4u);
  const std::vector<std::pair<std::string, double>> expected = {
      {"copy", 200}, {"conv", 180}, {"load", 100}, {"sum", 100}};
  for (std::size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(s.operations[i].name, expected[i].first);
    EXPECT_EQ(s.operations[i].count, 1);
    EXPECT_DOUBLE_EQ(s.operations[i].total_us, expected[i].second);
    EXPECT_DOUBLE_EQ(s.operations[i].max_us, expected[i].second);
  }
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].device, "cpu(0)");
  EXPECT_DOUBLE_EQ(s.devices[0].busy_us, 200);  // [0,100] and [500,600]
  EXPECT_NEAR(s.devices[0].busy_fraction, 200.0 / 600.0, 1e-12);
  EXPECT_EQ(s.devices[1].device, "gpu(0)");
  EXPECT_DOUBLE_EQ(s.devices[1].busy_us, 280);  // [120,300] and [200,400] merged
  EXPECT_DOUBLE_EQ(s.copy_us, 200);
  EXPECT_DOUBLE_EQ(s.copy_overlapped_us, 100);  // [200,300] under conv
  EXPECT_DOUBLE_EQ(s.wait_us, 200);
  ASSERT_EQ(s.waits.size(), 2u);
  EXPECT_EQ(s.waits[0].what, "wait_to_read");
  EXPECT_EQ(s.waits[0].waited_for, "sum");
  EXPECT_DOUBLE_EQ(s.waits[0].total_us, 150);
  EXPECT_DOUBLE_EQ(s.waits[1].total_us, 50);
  ASSERT_EQ(s.gaps.size(), 1u);  // the only track with two intervals
  EXPECT_EQ(s.gaps[0].track, "cpu(0) worker 0");
  EXPECT_DOUBLE_EQ(s.gaps[0].start_us, 100);
  EXPECT_DOUBLE_EQ(s.gaps[0].length_us, 400);
  EXPECT_EQ(s.gaps[0].before, "load");
  EXPECT_EQ(s.gaps[0].after, "sum");
  // From sum (ends last) back to what it read that ended last (copy at 400,
  // not conv at 300); copy reads nothing.
  ASSERT_EQ(s.critical_path.size(), 2u);
  EXPECT_EQ(s.critical_path[0].name, "copy");
  EXPECT_EQ(s.critical_path[0].seq, 3u);
  EXPECT_EQ(s.critical_path[0].device, "gpu(0)");
  EXPECT_DOUBLE_EQ(s.critical_path[0].busy_us, 200);
  EXPECT_EQ(s.critical_path[1].name, "sum");
  EXPECT_EQ(s.critical_path[1].seq, 4u);
  EXPECT_DOUBLE_EQ(s.critical_path_us, 300);
  // copy: pushed at 60, on its stream at 200; sum: released at 400, ran at 500.
  EXPECT_EQ(s.critical_path[0].gate, tools::CriticalGate::kFirst);
  EXPECT_DOUBLE_EQ(s.critical_path[0].waited_us, 140);
  EXPECT_EQ(s.critical_path[1].gate, tools::CriticalGate::kData);
  EXPECT_DOUBLE_EQ(s.critical_path[1].waited_us, 100);
  EXPECT_DOUBLE_EQ(s.critical_path_waited_us, 240);
  ASSERT_EQ(s.memory.size(), 2u);
  EXPECT_EQ(s.memory[0].device, "cpu(0)");
  EXPECT_EQ(s.memory[0].allocations, 3);
  EXPECT_EQ(s.memory[0].releases, 1);
  EXPECT_EQ(s.memory[0].peak_bytes, 1512);
  EXPECT_EQ(s.memory[0].end_bytes, 768);
  EXPECT_EQ(s.memory[1].device, "gpu(0)");
  EXPECT_EQ(s.memory[1].peak_bytes, 4096);
  // Time per device over the 600 us span: cpu(0) computes [0,100] and
  // [500,600]; gpu(0) computes [120,300] and copies [200,400], 100 us of
  // it under the convolution.
  ASSERT_EQ(s.breakdown.size(), 2u);
  EXPECT_EQ(s.breakdown[0].device, "cpu(0)");
  EXPECT_DOUBLE_EQ(s.breakdown[0].compute_us, 200);
  EXPECT_DOUBLE_EQ(s.breakdown[0].copy_us, 0);
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_us, 400);
  EXPECT_EQ(s.breakdown[1].device, "gpu(0)");
  EXPECT_DOUBLE_EQ(s.breakdown[1].compute_us, 180);
  EXPECT_DOUBLE_EQ(s.breakdown[1].copy_us, 200);
  EXPECT_DOUBLE_EQ(s.breakdown[1].communication_us, 0);
  EXPECT_DOUBLE_EQ(s.breakdown[1].overlapped_us, 100);
  EXPECT_DOUBLE_EQ(s.breakdown[1].idle_us, 320);  // 600 - [120,400]
  // Idle by cause. cpu(0), [100,500]: sum was pushed at 70, ready at 400
  // (it read conv and copy, on gpu(0)), started at 500.
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_other_device_us, 300);
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_ready_us, 100);
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_nothing_pushed_us + s.breakdown[0].idle_host_waiting_us +
                       s.breakdown[0].idle_dependency_us,
                   0);
  // gpu(0), [0,120]: conv pushed at 50 (nothing before), ready at 100 (it
  // read load, on cpu(0)), its device work from 120; then [400,600] after
  // its last operation, a host thread waiting from 450.
  EXPECT_DOUBLE_EQ(s.breakdown[1].idle_nothing_pushed_us, 50 + 50);
  EXPECT_DOUBLE_EQ(s.breakdown[1].idle_host_waiting_us, 150);
  EXPECT_DOUBLE_EQ(s.breakdown[1].idle_other_device_us, 50);
  EXPECT_DOUBLE_EQ(s.breakdown[1].idle_ready_us, 20);
  EXPECT_DOUBLE_EQ(s.breakdown[1].idle_dependency_us, 0);
}

TEST(ProfileReportTest, AModelledTraceSaysItsTimesArePredictions) {
  profiler::Trace t = synthetic();
  EXPECT_EQ(tools::figure_tables(tools::summarize(t))[0].rows[0][1], "measured");
  t.origin.device_model = "h100-sxm";
  const profiler::Trace read = tools::parse_chrome_trace(profiler::to_chrome_trace(t));
  EXPECT_EQ(read.origin.device_model, "h100-sxm");
  const auto tables = tools::figure_tables(tools::summarize(read));
  EXPECT_EQ(tables[0].rows[0][0], "times");
  EXPECT_EQ(tables[0].rows[0][1], "predicted by the device model h100-sxm, not measured");
  // The figures are the same as the measured trace's: only the label differs.
  EXPECT_EQ(tables[0].rows[1], tools::figure_tables(tools::summarize(synthetic()))[0].rows[1]);
}

TEST(ProfileReportTest, CommunicationUnderComputeIsCountedApartFromCopies) {
  // gpu(0): compute [0, 100] us; a gradient sum on the copy queue [50, 150];
  // a plain copy [60, 70], inside both.
  profiler::Trace t;
  t.ops.push_back({.name = "backward",
                   .ctx = gpu(0),
                   .seq = 1,
                   .device_started_ns = 0,
                   .device_ended_ns = 100 * us});
  t.ops.push_back({.name = "allreduce",
                   .ctx = gpu(0),
                   .queue = QueueKind::kCopy,
                   .seq = 2,
                   .priority = kCommunicationPriority,
                   .device_started_ns = 50 * us,
                   .device_ended_ns = 150 * us});
  t.ops.push_back({.name = "copy",
                   .ctx = gpu(0),
                   .queue = QueueKind::kCopy,
                   .seq = 3,
                   .device_started_ns = 60 * us,
                   .device_ended_ns = 70 * us});
  const tools::ProfileSummary s = tools::summarize(t);
  ASSERT_EQ(s.breakdown.size(), 1u);
  const tools::TimeBreakdown& b = s.breakdown[0];
  EXPECT_DOUBLE_EQ(b.compute_us, 100);
  EXPECT_DOUBLE_EQ(b.copy_us, 10);
  EXPECT_DOUBLE_EQ(b.communication_us, 100);
  EXPECT_DOUBLE_EQ(b.communication_overlapped_us, 50);  // [50, 100]
  EXPECT_DOUBLE_EQ(b.overlapped_us, 50);                // the copy lies inside that
}

TEST(ProfileReportTest, AnAsynchronousOperationKeepsItsWorkerBusyOnlyUntilItReturns) {
  // allreduce on cpu(1): its closure runs [100, 110], then it is in flight
  // until 500; scale on cpu(1) runs [520, 540]. Through the file format.
  profiler::Trace t;
  t.ops.push_back({.name = "allreduce",
                   .ctx = cpu(1),
                   .seq = 1,
                   .priority = kCommunicationPriority,
                   .started_ns = 100 * us,
                   .ended_ns = 500 * us,
                   .returned_ns = 110 * us});
  t.ops.push_back({.name = "scale",
                   .ctx = cpu(1),
                   .seq = 2,
                   .pushed_ns = 0,
                   .started_ns = 520 * us,
                   .ended_ns = 540 * us});
  const profiler::Trace parsed = tools::parse_chrome_trace(profiler::to_chrome_trace(t));
  ASSERT_EQ(parsed.ops.size(), 2u);
  EXPECT_EQ(parsed.ops[0].returned_ns, 110 * us);
  EXPECT_EQ(parsed.ops[1].returned_ns, -1);
  const tools::ProfileSummary s = tools::summarize(parsed);
  EXPECT_DOUBLE_EQ(s.span_us, 540);
  ASSERT_EQ(s.devices.size(), 1u);
  EXPECT_DOUBLE_EQ(s.devices[0].busy_us, 30);        // [100, 110] and [520, 540]
  EXPECT_DOUBLE_EQ(s.devices[0].in_flight_us, 390);  // [110, 500]
  EXPECT_NEAR(s.devices[0].in_flight_fraction, 390.0 / 540.0, 1e-12);
  // The operation itself lasted 400 us; its worker was idle from 110 to 520.
  EXPECT_DOUBLE_EQ(s.operations[0].total_us, 400);
  ASSERT_EQ(s.gaps.size(), 1u);
  EXPECT_DOUBLE_EQ(s.gaps[0].start_us, 110);
  EXPECT_DOUBLE_EQ(s.gaps[0].length_us, 410);
  // Communication [100,500] (the closure, then in flight), compute
  // [520,540], idle the remaining 120 us of the 540.
  ASSERT_EQ(s.breakdown.size(), 1u);
  EXPECT_DOUBLE_EQ(s.breakdown[0].communication_us, 400);
  EXPECT_DOUBLE_EQ(s.breakdown[0].compute_us, 20);
  EXPECT_DOUBLE_EQ(s.breakdown[0].overlapped_us, 0);
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_us, 120);
}

TEST(ProfileReportTest, TheEngineRecordsWhenAnAsynchronousClosureReturned) {
  Engine::get().wait_for_all();
  profiler::clear();
  std::thread completer;
  {
    profiler::Scope profiling;
    NDArray out = zeros({4}, cpu(1));
    push_arrays({.name = "completes later",
                 .writes = {out},
                 .fn = [&completer](const RunContext&, Completion done) {
                   completer = std::thread([done = std::move(done)]() mutable {
                     std::this_thread::sleep_for(std::chrono::milliseconds(30));
                     done.done();
                   });
                 }});
    out.wait_to_read();
  }
  completer.join();
  const profiler::Trace trace = profiler::collect();
  const auto found =
      std::find_if(trace.ops.begin(), trace.ops.end(),
                   [](const profiler::OpEvent& e) { return e.name == "completes later"; });
  ASSERT_NE(found, trace.ops.end());
  EXPECT_GE(found->returned_ns, found->started_ns);
  EXPECT_GE(found->ended_ns - found->returned_ns, 25'000'000) << "in flight while it slept";
  const tools::ProfileSummary s = tools::summarize(trace);
  const auto cpu1 = std::find_if(s.devices.begin(), s.devices.end(),
                                 [](const tools::DeviceStats& d) { return d.device == "cpu(1)"; });
  ASSERT_NE(cpu1, s.devices.end());
  EXPECT_LT(cpu1->busy_us, 20'000) << "the worker was free while the completion slept";
  EXPECT_GE(cpu1->in_flight_us, 25'000);
  // Synchronous operations have none.
  for (const profiler::OpEvent& e : trace.ops) {
    if (e.name != "completes later") {
      EXPECT_EQ(e.returned_ns, -1) << e.name;
    }
  }
}

TEST(ProfileReportTest, ARealRunRecordsOperatorsCopiesAndMemory) {
  Engine::get().wait_for_all();
  profiler::clear();
  {
    profiler::Scope profiling;
    const NDArray a = ones({1000}, DType::kFloat32, cpu(0));
    const NDArray b = a + 1;
    const NDArray c = b.copyto(gpu(0));  // a simulated GPU (the test main)
    EXPECT_EQ(sum(c).asscalar<float>(), 2000.f);
    Engine::get().wait_for_all();
  }
  const profiler::Trace trace = profiler::collect();
  profiler::clear();
  std::set<std::string> names;
  bool copy_on_gpu = false;
  for (const profiler::OpEvent& e : trace.ops) {
    names.insert(e.name);
    if (e.name == "copy" && e.ctx == gpu(0)) {
      copy_on_gpu = e.queue == QueueKind::kCopy && e.device_started_ns >= 0;
    }
  }
  EXPECT_TRUE(names.count("plus_scalar")) << "operators are recorded under their names";
  EXPECT_TRUE(copy_on_gpu) << "the copy runs on gpu(0)'s copy queue, with a device span";
  std::set<Context> allocated_on;
  for (const profiler::AllocationEvent& a : trace.allocations) {
    if (!a.release && a.bytes >= 4000) allocated_on.insert(a.ctx);
  }
  EXPECT_TRUE(allocated_on.count(cpu(0)));
  EXPECT_TRUE(allocated_on.count(gpu(0)));
  const tools::ProfileSummary s = tools::summarize(trace);
  EXPECT_GT(s.copy_us, 0);
  EXPECT_FALSE(s.critical_path.empty());
  EXPECT_FALSE(trace.waits.empty()) << "asscalar waited";
}

/// a  cpu(0) worker 0  [0, 100]    pushed 0
/// b  cpu(0) worker 0  [100, 250]  pushed 10, reads nothing: waits for a
/// host thread 0: wait_to_read for b [20, 260]
/// c  cpu(1) worker 0  [300, 400]  pushed 280 after the wait, reads b
/// d  cpu(1) worker 0  [400, 450]  pushed 290, reads a: waits for c
/// e  cpu(0) worker 0  [260, 270]  pushed 255, reads nothing: off the path
profiler::Trace gated_trace() {
  profiler::Trace t;
  const auto op = [&](const char* name, int device, std::uint64_t seq, std::int64_t pushed,
                      std::int64_t begin, std::int64_t end) {
    t.ops.push_back({.name = name,
                     .ctx = cpu(device),
                     .seq = seq,
                     .pushed_ns = pushed * us,
                     .ready_ns = pushed * us,
                     .started_ns = begin * us,
                     .ended_ns = end * us});
  };
  op("a", 0, 1, 0, 0, 100);
  op("b", 0, 2, 10, 100, 250);
  op("e", 0, 5, 255, 260, 270);
  op("c", 1, 3, 280, 300, 400);
  op("d", 1, 4, 290, 400, 450);
  t.flows = {{2, 3}, {1, 4}};
  t.waits.push_back({.what = "wait_to_read",
                     .waited_for = "b",
                     .waited_for_seq = 2,
                     .started_ns = 20 * us,
                     .ended_ns = 260 * us});
  return t;
}

TEST(ProfileReportTest, TheCriticalPathFollowsDataTracksAndHostWaits) {
  const tools::ProfileSummary s =
      tools::summarize(tools::parse_chrome_trace(profiler::to_chrome_trace(gated_trace())));
  // d: released by c on its worker (400), not by a (100) or its push (290).
  // c: pushed at 280, after b's result (250), when the wait for b ended (260).
  // b: released by a on its worker (100), pushed long before.
  // a: its push.
  const std::vector<std::tuple<std::string, tools::CriticalGate, double, double>> expected = {
      {"a", tools::CriticalGate::kFirst, 100, 0},
      {"b", tools::CriticalGate::kTrack, 150, 0},
      {"c", tools::CriticalGate::kHostWait, 100, 40},
      {"d", tools::CriticalGate::kTrack, 50, 0}};
  ASSERT_EQ(s.critical_path.size(), expected.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    const auto& [name, gate, busy_us, waited_us] = expected[i];
    EXPECT_EQ(s.critical_path[i].name, name) << i;
    EXPECT_EQ(s.critical_path[i].gate, gate) << name;
    EXPECT_DOUBLE_EQ(s.critical_path[i].busy_us, busy_us) << name;
    EXPECT_DOUBLE_EQ(s.critical_path[i].waited_us, waited_us) << name;
  }
  EXPECT_DOUBLE_EQ(s.critical_path_us, 400);
  EXPECT_DOUBLE_EQ(s.critical_path_waited_us, 40);

  // Two stretches: a, b on cpu(0)'s worker, then c, d on cpu(1)'s after the wait.
  const std::vector<tools::CriticalStretch> stretches = tools::critical_stretches(s.critical_path);
  ASSERT_EQ(stretches.size(), 2u);
  EXPECT_EQ(stretches[0].first, 0u);
  EXPECT_EQ(stretches[0].count, 2u);
  EXPECT_EQ(stretches[1].first, 2u);
  EXPECT_EQ(stretches[1].count, 2u);
  const std::string text = tools::format_summary(s);
  EXPECT_NE(text.find("2  cpu(0) worker 0  a #1  b #2    0.0    250.0  55.6%        0.0  its push"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("2  cpu(1) worker 0  c #3  d #4  300.0    150.0  33.3%       40.0  a host "
                      "wait for b #2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("4 operations, 400.0 us busy (88.9% of the span), 40.0 us between them"),
            std::string::npos)
      << text;
}

TEST(ProfileReportTest, AnAsynchronousOperationHoldsItsTrackUntilItsClosureReturned) {
  // a: cpu(0) worker 0, closure [0, 20], in flight until 400 (a collective);
  // b: the same worker [20, 500], pushed at 5: released by a's return at 20,
  // not by a's end at 400.
  profiler::Trace t;
  t.ops.push_back({.name = "a",
                   .ctx = cpu(0),
                   .seq = 1,
                   .started_ns = 0,
                   .ended_ns = 400 * us,
                   .returned_ns = 20 * us});
  t.ops.push_back({.name = "b",
                   .ctx = cpu(0),
                   .seq = 2,
                   .pushed_ns = 5 * us,
                   .ready_ns = 5 * us,
                   .started_ns = 20 * us,
                   .ended_ns = 500 * us});
  const tools::ProfileSummary s =
      tools::summarize(tools::parse_chrome_trace(profiler::to_chrome_trace(t)));
  ASSERT_EQ(s.critical_path.size(), 2u);
  EXPECT_EQ(s.critical_path[0].name, "a");
  EXPECT_DOUBLE_EQ(s.critical_path[0].busy_us, 20) << "until it let its worker go";
  EXPECT_EQ(s.critical_path[1].gate, tools::CriticalGate::kTrack);
  EXPECT_DOUBLE_EQ(s.critical_path[1].waited_us, 0);
  EXPECT_DOUBLE_EQ(s.critical_path_us, 500) << "the span, not more";
}

/// The JSON data block of a profile page.
nlohmann::json page_data(const std::string& page) {
  const std::string open = "<script type=\"application/json\" id=\"tagflow-data\">";
  const auto begin = page.find(open);
  EXPECT_NE(begin, std::string::npos);
  const auto end = page.find("</script>", begin);
  return nlohmann::json::parse(page.substr(begin + open.size(), end - begin - open.size()));
}

/// A line of text split where two or more spaces separate its columns.
std::vector<std::string> columns_of(const std::string& line) {
  std::vector<std::string> out;
  std::size_t at = line.find_first_not_of(' ');
  while (at != std::string::npos) {
    auto gap = line.find("  ", at);
    out.push_back(line.substr(at, gap == std::string::npos ? std::string::npos : gap - at));
    at = gap == std::string::npos ? gap : line.find_first_not_of(' ', gap);
  }
  return out;
}

TEST(ProfileReportTest, ThePageHoldsEveryEventInItsData) {
  profiler::Trace t = synthetic();
  t.ops.push_back({.name = "stage",
                   .ctx = cpu(0),
                   .queue = QueueKind::kCopy,
                   .seq = 5,
                   .pushed_ns = 600 * us,
                   .ready_ns = 600 * us,
                   .started_ns = 600 * us,
                   .ended_ns = 610 * us});
  const tools::ProfileSummary s = tools::summarize(t);
  const std::string page = tools::profile_page(t, s, {.title = "synthetic.json"});
  EXPECT_EQ(page.rfind("<!doctype html>", 0), 0u);
  for (const char* outside : {"http://", "https://", "<link", "<script src", "@import"}) {
    EXPECT_EQ(page.find(outside), std::string::npos) << "the page fetches nothing: " << outside;
  }
  const nlohmann::json data = page_data(page);
  const nlohmann::json& ops = data["ops"];
  ASSERT_EQ(ops["seq"].size(), t.ops.size());
  // Times from the trace's start (load's push, at 0), in nanoseconds.
  EXPECT_EQ(data["extent_begin_ns"], 0) << "from the first push, as the text's span";
  EXPECT_EQ(data["extent_end_ns"], 650 * us) << "to the end of the last wait";
  EXPECT_EQ(data["operation_devices"], 2) << "cpu(0) and gpu(0)";
  EXPECT_EQ(ops["process"][0], 0);
  std::map<std::uint64_t, std::size_t> index;
  for (std::size_t i = 0; i < t.ops.size(); ++i) {
    const profiler::OpEvent& e = t.ops[i];
    index[e.seq] = i;
    EXPECT_EQ(ops["seq"][i], e.seq);
    EXPECT_EQ(data["names"][ops["name"][i].get<int>()], e.name);
    const auto busy = tools::busy_interval(e);
    EXPECT_EQ(ops["begin"][i], busy.begin_ns) << e.name;
    EXPECT_EQ(ops["end"][i], busy.end_ns) << e.name;
    EXPECT_EQ(ops["push"][i], e.pushed_ns);
    EXPECT_EQ(ops["ready"][i], e.ready_ns);
    EXPECT_EQ(data["tracks"][ops["track"][i].get<int>()]["name"], tools::track_of(t, e)) << e.name;
  }
  // A row per track, each with operations: a CPU device's copy-queue
  // operation runs on its worker's row.
  std::vector<int> ops_per_track(data["tracks"].size());
  for (const nlohmann::json& track : ops["track"]) ++ops_per_track.at(track.get<std::size_t>());
  for (std::size_t k = 0; k < ops_per_track.size(); ++k) {
    EXPECT_GT(ops_per_track[k], 0) << data["tracks"][k].dump();
  }
  ASSERT_EQ(data["flows"]["from"].size(), t.flows.size());
  for (std::size_t f = 0; f < t.flows.size(); ++f) {
    EXPECT_EQ(data["flows"]["from"][f], index[t.flows[f].from_seq]);
    EXPECT_EQ(data["flows"]["to"][f], index[t.flows[f].to_seq]);
  }
  ASSERT_EQ(data["critical"].size(), s.critical_path.size());
  for (std::size_t c = 0; c < s.critical_path.size(); ++c) {
    EXPECT_EQ(data["critical"][c], index[s.critical_path[c].seq]);
  }
  ASSERT_EQ(data["waits"]["begin"].size(), 2u);
  EXPECT_EQ(data["waits"]["for"][0], index[4]) << "wait_to_read waited for sum";
  EXPECT_EQ(data["waits"]["for"][1], -1) << "wait_for_all waited for everything";
  // Counters: cpu(0)'s memory steps through 1000, 1512, 512, 768.
  bool memory_seen = false, queue_seen = false;
  for (const nlohmann::json& c : data["counters"]) {
    if (c["name"] == "cpu(0) memory") {
      memory_seen = true;
      EXPECT_EQ(c["v"], (std::vector<std::int64_t>{1000, 1512, 512, 768}));
      EXPECT_EQ(c["t"], (std::vector<std::int64_t>{10 * us, 20 * us, 30 * us, 40 * us}));
    }
    if (c["name"] == "cpu(0) ready, not started") {
      // load ready and started at 0; sum ready at 400, started at 500;
      // stage ready and started at 600.
      queue_seen = true;
      EXPECT_EQ(c["t"], (std::vector<std::int64_t>{0, 400 * us, 500 * us, 600 * us}));
      EXPECT_EQ(c["v"], (std::vector<std::int64_t>{0, 1, 0, 0}));
    }
  }
  EXPECT_TRUE(memory_seen && queue_seen) << data["counters"].dump();
}

TEST(ProfileReportTest, ThePageShowsTheSameFiguresAsTheText) {
  const profiler::Trace t = synthetic();
  const tools::ProfileSummary s = tools::summarize(t);
  const std::string page = tools::profile_page(t, s, {.title = "synthetic.json"});
  const std::string text = tools::format_summary(s);
  std::vector<std::vector<std::string>> text_rows;
  for (std::size_t at = 0; at < text.size();) {
    const auto newline = text.find('\n', at);
    text_rows.push_back(columns_of(text.substr(at, newline - at)));
    at = newline + 1;
  }
  std::size_t rows = 0;
  for (const tools::FigureTable& table : tools::figure_tables(s)) {
    const auto at = page.find("<table data-figure=\"" + table.id + "\">");
    ASSERT_NE(at, std::string::npos) << table.id;
    std::size_t cursor = at;
    for (const std::vector<std::string>& row : table.rows) {
      ++rows;
      EXPECT_NE(std::find(text_rows.begin(), text_rows.end(), row), text_rows.end())
          << table.id << ": " << fmt::format("{}", fmt::join(row, " | ")) << "\n"
          << text;
      for (const std::string& cell : row) {  // in the page, in order
        cursor = page.find(">" + cell + "</td>", cursor);
        ASSERT_NE(cursor, std::string::npos) << table.id << ": " << cell;
      }
    }
  }
  EXPECT_GE(rows, 20u) << "every table has rows for this trace";
  EXPECT_NE(text.find("Critical path, by stretch of one track\n"), std::string::npos) << text;
  EXPECT_NE(page.find("<tr data-op=\"2\"><td>1</td><td class=\"text\">gpu(0) copy stream</td>"
                      "<td class=\"text\">copy #3</td>"),
            std::string::npos)
      << "a critical path stretch's row names its first operation's index";
}

TEST(ProfileReportTest, NamesCannotBreakThePage) {
  profiler::Trace t = synthetic();
  t.ops[0].name = "</script><img src=x onerror=alert(1)>\xff";
  const std::string page =
      tools::profile_page(t, tools::summarize(t), {.title = "a <b> & \"c\".json"});
  EXPECT_EQ(page.find("<img"), std::string::npos);
  EXPECT_NE(page.find("&lt;/script&gt;&lt;img"), std::string::npos) << "escaped in the tables";
  EXPECT_NE(page.find("<title>tagflow profile: a &lt;b&gt; &amp; &quot;c&quot;.json</title>"),
            std::string::npos);
  const nlohmann::json data = page_data(page);
  EXPECT_EQ(data["names"][0].get<std::string>().rfind("</script><img", 0), 0u)
      << "the data keeps the name, the invalid byte replaced";
}

TEST(ProfileReportTest, AComparisonShowsBothRunsAndWhatEachOperationNameDid) {
  // B: the synthetic run with "conv" twice as long on the device, one "sum"
  // fewer (none), and a new "relu" of 40 us on cpu(0).
  profiler::Trace b = synthetic();
  for (profiler::OpEvent& e : b.ops) {
    if (e.name == "conv") e.device_ended_ns = 480 * us;  // 180 -> 360 us
  }
  std::erase_if(b.ops, [](const profiler::OpEvent& e) { return e.name == "sum"; });
  b.ops.push_back(
      {.name = "relu", .ctx = cpu(0), .seq = 9, .started_ns = 700 * us, .ended_ns = 740 * us});
  const tools::ProfileComparison c =
      tools::compare(tools::summarize(synthetic()), tools::summarize(b));
  ASSERT_EQ(c.operations.size(), 5u);  // load, conv, copy, sum, relu
  // The largest change of total time first: conv +180, sum -100, relu +40.
  EXPECT_EQ(c.operations[0].name, "conv");
  EXPECT_DOUBLE_EQ(c.operations[0].total_a_us, 180);
  EXPECT_DOUBLE_EQ(c.operations[0].total_b_us, 360);
  EXPECT_EQ(c.operations[1].name, "sum");
  EXPECT_EQ(c.operations[1].count_a, 1);
  EXPECT_EQ(c.operations[1].count_b, 0);
  EXPECT_EQ(c.operations[2].name, "relu");
  EXPECT_DOUBLE_EQ(c.operations[2].mean_b_us, 40);
  EXPECT_EQ(c.operations[3].total_b_us - c.operations[3].total_a_us, 0);
  const std::string text = tools::format_comparison(c, "a.json", "b.json");
  EXPECT_NE(text.find("A: a.json\nB: b.json"), std::string::npos) << text;
  EXPECT_NE(text.find("+100.0%"), std::string::npos) << "conv's total doubled:\n" << text;
  EXPECT_NE(text.find("gone"), std::string::npos) << text;
  EXPECT_NE(text.find("new"), std::string::npos) << text;
  // The figures of both runs side by side: the spans, as summarize gives them.
  EXPECT_NE(text.find(fmt::format("{:.1f}", c.a.span_us)), std::string::npos) << text;
  EXPECT_NE(text.find(fmt::format("{:.1f}", c.b.span_us)), std::string::npos) << text;
  EXPECT_NE(text.find("gpu(0) busy"), std::string::npos) << text;
}

TEST(ProfileReportTest, MalformedTracesGetClearErrors) {
  auto error_of = [](const std::string& text) {
    return testing::error_of([&] { (void)tools::parse_chrome_trace(text); });
  };
  EXPECT_NE(error_of("not json").find("not JSON"), std::string::npos);
  EXPECT_NE(error_of("{}").find("traceEvents"), std::string::npos);
  const std::string cpu0 = R"j({"ph":"M","name":"process_name","pid":1,"args":{"name":"cpu(0)"}})j";
  const std::string no_seq =
      R"j({"ph":"X","cat":"op","name":"a","pid":1,"tid":0,"ts":1,"dur":1,"args":{}})j";
  const std::string unnamed_pid =
      R"j({"ph":"X","cat":"op","name":"a","pid":7,"tid":0,"ts":1,"dur":1,"args":{"seq":1}})j";
  const std::string text_time =
      R"j({"ph":"X","cat":"op","name":"a","pid":1,"tid":0,"ts":"x","dur":1,"args":{"seq":1}})j";
  auto events = [](const std::string& a, const std::string& b) {
    return "{\"traceEvents\":[" + a + "," + b + "]}";
  };
  EXPECT_NE(error_of(events(cpu0, no_seq)).find("expected a \"seq\" field"), std::string::npos)
      << error_of(events(cpu0, no_seq));
  EXPECT_NE(error_of(events(cpu0, unnamed_pid)).find("no process is named for pid 7"),
            std::string::npos);
  EXPECT_NE(error_of(events(cpu0, text_time)).find("wrong type"), std::string::npos)
      << error_of(events(cpu0, text_time));
  EXPECT_THROW(tools::read_chrome_trace("/nonexistent/trace.json"), Error);
}

}  // namespace
}  // namespace tagflow
