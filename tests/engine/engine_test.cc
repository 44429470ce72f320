// The engine's contract, checked on every engine kind and worker count and
// on every device kind (cpu(i), simulated GPUs): dependency rules,
// asynchronous operations, shutdown and many clients (the order among ready
// operations is engine_order_test.cc's; deleting variables, deletion_test.cc's).

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

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

// --- dependency rules --------------------------------------------------------------

TEST_P(EngineTest, ReadAfterWriteSeesTheWrite) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      int value = 0;
      int seen = -1;
      engine_->push(
          {.name = "slow write", .ctx = ctx, .writes = {x}, .fn = [&](const RunContext& rc) {
             on_device(rc, [&] {
               std::this_thread::sleep_for(20ms);
               value = 1;
             });
           }});
      engine_->push({.name = "read", .ctx = ctx, .reads = {x}, .fn = [&](const RunContext& rc) {
                       on_device(rc, [&] { seen = value; });
                     }});
      engine_->wait_for_all();
      EXPECT_EQ(seen, 1) << ctx;
      engine_->delete_var(x);
    }
  });
}

TEST_P(EngineTest, WriteAfterReadWaitsForTheReader) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      int value = 0;
      int seen = -1;
      engine_->push(
          {.name = "slow read", .ctx = ctx, .reads = {x}, .fn = [&](const RunContext& rc) {
             on_device(rc, [&] {
               std::this_thread::sleep_for(20ms);
               seen = value;
             });
           }});
      engine_->push({.name = "write", .ctx = ctx, .writes = {x}, .fn = [&](const RunContext& rc) {
                       on_device(rc, [&] { value = 2; });
                     }});
      engine_->wait_to_write(x);
      EXPECT_EQ(seen, 0) << ctx;
      EXPECT_EQ(value, 2) << ctx;
      engine_->delete_var(x);
    }
  });
}

TEST_P(EngineTest, WriteAfterWriteKeepsPushOrder) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      std::vector<int> order;
      for (int i = 0; i < 50; ++i) {
        engine_->push(
            {.name = "append", .ctx = ctx, .writes = {x}, .fn = [&order, i](const RunContext& rc) {
               on_device(rc, [&order, i] { order.push_back(i); });
             }});
      }
      engine_->wait_to_read(x);
      ASSERT_EQ(order.size(), 50u) << ctx;
      for (int i = 0; i < 50; ++i) EXPECT_EQ(order[static_cast<std::size_t>(i)], i) << ctx;
      engine_->delete_var(x);
    }
  });
}

TEST_P(EngineTest, CrossDeviceChainsFollowDependencies) {
  // x is written on gpu(0), read on cpu(1) into y, read on gpu(1)'s copy
  // stream into z: each step must see the previous one's device work.
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var(), y = engine_->new_var(), z = engine_->new_var();
    long vx = 0, vy = 0, vz = 0;
    for (int round = 1; round <= 20; ++round) {
      engine_->push(
          {.name = "x", .ctx = gpu(0), .writes = {x}, .fn = [&, round](const RunContext& rc) {
             on_device(rc, [&, round] {
               std::this_thread::sleep_for(1ms);
               vx = round;
             });
           }});
      engine_->push(
          {.name = "y", .ctx = cpu(1), .reads = {x}, .writes = {y}, .fn = [&](const RunContext&) {
             vy = vx * 10;
           }});
      engine_->push({.name = "z",
                     .ctx = gpu(1),
                     .reads = {y},
                     .writes = {z},
                     .queue = QueueKind::kCopy,
                     .fn = [&](const RunContext& rc) { on_device(rc, [&] { vz += vy; }); }});
    }
    engine_->wait_to_read(z);
    EXPECT_EQ(vx, 20);
    EXPECT_EQ(vy, 200);
    EXPECT_EQ(vz, 10 * (20 * 21 / 2));
    for (VarHandle v : {x, y, z}) engine_->delete_var(v);
    engine_->wait_for_all();
  });
}

TEST_P(EngineTest, ConcurrentReadersOverlap) {
  if (!threaded() || GetParam().workers < 2) GTEST_SKIP() << "needs two workers";
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    std::atomic<int> inside{0};
    std::atomic<int> saw_both{0};
    for (int i = 0; i < 2; ++i) {
      engine_->push({.name = "reader", .ctx = cpu(0), .reads = {x}, .fn = [&](const RunContext&) {
                       ++inside;
                       // Both readers must be inside at once; serialised readers time out here.
                       const auto deadline = std::chrono::steady_clock::now() + 5s;
                       while (inside.load() < 2 && std::chrono::steady_clock::now() < deadline) {
                         std::this_thread::yield();
                       }
                       if (inside.load() == 2) ++saw_both;
                     }});
    }
    engine_->wait_for_all();
    EXPECT_EQ(saw_both.load(), 2);
    engine_->delete_var(x);
  });
}

TEST_P(EngineTest, WriterWaitsForAllConcurrentReaders) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    std::atomic<int> readers_done{0};
    int seen_by_writer = -1;
    for (int i = 0; i < 8; ++i) {
      engine_->push({.name = "reader", .ctx = cpu(0), .reads = {x}, .fn = [&](const RunContext&) {
                       std::this_thread::sleep_for(2ms);
                       ++readers_done;
                     }});
    }
    engine_->push({.name = "writer", .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                     seen_by_writer = readers_done.load();
                   }});
    engine_->wait_to_read(x);
    EXPECT_EQ(seen_by_writer, 8);
    engine_->delete_var(x);
  });
}

TEST_P(EngineTest, VariableListedTwiceOrInBothListsRunsOnce) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var(), y = engine_->new_var();
    int runs = 0;
    engine_->push({.name = "dup",
                   .ctx = cpu(0),
                   .reads = {x, x, y},
                   .writes = {x, y, x},
                   .fn = [&](const RunContext&) { ++runs; }});
    engine_->push(
        {.name = "after", .ctx = cpu(0), .reads = {x}, .writes = {y}, .fn = [&](const RunContext&) {
           ++runs;
         }});
    engine_->wait_to_read(y);
    EXPECT_EQ(runs, 2);
    engine_->delete_var(x);
    engine_->delete_var(y);
  });
}

TEST_P(EngineTest, OperationWithHundredsOfVariablesOrdersWithEachOfThem) {
  run_with_timeout(30s, [&] {
    constexpr int kVars = 300;
    std::vector<VarHandle> vars;
    for (int i = 0; i < kVars; ++i) vars.push_back(engine_->new_var());
    std::vector<int> values(kVars, 0);
    // One writer per variable, then one operation reading the even ones and
    // writing the odd ones (each listed twice), then one reader per variable.
    for (int i = 0; i < kVars; ++i) {
      engine_->push({.name = "init",
                     .ctx = cpu(i % 2),
                     .writes = {vars[static_cast<std::size_t>(i)]},
                     .fn = [&values, i](const RunContext&) {
                       std::this_thread::sleep_for(std::chrono::microseconds(i % 7));
                       values[static_cast<std::size_t>(i)] = i;
                     }});
    }
    Operation wide{.name = "wide", .ctx = gpu(0)};
    for (int i = 0; i < kVars; ++i) {
      VarList& list = i % 2 == 0 ? wide.reads : wide.writes;
      list.push_back(vars[static_cast<std::size_t>(i)]);
      list.push_back(vars[static_cast<std::size_t>(i)]);
    }
    long sum_seen = -1;
    wide.fn = [&](const RunContext& rc) {
      on_device(rc, [&] {
        long sum = 0;
        for (int i = 0; i < kVars; i += 2) sum += values[static_cast<std::size_t>(i)];
        sum_seen = sum;
        for (int i = 1; i < kVars; i += 2) values[static_cast<std::size_t>(i)] = -1;
      });
    };
    engine_->push(std::move(wide));
    std::atomic<int> odd_seen_overwritten{0};
    for (int i = 1; i < kVars; i += 2) {
      engine_->push({.name = "check",
                     .ctx = cpu(0),
                     .reads = {vars[static_cast<std::size_t>(i)]},
                     .fn = [&, i](const RunContext&) {
                       if (values[static_cast<std::size_t>(i)] == -1) ++odd_seen_overwritten;
                     }});
    }
    engine_->wait_for_all();
    long expected = 0;
    for (int i = 0; i < kVars; i += 2) expected += i;
    EXPECT_EQ(sum_seen, expected);
    EXPECT_EQ(odd_seen_overwritten.load(), kVars / 2);
    for (VarHandle v : vars) engine_->delete_var(v);
  });
}

/// A capture whose destruction takes a while and is seen: a wait that
/// returned, or a successor that ran, before it finished finds `alive` set.
std::shared_ptr<int> slow_to_destroy(std::atomic<bool>& alive) {
  alive = true;
  return {new int(0), [&alive](int* p) {
            std::this_thread::sleep_for(30ms);
            alive = false;
            delete p;
          }};
}

// Note [Closures die before waits return] in engine/detail/threaded_engine.h.
TEST_P(EngineTest, AClosureIsDestroyedBeforeTheWaitsAndOperationsItReleases) {
  run_with_timeout(60s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      std::atomic<bool> alive{false};
      auto push_holding = [&](std::shared_ptr<int> capture) {
        engine_->push({.name = "holds a capture",
                       .ctx = ctx,
                       .writes = {x},
                       .fn = [capture = std::move(capture)](const RunContext&) {}});
      };
      push_holding(slow_to_destroy(alive));
      engine_->wait_to_read(x);
      EXPECT_FALSE(alive) << ctx << ": wait_to_read returned before the closure was destroyed";
      push_holding(slow_to_destroy(alive));
      engine_->wait_to_write(x);
      EXPECT_FALSE(alive) << ctx << ": wait_to_write returned before the closure was destroyed";
      push_holding(slow_to_destroy(alive));
      engine_->wait_for_all();
      EXPECT_FALSE(alive) << ctx << ": wait_for_all returned before the closure was destroyed";
      push_holding(slow_to_destroy(alive));
      bool alive_when_read = true;
      engine_->push({.name = "reader", .ctx = ctx, .reads = {x}, .fn = [&](const RunContext&) {
                       alive_when_read = alive;
                     }});
      engine_->wait_for_all();
      EXPECT_FALSE(alive_when_read) << ctx << ": a reader ran before the writer's closure died";
      // A handle's wait and callbacks, too.
      auto tracked = [&] {
        return engine_->push_tracked(
            {.name = "tracked, holds a capture",
             .ctx = ctx,
             .writes = {x},
             .fn = [capture = slow_to_destroy(alive)](const RunContext&) {}});
      };
      tracked().wait();
      EXPECT_FALSE(alive) << ctx << ": a handle's wait returned before the closure was destroyed";
      std::atomic<int> alive_in_callback{-1};
      tracked().on_done([&](std::exception_ptr) { alive_in_callback = alive ? 1 : 0; });
      engine_->wait_for_all();
      EXPECT_EQ(alive_in_callback, 0) << ctx << ": on_done ran before the closure was destroyed";
      engine_->delete_var(x);
    }
  });
}

// --- asynchronous operations -----------------------------------------------------------

TEST_P(EngineTest, AsyncOperationCompletesFromAnotherThread) {
  run_with_timeout(30s, [&] {
    for (Context ctx : devices()) {
      VarHandle x = engine_->new_var();
      int value = 0;
      std::vector<std::thread> helpers;
      std::mutex helpers_mutex;
      engine_->push({.name = "async write",
                     .ctx = ctx,
                     .writes = {x},
                     .fn = [&](const RunContext&, Completion done) {
                       std::lock_guard lock(helpers_mutex);
                       helpers.emplace_back([&value, c = std::move(done)]() mutable {
                         std::this_thread::sleep_for(20ms);
                         value = 7;
                         c.done();
                       });
                     }});
      int seen = -1;
      engine_->push({.name = "read", .ctx = cpu(0), .reads = {x}, .fn = [&](const RunContext&) {
                       seen = value;
                     }});
      engine_->wait_for_all();
      EXPECT_EQ(seen, 7) << ctx;
      for (auto& t : helpers) t.join();
      engine_->delete_var(x);
    }
  });
}

TEST_P(EngineTest, AsyncFailureAndDroppedCompletionReachTheWaits) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var(), y = engine_->new_var();
    engine_->push(
        {.name = "io", .ctx = cpu(0), .writes = {x}, .fn = [](const RunContext&, Completion c) {
           c.fail(std::make_exception_ptr(std::runtime_error("disk unplugged")));
         }});
    engine_->push({.name = "forgetful",
                   .ctx = cpu(0),
                   .writes = {y},
                   .fn = [](const RunContext&, Completion) {}});
    try {
      engine_->wait_to_read(x);
      FAIL() << "no error";
    } catch (const OperationError& e) {
      EXPECT_EQ(e.op_name(), "io");
      EXPECT_NE(std::string(e.what()).find("disk unplugged"), std::string::npos) << e.what();
    }
    try {
      engine_->wait_to_read(y);
      FAIL() << "no error";
    } catch (const OperationError& e) {
      EXPECT_EQ(e.op_name(), "forgetful");
      EXPECT_NE(std::string(e.what()).find("without done() or fail()"), std::string::npos)
          << e.what();
    }
    EXPECT_NO_THROW(engine_->wait_for_all());
    engine_->delete_var(x);
    engine_->delete_var(y);
    engine_->wait_for_all();
  });
}

// --- shutdown, many clients ------------------------------------------------------------

TEST_P(EngineTest, ShutdownWithPendingWorkRunsItAll) {
  run_with_timeout(60s, [&] {
    std::atomic<int> ran{0};
    std::vector<std::thread> helpers;
    std::mutex helpers_mutex;
    {
      auto engine = make_engine(config_for(GetParam()));
      std::vector<VarHandle> vars;
      for (int i = 0; i < 8; ++i) vars.push_back(engine->new_var());
      for (int i = 0; i < 400; ++i) {
        const Context ctx = devices()[static_cast<std::size_t>(i) % 3];
        VarHandle v = vars[static_cast<std::size_t>(i) % vars.size()];
        if (i % 7 == 0) {
          engine->push({.name = "async",
                        .ctx = ctx,
                        .writes = {v},
                        .fn = [&](const RunContext&, Completion c) {
                          std::lock_guard lock(helpers_mutex);
                          helpers.emplace_back([&ran, c = std::move(c)]() mutable {
                            ++ran;
                            c.done();
                          });
                        }});
        } else {
          engine->push({.name = "work", .ctx = ctx, .writes = {v}, .fn = [&](const RunContext& rc) {
                          on_device(rc, [&] {
                            std::this_thread::sleep_for(50us);
                            ++ran;
                          });
                        }});
        }
      }
      for (VarHandle v : vars) engine->delete_var(v);
    }  // destroyed with work pending
    EXPECT_EQ(ran.load(), 400);
    for (auto& t : helpers) t.join();
  });
}

TEST_P(EngineTest, PushesFromSeveralClientThreads) {
  run_with_timeout(60s, [&] {
    constexpr int kThreads = 4;
    constexpr int kPushes = 5000;
    constexpr int kVars = 16;
    std::vector<VarHandle> vars;
    std::vector<long> counts(kVars, 0);
    for (int i = 0; i < kVars; ++i) vars.push_back(engine_->new_var());
    std::vector<std::thread> clients;
    for (int t = 0; t < kThreads; ++t) {
      clients.emplace_back([&, t] {
        for (int i = 0; i < kPushes; ++i) {
          // Two variables per operation, in either order: concurrent pushers
          // must agree on one order or deadlock.
          const int a = (i * 7 + t) % kVars;
          const int b = (i * 3 + t * 5 + 1) % kVars;
          const Context ctx = devices()[static_cast<std::size_t>(i + t) % 3];
          engine_->push(
              {.name = "count",
               .ctx = ctx,
               .writes = {vars[static_cast<std::size_t>(a)], vars[static_cast<std::size_t>(b)]},
               .fn = [&counts, a, b](const RunContext&) {
                 ++counts[static_cast<std::size_t>(a)];
                 if (b != a) ++counts[static_cast<std::size_t>(b)];
               }});
        }
      });
    }
    for (auto& c : clients) c.join();
    engine_->wait_for_all();
    long expected_total = 0;
    for (int t = 0; t < kThreads; ++t) {
      for (int i = 0; i < kPushes; ++i) {
        expected_total += ((i * 7 + t) % kVars) == ((i * 3 + t * 5 + 1) % kVars) ? 1 : 2;
      }
    }
    long total = 0;
    for (long c : counts) total += c;
    EXPECT_EQ(total, expected_total);
    for (VarHandle v : vars) engine_->delete_var(v);
  });
}

TEST_P(EngineTest, OperationsMayPushOperations) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    std::atomic<int> depth_reached{0};
    std::function<void(int)> spawn = [&](int depth) {
      engine_->push({.name = "nested",
                     .ctx = cpu(depth % 2),
                     .writes = {x},
                     .fn = [&, depth](const RunContext&) {
                       depth_reached = depth;
                       if (depth < 10) spawn(depth + 1);
                     }});
    };
    spawn(0);
    // Each level is pushed by the one before it: wait until the last has run.
    while (depth_reached.load() < 10) engine_->wait_for_all();
    engine_->wait_for_all();
    EXPECT_EQ(depth_reached.load(), 10);
    engine_->delete_var(x);
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, EngineTest, testing::engine_params(), testing::engine_param_name);

}  // namespace
}  // namespace tagflow
