#include "engine/engine.h"

#include <mutex>
#include <set>
#include <string>

#include <spdlog/spdlog.h>

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
      fail(std::make_exception_ptr(Error("an unfinished Completion was overwritten")));
    }
    op_ = std::exchange(other.op_, nullptr);
  }
  return *this;
}

Completion::~Completion() {
  if (op_ != nullptr) {
    fail(std::make_exception_ptr(
        Error("the operation's Completion was destroyed without done() or fail() being called")));
  }
}

void Completion::done() {
  TAGFLOW_CHECK(op_ != nullptr, "Completion::done: the operation was already completed");
  detail::OpBlock* op = std::exchange(op_, nullptr);
  op->engine->complete_async(op, nullptr);
}

void Completion::fail(std::exception_ptr error) {
  TAGFLOW_CHECK(op_ != nullptr, "Completion::fail: the operation was already completed");
  if (!error) error = std::make_exception_ptr(Error("Completion::fail called without an error"));
  detail::OpBlock* op = std::exchange(op_, nullptr);
  op->engine->complete_async(op, std::move(error));
}

// --- names -----------------------------------------------------------------------

const char* intern_name(std::string_view name) {
  static std::mutex mutex;
  static auto* names = new std::set<std::string, std::less<>>();  // lives for the process
  std::lock_guard lock(mutex);
  auto it = names->find(name);
  if (it == names->end()) it = names->emplace(name).first;
  return it->c_str();
}

// --- engines ---------------------------------------------------------------------

std::unique_ptr<Engine> make_engine(const EngineConfig& config) {
  TAGFLOW_CHECK(config.cpu_workers >= 1, "make_engine: expected cpu_workers >= 1, got {}",
                config.cpu_workers);
  TAGFLOW_CHECK(config.sim_gpus >= 0, "make_engine: expected sim_gpus >= 0, got {}",
                config.sim_gpus);
  if (config.kind == EngineKind::kNaive) return std::make_unique<detail::NaiveEngine>(config);
  return std::make_unique<detail::ThreadedEngine>(config);
}

Engine& Engine::get() {
  static std::unique_ptr<Engine> engine = [] {
    EngineConfig config = EngineConfig::from_env();
    spdlog::set_level(spdlog::level::from_str(config.log_level));
    for (const auto& [name, value] : config.describe()) spdlog::info("config {}={}", name, value);
    auto made = make_engine(config);
    spdlog::info("engine: {} with {} GPU(s)", to_string(config.kind), made->num_gpus());
    if (config.dump_signal != 0) install_dump_signal(config.dump_signal);
    return made;
  }();
  if (engine->config().watchdog_seconds > 0) {
    // Started after the engine, so destroyed before it.
    static Watchdog watchdog(
        *engine,
        std::chrono::milliseconds(
            static_cast<std::chrono::milliseconds::rep>(engine->config().watchdog_seconds * 1000)),
        [seconds = engine->config().watchdog_seconds](const DependencyState& state) {
          spdlog::error("watchdog: no operation completed for {} s\n{}", seconds, state.describe());
        });
  }
  return *engine;
}

std::vector<std::pair<std::string, std::string>> build_info() { return detail::build_info(); }

int num_gpus() { return Engine::get().num_gpus(); }

bool inside_engine_operation() { return detail::this_worker().running != nullptr; }

}  // namespace tagflow
