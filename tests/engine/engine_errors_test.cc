// The engine's contract on failures, checked on every engine kind and worker
// count: errors stored on variables, passed on and rethrown, cleared by a later
// write; waits from inside operations; bad pushes.

#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/sim_runtime.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "engine/stream.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::config_for;
using testing::EngineParam;
using testing::EngineTest;
using testing::on_device;
using testing::run_with_timeout;

/// Same fixture; its own name, as GoogleTest wants one class per suite.
class EngineErrorTest : public EngineTest {};

TEST_P(EngineErrorTest, ExceptionNotDerivedFromStdExceptionIsStillReported) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    engine_->push(
        {.name = "throws an int", .ctx = cpu(0), .writes = {x}, .fn = [](const RunContext&) {
           throw 42;
         }});
    try {
      engine_->wait_to_read(x);
      FAIL() << "no error";
    } catch (const OperationError& e) {
      EXPECT_EQ(e.op_name(), "throws an int");
      EXPECT_NE(std::string(e.what()).find("not derived from std::exception"), std::string::npos)
          << e.what();
      try {
        std::rethrow_exception(e.cause());
      } catch (int value) {
        EXPECT_EQ(value, 42);
      }
    }
    EXPECT_NO_THROW(engine_->wait_for_all());
    engine_->delete_var(x);
  });
}

// --- errors on variables --------------------------------------------------------------

TEST_P(EngineErrorTest, ErrorTravelsAlongAChainAndSkipsDependents) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var(), y = engine_->new_var(), z = engine_->new_var();
    VarHandle w = engine_->new_var();
    std::atomic<int> dependents_ran{0};
    std::atomic<bool> independent_ran{false};
    engine_->push({.name = "explode", .ctx = cpu(0), .writes = {x}, .fn = [](const RunContext&) {
                     throw std::runtime_error("boom");
                   }});
    engine_->push(
        {.name = "b", .ctx = cpu(1), .reads = {x}, .writes = {y}, .fn = [&](const RunContext&) {
           ++dependents_ran;
         }});
    engine_->push(
        {.name = "c", .ctx = gpu(0), .reads = {y}, .writes = {z}, .fn = [&](const RunContext&) {
           ++dependents_ran;
         }});
    engine_->push(
        {.name = "independent", .ctx = cpu(0), .writes = {w}, .fn = [&](const RunContext&) {
           independent_ran = true;
         }});
    for (VarHandle v : {x, y, z}) {
      try {
        engine_->wait_to_read(v);
        FAIL() << "no error";
      } catch (const OperationError& e) {
        EXPECT_EQ(e.op_name(), "explode");
        EXPECT_EQ(e.context(), cpu(0));
        EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos);
      }
    }
    EXPECT_NO_THROW(engine_->wait_to_read(w));
    EXPECT_TRUE(independent_ran.load());
    EXPECT_EQ(dependents_ran.load(), 0);
    // The waits above reported the error: wait_for_all does not again (Note
    // [Errors seen by wait_for_all]), and the engine is clean.
    EXPECT_NO_THROW(engine_->wait_for_all());
    for (VarHandle v : {x, y, z, w}) engine_->delete_var(v);
    engine_->wait_for_all();
  });
}

TEST_P(EngineErrorTest, ErrorFromAGpuReachesACpuReader) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var(), y = engine_->new_var();
    engine_->push({.name = "gpu kernel", .ctx = gpu(1), .writes = {x}, .fn = [](const RunContext&) {
                     throw std::invalid_argument("bad launch");
                   }});
    engine_->push(
        {.name = "host", .ctx = cpu(2), .reads = {x}, .writes = {y}, .fn = [](const RunContext&) {
         }});
    try {
      engine_->wait_to_read(y);
      FAIL() << "no error";
    } catch (const OperationError& e) {
      EXPECT_EQ(e.context(), gpu(1));
      EXPECT_NE(std::string(e.what()).find("gpu(1)"), std::string::npos) << e.what();
      try {
        std::rethrow_exception(e.cause());
      } catch (const std::invalid_argument& cause) {
        EXPECT_STREQ(cause.what(), "bad launch");
      }
    }
    EXPECT_NO_THROW(engine_->wait_for_all());
    engine_->delete_var(x);
    engine_->delete_var(y);
  });
}

// A GPU operation skipped for an inherited error still orders what it writes
// after the device work it follows on another stream: a host wait on that
// variable must not return while that work has yet to run.
TEST_P(EngineErrorTest, SkippedGpuOperationStillFollowsDeviceWorkOnAnotherStream) {
  run_with_timeout(30s, [&] {
    VarHandle w = engine_->new_var(), u = engine_->new_var();
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::atomic<bool> slow_work_done{false};
    // The naive engine finishes device work inside push: nothing to hold.
    const bool naive = GetParam().kind == EngineKind::kNaive;
    if (naive) release.set_value();
    engine_->push({.name = "slow device work",
                   .ctx = gpu(0),
                   .writes = {w},
                   .fn = [&, released](const RunContext& rc) {
                     rc.stream->enqueue_host([&, released] {
                       released.wait();
                       slow_work_done = true;
                     });
                   }});
    engine_->push({.name = "fails", .ctx = cpu(0), .writes = {u}, .fn = [](const RunContext&) {
                     throw std::runtime_error("upstream failure");
                   }});
    // Skipped (it reads u's error); it writes w after the slow work.
    engine_->push({.name = "skipped",
                   .ctx = gpu(1),
                   .reads = {u},
                   .writes = {w},
                   .fn = [](const RunContext&) { ADD_FAILURE() << "a skipped operation ran"; }});
    std::atomic<bool> waited{false};
    bool done_when_returned = false;
    std::thread waiter([&] {
      EXPECT_THROW(engine_->wait_to_read(w), OperationError);
      done_when_returned = slow_work_done.load();
      waited = true;
    });
    if (!naive) {
      std::this_thread::sleep_for(50ms);
      EXPECT_FALSE(waited.load()) << "wait_to_read returned before the device work it follows";
      release.set_value();
    }
    waiter.join();
    EXPECT_TRUE(done_when_returned);
    EXPECT_NO_THROW(engine_->wait_for_all());
    engine_->delete_var(w);
    engine_->delete_var(u);
  });
}

TEST_P(EngineErrorTest, LaterSuccessfulWriteClearsTheError) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    int value = 0;
    engine_->push({.name = "fail", .ctx = cpu(0), .writes = {x}, .fn = [](const RunContext&) {
                     throw std::runtime_error("first");
                   }});
    // In place (read + write): must be skipped, the error stays.
    engine_->push({.name = "in place",
                   .ctx = cpu(0),
                   .reads = {x},
                   .writes = {x},
                   .fn = [&](const RunContext&) { value += 100; }});
    EXPECT_THROW(engine_->wait_to_read(x), OperationError);
    EXPECT_EQ(value, 0);
    // Overwrite: runs and clears.
    engine_->push({.name = "overwrite", .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                     value = 5;
                   }});
    EXPECT_NO_THROW(engine_->wait_to_read(x));
    EXPECT_EQ(value, 5);
    EXPECT_NO_THROW(engine_->wait_for_all());  // the waits above reported it
    engine_->delete_var(x);
  });
}

TEST_P(EngineErrorTest, WaitFromInsideAnOperationThrowsInsteadOfDeadlocking) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var(), y = engine_->new_var();
    std::vector<std::string> messages;
    engine_->push({.name = "impatient", .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                     try {
                       engine_->wait_to_read(y);
                     } catch (const WaitInsideOperationError& e) {
                       messages.push_back(e.what());
                     }
                     try {
                       engine_->wait_for_all();
                     } catch (const WaitInsideOperationError& e) {
                       messages.push_back(e.what());
                     }
                   }});
    engine_->wait_for_all();
    ASSERT_EQ(messages.size(), 2u);
    EXPECT_NE(messages[0].find("wait_to_read"), std::string::npos) << messages[0];
    EXPECT_NE(messages[0].find("'impatient'"), std::string::npos) << messages[0];
    EXPECT_NE(messages[1].find("wait_for_all"), std::string::npos) << messages[1];
    engine_->delete_var(x);
    engine_->delete_var(y);
  });
}

TEST_P(EngineErrorTest, ErrorRaisedByDeviceWorkReachesWaitForAll) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    engine_->push({.name = "kernel", .ctx = gpu(0), .writes = {x}, .fn = [](const RunContext& rc) {
                     rc.stream->enqueue_host([] { throw std::runtime_error("illegal address"); });
                   }});
    try {
      engine_->wait_for_all();
      FAIL() << "no error";
    } catch (const OperationError& e) {
      EXPECT_EQ(e.context(), gpu(0));
      EXPECT_NE(std::string(e.what()).find("illegal address"), std::string::npos) << e.what();
    }
    EXPECT_NO_THROW(engine_->wait_for_all());  // reported once
    engine_->delete_var(x);
  });
}

/// Launches `body` as a simulated kernel on the operation's stream (as ops'
/// run_kernel does), checked as a real launch is.
template <typename F>
void launch_kernel(const RunContext& rc, F&& body) {
  detail::sim::launch_kernel(*rc.stream, std::forward<F>(body));
  detail::sim::check_status(detail::sim::get_last_error(), "kernel launch", rc.ctx);
}

// Every GPU's kernels are launched from a thread whose current device is that
// GPU: the threaded engine's workers select theirs as they start, the naive
// engine selects it around each operation and gives the caller's back. On a
// real GPU a launch from another device fails with "invalid resource
// handle"; the simulated GPUs refuse it the same way (Note [Simulated CUDA
// rules]).
TEST_P(EngineErrorTest, WorkOnEveryGpuAndQueueIsLaunchedFromItsOwnDevice) {
  run_with_timeout(30s, [&] {
    const detail::sim::ScopedDevice callers_device(1);
    std::vector<VarHandle> vars;
    std::vector<std::atomic<int>> values(8);
    int i = 0;
    for (Context ctx : {gpu(1), gpu(0), gpu(1), gpu(0)}) {
      for (QueueKind queue : {QueueKind::kCompute, QueueKind::kCopy}) {
        VarHandle v = engine_->new_var();
        vars.push_back(v);
        std::atomic<int>* value = &values[static_cast<std::size_t>(i)];
        const int expected = ++i;
        engine_->push({.name = "fill",
                       .ctx = ctx,
                       .writes = {v},
                       .queue = queue,
                       .fn = [value, expected](const RunContext& rc) {
                         launch_kernel(rc, [value, expected] { value->store(expected); });
                       }});
      }
    }
    for (std::size_t k = 0; k < vars.size(); ++k) {
      EXPECT_NO_THROW(engine_->wait_to_read(vars[k])) << "operation " << k;
      EXPECT_EQ(values[k].load(), static_cast<int>(k) + 1);
    }
    EXPECT_EQ(detail::sim::current_device(), 1) << "pushing changed the caller's current device";
    EXPECT_NO_THROW(engine_->wait_for_all());
    for (VarHandle v : vars) engine_->delete_var(v);
  });
}

// Note [Errors of device work] in engine/stream.h: device work that fails
// after its operation completed still reaches what depends on it.
TEST_P(EngineErrorTest, DeviceWorkThatFailsPutsItsErrorOnWhatItWrites) {
  run_with_timeout(30s, [&] {
    VarHandle clean = engine_->new_var();
    VarHandle x = engine_->new_var();
    VarHandle on_cpu = engine_->new_var();
    VarHandle on_other_gpu = engine_->new_var();
    VarHandle later = engine_->new_var();
    std::atomic<bool> cpu_reader_ran{false};
    engine_->push(
        {.name = "before", .ctx = gpu(0), .writes = {clean}, .fn = [](const RunContext& rc) {
           on_device(rc, [] {});
         }});
    engine_->wait_to_read(clean);
    engine_->push({.name = "kernel", .ctx = gpu(0), .writes = {x}, .fn = [](const RunContext& rc) {
                     on_device(rc, [] { throw std::runtime_error("illegal address"); });
                   }});
    engine_->push({.name = "reader on cpu",
                   .ctx = cpu(0),
                   .reads = {x},
                   .writes = {on_cpu},
                   .fn = [&](const RunContext&) { cpu_reader_ran.store(true); }});
    engine_->push({.name = "reader on gpu(1)",
                   .ctx = gpu(1),
                   .reads = {x},
                   .writes = {on_other_gpu},
                   .fn = [](const RunContext& rc) { on_device(rc, [] {}); }});
    engine_->push({.name = "later on gpu(0)",
                   .ctx = gpu(0),
                   .writes = {later},
                   .fn = [](const RunContext& rc) { on_device(rc, [] {}); }});
    auto expect_failure = [&](VarHandle v, const char* what) {
      try {
        engine_->wait_to_read(v);
        ADD_FAILURE() << what << ": wait_to_read succeeded";
      } catch (const OperationError& e) {
        EXPECT_NE(std::string(e.what()).find("illegal address"), std::string::npos)
            << what << ": " << e.what();
      }
    };
    expect_failure(x, "the failed operation's output");
    expect_failure(on_cpu, "a CPU reader's output");
    expect_failure(on_other_gpu, "another GPU's reader's output");
    expect_failure(later, "later work on the lost device");
    EXPECT_FALSE(cpu_reader_ran.load()) << "a CPU operation read the failed work's output";
    EXPECT_NO_THROW(engine_->wait_to_read(clean)) << "work finished before the fault";
    EXPECT_NO_THROW(engine_->wait_for_all());
    for (VarHandle v : {clean, x, on_cpu, on_other_gpu, later}) engine_->delete_var(v);
  });
}

// Note [Errors seen by wait_for_all]: threads waiting at the same time all
// see the error; none consumes another's, and a later wait sees only newer ones.
TEST_P(EngineErrorTest, ConcurrentWaitForAllCallsAllSeeTheError) {
  run_with_timeout(30s, [&] {
    VarHandle failed = engine_->new_var();
    VarHandle slow = engine_->new_var();
    engine_->push(
        {.name = "failing", .ctx = cpu(0), .writes = {failed}, .fn = [](const RunContext&) {
           throw std::runtime_error("failed on purpose");
         }});
    // Holds every wait_for_all until the waiters below are all waiting.
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    std::thread completer;
    std::atomic<bool> slow_started{false};
    std::thread slow_pusher([&] {
      engine_->push({.name = "slow",
                     .ctx = cpu(1),
                     .writes = {slow},
                     .fn = [&](const RunContext&, Completion done) {
                       slow_started.store(true);
                       completer = std::thread([released, done = std::move(done)]() mutable {
                         released.wait();
                         done.done();
                       });
                     }});
    });
    while (!slow_started.load()) std::this_thread::yield();
    constexpr int kWaiters = 3;
    std::atomic<int> waiting{0};
    std::atomic<int> saw_error{0};
    std::vector<std::thread> waiters;
    for (int i = 0; i < kWaiters; ++i) {
      waiters.emplace_back([&] {
        waiting.fetch_add(1);
        try {
          engine_->wait_for_all();
        } catch (const OperationError& e) {
          if (std::string(e.what()).find("failed on purpose") != std::string::npos) {
            saw_error.fetch_add(1);
          }
        }
      });
    }
    while (waiting.load() < kWaiters) std::this_thread::yield();
    std::this_thread::sleep_for(50ms);  // into their waits
    release.set_value();
    for (std::thread& t : waiters) t.join();
    slow_pusher.join();
    completer.join();
    EXPECT_EQ(saw_error.load(), kWaiters) << "a waiter consumed another's error";
    EXPECT_NO_THROW(engine_->wait_for_all()) << "a later wait sees only newer errors";
    engine_->delete_var(failed);
    engine_->delete_var(slow);
  });
}

// --- bad input ----------------------------------------------------------------------------

TEST_P(EngineErrorTest, BadPushesGiveTypedErrorsAndLoseNothing) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    try {
      engine_->push(
          {.name = "far away", .ctx = gpu(5), .writes = {x}, .fn = [](const RunContext&) {}});
      FAIL() << "accepted gpu(5)";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("gpu(5)"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("2 GPU"), std::string::npos) << e.what();
    }
    try {
      engine_->push({.name = "unknown device",
                     .ctx = Context{static_cast<DeviceType>(7), 0},
                     .writes = {x},
                     .fn = [](const RunContext&) { ADD_FAILURE() << "ran on an unknown device"; }});
      FAIL() << "accepted a context of unknown device type";
    } catch (const DeviceError& e) {
      EXPECT_NE(std::string(e.what()).find("unknown type"), std::string::npos) << e.what();
    }
    // CPU indices past the last device, and negative ones, on every engine.
    for (const Context ctx : {cpu(kMaxCpuDevices), cpu(1'000'000), cpu(-1), cpu_pinned(-1)}) {
      try {
        engine_->push(
            {.name = "no such cpu", .ctx = ctx, .writes = {x}, .fn = [](const RunContext&) {
               ADD_FAILURE() << "ran on a missing CPU";
             }});
        ADD_FAILURE() << "accepted " << ctx;
      } catch (const DeviceError& e) {
        EXPECT_NE(std::string(e.what()).find(ctx.str()), std::string::npos) << e.what();
      }
    }
    EXPECT_THROW(engine_->push({.name = "empty", .ctx = cpu(0), .writes = {x}}), Error);
    EXPECT_THROW(engine_->push({.name = "null var",
                                .ctx = cpu(0),
                                .writes = {nullptr},
                                .fn = [](const RunContext&) {}}),
                 Error);
    // The engine is still usable, and x has no leftover claim.
    int value = 0;
    engine_->push({.name = "fine", .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                     value = 1;
                   }});
    engine_->wait_to_read(x);
    EXPECT_EQ(value, 1);
    engine_->delete_var(x);
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineErrorTest, testing::engine_params(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
