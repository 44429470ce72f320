#include "tools/stress.h"

#include <atomic>
#include <memory>
#include <thread>

#include <fmt/format.h>

#include "tagflow/tagflow.h"
#include "tools/stress_client.h"

namespace tagflow::tools {

namespace {

using namespace stress;
using Clock = std::chrono::steady_clock;

std::vector<Context> default_devices() {
  std::vector<Context> devices = {cpu(0), cpu(1)};
  for (int i = 0; i < num_gpus(); ++i) devices.push_back(gpu(i));
  return devices;
}

void check_options(const StressOptions& o, const std::vector<Context>& devices) {
  TAGFLOW_CHECK(!devices.empty(), "stress: expected at least one device, got none");
  for (std::size_t i = 0; i < devices.size(); ++i) {
    check_device(devices[i]);
    TAGFLOW_CHECK(!devices[i].is_cpu_pinned(), "stress: expected cpu:N or gpu:N, got {}",
                  devices[i].str());
    for (std::size_t j = 0; j < i; ++j) {
      TAGFLOW_CHECK(devices[i] != devices[j], "stress: the device {} is listed twice",
                    devices[i].str());
    }
  }
  TAGFLOW_CHECK(o.clients >= 1 && o.clients <= 256, "stress: expected 1..256 clients, got {}",
                o.clients);
  TAGFLOW_CHECK(o.completers >= 1 && o.completers <= 64,
                "stress: expected 1..64 completer threads, got {}", o.completers);
  TAGFLOW_CHECK(o.slots >= 2 * static_cast<int>(devices.size()) && o.slots <= 100000,
                "stress: expected 2..100000 variables per client and at least two per device "
                "({}), got {}",
                2 * devices.size(), o.slots);
  TAGFLOW_CHECK(o.round_steps >= 1 && o.round_steps <= (1 << 24),
                "stress: expected 1..16777216 steps per round, got {}", o.round_steps);
  TAGFLOW_CHECK(o.watchdog_seconds > 0, "stress: expected a positive watchdog time, got {}",
                o.watchdog_seconds);
  TAGFLOW_CHECK(o.memory_limit >= (std::uint64_t{1} << 20),
                "stress: expected a memory limit of at least 1 MiB, got {} bytes", o.memory_limit);
  const stress::Mix& m = o.mix;
  for (const auto& [name, rate] : {std::pair{"copy", m.copy},
                                   {"allocate", m.allocate},
                                   {"delete", m.remove},
                                   {"async", m.async},
                                   {"priority", m.priority},
                                   {"fail", m.fail},
                                   {"oom", m.alloc_fail}}) {
    TAGFLOW_CHECK(rate >= 0 && rate <= 100,
                  "stress: expected a {} rate in 0..100 (percent), got {}", name, rate);
  }
  TAGFLOW_CHECK(m.copy + m.allocate + m.remove <= 100,
                "stress: copy, allocate and delete rates add up to {}%, expected at most 100",
                m.copy + m.allocate + m.remove);
}

}  // namespace

StressReport run_stress(const StressOptions& options, const StallHandler& on_stall) {
  std::vector<Context> devices = options.devices.empty() ? default_devices() : options.devices;
  check_options(options, devices);
  Engine& engine = Engine::get();
  engine.wait_for_all();

  StressReport report;
  report.devices = devices;
  report.steps_per_device.assign(devices.size(), 0);
  for (Context c : devices) report.memory_before.push_back(memory_stats(c).in_use);
  for (Context c : devices) set_memory_limit(c, options.memory_limit);

  Shared shared{.options = options, .engine = engine, .devices = devices};
  for (std::size_t d = 0; d < devices.size(); ++d) {
    shared.constant_vars.push_back(engine.new_var());
    shared.constants.push_back(std::make_unique<Cell>());
    // Written once, on its device, before any client reads it.
    Cell* cell = shared.constants.back().get();
    const Value value = shared_value(options.seed, static_cast<int>(d));
    engine.push({.name = "stress_constant",
                 .ctx = devices[d],
                 .writes = {shared.constant_vars.back()},
                 .fn = [cell, value](const RunContext& rc) {
                   if (rc.stream != nullptr) {
                     rc.stream->enqueue_host([cell, value] { cell->value = value; });
                   } else {
                     cell->value = value;
                   }
                 }});
  }

  const auto start = Clock::now();
  std::atomic<std::uint64_t> budget{options.steps};
  std::atomic<int> rounds{0};
  std::vector<StressReport> partial(static_cast<std::size_t>(options.clients));
  std::uint64_t expected_runs = 0;
  {
    Completers completers(options.completers);
    Watchdog watchdog(engine,
                      std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(
                          options.watchdog_seconds * 1000)),
                      [&](const DependencyState& state) {
                        if (on_stall(state)) completers.release_held();
                      });
    std::vector<std::unique_ptr<Client>> clients;
    for (int c = 0; c < options.clients; ++c) {
      clients.push_back(std::make_unique<Client>(shared, completers, c));
    }
    std::vector<std::thread> threads;
    for (int c = 0; c < options.clients; ++c) {
      threads.emplace_back([&, c] {
        StressReport& mine = partial[static_cast<std::size_t>(c)];
        mine.steps_per_device.assign(devices.size(), 0);
        for (int round = 0;; ++round) {
          const bool out_of_time =
              options.duration.count() > 0 && Clock::now() - start >= options.duration;
          const std::uint64_t want = static_cast<std::uint64_t>(options.round_steps);
          std::uint64_t left = budget.load();
          while (left >= want && !budget.compare_exchange_weak(left, left - want)) {
          }
          if (out_of_time || left < want) break;
          try {
            clients[static_cast<std::size_t>(c)]->run_round(round, mine);
          } catch (const std::exception& e) {
            shared.mismatch(fmt::format("client {} round {}: {}", c, round, e.what()));
            break;
          }
          rounds.fetch_add(1);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    std::uint64_t errors_raised = 0;
    for (auto& client : clients) {
      client->finish();
      expected_runs += client->expected_runs();
      errors_raised += client->errors_raised();
      for (std::size_t k = 0; k < kNumCounts; ++k)
        report.counts[kCountNames[k]] += client->counts()[k];
    }
    for (VarHandle v : shared.constant_vars) engine.delete_var(v);
    // wait_for_all reports the first error raised since the previous one
    // returned: an injected one exactly when some step failed (and no
    // wait_for_all of the rounds reported one already).
    try {
      engine.wait_for_all();
      if (errors_raised > 0 && shared.errors_reported_by_rounds.load() == 0) {
        shared.mismatch(
            fmt::format("wait_for_all: no error, though {} steps failed", errors_raised));
      }
    } catch (const std::exception& e) {
      if (errors_raised == 0 ||
          std::string_view(e.what()).find("injected fault #") == std::string_view::npos) {
        shared.mismatch(fmt::format("wait_for_all: {}", e.what()));
      }
    }
    report.stalls = watchdog.stalls();
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  report.rounds = static_cast<std::uint64_t>(rounds.load());
  for (const StressReport& p : partial) {
    report.steps += p.steps;
    for (std::size_t d = 0; d < devices.size() && d < p.steps_per_device.size(); ++d) {
      report.steps_per_device[d] += p.steps_per_device[d];
    }
    report.faults_injected += p.faults_injected;
    report.errors_expected += p.errors_expected;
    report.errors_seen += p.errors_seen;
  }
  report.executed = shared.executed.load();
  if (report.executed != expected_runs) {
    shared.mismatch(
        fmt::format("{} step bodies ran, the replay runs {}", report.executed, expected_runs));
  }
  report.mismatches = shared.mismatches.load();
  report.first_mismatches = shared.first_mismatches;
  for (Context c : devices) {
    set_memory_limit(c, 0);
    report.memory_after.push_back(memory_stats(c).in_use);
  }
  return report;
}

std::string format_report(const StressReport& r) {
  std::string devices;
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    devices += fmt::format("{}{} ({} steps)", d == 0 ? "" : ", ", r.devices[d].str(),
                           r.steps_per_device[d]);
  }
  std::string out = fmt::format(
      "stress: {} steps in {} rounds, {:.2f} s: {} operations/s\n"
      "  devices: {}\n",
      r.steps, r.rounds, r.seconds, r.operations_per_second(), devices);
  for (const auto& [name, count] : r.counts) out += fmt::format("  {:<26} {}\n", name, count);
  out += fmt::format("  faults injected: {}; errors expected at waits: {}, seen: {}\n",
                     r.faults_injected, r.errors_expected, r.errors_seen);
  std::string memory;
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    memory += fmt::format("{}{} {} -> {} bytes", d == 0 ? "" : ", ", r.devices[d].str(),
                          r.memory_before[d], r.memory_after[d]);
  }
  out += fmt::format("  memory in use before -> after: {}\n", memory);
  out += fmt::format("  watchdog stalls: {}\n", r.stalls);
  out += fmt::format("  mismatches against the serial replay: {}\n", r.mismatches);
  for (const std::string& m : r.first_mismatches) out += fmt::format("    {}\n", m);
  out += r.passed() ? "  PASSED\n" : "  FAILED\n";
  return out;
}

std::string report_json(const StressReport& r) {
  std::string counts;
  for (const auto& [name, count] : r.counts) {
    counts += fmt::format("{}\"{}\":{}", counts.empty() ? "" : ",", name, count);
  }
  return fmt::format(
      "{{\"bench\":\"stress\",\"steps\":{},\"rounds\":{},\"seconds\":{:.3f},\"ops_per_s\":{},"
      "\"devices\":{},\"counts\":{{{}}},\"faults_injected\":{},\"errors_expected\":{},"
      "\"errors_seen\":{},\"mismatches\":{},\"stalls\":{},\"passed\":{}}}",
      r.steps, r.rounds, r.seconds, r.operations_per_second(), r.devices.size(), counts,
      r.faults_injected, r.errors_expected, r.errors_seen, r.mismatches, r.stalls,
      r.passed() ? "true" : "false");
}

}  // namespace tagflow::tools
