// The watchdog (engine/watchdog.h) and the dump signal (engine/dump_signal.h):
// a stall is reported once, with the stuck operation named; steady progress
// and an idle engine are not stalls; the signal prints the state of the
// process-wide engine and leaves a program's own handler alone.

#include "engine/watchdog.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <latch>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/dump_signal.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tests/engine/watchdog.h"

namespace tagflow::testing {
namespace {

using namespace std::chrono_literals;

std::unique_ptr<Engine> small_engine() {
  EngineConfig config = EngineConfig::defaults();
  config.cpu_workers = 1;
  return make_engine(config);
}

/// Waits up to 10 s for `done()`.
template <typename Done>
bool eventually(Done done) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

TEST(Watchdog, ReportsAStallOnceNamingTheStuckOperation) {
  run_with_timeout(60s, [] {
    auto engine = small_engine();
    VarHandle x = engine->new_var(), y = engine->new_var();
    std::mutex mutex;
    std::string report;
    std::optional<DependencyState> seen;
    Watchdog watchdog(*engine, 100ms, [&](const DependencyState& state) {
      std::lock_guard lock(mutex);
      seen = state;
      report = state.describe();
    });
    std::optional<Completion> held;
    std::latch launched(1);
    engine->push(
        {.name = "never_completes", .writes = {x}, .fn = [&](const RunContext&, Completion c) {
           held.emplace(std::move(c));
           launched.count_down();
         }});
    launched.wait();
    engine->push(
        {.name = "behind_it", .reads = {x}, .writes = {y}, .fn = [](const RunContext&) {}});
    ASSERT_TRUE(eventually([&] { return watchdog.stalls() == 1; }));
    std::this_thread::sleep_for(400ms);  // still stuck: reported once, not again
    EXPECT_EQ(watchdog.stalls(), 1);
    {
      std::lock_guard lock(mutex);
      ASSERT_TRUE(seen.has_value());
      ASSERT_EQ(seen->blockers().size(), 1u) << report;
      EXPECT_EQ(seen->blockers()[0]->name, "never_completes");
      EXPECT_EQ(seen->blockers()[0]->stage, OperationStage::kLaunched);
      EXPECT_NE(report.find("'never_completes' on cpu(0): launched"), std::string::npos) << report;
      EXPECT_NE(report.find("1 operation(s) wait behind it"), std::string::npos) << report;
    }
    // Progress re-arms it: a second stall is a second report.
    held->done();
    engine->wait_for_all();
    std::latch second(1);
    engine->push({.name = "stuck_again", .writes = {y}, .fn = [&](const RunContext&, Completion c) {
                    held.emplace(std::move(c));
                    second.count_down();
                  }});
    second.wait();
    ASSERT_TRUE(eventually([&] { return watchdog.stalls() == 2; }));
    {
      std::lock_guard lock(mutex);
      EXPECT_NE(report.find("'stuck_again'"), std::string::npos) << report;
    }
    held->done();
    engine->wait_for_all();
    engine->delete_var(x);
    engine->delete_var(y);
  });
}

TEST(Watchdog, SlowProgressAndIdlenessAreNotStalls) {
  run_with_timeout(60s, [] {
    auto engine = small_engine();
    VarHandle x = engine->new_var();
    Watchdog watchdog(*engine, 300ms, [](const DependencyState& state) {
      ADD_FAILURE() << "unexpected stall:\n" << state.describe();
    });
    // A chain of operations of 30 ms each: always something pending, and
    // something completing well within the stall time.
    for (int i = 0; i < 30; ++i) {
      engine->push({.name = "slow_step", .writes = {x}, .fn = [](const RunContext&) {
                      std::this_thread::sleep_for(30ms);
                    }});
    }
    engine->wait_for_all();
    std::this_thread::sleep_for(700ms);  // idle: nothing pending is not a stall
    EXPECT_EQ(watchdog.stalls(), 0);
    engine->delete_var(x);
  });
}

TEST(Watchdog, RefusesABadStallTimeOrCallback) {
  auto engine = small_engine();
  EXPECT_THROW(Watchdog(*engine, 0ms, [](const DependencyState&) {}), Error);
  EXPECT_THROW(Watchdog(*engine, 10ms, nullptr), Error);
}

TEST(DumpSignal, PrintsTheProcessWideEngineStateOnStandardError) {
  run_with_timeout(60s, [] {
    Engine& engine = Engine::get();
    ASSERT_TRUE(install_dump_signal(SIGUSR2));
    EXPECT_TRUE(install_dump_signal(SIGUSR2));  // twice is fine
    VarHandle x = engine.new_var();
    std::optional<Completion> held;
    std::latch launched(1);
    engine.push(
        {.name = "signal_dump_subject", .writes = {x}, .fn = [&](const RunContext&, Completion c) {
           held.emplace(std::move(c));
           launched.count_down();
         }});
    launched.wait();
    // The latch opens inside the closure; the operation is "launched" only
    // once the closure has returned.
    ASSERT_TRUE(eventually([&] {
      for (const PendingOperation& p : engine.dependency_state().operations) {
        if (p.stage == OperationStage::kLaunched) return true;
      }
      return false;
    }));
    const int before = dump_signal_count();
    ::testing::internal::CaptureStderr();
    ASSERT_EQ(std::raise(SIGUSR2), 0);
    const bool dumped = eventually([&] { return dump_signal_count() > before; });
    const std::string text = ::testing::internal::GetCapturedStderr();
    ASSERT_TRUE(dumped);
    EXPECT_NE(text.find("tagflow dependency state (on signal)"), std::string::npos) << text;
    EXPECT_NE(text.find("'signal_dump_subject' on cpu(0): launched"), std::string::npos) << text;
    held->done();
    engine.wait_to_read(x);
    engine.delete_var(x);
  });
}

std::atomic<int> g_own_handler_calls{0};
void own_handler(int) { g_own_handler_calls.fetch_add(1); }

TEST(DumpSignal, LeavesAProgramsOwnHandlerAlone) {
  struct sigaction action {};
  action.sa_handler = own_handler;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(sigaction(SIGXCPU, &action, nullptr), 0);
  const int calls = g_own_handler_calls.load();
  EXPECT_FALSE(install_dump_signal(SIGXCPU));
  struct sigaction now {};
  ASSERT_EQ(sigaction(SIGXCPU, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, own_handler);
  ASSERT_EQ(std::raise(SIGXCPU), 0);
  EXPECT_EQ(g_own_handler_calls.load(), calls + 1);
  signal(SIGXCPU, SIG_DFL);
}

TEST(DumpSignal, RefusesSignalsThatCannotBeHandled) {
  EXPECT_THROW(install_dump_signal(SIGKILL), Error);
  EXPECT_THROW(install_dump_signal(0), Error);
  EXPECT_THROW(install_dump_signal(100000), Error);
}

TEST(EngineConfigDiagnostics, ReadsTheDumpSignalAndWatchdogSettings) {
  EXPECT_EQ(EngineConfig::defaults().dump_signal, SIGUSR1);
  EXPECT_EQ(EngineConfig::defaults().watchdog_seconds, 0);
  setenv("TAGFLOW_DUMP_SIGNAL", "USR2", 1);
  setenv("TAGFLOW_WATCHDOG", "2.5", 1);
  EngineConfig config = EngineConfig::from_env();
  EXPECT_EQ(config.dump_signal, SIGUSR2);
  EXPECT_EQ(config.watchdog_seconds, 2.5);
  setenv("TAGFLOW_DUMP_SIGNAL", "off", 1);
  EXPECT_EQ(EngineConfig::from_env().dump_signal, 0);
  setenv("TAGFLOW_DUMP_SIGNAL", "HUP", 1);
  EXPECT_THROW((void)EngineConfig::from_env(), Error);
  unsetenv("TAGFLOW_DUMP_SIGNAL");
  for (const char* bad : {"soon", "-1", "3s"}) {
    setenv("TAGFLOW_WATCHDOG", bad, 1);
    EXPECT_THROW((void)EngineConfig::from_env(), Error) << bad;
  }
  unsetenv("TAGFLOW_WATCHDOG");
}

TEST(EngineConfigDiagnostics, ReadsTheExitTimeout) {
  EXPECT_EQ(EngineConfig::defaults().exit_timeout_seconds, 10);
  setenv("TAGFLOW_EXIT_TIMEOUT", "0.5", 1);
  EXPECT_EQ(EngineConfig::from_env().exit_timeout_seconds, 0.5);
  setenv("TAGFLOW_EXIT_TIMEOUT", "0", 1);
  EXPECT_EQ(EngineConfig::from_env().exit_timeout_seconds, 0);
  for (const char* bad : {"never", "-2", "5s"}) {
    setenv("TAGFLOW_EXIT_TIMEOUT", bad, 1);
    try {
      (void)EngineConfig::from_env();
      ADD_FAILURE() << bad << ": expected an error";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TAGFLOW_EXIT_TIMEOUT"), std::string::npos) << e.what();
    }
  }
  unsetenv("TAGFLOW_EXIT_TIMEOUT");
}

}  // namespace
}  // namespace tagflow::testing
