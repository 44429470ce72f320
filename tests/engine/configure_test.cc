// Engine::configure: the process-wide engine's configuration set from code
// before its first use, with the environment as defaults, refused with a
// ConfigError naming the setting afterwards or when out of range, and
// listed with where each value came from. Each test runs in a process of
// its own (ctest runs one test per process), so each starts before the
// engine does; the binary's main does not touch the engine.

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"

namespace tagflow {
namespace {

/// The environment variables these tests set, cleared so that the test
/// decides what the environment says.
void clear_environment() {
  for (const char* name : {"TAGFLOW_SIM_GPUS", "TAGFLOW_CPU_WORKERS", "TAGFLOW_LOG_LEVEL",
                           "TAGFLOW_ENGINE", "TAGFLOW_SCHEDULE", "TAGFLOW_MAX_PENDING_OPS"}) {
    unsetenv(name);
  }
}

ConfigSetting setting(const std::string& variable) {
  for (const ConfigSetting& s : Engine::settings()) {
    if (s.variable == variable) return s;
  }
  ADD_FAILURE() << "no setting " << variable;
  return {};
}

template <typename Call>
ConfigError config_error_of(Call call) {
  try {
    call();
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError";
  return ConfigError("", "");
}

TEST(ConfigureTest, SetsTheProcessEngineBeforeItsFirstUse) {
  clear_environment();
  EngineConfig config = EngineConfig::from_env();
  const int workers = EngineConfig::defaults().cpu_workers + 1;  // not the machine's default
  config.cpu_workers = workers;
  config.set_sim_gpus("3");
  ASSERT_FALSE(Engine::started());
  Engine::configure(config);
  EXPECT_FALSE(Engine::started()) << "configure() must not start the engine";
  const NDArray x = ones({2}, gpu(2));  // the first use
  EXPECT_TRUE(Engine::started());
  EXPECT_EQ(num_gpus(), 3);
  EXPECT_EQ(Engine::get().config().cpu_workers, workers);
  EXPECT_EQ(sum(x).asscalar<float>(), 2.f);
  const ConfigSetting gpus = setting("TAGFLOW_SIM_GPUS");
  EXPECT_EQ(gpus.value, "3");
  EXPECT_EQ(gpus.source, "code");
  EXPECT_EQ(setting("TAGFLOW_CPU_WORKERS").source, "code");
  EXPECT_EQ(setting("TAGFLOW_LOG_LEVEL").source, "default");
  // The same settings again change nothing, and are not refused.
  EXPECT_NO_THROW(Engine::configure(config));
}

TEST(ConfigureTest, TheEnvironmentStaysTheDefaults) {
  clear_environment();
  setenv("TAGFLOW_CPU_WORKERS", "3", 1);
  setenv("TAGFLOW_LOG_LEVEL", "error", 1);
  EngineConfig config = EngineConfig::from_env();
  config.set_sim_gpus("2");
  Engine::configure(config);
  EXPECT_EQ(Engine::get().config().cpu_workers, 3);
  EXPECT_EQ(num_gpus(), 2);
  const ConfigSetting workers = setting("TAGFLOW_CPU_WORKERS");
  EXPECT_EQ(workers.value, "3");
  EXPECT_EQ(workers.source, "environment");
  EXPECT_EQ(setting("TAGFLOW_LOG_LEVEL").source, "environment");
  EXPECT_EQ(setting("TAGFLOW_SIM_GPUS").source, "code");
  EXPECT_EQ(setting("TAGFLOW_ENGINE").source, "default");
}

TEST(ConfigureTest, WithoutConfigureTheEnvironmentDecides) {
  clear_environment();
  setenv("TAGFLOW_SIM_GPUS", "1", 1);
  EXPECT_EQ(num_gpus(), 1);
  EXPECT_EQ(setting("TAGFLOW_SIM_GPUS").source, "environment");
  EXPECT_EQ(setting("TAGFLOW_CPU_WORKERS").source, "default");
}

TEST(ConfigureTest, AfterTheEngineStartedADifferentSettingIsRefusedByName) {
  clear_environment();
  (void)Engine::get();  // started from the environment: no simulated GPU
  const EngineConfig running = Engine::get().config();
  EXPECT_NO_THROW(Engine::configure(running));
  EngineConfig other = running;
  other.set_sim_gpus("2");
  other.max_pending = 100;
  const ConfigError e = config_error_of([&] { Engine::configure(other); });
  EXPECT_EQ(e.setting(), "TAGFLOW_SIM_GPUS");
  const std::string message = e.what();
  EXPECT_NE(message.find("the process-wide engine has already started"), std::string::npos)
      << message;
  EXPECT_NE(message.find("TAGFLOW_SIM_GPUS runs with 0, asked for 2"), std::string::npos)
      << message;
  EXPECT_NE(message.find("TAGFLOW_MAX_PENDING_OPS runs with 16384, asked for 100"),
            std::string::npos)
      << message;
  EXPECT_EQ(num_gpus(), 0) << "nothing changed";
}

TEST(ConfigureTest, ValuesOutOfRangeAreRefusedByNameAndChangeNothing) {
  clear_environment();
  EngineConfig no_workers = EngineConfig::from_env();
  no_workers.cpu_workers = 0;
  ConfigError e = config_error_of([&] { Engine::configure(no_workers); });
  EXPECT_EQ(e.setting(), "TAGFLOW_CPU_WORKERS");
  EXPECT_STREQ(e.what(),
               "EngineConfig: cpu_workers (TAGFLOW_CPU_WORKERS): expected 1 to 1024 worker "
               "threads, got 0");
  EngineConfig loud = EngineConfig::from_env();
  loud.log_level = "loud";
  e = config_error_of([&] { Engine::configure(loud); });
  EXPECT_EQ(e.setting(), "TAGFLOW_LOG_LEVEL");
  EXPECT_STREQ(e.what(),
               "EngineConfig: log_level (TAGFLOW_LOG_LEVEL): expected trace, debug, info, warn, "
               "error, critical or off, got \"loud\"");
  EngineConfig scheduled = EngineConfig::from_env();
  scheduled.schedule = ScheduleOptions::parse("random:1");
  e = config_error_of([&] { Engine::configure(scheduled); });
  EXPECT_EQ(e.setting(), "TAGFLOW_ENGINE");
  EngineConfig many = EngineConfig::from_env();
  many.sim_gpus = 65;
  EXPECT_EQ(config_error_of([&] { Engine::configure(many); }).setting(), "TAGFLOW_SIM_GPUS");
  EXPECT_FALSE(Engine::started());
  // Nothing was taken: the environment's configuration starts the engine.
  EXPECT_EQ(Engine::get().config().cpu_workers, EngineConfig::from_env().cpu_workers);
  EXPECT_EQ(Engine::get().config().log_level, "warn");
}

TEST(ConfigureTest, ConfigureRacingTheFirstUseIsTakenOrComparedNeverTorn) {
  clear_environment();
  EngineConfig config = EngineConfig::from_env();
  config.set_sim_gpus("2");
  config.cpu_workers = 2;
  std::vector<std::thread> threads;
  std::vector<int> gpus(4, -1);
  std::atomic<int> refused{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      if (t % 2 == 0) {
        try {
          Engine::configure(config);
        } catch (const ConfigError& e) {
          if (e.setting() == "TAGFLOW_SIM_GPUS") refused.fetch_add(1);
        }
      } else {
        gpus[static_cast<std::size_t>(t / 2)] = num_gpus();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  // Either a configure() came first, and the later ones (the same settings)
  // were accepted; or the environment's engine started first, and every
  // configure() was compared with it and refused.
  const int n = num_gpus();
  if (n == 2) {
    EXPECT_EQ(refused.load(), 0);
  } else {
    EXPECT_EQ(n, 0);
    EXPECT_EQ(refused.load(), 4);
  }
  for (int g : gpus) EXPECT_EQ(g, n);
}

}  // namespace
}  // namespace tagflow
