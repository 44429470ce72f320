// engine/detail/lifetime.h: a forked child tells itself from its parent, and an
// engine started before fork() refuses every call in the child with
// ForkError, ignores deletions and is destroyed there without waiting for
// threads that do not exist; on every engine kind and device kind. Each
// child reports through its exit status; the parent waits for it with a
// time limit. What happens at exit is checked by the programs in
// tests/engine/lifecycle (Note [Engine lifetime] in engine/engine.h).

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "engine/detail/lifetime.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/watchdog.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/lifecycle/lifecycle.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;

/// Forks; the child returns `body()` as its exit status through _exit (the
/// test binary's own exit handlers are the parent's business).
template <typename Body>
lifecycle::Ended in_child(Body&& body) {
  const pid_t pid = fork();
  if (pid == 0) _exit(body());
  EXPECT_GT(pid, 0) << "fork failed";
  return lifecycle::wait_for(pid, 60s);
}

/// 0 when `call` throws ForkError whose message names `what`, else 1.
template <typename Call>
int fork_error_status(const char* what, Call&& call) {
  try {
    call();
  } catch (const ForkError& e) {
    return std::string(e.what()).find(what) != std::string::npos ? 0 : 1;
  } catch (...) {
    return 1;
  }
  return 1;
}

TEST(ForkCheckTest, TellsAForkedChildFromItsParent) {
  const detail::ForkCheck parent_check;
  EXPECT_FALSE(parent_check.forked());
  const lifecycle::Ended ended = in_child([&] {
    const detail::ForkCheck child_check;
    if (!parent_check.forked()) return 1;
    if (child_check.forked()) return 2;
    return 0;
  });
  EXPECT_TRUE(ended.exited_with(0)) << ended.describe();
  EXPECT_FALSE(parent_check.forked());
}

class EngineLifetimeTest : public EngineTest {};

TEST_P(EngineLifetimeTest, AForkedChildGetsForkErrorAndLetsGoOfTheEngine) {
  std::atomic<int> ran{0};
  VarHandle x = engine_->new_var();
  VarHandle y = engine_->new_var();
  // Work in flight at the fork on every device: a slow operation, and more behind it.
  for (Context ctx : devices()) {
    engine_->push({.name = "slow", .ctx = ctx, .writes = {x}, .fn = [&](const RunContext&) {
                     std::this_thread::sleep_for(20ms);
                     ran.fetch_add(1);
                   }});
    engine_->push(
        {.name = "behind", .ctx = ctx, .reads = {x}, .writes = {y}, .fn = [&](const RunContext&) {
           ran.fetch_add(1);
         }});
  }
  const lifecycle::Ended ended = in_child([&] {
    int failures = 0;
    failures += fork_error_status("push", [&] {
      engine_->push({.name = "in the child", .ctx = cpu(0), .fn = [](const RunContext&) {}});
    });
    failures += fork_error_status("new_var", [&] { (void)engine_->new_var(); });
    failures += fork_error_status("wait_to_read", [&] { engine_->wait_to_read(y); });
    failures += fork_error_status("wait_to_write", [&] { engine_->wait_to_write(x); });
    failures += fork_error_status("wait_for_all", [&] { engine_->wait_for_all(); });
    failures += fork_error_status("dependency_state", [&] { (void)engine_->dependency_state(); });
    bool deleted = false;
    engine_->delete_var(y, [&deleted] { deleted = true; });
    failures += deleted ? 1 : 0;
    engine_.reset();  // returns: nothing to join here
    return failures;
  });
  EXPECT_TRUE(ended.exited_with(0)) << ended.describe();
  // The parent's engine is untouched.
  engine_->wait_for_all();
  EXPECT_EQ(ran.load(), 2 * static_cast<int>(devices().size()));
  engine_->delete_var(x);
  engine_->delete_var(y);
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineLifetimeTest, testing::engine_params(),
                         testing::engine_param_name);

TEST(WatchdogLifetimeTest, IsDestroyedInAForkedChildWithoutWaitingForItsThread) {
  auto engine = make_engine(testing::config_for({"threaded2", EngineKind::kThreaded, 2}));
  auto* watchdog = new Watchdog(*engine, 10ms, [](const DependencyState&) {});
  std::this_thread::sleep_for(20ms);  // its thread waits on its condition variable
  const lifecycle::Ended ended = in_child([&] {
    delete watchdog;  // returns: its thread is the parent's
    return 0;
  });
  EXPECT_TRUE(ended.exited_with(0)) << ended.describe();
  delete watchdog;
}

}  // namespace
}  // namespace tagflow
