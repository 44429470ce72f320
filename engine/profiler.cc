#include "engine/profiler.h"

#include <array>
#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <unordered_map>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "engine/detail/model_clock.h"
#include "engine/detail/profile_marks.h"
#include "engine/error.h"

namespace tagflow {

namespace detail {

std::atomic<int> g_profiling{0};

namespace {

using Clock = std::chrono::steady_clock;

Clock::time_point epoch() {
  static const Clock::time_point start = Clock::now();
  return start;
}

/// What has been recorded, behind one mutex: recording is rare enough (a
/// few events per operation, only while profiling) for that to do.
struct Recorder {
  std::mutex mutex;
  profiler::Trace trace;
  int rank = 0, ranks = 1;
};

Recorder& recorder() {
  static Recorder* r = new Recorder;  // never destroyed: threads may record late
  return *r;
}

/// A small number per host thread, in order of first wait.
int thread_number() {
  static std::atomic<int> next{0};
  thread_local const int mine = next.fetch_add(1, std::memory_order_relaxed);
  return mine;
}

}  // namespace

std::int64_t profiler_now() {
  // Simulated GPUs keeping modelled time: the whole trace is on the model's
  // clock (Note [Modelled traces] in engine/detail/model_clock.h).
  if (const sim::ModelClock* model = sim::ModelClock::active()) [[unlikely]]
    return model->host_now();
  (void)epoch();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - epoch()).count();
}

void record_op(ProfileMarks* marks) {
  profiler::OpEvent e{.name = marks->name,
                      .ctx = marks->ctx,
                      .queue = marks->queue,
                      .worker = marks->worker,
                      .seq = marks->seq,
                      .priority = marks->priority,
                      .failed = marks->failed,
                      .pushed_ns = marks->pushed,
                      .ready_ns = marks->ready,
                      .started_ns = marks->started,
                      .ended_ns = marks->ended,
                      .device_started_ns = marks->device_started,
                      .device_ended_ns = marks->device_ended,
                      .returned_ns = marks->returned};
  delete marks;
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.trace.ops.push_back(std::move(e));
}

void record_flow(std::uint64_t from, std::uint64_t to) {
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.trace.flows.push_back({from, to});
}

void record_allocation(Context ctx, std::uint64_t bytes, bool release) {
  profiler::AllocationEvent e{
      .ctx = ctx, .bytes = bytes, .release = release, .at_ns = profiler_now()};
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.trace.allocations.push_back(e);
}

void record_wait(const char* what, const char* waited_for, std::uint64_t waited_for_seq,
                 std::int64_t started) {
  profiler::WaitEvent e{.what = what,
                        .waited_for = waited_for != nullptr ? waited_for : "",
                        .waited_for_seq = waited_for_seq,
                        .thread = thread_number(),
                        .started_ns = started,
                        .ended_ns = profiler_now()};
  Recorder& r = recorder();
  std::lock_guard lock(r.mutex);
  r.trace.waits.push_back(std::move(e));
}

}  // namespace detail

namespace profiler {

bool enabled() { return detail::profiling(); }

Scope::Scope() {
  (void)detail::profiler_now();  // fixes the epoch before the first event
  detail::g_profiling.fetch_add(1, std::memory_order_relaxed);
}

Scope::~Scope() { detail::g_profiling.fetch_sub(1, std::memory_order_relaxed); }

Trace collect() {
  (void)detail::profiler_now();  // fixes the epoch
  detail::Recorder& r = detail::recorder();
  std::lock_guard lock(r.mutex);
  Trace trace = r.trace;
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) == 0) trace.origin.host = host.data();
  std::ifstream boot("/proc/sys/kernel/random/boot_id");
  std::getline(boot, trace.origin.boot_id);
  trace.origin.steady_epoch_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(detail::epoch().time_since_epoch())
          .count();
  trace.origin.rank = r.rank;
  trace.origin.ranks = r.ranks;
  if (const detail::sim::ModelClock* model = detail::sim::ModelClock::active()) {
    trace.origin.device_model = model->model().name;
  }
  return trace;
}

void clear() {
  detail::Recorder& r = detail::recorder();
  std::lock_guard lock(r.mutex);
  r.trace = Trace{};
}

void set_rank(int rank, int ranks) {
  TAGFLOW_CHECK(ranks >= 1 && rank >= 0 && rank < ranks,
                "profiler::set_rank: expected 0 <= rank < ranks, got rank {} of {}", rank, ranks);
  detail::Recorder& r = detail::recorder();
  std::lock_guard lock(r.mutex);
  r.rank = rank;
  r.ranks = ranks;
}

void mark_sync() {
  const std::int64_t now = detail::profiler_now();
  detail::Recorder& r = detail::recorder();
  std::lock_guard lock(r.mutex);
  r.trace.origin.sync_ns = now;
}

namespace {

using nlohmann::json;

double micros(std::int64_t ns) { return static_cast<double>(ns) / 1000.0; }

/// Track numbers within a device's process (Note in to_chrome_trace).
int worker_track(const OpEvent& e) { return e.ctx.is_gpu() ? static_cast<int>(e.queue) : e.worker; }
int stream_track(const OpEvent& e) { return 2 + static_cast<int>(e.queue); }

const char* gpu_track_name(int track) {
  static const char* const names[] = {"compute worker", "copy worker", "compute stream",
                                      "copy stream"};
  return names[track];
}

}  // namespace

std::string to_chrome_trace(const Trace& trace) {
  TAGFLOW_CHECK(trace.processes.empty(),
                "to_chrome_trace: expected the trace of one process, got one merged from {}",
                trace.processes.size());
  // Processes: 0 for the host threads' waits, then one per device in order
  // (cpu(i), then gpu(i)). Tracks: a CPU device's workers by index; a GPU's
  // compute and copy workers (0, 1), where closures run and launch, and its
  // compute and copy streams (2, 3), where the device work runs.
  std::map<Context, int> pids;
  for (const OpEvent& e : trace.ops) pids[e.ctx] = 0;
  for (const AllocationEvent& a : trace.allocations) pids[a.ctx] = 0;
  int next_pid = 1;
  for (auto& [device, pid] : pids) pid = next_pid++;
  auto pid_of = [&](Context c) { return pids.at(c); };

  json events = json::array();
  events.push_back(
      {{"ph", "M"}, {"name", "process_name"}, {"pid", 0}, {"args", {{"name", "host"}}}});
  std::map<std::pair<int, int>, std::string> tracks;
  std::map<std::uint64_t, const OpEvent*> by_seq;
  std::map<std::uint64_t, std::vector<std::uint64_t>> reads_from;
  for (const FlowEvent& f : trace.flows) reads_from[f.to_seq].push_back(f.from_seq);
  for (const OpEvent& e : trace.ops) {
    const int pid = pid_of(e.ctx);
    by_seq[e.seq] = &e;
    const int tid = worker_track(e);
    tracks[{pid, tid}] =
        e.ctx.is_gpu() ? gpu_track_name(tid) : "worker " + std::to_string(e.worker);
    json args = {{"seq", e.seq},
                 {"priority", e.priority},
                 {"pushed_us", micros(e.pushed_ns)},
                 {"ready_us", micros(e.ready_ns)},
                 {"queued_us", micros(e.started_ns - e.ready_ns)}};
    if (e.failed) args["failed"] = true;
    if (e.returned_ns >= 0) args["returned_us"] = micros(e.returned_ns);
    if (const auto from = reads_from.find(e.seq); from != reads_from.end()) {
      args["reads_from"] = from->second;  // the flows, for readers of the file
    }
    args["queue"] = e.queue == QueueKind::kCopy ? "copy" : "compute";
    args["worker"] = e.worker;
    events.push_back({{"ph", "X"},
                      {"cat", "op"},
                      {"name", e.name},
                      {"pid", pid},
                      {"tid", tid},
                      {"ts", micros(e.started_ns)},
                      {"dur", micros(e.ended_ns - e.started_ns)},
                      {"args", args}});
    if (e.device_started_ns >= 0 && e.device_ended_ns >= e.device_started_ns) {
      const int stream = stream_track(e);
      tracks[{pid, stream}] = gpu_track_name(stream);
      events.push_back({{"ph", "X"},
                        {"cat", "device"},
                        {"name", e.name},
                        {"pid", pid},
                        {"tid", stream},
                        {"ts", micros(e.device_started_ns)},
                        {"dur", micros(e.device_ended_ns - e.device_started_ns)},
                        {"args", {{"seq", e.seq}}}});
    }
  }
  for (const auto& [device, pid] : pids) {
    events.push_back(
        {{"ph", "M"}, {"name", "process_name"}, {"pid", pid}, {"args", {{"name", device.str()}}}});
  }
  for (const auto& [track, name] : tracks) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", track.first},
                      {"tid", track.second},
                      {"args", {{"name", name}}}});
  }
  int flow_id = 0;
  for (const FlowEvent& f : trace.flows) {
    const auto from = by_seq.find(f.from_seq);
    const auto to = by_seq.find(f.to_seq);
    if (from == by_seq.end() || to == by_seq.end()) continue;  // one end not recorded
    const OpEvent& a = *from->second;
    const OpEvent& b = *to->second;
    ++flow_id;
    events.push_back({{"ph", "s"},
                      {"cat", "dependency"},
                      {"name", "dependency"},
                      {"id", flow_id},
                      {"pid", pid_of(a.ctx)},
                      {"tid", worker_track(a)},
                      {"ts", micros(a.started_ns)}});
    events.push_back({{"ph", "f"},
                      {"bp", "e"},
                      {"cat", "dependency"},
                      {"name", "dependency"},
                      {"id", flow_id},
                      {"pid", pid_of(b.ctx)},
                      {"tid", worker_track(b)},
                      {"ts", micros(b.started_ns)}});
  }
  // Memory: a counter per device, allocated since recording began.
  std::map<Context, std::int64_t> allocated;
  for (const AllocationEvent& a : trace.allocations) {
    std::int64_t& bytes = allocated[a.ctx];
    bytes += a.release ? -static_cast<std::int64_t>(a.bytes) : static_cast<std::int64_t>(a.bytes);
    events.push_back({{"ph", "C"},
                      {"name", "allocated bytes"},
                      {"pid", pid_of(a.ctx)},
                      {"ts", micros(a.at_ns)},
                      {"args", {{"bytes", bytes}}}});
  }
  std::map<int, bool> host_threads;
  for (const WaitEvent& w : trace.waits) {
    host_threads[w.thread] = true;
    json args = json::object();
    if (!w.waited_for.empty()) {
      args["waited_for"] = w.waited_for;
      args["seq"] = w.waited_for_seq;
    }
    events.push_back({{"ph", "X"},
                      {"cat", "wait"},
                      {"name", w.what},
                      {"pid", 0},
                      {"tid", w.thread},
                      {"ts", micros(w.started_ns)},
                      {"dur", micros(w.ended_ns - w.started_ns)},
                      {"args", args}});
  }
  for (const auto& [thread, unused] : host_threads) {
    events.push_back({{"ph", "M"},
                      {"name", "thread_name"},
                      {"pid", 0},
                      {"tid", thread},
                      {"args", {{"name", "thread " + std::to_string(thread)}}}});
  }
  const Origin& o = trace.origin;
  json origin = {
      {"host", o.host},       {"boot_id", o.boot_id}, {"steady_epoch_ns", o.steady_epoch_ns},
      {"sync_ns", o.sync_ns}, {"rank", o.rank},       {"ranks", o.ranks}};
  if (!o.device_model.empty()) origin["device_model"] = o.device_model;
  return json{
      {"traceEvents", events}, {"displayTimeUnit", "ms"}, {"otherData", {{"tagflow", origin}}}}
      .dump(-1, ' ', false, json::error_handler_t::replace);
}

void write_chrome_trace(const Trace& trace, const std::filesystem::path& path) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  TAGFLOW_CHECK(out.good(), "write_chrome_trace: cannot open {} for writing", path.string());
  out << to_chrome_trace(trace);
  out.close();
  TAGFLOW_CHECK(out.good(), "write_chrome_trace: writing {} failed", path.string());
}

}  // namespace profiler

}  // namespace tagflow
