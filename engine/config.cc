#include "engine/config.h"

#include <charconv>
#include <csignal>
#include <cstdlib>
#include <string_view>
#include <thread>
#include <utility>

#include "engine/error.h"

namespace tagflow {

namespace {

const char* env(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? value : nullptr;
}

int env_int(const char* name, int fallback, int min, int max) {
  const char* text = env(name);
  if (text == nullptr) return fallback;
  int value = 0;
  std::string_view s(text);
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  TAGFLOW_CHECK(ec == std::errc{} && ptr == s.data() + s.size() && value >= min && value <= max,
                "{}: expected an integer in [{}, {}], got \"{}\"", name, min, max, text);
  return value;
}

bool env_bool(const char* name, bool fallback) {
  const char* text = env(name);
  if (text == nullptr) return fallback;
  std::string_view s(text);
  if (s == "1" || s == "true" || s == "on" || s == "yes") return true;
  if (s == "0" || s == "false" || s == "off" || s == "no") return false;
  detail::throw_error("{}: expected 1/0, true/false, on/off or yes/no, got \"{}\"", name, text);
}

std::uint64_t env_bytes(const char* name, std::uint64_t fallback) {
  const char* text = env(name);
  if (text == nullptr) return fallback;
  std::string_view s(text);
  std::uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  std::string_view suffix(ptr, static_cast<std::size_t>(s.data() + s.size() - ptr));
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  TAGFLOW_CHECK(ec == std::errc{} && shift >= 0 && value <= (std::uint64_t{1} << 50) >> shift,
                "{}: expected a byte count with an optional K, M or G suffix (e.g. 512M), "
                "got \"{}\"",
                name, text);
  return value << shift;
}

/// One of spdlog's level names, as TAGFLOW_LOG_LEVEL and EngineConfig::log_level take them.
bool is_log_level(std::string_view level) {
  static constexpr std::string_view kLevels[] = {"trace", "debug",    "info", "warn",
                                                 "error", "critical", "off"};
  for (auto l : kLevels) {
    if (l == level) return true;
  }
  return false;
}

}  // namespace

const char* to_string(EngineKind kind) { return kind == EngineKind::kNaive ? "naive" : "threaded"; }

const char* to_string(ConvTf32 policy) { return policy == ConvTf32::kForbid ? "forbid" : "allow"; }

const char* to_string(CpuConv kind) {
  switch (kind) {
    case CpuConv::kDirect:
      return "direct";
    case CpuConv::kIm2col:
      return "im2col";
    case CpuConv::kAuto:
      break;
  }
  return "auto";
}

const char* to_string(CpuGemm kind) {
  switch (kind) {
    case CpuGemm::kOneDnn:
      return "onednn";
    case CpuGemm::kOpenBlas:
      return "openblas";
    case CpuGemm::kAuto:
      break;
  }
  return "auto";
}

EngineConfig EngineConfig::defaults() {
  EngineConfig c;
  c.dump_signal = SIGUSR1;
  c.cpu_workers = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return c;
}

EngineConfig EngineConfig::from_env() {
  EngineConfig c = defaults();
  if (const char* kind = env("TAGFLOW_ENGINE")) {
    std::string_view k(kind);
    if (k == "threaded") {
      c.kind = EngineKind::kThreaded;
    } else if (k == "naive") {
      c.kind = EngineKind::kNaive;
    } else {
      detail::throw_error("TAGFLOW_ENGINE: expected \"threaded\" or \"naive\", got \"{}\"", kind);
    }
  }
  c.cpu_workers = env_int("TAGFLOW_CPU_WORKERS", c.cpu_workers, 1, 1024);
  if (const char* text = env("TAGFLOW_SCHEDULE")) {
    c.schedule = ScheduleOptions::parse(text);
    if (c.schedule.controlled() && env("TAGFLOW_ENGINE") == nullptr) c.kind = EngineKind::kNaive;
  }
  if (const char* path = env("TAGFLOW_SCHEDULE_RECORD")) {
    c.schedule.record = path;
    if (env("TAGFLOW_ENGINE") == nullptr) c.kind = EngineKind::kNaive;
  }
  if (const char* text = env("TAGFLOW_SIM_GPUS")) c.set_sim_gpus(text);
  c.worker_spin = env_int("TAGFLOW_WORKER_SPIN", c.worker_spin, 0, 100'000'000);
  c.max_pending = env_int("TAGFLOW_MAX_PENDING_OPS", c.max_pending, 0, 1 << 30);
  c.memory_limit = env_bytes("TAGFLOW_MEMORY_LIMIT", c.memory_limit);
  c.profiler = env_bool("TAGFLOW_PROFILER", c.profiler);
  if (const char* text = env("TAGFLOW_DUMP_SIGNAL")) {
    const std::string_view s(text);
    if (s == "USR1" || s == "SIGUSR1") {
      c.dump_signal = SIGUSR1;
    } else if (s == "USR2" || s == "SIGUSR2") {
      c.dump_signal = SIGUSR2;
    } else if (s == "off" || s == "0") {
      c.dump_signal = 0;
    } else {
      detail::throw_error("TAGFLOW_DUMP_SIGNAL: expected USR1, USR2 or off, got \"{}\"", text);
    }
  }
  if (const char* text = env("TAGFLOW_WATCHDOG")) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    TAGFLOW_CHECK(end != text && *end == '\0' && seconds >= 0 && seconds <= 1e6,
                  "TAGFLOW_WATCHDOG: expected seconds in [0, 1e6] (0: off), got \"{}\"", text);
    c.watchdog_seconds = seconds;
  }
  if (const char* text = env("TAGFLOW_EXIT_TIMEOUT")) {
    char* end = nullptr;
    const double seconds = std::strtod(text, &end);
    TAGFLOW_CHECK(end != text && *end == '\0' && seconds >= 0 && seconds <= 1e6,
                  "TAGFLOW_EXIT_TIMEOUT: expected seconds in [0, 1e6] (0: do not wait), got \"{}\"",
                  text);
    c.exit_timeout_seconds = seconds;
  }
  if (const char* text = env("TAGFLOW_CONV_TF32")) {
    const std::string_view s(text);
    if (s == "allow") {
      c.conv_tf32 = ConvTf32::kAllow;
    } else if (s == "forbid") {
      c.conv_tf32 = ConvTf32::kForbid;
    } else {
      detail::throw_error("TAGFLOW_CONV_TF32: expected \"allow\" or \"forbid\", got \"{}\"", text);
    }
  }
  if (const char* text = env("TAGFLOW_CPU_CONV")) {
    const std::string_view s(text);
    if (s == "auto") {
      c.cpu_conv = CpuConv::kAuto;
    } else if (s == "direct") {
      c.cpu_conv = CpuConv::kDirect;
    } else if (s == "im2col") {
      c.cpu_conv = CpuConv::kIm2col;
    } else {
      detail::throw_error(
          "TAGFLOW_CPU_CONV: expected \"auto\", \"direct\" or \"im2col\", got \"{}\"", text);
    }
  }
  if (const char* text = env("TAGFLOW_CPU_GEMM")) {
    const std::string_view s(text);
    if (s == "auto") {
      c.cpu_gemm = CpuGemm::kAuto;
    } else if (s == "onednn") {
      c.cpu_gemm = CpuGemm::kOneDnn;
    } else if (s == "openblas") {
      c.cpu_gemm = CpuGemm::kOpenBlas;
    } else {
      detail::throw_error(
          "TAGFLOW_CPU_GEMM: expected \"auto\", \"onednn\" or \"openblas\", got \"{}\"", text);
    }
  }
  if (const char* level = env("TAGFLOW_LOG_LEVEL")) {
    const bool known = is_log_level(level);
    TAGFLOW_CHECK(known,
                  "TAGFLOW_LOG_LEVEL: expected trace, debug, info, warn, error, critical or "
                  "off, got \"{}\"",
                  level);
    c.log_level = level;
  }
  return c;
}

void EngineConfig::set_sim_gpus(std::string_view text) {
  constexpr const char* kExpected =
      "expected N (0 to 64), N:MODEL or N:MODEL:timing, where MODEL is h100-sxm, a100-sxm, l4 "
      "or a JSON file";
  const std::size_t colon = text.find(':');
  const std::string_view count = text.substr(0, colon);
  int n = -1;
  auto [ptr, ec] = std::from_chars(count.data(), count.data() + count.size(), n);
  TAGFLOW_CHECK(ec == std::errc{} && ptr == count.data() + count.size() && n >= 0 && n <= 64,
                "TAGFLOW_SIM_GPUS: {}, got \"{}\"", kExpected, text);
  std::optional<DeviceModel> model;
  bool timing_only = false;
  if (colon != std::string_view::npos) {
    std::string_view rest = text.substr(colon + 1);
    for (std::string_view mode : {":timing", ":compute"}) {
      if (rest.size() > mode.size() && rest.ends_with(mode)) {
        timing_only = mode == ":timing";
        rest.remove_suffix(mode.size());
      }
    }
    // A last part that is a word, not a path, is a mode: name it when it is
    // none of the two, rather than look for a file "h100-sxm:foo".
    if (const std::size_t last = rest.rfind(':'); last != std::string_view::npos) {
      const std::string_view mode = rest.substr(last + 1);
      TAGFLOW_CHECK(mode.find_first_of("/.") != std::string_view::npos,
                    "TAGFLOW_SIM_GPUS: unknown mode \"{}\" in \"{}\": expected timing or compute "
                    "after the model ({})",
                    mode, text, kExpected);
    }
    TAGFLOW_CHECK(!rest.empty() && n > 0, "TAGFLOW_SIM_GPUS: {}, got \"{}\"", kExpected, text);
    try {
      model = DeviceModel::resolve(rest);
    } catch (const Error& e) {
      detail::throw_error("TAGFLOW_SIM_GPUS: {}", e.what());
    }
  }
  sim_gpus = n;
  sim_model = std::move(model);
  sim_timing_only = timing_only;
}

std::string EngineConfig::sim_gpus_text() const {
  if (!sim_model) return std::to_string(sim_gpus);
  return fmt::format("{}:{}{}", sim_gpus, sim_model->name, sim_timing_only ? ":timing" : "");
}

void EngineConfig::check() const {
  const auto require = [](bool ok, const char* variable, const char* field, std::string expected,
                          std::string got) {
    if (ok) return;
    throw ConfigError(variable, fmt::format("EngineConfig: {} ({}): expected {}, got {}", field,
                                            variable, expected, got));
  };
  require(cpu_workers >= 1 && cpu_workers <= 1024, "TAGFLOW_CPU_WORKERS", "cpu_workers",
          "1 to 1024 worker threads", std::to_string(cpu_workers));
  require(sim_gpus >= 0 && sim_gpus <= 64, "TAGFLOW_SIM_GPUS", "sim_gpus", "0 to 64",
          std::to_string(sim_gpus));
  require(!(sim_model.has_value() || sim_timing_only) || sim_gpus > 0, "TAGFLOW_SIM_GPUS",
          "sim_model", "simulated GPUs (sim_gpus > 0) for a device model", "sim_gpus = 0");
  require(!sim_timing_only || sim_model.has_value(), "TAGFLOW_SIM_GPUS", "sim_timing_only",
          "a device model to time the kernels with", "none");
  require(worker_spin >= 0, "TAGFLOW_WORKER_SPIN", "worker_spin", "0 or more polls",
          std::to_string(worker_spin));
  require(max_pending >= 0, "TAGFLOW_MAX_PENDING_OPS", "max_pending", "0 (no limit) or more",
          std::to_string(max_pending));
  require(memory_limit <= (std::uint64_t{1} << 50), "TAGFLOW_MEMORY_LIMIT", "memory_limit",
          "at most 2^50 bytes (0: the device's own limit)", std::to_string(memory_limit));
  require(dump_signal == 0 || dump_signal == SIGUSR1 || dump_signal == SIGUSR2,
          "TAGFLOW_DUMP_SIGNAL", "dump_signal", "0 (off), SIGUSR1 or SIGUSR2",
          std::to_string(dump_signal));
  require(watchdog_seconds >= 0 && watchdog_seconds <= 1e6, "TAGFLOW_WATCHDOG", "watchdog_seconds",
          "seconds in [0, 1e6] (0: off)", fmt::format("{}", watchdog_seconds));
  require(exit_timeout_seconds >= 0 && exit_timeout_seconds <= 1e6, "TAGFLOW_EXIT_TIMEOUT",
          "exit_timeout_seconds", "seconds in [0, 1e6] (0: do not wait)",
          fmt::format("{}", exit_timeout_seconds));
  require(kind == EngineKind::kNaive || !schedule.controlled(), "TAGFLOW_ENGINE", "kind",
          fmt::format("the naive engine for the controlled schedule {}", schedule.str()),
          "threaded");
  const bool known = is_log_level(log_level);
  require(known, "TAGFLOW_LOG_LEVEL", "log_level",
          "trace, debug, info, warn, error, critical or off", fmt::format("\"{}\"", log_level));
}

std::vector<ConfigSetting> EngineConfig::sources(bool from_code) const {
  const auto mine = describe();
  const auto machine = defaults().describe();
  std::vector<std::pair<std::string, std::string>> environment = machine;
  try {
    environment = from_env().describe();
  } catch (const Error&) {
    // A malformed variable: the environment gave nothing usable.
  }
  std::vector<ConfigSetting> settings;
  for (std::size_t i = 0; i < mine.size(); ++i) {
    const std::string& value = mine[i].second;
    const char* source = "default";
    if (from_code && value != environment[i].second) {
      source = "code";
    } else if (value != machine[i].second) {
      source = "environment";
    }
    settings.push_back({mine[i].first, value, source});
  }
  return settings;
}

std::vector<std::pair<std::string, std::string>> EngineConfig::describe() const {
  return {
      {"TAGFLOW_ENGINE", to_string(kind)},
      {"TAGFLOW_CPU_WORKERS", std::to_string(cpu_workers)},
      {"TAGFLOW_SIM_GPUS", sim_gpus_text()},
      {"TAGFLOW_WORKER_SPIN", std::to_string(worker_spin)},
      {"TAGFLOW_MAX_PENDING_OPS", std::to_string(max_pending)},
      {"TAGFLOW_MEMORY_LIMIT",
       memory_limit == 0 ? "0 (device limit)" : std::to_string(memory_limit)},
      {"TAGFLOW_PROFILER", profiler ? "1" : "0"},
      {"TAGFLOW_DUMP_SIGNAL", dump_signal == SIGUSR1   ? "USR1"
                              : dump_signal == SIGUSR2 ? "USR2"
                                                       : "off"},
      {"TAGFLOW_WATCHDOG", watchdog_seconds > 0 ? fmt::format("{}", watchdog_seconds) : "0 (off)"},
      {"TAGFLOW_EXIT_TIMEOUT",
       exit_timeout_seconds > 0 ? fmt::format("{}", exit_timeout_seconds) : "0 (no wait)"},
      {"TAGFLOW_CONV_TF32", to_string(conv_tf32)},
      {"TAGFLOW_CPU_CONV", to_string(cpu_conv)},
      {"TAGFLOW_CPU_GEMM", to_string(cpu_gemm)},
      {"TAGFLOW_SCHEDULE", schedule.str()},
      {"TAGFLOW_SCHEDULE_RECORD", schedule.record.empty() ? "(none)" : schedule.record.string()},
      {"TAGFLOW_LOG_LEVEL", log_level},
  };
}

}  // namespace tagflow
