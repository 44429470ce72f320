// Traces of several processes on one timeline (tools/profile_merge.h): the
// clock each alignment uses, against offsets worked by hand, and figures
// kept per process.

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engine/error.h"
#include "engine/profiler.h"
#include "tests/ops/test_util.h"
#include "tools/profile_compare.h"
#include "tools/profile_merge.h"
#include "tools/profile_page.h"
#include "tools/profile_report.h"

namespace tagflow {
namespace {

constexpr std::int64_t us = 1000;  // ns

/// A process's recording: `load` on cpu(0) [0, 100], then `sum` [150, 250]
/// reading it; a host wait for sum [100, 250]; 64 bytes allocated at 10.
profiler::Trace process_trace(const std::string& host, std::int64_t epoch, std::int64_t sync,
                              int rank) {
  profiler::Trace t;
  t.ops.push_back({.name = "load", .ctx = cpu(0), .seq = 1, .started_ns = 0, .ended_ns = 100 * us});
  t.ops.push_back({.name = "sum",
                   .ctx = cpu(0),
                   .seq = 2,
                   .pushed_ns = 50 * us,
                   .ready_ns = 100 * us,
                   .started_ns = 150 * us,
                   .ended_ns = 250 * us});
  t.flows = {{1, 2}};
  t.waits.push_back({.what = "wait_to_read",
                     .waited_for = "sum",
                     .waited_for_seq = 2,
                     .started_ns = 100 * us,
                     .ended_ns = 250 * us});
  t.allocations.push_back({.ctx = cpu(0), .bytes = 64, .at_ns = 10 * us});
  t.origin = {.host = host, .steady_epoch_ns = epoch, .sync_ns = sync, .rank = rank, .ranks = 2};
  return t;
}

TEST(ProfileMergeTest, ProcessesOfOneHostAlignOnItsSteadyClock) {
  // Rank 1's profiler started 1 ms after rank 0's: its times move 1 ms later.
  const tools::MergedTrace m = tools::merge_traces(
      {process_trace("node", 5'000 * us, 40 * us, 0), process_trace("node", 6'000 * us, 7 * us, 1)},
      {"rank 0", "rank 1"}, tools::Alignment::kSameRun);
  EXPECT_NE(m.alignment.find("steady clock of node"), std::string::npos) << m.alignment;
  ASSERT_EQ(m.trace.ops.size(), 4u);
  EXPECT_EQ(m.trace.ops[2].process, 1);
  EXPECT_EQ(m.trace.ops[2].started_ns, 1'000 * us);
  EXPECT_EQ(m.trace.ops[3].pushed_ns, 1'050 * us);
  EXPECT_EQ(m.trace.waits[1].started_ns, 1'100 * us);
  EXPECT_EQ(m.trace.waits[1].process, 1);
  EXPECT_EQ(m.trace.allocations[1].at_ns, 1'010 * us);
  EXPECT_EQ(m.trace.flows[1].process, 1);
  EXPECT_EQ(m.trace.ops[0].device_started_ns, -1) << "no device span stays none";

  // Figures per process: the same cpu(0) in each is two devices.
  const tools::ProfileSummary s = tools::summarize(m.trace);
  ASSERT_EQ(s.devices.size(), 2u);
  EXPECT_EQ(s.devices[0].device, "rank 0 cpu(0)");
  EXPECT_EQ(s.devices[1].device, "rank 1 cpu(0)");
  EXPECT_DOUBLE_EQ(s.devices[1].busy_us, 200);
  EXPECT_DOUBLE_EQ(s.span_us, 1'250);
  // The critical path follows rank 1's flows (seq 1 -> 2 of that process).
  ASSERT_EQ(s.critical_path.size(), 2u);
  EXPECT_EQ(s.critical_path[0].device, "rank 1 cpu(0)");
  EXPECT_EQ(s.critical_path[0].name, "load");
  ASSERT_EQ(s.memory.size(), 2u);
  EXPECT_EQ(s.memory[1].device, "rank 1 cpu(0)");
  // Idle by cause counts only a process's own host waits: rank 0's device,
  // [100, 150] ready (sum waiting for a worker), then [250, 1250] with
  // nothing pushed (rank 1's wait is not its host's).
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_ready_us, 50);
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_host_waiting_us, 0);
  EXPECT_DOUBLE_EQ(s.breakdown[0].idle_nothing_pushed_us, 1'000);
  EXPECT_THROW((void)profiler::to_chrome_trace(m.trace), Error) << "a merged trace is not a file";
}

TEST(ProfileMergeTest, ProcessesOfSeveralHostsAlignAtTheirSyncMarks) {
  // Rank 1 left the barrier at its time 200 us, rank 0 at 500 us: +300 us.
  const tools::MergedTrace m =
      tools::merge_traces({process_trace("a", 1, 500 * us, 0), process_trace("b", 99, 200 * us, 1)},
                          {"rank 0", "rank 1"}, tools::Alignment::kSameRun);
  EXPECT_NE(m.alignment.find("barrier"), std::string::npos) << m.alignment;
  EXPECT_EQ(m.trace.ops[2].started_ns, 300 * us);
  EXPECT_EQ(m.trace.ops[3].ended_ns, 550 * us);
}

TEST(ProfileMergeTest, WithoutACommonClockTracesAlignAtTheirStartsAndSaySo) {
  profiler::Trace late = process_trace("b", 99, -1, 1);
  for (profiler::OpEvent& e : late.ops) {
    e.pushed_ns += 70 * us;
    e.ready_ns += 70 * us;
    e.started_ns += 70 * us;
    e.ended_ns += 70 * us;
  }
  late.waits[0].started_ns += 70 * us;
  late.waits[0].ended_ns += 70 * us;
  late.allocations[0].at_ns += 70 * us;
  const tools::MergedTrace m = tools::merge_traces(
      {process_trace("a", 1, 500 * us, 0), late}, {"rank 0", "rank 1"}, tools::Alignment::kSameRun);
  EXPECT_NE(m.alignment.find("share no clock"), std::string::npos) << m.alignment;
  EXPECT_EQ(m.trace.ops[2].started_ns, 0) << "its first event moved onto rank 0's";
  // Two runs are compared from their starts even on one host.
  const tools::MergedTrace runs = tools::merge_traces(
      {process_trace("node", 0, -1, 0), process_trace("node", 9'000 * us, -1, 0)}, {"A", "B"},
      tools::Alignment::kStarts);
  EXPECT_EQ(runs.trace.ops[2].started_ns, 0);
  EXPECT_EQ(tools::track_of(runs.trace, runs.trace.ops[2]), "B cpu(0) worker 0");
  EXPECT_THROW(
      (void)tools::merge_traces({process_trace("a", 0, -1, 0)}, {}, tools::Alignment::kSameRun),
      Error);
}

TEST(ProfileMergeTest, NoTimeFallsBelowZeroAndDeviceSpansStayDeviceSpans) {
  // Rank 1's profiler started 10 ms before rank 0's: on rank 0's clock its
  // events are negative, so both move 10 ms later; its GPU operation keeps
  // its device span (-1 would mean none).
  profiler::Trace early = process_trace("node", 90 * us, -1, 1);
  early.ops.push_back({.name = "kernel",
                       .ctx = gpu(0),
                       .seq = 3,
                       .started_ns = 10 * us,
                       .ended_ns = 11 * us,
                       .device_started_ns = 20 * us,
                       .device_ended_ns = 520 * us});
  const tools::MergedTrace m =
      tools::merge_traces({process_trace("node", 10'090 * us, -1, 0), early}, {"rank 0", "rank 1"},
                          tools::Alignment::kSameRun);
  ASSERT_EQ(m.trace.ops.size(), 5u);
  EXPECT_EQ(m.trace.ops[0].started_ns, 10'000 * us) << "rank 0 moved 10 ms later";
  EXPECT_EQ(m.trace.ops[2].started_ns, 0) << "rank 1's first event at 0";
  EXPECT_EQ(m.trace.ops[4].device_started_ns, 20 * us);
  const tools::ProfileSummary s = tools::summarize(m.trace);
  const auto gpu_busy = std::find_if(s.devices.begin(), s.devices.end(),
                                     [](const auto& d) { return d.device == "rank 1 gpu(0)"; });
  ASSERT_NE(gpu_busy, s.devices.end());
  EXPECT_DOUBLE_EQ(gpu_busy->busy_us, 500) << "the device span, not the 1 us launch";
  EXPECT_EQ(tools::track_of(m.trace, m.trace.ops[4]), "rank 1 gpu(0) compute stream");
}

TEST(ProfileMergeTest, OneHostNameIsOneClockOnlyWithinOneBoot) {
  profiler::Trace a = process_trace("localhost", 5'000 * us, 500 * us, 0);
  profiler::Trace b = process_trace("localhost", 9'000 * us, 200 * us, 1);
  a.origin.boot_id = "boot-a";
  b.origin.boot_id = "boot-b";  // a clone on another machine
  const tools::MergedTrace m =
      tools::merge_traces({a, b}, {"rank 0", "rank 1"}, tools::Alignment::kSameRun);
  EXPECT_NE(m.alignment.find("barrier"), std::string::npos) << m.alignment;
  EXPECT_EQ(m.trace.ops[2].started_ns, 300 * us);
  EXPECT_NE(testing::error_of([&] {
              (void)tools::merge_traces({a, b}, {"rank", "rank"}, tools::Alignment::kSameRun);
            }).find("\"rank\" twice"),
            std::string::npos);
}

TEST(ProfileMergeTest, ATraceOfWaitsAndMemoryOnlyStillSaysSo) {
  profiler::Trace t = process_trace("node", 1, -1, 0);
  t.ops.clear();
  t.flows.clear();
  const tools::ProfileSummary s = tools::summarize(t);
  ASSERT_EQ(s.waits.size(), 1u);
  EXPECT_DOUBLE_EQ(s.wait_us, 150);
  ASSERT_EQ(s.memory.size(), 1u);
  EXPECT_EQ(s.memory[0].peak_bytes, 64);
  // A crafted origin is refused, not converted.
  std::string text = profiler::to_chrome_trace(process_trace("node", 1, -1, 0));
  const auto at = text.find("\"steady_epoch_ns\":1");
  ASSERT_NE(at, std::string::npos);
  text.replace(at, std::string("\"steady_epoch_ns\":1").size(), "\"steady_epoch_ns\":1e30");
  EXPECT_NE(testing::error_of([&] {
              (void)tools::parse_chrome_trace(text);
            }).find("steady_epoch_ns to be an integer"),
            std::string::npos);
}

TEST(ProfileMergeTest, TheOriginTravelsInTheFile) {
  const profiler::Trace t = process_trace("node-7", 123'456'789, 42 * us, 1);
  const profiler::Trace back = tools::parse_chrome_trace(profiler::to_chrome_trace(t));
  EXPECT_EQ(back.origin.host, "node-7");
  EXPECT_EQ(back.origin.steady_epoch_ns, 123'456'789);
  EXPECT_EQ(back.origin.sync_ns, 42 * us);
  EXPECT_EQ(back.origin.rank, 1);
  EXPECT_EQ(back.origin.ranks, 2);
  // What the profiler records says where it was recorded.
  profiler::set_rank(0, 1);
  const profiler::Trace recorded = profiler::collect();
  EXPECT_FALSE(recorded.origin.host.empty());
  EXPECT_GT(recorded.origin.steady_epoch_ns, 0);
  EXPECT_THROW(profiler::set_rank(2, 2), Error);
}

TEST(ProfileMergeTest, AMissingTraceStandsForItsRankFiles) {
  const auto dir =
      std::filesystem::temp_directory_path() /
      ("tagflow_merge_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const auto file = dir / "trace.json";
  EXPECT_EQ(tools::rank_trace_file(file, 0, 1), file);
  EXPECT_EQ(tools::rank_trace_file(file, 3, 4), dir / "trace.rank3.json");
  const std::string error = testing::error_of([&] { (void)tools::trace_files(file); });
  EXPECT_NE(error.find("trace.rank0.json"), std::string::npos) << error;
  for (int rank : {0, 1, 2}) {
    std::ofstream(tools::rank_trace_file(file, rank, 3))
        << profiler::to_chrome_trace(process_trace("node", 1 + rank, -1, rank));
  }
  EXPECT_EQ(tools::trace_files(file),
            (std::vector<std::filesystem::path>{dir / "trace.rank0.json", dir / "trace.rank1.json",
                                                dir / "trace.rank2.json"}));
  std::ofstream(file) << "{}";
  EXPECT_EQ(tools::trace_files(file), std::vector<std::filesystem::path>{file}) << "it exists";

  // A comparison page holds both runs, as processes A and B, and the
  // comparison's tables.
  const auto a = dir / "trace.rank0.json", b = dir / "trace.rank1.json", page = dir / "cmp.html";
  tools::run_profile_comparison(a, b, page);
  std::ifstream in(page);
  const std::string html((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(html.find("<table data-figure=\"comparison\">"), std::string::npos);
  EXPECT_NE(html.find("<table data-figure=\"operation-changes\">"), std::string::npos);
  EXPECT_NE(html.find("\"A cpu(0) worker 0\""), std::string::npos);
  EXPECT_NE(html.find("\"B cpu(0) worker 0\""), std::string::npos);
  EXPECT_NE(html.find(">A cpu(0)</td>"), std::string::npos) << "each run's devices' figures";
  // Each run's device figures over its own span, as its own report gives them.
  const tools::ProfileSummary alone = tools::summarize(tools::read_chrome_trace(b));
  const std::string b_row = "<td class=\"text\">B cpu(0)</td><td>" +
                            fmt::format("{:.1f}", alone.devices[0].busy_us) + "</td><td>" +
                            fmt::format("{:.1f}%", 100 * alone.devices[0].busy_fraction) + "</td>";
  EXPECT_NE(html.find(b_row), std::string::npos) << b_row;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tagflow
