// OperationHandle (engine/operation_handle.h): waiting for, polling and
// calling back on one pushed operation, on every engine kind and worker
// count, on CPUs and simulated GPUs. The reference for what a handle must say
// is what the engine's variable waits say (wait_to_read on a variable the
// operation writes), and for what it must have done, values computed here
// with plain loops.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <exception>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "engine/operation_handle.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;
using testing::on_device;
using testing::run_with_timeout;

class OperationHandleTest : public EngineTest {};

/// Sum of i * i for i < n, in double: the reference the operations' work is
/// checked against.
double sum_of_squares(int n) {
  double sum = 0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(i) * i;
  return sum;
}

/// The exception an operation's wait rethrows, or null.
template <typename Wait>
std::exception_ptr error_of(Wait&& wait) {
  try {
    wait();
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

std::string what(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "(not a std::exception)";
  }
}

/// Polls `condition` for up to ten seconds.
template <typename Condition>
bool eventually(Condition&& condition) {
  for (int i = 0; i < 10000; ++i) {
    if (condition()) return true;
    std::this_thread::sleep_for(1ms);
  }
  return condition();
}

// --- waiting --------------------------------------------------------------------------

// wait() returns only once the closure, and on a GPU its device work, has run:
// the work is slow on purpose, so a wait that returned at launch would see
// the old value.
TEST_P(OperationHandleTest, WaitReturnsOnceTheWorkHasRun) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      for (int n : {10, 1000}) {
        VarHandle x = engine_->new_var();
        double result = -1;
        OperationHandle h = engine_->push_tracked({.name = "squares",
                                                   .ctx = ctx,
                                                   .writes = {x},
                                                   .fn = [&result, n](const RunContext& rc) {
                                                     on_device(rc, [&result, n] {
                                                       std::this_thread::sleep_for(20ms);
                                                       double sum = 0;
                                                       for (int i = 0; i < n; ++i)
                                                         sum += static_cast<double>(i) * i;
                                                       result = sum;
                                                     });
                                                   }});
        const OperationHandle copy = h;  // copies share the state
        copy.wait();
        EXPECT_EQ(result, sum_of_squares(n)) << ctx;
        EXPECT_TRUE(h.done()) << ctx;
        EXPECT_TRUE(copy.done()) << ctx;
        EXPECT_EQ(h.error(), nullptr) << ctx;
        EXPECT_NO_THROW(h.wait()) << ctx << ": a second wait";
        engine_->delete_var(x);
      }
    }
    EXPECT_NO_THROW(engine_->wait_for_all());
  });
}

// Many tracked operations, chained through variables and waited for in
// reverse order: each wait sees its own operation's result.
TEST_P(OperationHandleTest, EachHandleWaitsForItsOwnOperation) {
  run_with_timeout(30s, [&] {
    constexpr int kOps = 60;
    std::vector<VarHandle> vars;
    for (int i = 0; i < 4; ++i) vars.push_back(engine_->new_var());
    std::vector<double> out(kOps, -1);
    std::vector<OperationHandle> handles;
    for (int i = 0; i < kOps; ++i) {
      const Context ctx = devices()[static_cast<std::size_t>(i) % devices().size()];
      handles.push_back(engine_->push_tracked(
          {.name = "write",
           .ctx = ctx,
           .writes = {vars[i % 4]},
           .fn = [&out, i](const RunContext& rc) {
             on_device(rc, [&out, i] { out[static_cast<std::size_t>(i)] = sum_of_squares(i); });
           }}));
    }
    for (int i = kOps - 1; i >= 0; --i) {
      handles[static_cast<std::size_t>(i)].wait();
      EXPECT_EQ(out[static_cast<std::size_t>(i)], sum_of_squares(i)) << "operation " << i;
    }
    for (VarHandle v : vars) engine_->delete_var(v);
  });
}

// wait_for_all() waits for the handles too: when it returns, the handle of
// every operation pushed before is done, device work included.
TEST_P(OperationHandleTest, WaitForAllLeavesEveryHandleDone) {
  run_with_timeout(30s, [&] {
    constexpr int kOps = 30;
    std::vector<double> out(kOps, -1);
    std::vector<OperationHandle> handles;
    for (int i = 0; i < kOps; ++i) {
      const Context ctx = devices()[static_cast<std::size_t>(i) % devices().size()];
      handles.push_back(
          engine_->push_tracked({.name = "slow", .ctx = ctx, .fn = [&out, i](const RunContext& rc) {
                                   on_device(rc, [&out, i] {
                                     std::this_thread::sleep_for(2ms);
                                     out[static_cast<std::size_t>(i)] = sum_of_squares(i);
                                   });
                                 }}));
    }
    engine_->wait_for_all();
    for (int i = 0; i < kOps; ++i) {
      EXPECT_TRUE(handles[static_cast<std::size_t>(i)].done()) << "operation " << i;
      EXPECT_EQ(out[static_cast<std::size_t>(i)], sum_of_squares(i)) << "operation " << i;
    }
  });
}

// --- errors -----------------------------------------------------------------------------

// A failing operation, and one skipped because it reads the failure: the
// handle reports exactly the error wait_to_read on what it writes rethrows,
// and does not take it from wait_for_all.
TEST_P(OperationHandleTest, ErrorsAreThoseOfTheVariablesItWrites) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var(), y = engine_->new_var();
      std::atomic<bool> skipped_ran{false};
      OperationHandle failing = engine_->push_tracked(
          {.name = "explode", .ctx = ctx, .writes = {x}, .fn = [](const RunContext&) {
             throw std::runtime_error("boom");
           }});
      OperationHandle skipped =
          engine_->push_tracked({.name = "skipped",
                                 .ctx = ctx,
                                 .reads = {x},
                                 .writes = {y},
                                 .fn = [&](const RunContext&) { skipped_ran.store(true); }});
      for (const OperationHandle* h : {&failing, &skipped}) {
        try {
          h->wait();
          ADD_FAILURE() << ctx << ": wait() did not throw";
        } catch (const OperationError& e) {
          EXPECT_EQ(e.op_name(), "explode") << ctx;
          EXPECT_EQ(e.context(), ctx);
          EXPECT_NE(std::string(e.what()).find("boom"), std::string::npos) << e.what();
        }
        EXPECT_TRUE(h->done());
      }
      EXPECT_FALSE(skipped_ran.load()) << ctx << ": a skipped operation ran";
      // The very errors the variables carry.
      EXPECT_EQ(failing.error(), error_of([&] { engine_->wait_to_read(x); })) << ctx;
      EXPECT_EQ(skipped.error(), error_of([&] { engine_->wait_to_read(y); })) << ctx;
      EXPECT_NE(failing.error(), nullptr);
      // Reported by the handles, still reported once by wait_for_all.
      EXPECT_NO_THROW(engine_->wait_for_all()) << ctx;
      EXPECT_NO_THROW(engine_->wait_for_all()) << ctx;
      EXPECT_NE(failing.error(), nullptr) << "reading it does not clear it";
      engine_->delete_var(x);
      engine_->delete_var(y);
    }
  });
}

// Note [Errors of device work]: a GPU operation whose device work fails after
// it was launched has that failure on its handle, as on what it writes.
TEST_P(OperationHandleTest, DeviceWorkThatFailsAfterLaunchReachesTheHandle) {
  run_with_timeout(30s, [&] {
    VarHandle before = engine_->new_var(), x = engine_->new_var();
    OperationHandle clean = engine_->push_tracked(
        {.name = "before", .ctx = gpu(0), .writes = {before}, .fn = [](const RunContext& rc) {
           on_device(rc, [] {});
         }});
    clean.wait();
    std::promise<void> release;
    std::shared_future<void> released = release.get_future().share();
    const bool naive = GetParam().kind == EngineKind::kNaive;  // runs it inside push
    if (naive) release.set_value();
    OperationHandle h = engine_->push_tracked(
        {.name = "kernel", .ctx = gpu(0), .writes = {x}, .fn = [released](const RunContext& rc) {
           on_device(rc, [released] {
             released.wait();
             throw std::runtime_error("illegal address");
           });
         }});
    if (!naive) {
      std::this_thread::sleep_for(30ms);
      EXPECT_FALSE(h.done()) << "done while its device work had not run";
      EXPECT_EQ(h.error(), nullptr);
      release.set_value();
    }
    const std::exception_ptr error = error_of([&] { h.wait(); });
    ASSERT_NE(error, nullptr) << "the device work's failure was not reported";
    EXPECT_NE(what(error).find("illegal address"), std::string::npos) << what(error);
    EXPECT_EQ(h.error(), error);
    const std::exception_ptr on_var = error_of([&] { engine_->wait_to_read(x); });
    EXPECT_EQ(what(error), what(on_var));
    EXPECT_TRUE(clean.done());
    EXPECT_EQ(clean.error(), nullptr) << "work finished before the fault";
    EXPECT_NO_THROW(engine_->wait_for_all());
    engine_->delete_var(before);
    engine_->delete_var(x);
  });
}

// --- polling ------------------------------------------------------------------------------

// done() never blocks, is false while the operation (or its device work)
// runs, and becomes true; once it is, the work's effect is visible.
TEST_P(OperationHandleTest, PollingReachesDone) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      std::promise<void> release;
      std::shared_future<void> released = release.get_future().share();
      const bool naive = GetParam().kind == EngineKind::kNaive;
      if (naive) release.set_value();
      std::atomic<int> value{0};
      OperationHandle h = engine_->push_tracked({.name = "gated",
                                                 .ctx = ctx,
                                                 .writes = {x},
                                                 .fn = [&value, released](const RunContext& rc) {
                                                   on_device(rc, [&value, released] {
                                                     released.wait();
                                                     value.store(7);
                                                   });
                                                 }});
      if (!naive) {
        std::this_thread::sleep_for(20ms);  // launched by now, on a GPU
        const auto started = std::chrono::steady_clock::now();
        for (int i = 0; i < 1000; ++i) EXPECT_FALSE(h.done()) << ctx;
        EXPECT_LT(std::chrono::steady_clock::now() - started, 5s) << "done() blocked";
        release.set_value();
      }
      ASSERT_TRUE(eventually([&] { return h.done(); })) << ctx;
      EXPECT_EQ(value.load(), 7) << ctx;
      EXPECT_EQ(h.error(), nullptr);
      engine_->delete_var(x);
    }
  });
}

// --- callbacks ----------------------------------------------------------------------------

// A callback registered before completion runs once, on the thread that
// completes the operation, before wait() returns; one registered after runs
// at once on the registering thread; one registered from a callback runs too.
TEST_P(OperationHandleTest, CallbacksRunOnceBeforeAndAfterCompletion) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      for (bool fail : {false, true}) {
        VarHandle x = engine_->new_var();
        std::promise<void> release;
        std::shared_future<void> released = release.get_future().share();
        const bool naive = GetParam().kind == EngineKind::kNaive;
        if (naive) release.set_value();
        OperationHandle h =
            engine_->push_tracked({.name = "gated",
                                   .ctx = ctx,
                                   .writes = {x},
                                   .fn = [fail, released](const RunContext& rc) {
                                     on_device(rc, [fail, released] {
                                       released.wait();
                                       if (fail) throw std::runtime_error("callback test failure");
                                     });
                                   }});
        std::atomic<int> before{0}, nested{0}, after{0};
        std::atomic<bool> before_saw_error{false}, after_saw_error{false};
        std::thread::id before_thread;
        h.on_done([&, h](std::exception_ptr e) {
          before.fetch_add(1);
          before_saw_error = e != nullptr;
          before_thread = std::this_thread::get_id();
          h.on_done([&](std::exception_ptr) { nested.fetch_add(1); });
        });
        if (!naive) release.set_value();
        EXPECT_EQ(error_of([&] { h.wait(); }) != nullptr, fail) << ctx;
        EXPECT_EQ(before.load(), 1) << ctx;
        EXPECT_EQ(nested.load(), 1) << ctx << ": a callback registered from a callback";
        EXPECT_EQ(before_saw_error.load(), fail) << ctx;
        if (!naive) {
          EXPECT_NE(before_thread, std::this_thread::get_id())
              << ctx << ": not called from the thread that completed the operation";
        }
        std::thread::id after_thread;
        h.on_done([&](std::exception_ptr e) {
          after.fetch_add(1);
          after_saw_error = e != nullptr;
          after_thread = std::this_thread::get_id();
        });
        EXPECT_EQ(after.load(), 1) << ctx << ": not called at once";
        EXPECT_EQ(after_thread, std::this_thread::get_id()) << ctx;
        EXPECT_EQ(after_saw_error.load(), fail) << ctx;
        EXPECT_EQ(before.load(), 1) << ctx << ": called twice";
        if (fail) {
          EXPECT_NO_THROW(engine_->wait_for_all());
        }
        engine_->delete_var(x);
      }
    }
  });
}

// Registration racing completion, from several threads at once: every
// callback runs exactly once (run this one under ThreadSanitizer too).
TEST_P(OperationHandleTest, CallbacksRegisteredWhileOperationsCompleteRunExactlyOnce) {
  run_with_timeout(60s, [&] {
    constexpr int kOps = 3000;
    constexpr int kThreads = 4;
    constexpr int kPerThread = 2;
    std::vector<VarHandle> vars;
    for (int i = 0; i < 8; ++i) vars.push_back(engine_->new_var());
    std::vector<OperationHandle> handles(kOps);
    std::unique_ptr<std::atomic<int>[]> calls(new std::atomic<int>[kOps]);
    std::unique_ptr<std::atomic<int>[]> ran(new std::atomic<int>[kOps]);
    for (int i = 0; i < kOps; ++i) calls[i] = ran[i] = 0;
    std::atomic<int> published{0};
    std::atomic<int> errors_seen{0};
    std::vector<std::thread> registrars;
    for (int t = 0; t < kThreads; ++t) {
      registrars.emplace_back([&] {
        for (int i = 0; i < kOps; ++i) {
          while (published.load(std::memory_order_acquire) <= i) std::this_thread::yield();
          for (int k = 0; k < kPerThread; ++k) {
            handles[static_cast<std::size_t>(i)].on_done(
                [&calls, &errors_seen, i](std::exception_ptr e) {
                  if (e) errors_seen.fetch_add(1);
                  calls[i].fetch_add(1, std::memory_order_relaxed);
                });
          }
        }
      });
    }
    for (int i = 0; i < kOps; ++i) {
      const Context ctx = devices()[static_cast<std::size_t>(i) % devices().size()];
      handles[static_cast<std::size_t>(i)] = engine_->push_tracked(
          {.name = "tiny",
           .ctx = ctx,
           .writes = {vars[i % 8]},
           .fn = [&ran, i](const RunContext& rc) {
             on_device(rc, [&ran, i] { ran[i].fetch_add(1, std::memory_order_relaxed); });
           }});
      published.store(i + 1, std::memory_order_release);
    }
    for (std::thread& t : registrars) t.join();
    for (const OperationHandle& h : handles) h.wait();
    int wrong = 0;
    for (int i = 0; i < kOps; ++i) {
      if (calls[i].load() != kThreads * kPerThread || ran[i].load() != 1) {
        if (++wrong <= 5) {
          ADD_FAILURE() << "operation " << i << ": " << calls[i].load() << " callback call(s), "
                        << "expected " << kThreads * kPerThread << "; ran " << ran[i].load()
                        << " time(s)";
        }
      }
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(errors_seen.load(), 0);
    for (VarHandle v : vars) engine_->delete_var(v);
    engine_->wait_for_all();
  });
}

// --- asynchronous operations and nested pushes -------------------------------------------------

// An asynchronous operation completes when its Completion is called, from
// another thread and later: the handle waits for that, and reports fail().
TEST_P(OperationHandleTest, AsynchronousOperationsCompleteWhenTheirCompletionIsCalled) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      for (bool fail : {false, true}) {
        VarHandle x = engine_->new_var();
        std::atomic<double> result{-1};
        std::thread completer;
        OperationHandle h = engine_->push_tracked(
            {.name = "async",
             .ctx = ctx,
             .writes = {x},
             .fn = [&, fail](const RunContext&, Completion c) {
               completer = std::thread([&result, fail, c = std::move(c)]() mutable {
                 std::this_thread::sleep_for(20ms);
                 result.store(sum_of_squares(100));
                 if (fail) {
                   c.fail(std::make_exception_ptr(std::runtime_error("remote peer went away")));
                 } else {
                   c.done();
                 }
               });
             }});
        const std::exception_ptr error = error_of([&] { h.wait(); });
        EXPECT_EQ(result.load(), sum_of_squares(100)) << ctx;
        EXPECT_EQ(error != nullptr, fail) << ctx;
        if (fail) {
          EXPECT_NE(what(error).find("remote peer went away"), std::string::npos) << what(error);
          EXPECT_EQ(error, error_of([&] { engine_->wait_to_read(x); }));
          EXPECT_NO_THROW(engine_->wait_for_all());
        }
        completer.join();
        engine_->delete_var(x);
      }
    }
  });
}

// Tracked pushes from inside an operation and from the thread completing an
// asynchronous one (deferred on the naive engine, Note [Naive engine order]):
// their handles complete once they have run, after what they follow.
TEST_P(OperationHandleTest, NestedTrackedPushesCompleteAfterTheyRun) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var(), y = engine_->new_var();
      int value = 0;  // guarded by x
      std::promise<OperationHandle> nested_handle;
      std::atomic<bool> nested_done_inside{true};
      OperationHandle outer = engine_->push_tracked(
          {.name = "outer", .ctx = ctx, .writes = {x}, .fn = [&](const RunContext&) {
             value = 1;
             OperationHandle nested =
                 engine_->push_tracked({.name = "times ten",
                                        .ctx = ctx,
                                        .reads = {x},
                                        .writes = {x},
                                        .fn = [&](const RunContext&) { value *= 10; }});
             nested_done_inside.store(nested.done());
             value = 2;
             nested_handle.set_value(nested);
           }});
      outer.wait();
      OperationHandle nested = nested_handle.get_future().get();
      nested.wait();
      EXPECT_EQ(value, 20) << ctx << ": the nested operation ran inside its parent";
      EXPECT_FALSE(nested_done_inside.load()) << ctx << ": done before its parent returned";

      std::thread completer;
      std::atomic<double> followed{-1};
      std::promise<OperationHandle> follow_handle;
      OperationHandle async = engine_->push_tracked(
          {.name = "async", .ctx = ctx, .writes = {y}, .fn = [&](const RunContext&, Completion c) {
             completer = std::thread([&, c = std::move(c)]() mutable {
               follow_handle.set_value(engine_->push_tracked(
                   {.name = "follow-up", .ctx = ctx, .reads = {y}, .fn = [&](const RunContext&) {
                      followed.store(sum_of_squares(10));
                    }}));
               c.done();
             });
           }});
      async.wait();
      OperationHandle follow = follow_handle.get_future().get();
      follow.wait();
      EXPECT_EQ(followed.load(), sum_of_squares(10)) << ctx;
      completer.join();
      engine_->delete_var(x);
      engine_->delete_var(y);
    }
  });
}

// --- misuse and lifetime -------------------------------------------------------------------

// A wait from inside an operation or from a handle's callback would block the
// thread that has to complete what it waits for: a typed error instead.
TEST_P(OperationHandleTest, WaitInsideAnOperationOrACallbackThrows) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      OperationHandle first =
          engine_->push_tracked({.name = "first", .ctx = ctx, .fn = [](const RunContext&) {}});
      first.wait();
      std::atomic<int> refused{0};
      OperationHandle waiter = engine_->push_tracked(
          {.name = "waits inside", .ctx = ctx, .writes = {x}, .fn = [&, first](const RunContext&) {
             try {
               first.wait();
             } catch (const WaitInsideOperationError& e) {
               if (std::string(e.what()).find("waits inside") != std::string::npos)
                 refused.fetch_add(1);
             }
           }});
      waiter.wait();
      EXPECT_EQ(refused.load(), 1) << ctx << ": wait inside an operation was not refused";
      std::promise<void> release;
      std::shared_future<void> released = release.get_future().share();
      const bool naive = GetParam().kind == EngineKind::kNaive;
      if (naive) release.set_value();
      OperationHandle gated = engine_->push_tracked(
          {.name = "gated", .ctx = ctx, .writes = {x}, .fn = [released](const RunContext& rc) {
             on_device(rc, [released] { released.wait(); });
           }});
      std::atomic<int> refused_in_callback{0};
      gated.on_done([&, first](std::exception_ptr) {
        try {
          first.wait();
        } catch (const WaitInsideOperationError&) {
          refused_in_callback.fetch_add(1);
        }
      });
      if (!naive) release.set_value();
      gated.wait();
      EXPECT_EQ(refused_in_callback.load(), 1) << ctx << ": wait inside a callback was not refused";
      engine_->delete_var(x);
    }
  });
}

TEST_P(OperationHandleTest, AnEmptyHandleSaysSo) {
  const OperationHandle empty;
  EXPECT_FALSE(static_cast<bool>(empty));
  EXPECT_FALSE(empty.done());
  EXPECT_EQ(empty.error(), nullptr);
  try {
    empty.wait();
    FAIL() << "wait() on an empty handle returned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("empty"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("push_tracked"), std::string::npos) << e.what();
  }
  EXPECT_THROW(empty.on_done([](std::exception_ptr) {}), Error);
  OperationHandle h =
      engine_->push_tracked({.name = "op", .ctx = cpu(0), .fn = [](const RunContext&) {}});
  EXPECT_TRUE(static_cast<bool>(h));
  const OperationHandle moved = std::move(h);
  EXPECT_FALSE(static_cast<bool>(h));  // NOLINT(bugprone-use-after-move): it is empty now
  EXPECT_THROW(h.wait(), Error);
  EXPECT_NO_THROW(moved.wait());
}

// The engine drains its work when destroyed: a handle kept after it still
// answers, done and with the operation's outcome, device work included.
TEST_P(OperationHandleTest, HandlesOutliveTheirEngine) {
  run_with_timeout(30s, [&] {
    std::vector<VarHandle> vars;
    std::vector<OperationHandle> handles;
    std::vector<double> out(devices().size(), -1);
    std::atomic<int> callbacks{0};
    for (std::size_t i = 0; i < devices().size(); ++i) {
      vars.push_back(engine_->new_var());
      handles.push_back(engine_->push_tracked({.name = "slow",
                                               .ctx = devices()[i],
                                               .writes = {vars[i]},
                                               .fn = [&out, i](const RunContext& rc) {
                                                 on_device(rc, [&out, i] {
                                                   std::this_thread::sleep_for(30ms);
                                                   out[i] = sum_of_squares(static_cast<int>(i) + 5);
                                                 });
                                               }}));
      handles.back().on_done([&](std::exception_ptr) { callbacks.fetch_add(1); });
    }
    OperationHandle failed =
        engine_->push_tracked({.name = "failed", .ctx = gpu(1), .fn = [](const RunContext&) {
                                 throw std::runtime_error("kept after the engine");
                               }});
    for (VarHandle v : vars) engine_->delete_var(v);
    engine_.reset();  // logs the error never waited for
    for (std::size_t i = 0; i < handles.size(); ++i) {
      EXPECT_TRUE(handles[i].done()) << devices()[i];
      EXPECT_EQ(handles[i].error(), nullptr);
      EXPECT_NO_THROW(handles[i].wait());
      EXPECT_EQ(out[i], sum_of_squares(static_cast<int>(i) + 5)) << devices()[i];
    }
    EXPECT_EQ(callbacks.load(), static_cast<int>(handles.size()));
    EXPECT_TRUE(failed.done());
    EXPECT_NE(what(failed.error()).find("kept after the engine"), std::string::npos);
    EXPECT_THROW(failed.wait(), OperationError);
    int late = 0;
    failed.on_done([&](std::exception_ptr e) { late += e != nullptr ? 1 : 0; });
    EXPECT_EQ(late, 1);
  });
}

INSTANTIATE_TEST_SUITE_P(OperationHandle, OperationHandleTest, testing::engine_params(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
