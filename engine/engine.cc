#include "engine/engine.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <utility>

#include <spdlog/spdlog.h>

#include "engine/detail/exit_hook.h"
#include "engine/detail/lifetime.h"
#include "engine/detail/naive_engine.h"
#include "engine/detail/threaded_engine.h"
#include "engine/detail/worker_pool.h"
#include "engine/dump_signal.h"
#include "engine/error.h"
#include "engine/watchdog.h"

namespace tagflow {

// --- Completion ------------------------------------------------------------------

Completion& Completion::operator=(Completion&& other) noexcept {
  if (this != &other) {
    if (op_ != nullptr) {
      // Made first: the temporary Error, which shares its message with the
      // stored copy, is gone before another thread can see that copy.
      std::exception_ptr error =
          std::make_exception_ptr(Error("an unfinished Completion was overwritten"));
      fail(std::move(error));
    }
    op_ = std::exchange(other.op_, nullptr);
  }
  return *this;
}

Completion::~Completion() {
  if (op_ != nullptr) {
    std::exception_ptr error = std::make_exception_ptr(  // made first, as in operator=
        Error("the operation's Completion was destroyed without done() or fail() being called"));
    fail(std::move(error));
  }
}

void Completion::done() {
  TAGFLOW_CHECK(op_ != nullptr, "Completion::done: the operation was already completed");
  detail::OpBlock* op = std::exchange(op_, nullptr);
  op->extras->engine->complete_async(op, nullptr);
}

void Completion::fail(std::exception_ptr error) {
  TAGFLOW_CHECK(op_ != nullptr, "Completion::fail: the operation was already completed");
  if (!error) error = std::make_exception_ptr(Error("Completion::fail called without an error"));
  detail::OpBlock* op = std::exchange(op_, nullptr);
  op->extras->engine->complete_async(op, std::move(error));
}

// --- variable handles --------------------------------------------------------------

std::string VarHandle::str() const {
  if (!*this) return "null";
  return fmt::format("{} (generation {})", static_cast<const void*>(detail::var_block(*this)),
                     generation());
}

std::ostream& operator<<(std::ostream& os, const VarHandle& var) { return os << var.str(); }

// --- names -----------------------------------------------------------------------

const char* intern_name(std::string_view name) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string, std::less<>>();  // lives for the process
  static bool warned = false;
  name = name.substr(0, kMaxInternedNameLength);
  std::lock_guard lock(mutex);
  auto it = names->find(name);
  if (it != names->end()) return it->c_str();
  if (names->size() >= kMaxInternedNames) {
    if (!std::exchange(warned, true)) {
      spdlog::warn(
          "intern_name: {} distinct operation names kept, the most there may be; \"{}\" and "
          "later new names are shown as \"(too many operation names)\". Name operations by "
          "kind, not by instance.",
          kMaxInternedNames, name);
    }
    return "(too many operation names)";
  }
  return names->emplace(name).first->c_str();
}

// --- engines ---------------------------------------------------------------------

std::unique_ptr<Engine> make_engine(const EngineConfig& config) {
  TAGFLOW_CHECK(config.cpu_workers >= 1, "make_engine: expected cpu_workers >= 1, got {}",
                config.cpu_workers);
  TAGFLOW_CHECK(config.sim_gpus >= 0, "make_engine: expected sim_gpus >= 0, got {}",
                config.sim_gpus);
  TAGFLOW_CHECK(config.kind == EngineKind::kNaive || !config.schedule.controlled(),
                "make_engine: a controlled schedule ({}) runs on the naive engine, one operation "
                "at a time (Note [Controlled schedules]); expected TAGFLOW_ENGINE=naive, got "
                "threaded",
                config.schedule.str());
  if (config.kind == EngineKind::kNaive) return std::make_unique<detail::NaiveEngine>(config);
  return std::make_unique<detail::ThreadedEngine>(config);
}

namespace {

/// The process-wide engine and what starts with it. Made once, never
/// destroyed (Note [Engine lifetime] in engine.h).
struct ProcessEngine {
  std::unique_ptr<Engine> engine;
  /// Its configuration came from Engine::configure().
  bool configured_from_code = false;
  detail::EngineCore* core = nullptr;
  std::unique_ptr<Watchdog> watchdog;
  detail::ForkCheck fork_check;
};
ProcessEngine* g_process = nullptr;

std::chrono::milliseconds to_milliseconds(double seconds) {
  return std::chrono::milliseconds(static_cast<std::chrono::milliseconds::rep>(seconds * 1000));
}

/// The exit hook (Note [Engine lifetime]): registered when the engine
/// starts, and maybe again (detail::register_exit_hook_again); only the
/// first to run acts.
void finish_at_exit() {
  static std::atomic<bool> ran{false};
  if (ran.exchange(true)) return;
  detail::note_exit_started();
  ProcessEngine& p = *g_process;
  if (p.fork_check.forked()) return;  // a child: the threads to wait for are the parent's
  const detail::WorkerIdentity& me = detail::this_worker();
  const bool on_engine_thread = me.pool != nullptr || me.running != nullptr;
  // exit() from inside an operation: it cannot wait for itself, and what
  // the other workers would start next could use statics about to go.
  if (on_engine_thread) p.core->stop_workers();
  p.watchdog.reset();  // its thread reads the engine and logs: stopped while spdlog lives
  if (on_engine_thread) {
    spdlog::info(
        "engine: exit() called from inside operation '{}': operations not yet started "
        "are dropped",
        me.running != nullptr ? me.running : "(between operations)");
    return;
  }
  const double seconds = p.engine->config().exit_timeout_seconds;
  if (seconds <= 0) return;
  if (!p.core->finish_pending(to_milliseconds(seconds))) {
    std::string state;
    try {
      state = p.engine->dependency_state().describe();
    } catch (const std::exception& e) {
      state = std::string("(dependency state unavailable: ") + e.what() + ")\n";
    }
    spdlog::error(
        "engine: at exit, no operation completed for {} s (TAGFLOW_EXIT_TIMEOUT); exiting "
        "without the {} still pending\n{}",
        seconds, p.engine->operation_counts().pending(), state);
  }
}

/// What Engine::configure() set and whether the process engine has started:
/// one lock for both, so a configure() racing the first get() either is
/// taken or throws.
struct StartingConfig {
  std::mutex mutex;
  std::optional<EngineConfig> from_code;
  std::atomic<bool> started{false};
};

StartingConfig& starting_config() {
  static auto* const config = new StartingConfig();  // lives for the process, as the engine
  return *config;
}

ProcessEngine* start_process_engine() {
  StartingConfig& starting = starting_config();
  std::lock_guard lock(starting.mutex);
  const bool from_code = starting.from_code.has_value();
  EngineConfig config = from_code ? *starting.from_code : EngineConfig::from_env();
  // spdlog first: its registry, made here at the latest, then outlives the
  // exit hook registered below (objects and hooks go in reverse order).
  spdlog::set_level(spdlog::level::from_str(config.log_level));
  for (const auto& [name, value] : config.describe()) spdlog::info("config {}={}", name, value);
  auto p = std::make_unique<ProcessEngine>();
  p->configured_from_code = from_code;
  p->engine = make_engine(config);
  p->core = dynamic_cast<detail::EngineCore*>(p->engine.get());
  spdlog::info("engine: {} with {} GPU(s)", to_string(config.kind), p->engine->num_gpus());
  if (config.dump_signal != 0) install_dump_signal(config.dump_signal);
  if (config.watchdog_seconds > 0) {
    p->watchdog = std::make_unique<Watchdog>(
        *p->engine, to_milliseconds(config.watchdog_seconds),
        [seconds = config.watchdog_seconds](const DependencyState& state) {
          spdlog::error("watchdog: no operation completed for {} s\n{}", seconds, state.describe());
        });
  }
  g_process = p.release();
  TAGFLOW_CHECK(std::atexit(finish_at_exit) == 0,
                "engine: expected to register the exit hook, std::atexit failed");
  starting.started.store(true, std::memory_order_release);
  return g_process;
}

}  // namespace

void detail::register_exit_hook_again() {
  (void)Engine::get();
  TAGFLOW_CHECK(std::atexit(finish_at_exit) == 0,
                "engine: expected to register the exit hook, std::atexit failed");
}

Engine& Engine::get() {
  // Never destroyed, reachable from here (Note [Engine lifetime]).
  static Engine* const engine = start_process_engine()->engine.get();
  return *engine;
}

void Engine::configure(const EngineConfig& config) {
  config.check();
  StartingConfig& starting = starting_config();
  std::lock_guard lock(starting.mutex);
  if (!starting.started.load(std::memory_order_acquire)) {
    starting.from_code = config;
    return;
  }
  const auto running = g_process->engine->config().describe();
  const auto asked = config.describe();
  std::string differences;
  std::string first;
  for (std::size_t i = 0; i < running.size(); ++i) {
    if (running[i].second == asked[i].second) continue;
    if (first.empty()) first = running[i].first;
    differences += fmt::format("{}{} runs with {}, asked for {}", differences.empty() ? "" : "; ",
                               running[i].first, running[i].second, asked[i].second);
  }
  if (differences.empty()) return;
  throw ConfigError(first, fmt::format("Engine::configure: the process-wide engine has already "
                                       "started, and its configuration cannot change: {}. Call "
                                       "configure() before the first array, network or "
                                       "Engine::get()",
                                       differences));
}

bool Engine::started() { return starting_config().started.load(std::memory_order_acquire); }

std::vector<ConfigSetting> Engine::settings() {
  const Engine& engine = get();
  return engine.config().sources(g_process->configured_from_code);
}

std::vector<std::pair<std::string, std::string>> build_info() { return detail::build_info(); }

int num_gpus() { return Engine::get().num_gpus(); }

bool inside_engine_operation() { return detail::this_worker().running != nullptr; }

}  // namespace tagflow
