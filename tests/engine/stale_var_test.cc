// Stale variable handles (Note [Variable generations] in
// engine/detail/var_block.h): a VarHandle used after delete_var is refused
// with StaleVariableError by push, the waits and delete_var, on every engine,
// changes nothing, and never reaches the variable that reuses its record.

#include <atomic>
#include <cstdint>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/var_block.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using testing::EngineTest;
using testing::run_with_timeout;

/// Same fixture; its own name, as GoogleTest wants one class per suite.
class StaleVarTest : public EngineTest {};

/// An asynchronous write on `var` that stays pending until finish(): the
/// test holds its Completion. Pushed from a thread of its own, because the
/// naive engine runs an operation in its pusher until the Completion comes.
class HeldWrite {
 public:
  HeldWrite(Engine& engine, VarHandle var, std::function<void()> body) : body_(std::move(body)) {
    std::future<Completion> started = started_.get_future();
    pusher_ = std::thread([this, &engine, var] {
      engine.push({.name = "held write",
                   .ctx = cpu(0),
                   .writes = {var},
                   .fn = [this](const RunContext&, Completion done) {
                     body_();
                     started_.set_value(std::move(done));
                   }});
    });
    completion_ = started.get();  // the closure has run: the write is launched
  }
  HeldWrite(const HeldWrite&) = delete;
  HeldWrite& operator=(const HeldWrite&) = delete;
  ~HeldWrite() {
    if (pusher_.joinable()) finish();
  }
  /// Completes the write.
  void finish() {
    completion_.done();
    pusher_.join();
  }

 private:
  std::function<void()> body_;
  std::promise<Completion> started_;
  Completion completion_;
  std::thread pusher_;
};

/// Runs `call`, expecting StaleVariableError whose message holds every one
/// of `words`.
template <typename F>
void expect_stale(F&& call, const std::vector<std::string>& words) {
  try {
    call();
    ADD_FAILURE() << "a stale handle was accepted";
  } catch (const StaleVariableError& e) {
    for (const std::string& w : words) {
      EXPECT_NE(std::string(e.what()).find(w), std::string::npos)
          << "no '" << w << "' in: " << e.what();
    }
  }
}

/// A new variable on the record of `stale` (deleted and freed): records are
/// recycled per thread, most recently freed first, so it comes within a few
/// tries. The variables made on the way are deleted.
VarHandle new_var_on_record_of(Engine& engine, VarHandle stale) {
  std::vector<VarHandle> others;
  VarHandle found;
  for (int i = 0; i < 10000 && !found; ++i) {
    VarHandle v = engine.new_var();
    if (detail::var_block(v) == detail::var_block(stale)) {
      found = v;
    } else {
      others.push_back(v);
    }
  }
  for (VarHandle v : others) engine.delete_var(v);
  return found;
}

TEST(VarHandleTest, IsASmallValueType) {
  static_assert(sizeof(VarHandle) == 8, "a handle is copied on every push");
  static_assert(std::is_trivially_copyable_v<VarHandle>);
  const VarHandle null;
  EXPECT_FALSE(null);
  EXPECT_TRUE(null == nullptr);
  EXPECT_EQ(null, VarHandle(nullptr));
  EXPECT_EQ(null.str(), "null");

  auto engine = make_engine(testing::config_for({"threaded1", EngineKind::kThreaded, 1}));
  VarHandle x = engine->new_var(), y = engine->new_var();
  EXPECT_TRUE(x);
  EXPECT_TRUE(x != nullptr);
  EXPECT_NE(x, y);
  EXPECT_EQ(x, VarHandle(x));
  EXPECT_TRUE((x < y) != (y < x));
  // Printed as its record's address and its generation.
  std::ostringstream printed;
  printed << x;
  EXPECT_EQ(printed.str(), x.str());
  EXPECT_NE(x.str().find("(generation " + std::to_string(x.generation()) + ")"), std::string::npos)
      << x.str();
  // Usable as a key.
  std::map<VarHandle, int> ordered{{x, 1}, {y, 2}};
  std::unordered_map<VarHandle, int> hashed{{x, 1}, {y, 2}};
  EXPECT_EQ(ordered.at(y), 2);
  EXPECT_EQ(hashed.at(x), 1);
  EXPECT_EQ(std::hash<VarHandle>{}(x), std::hash<VarHandle>{}(VarHandle(x)));

  // The same record at a later generation is another handle.
  engine->delete_var(x);
  VarHandle again = new_var_on_record_of(*engine, x);
  ASSERT_TRUE(again);
  EXPECT_NE(again, x);
  EXPECT_GT(again.generation(), x.generation());
  EXPECT_EQ(hashed.count(again), 0u);
  engine->delete_var(again);
  engine->delete_var(y);
}

TEST_P(StaleVarTest, DoubleDeleteIsRefusedAndTheEngineKeepsWorking) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    int value = 0;
    engine_->push({.name = "fill", .ctx = cpu(0), .writes = {x}, .fn = [&](const RunContext&) {
                     value = 1;
                   }});
    std::atomic<int> deleted{0};
    engine_->delete_var(x, [&] { deleted.fetch_add(1); });
    expect_stale([&] { engine_->delete_var(x, [&] { deleted.fetch_add(100); }); },
                 {"delete_var", "already deleted", "generation " + std::to_string(x.generation()),
                  "is at generation " + std::to_string(x.generation() + 1)});
    engine_->wait_for_all();
    EXPECT_EQ(value, 1);
    EXPECT_EQ(deleted.load(), 1) << "the refused deletion's deleter ran";
    // Deleted and freed now: refused all the same.
    EXPECT_THROW(engine_->delete_var(x), StaleVariableError);

    // The engine still works, on new variables (which may reuse x's record).
    for (int i = 0; i < 4; ++i) {
      VarHandle y = engine_->new_var();
      for (Context ctx : devices()) {
        engine_->push({.name = "add", .ctx = ctx, .writes = {y}, .fn = [&](const RunContext& rc) {
                         testing::on_device(rc, [&] { value += 1; });
                       }});
      }
      engine_->wait_to_read(y);
      engine_->delete_var(y);
    }
    EXPECT_EQ(value, 1 + 4 * static_cast<int>(devices().size()));
    EXPECT_NO_THROW(engine_->wait_for_all());
  });
}

// A refused push drops the closure it was given, and the closure's
// destructor may call the engine: here, as an array's does, it deletes a
// variable. Dropped under the engine's push lock, that would deadlock.
TEST_P(StaleVarTest, ARefusedPushDropsItsClosureOutsideTheEnginesLock) {
  run_with_timeout(30s, [&] {
    VarHandle stale = engine_->new_var();
    engine_->delete_var(stale);
    VarHandle live = engine_->new_var();
    VarHandle owned = engine_->new_var();
    std::atomic<int> deleted{0};
    std::atomic<bool> ran{false};
    // The closure holds the only reference; its release deletes `owned`.
    auto guard = std::shared_ptr<int>(new int(0), [&, engine = engine_.get()](int* p) {
      delete p;
      engine->delete_var(owned, [&] { deleted.fetch_add(1); });
    });
    for (const char* list : {"reads", "writes"}) {
      Operation op{.name = "refused", .ctx = cpu(0), .fn = [g = guard, &ran](const RunContext&) {
                     ran = true;
                   }};
      (std::string(list) == "reads" ? op.reads : op.writes) = {live, stale};
      if (std::string(list) == "writes") guard.reset();  // the closure's copy is the last one
      expect_stale([&] { engine_->push(std::move(op)); }, {"push", "'refused'", list});
    }
    engine_->wait_for_all();
    EXPECT_FALSE(ran.load()) << "a refused operation ran";
    EXPECT_EQ(deleted.load(), 1) << "the closure was not dropped, or dropped twice";
    EXPECT_THROW(engine_->wait_to_read(owned), StaleVariableError);
    // The engine still takes pushes on the live variable.
    int value = 0;
    engine_->push({.name = "after", .ctx = cpu(0), .writes = {live}, .fn = [&](const RunContext&) {
                     value = 7;
                   }});
    engine_->wait_to_read(live);
    EXPECT_EQ(value, 7);
    engine_->delete_var(live);
  });
}

// Note [Variable generations]: the handle is stale from the moment
// delete_var returns, while the deletion still waits for the operation in
// flight (on the naive engine, it is queued behind the asynchronous one).
TEST_P(StaleVarTest, StaleHandleIsRefusedWhileItsDeletionWaitsForARunningOperation) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    int value = 0;
    HeldWrite held(*engine_, x, [&] { value = 7; });
    std::atomic<int> deleted{0};
    std::atomic<int> stale_ran{0};
    engine_->delete_var(x, [&] { deleted.fetch_add(1); });
    EXPECT_EQ(deleted.load(), 0) << "deleted before its operation completed";
    const OperationCounts before = engine_->operation_counts();

    expect_stale(
        [&] {
          engine_->push(
              {.name = "late write", .ctx = cpu(1), .writes = {x}, .fn = [&](const RunContext&) {
                 stale_ran.fetch_add(1);
               }});
        },
        {"push", "operation 'late write'", "writes", "deleted"});
    expect_stale(
        [&] {
          engine_->push(
              {.name = "late read", .ctx = gpu(0), .reads = {x}, .fn = [&](const RunContext&) {
                 stale_ran.fetch_add(1);
               }});
        },
        {"push", "operation 'late read'", "reads"});
    // Refused at once: they do not wait for the operation in flight.
    expect_stale([&] { engine_->wait_to_read(x); }, {"wait_to_read", "already deleted"});
    expect_stale([&] { engine_->wait_to_write(x); }, {"wait_to_write", "already deleted"});
    expect_stale([&] { engine_->delete_var(x, [&] { deleted.fetch_add(100); }); }, {"delete_var"});
    const OperationCounts after = engine_->operation_counts();
    EXPECT_EQ(after.pushed, before.pushed) << "a refused call was counted as pushed";

    if (threaded()) {
      // The dump shows the pending deletion with the handle it was given.
      const DependencyState state = engine_->dependency_state();
      bool listed = false;
      for (const PendingOperation& op : state.operations) {
        if (op.name == "delete_var") {
          listed = true;
          EXPECT_EQ(op.writes, std::vector<VarHandle>{x});
          ASSERT_EQ(op.waits_for.size(), 1u);
          EXPECT_EQ(op.waits_for[0].var, x);
        }
      }
      EXPECT_TRUE(listed) << state.describe();
      EXPECT_NE(state.describe().find("var " + x.str() + " to write"), std::string::npos)
          << state.describe();
    }

    held.finish();
    engine_->wait_for_all();
    EXPECT_EQ(value, 7);
    EXPECT_EQ(deleted.load(), 1);
    EXPECT_EQ(stale_ran.load(), 0);
    EXPECT_THROW(engine_->wait_to_read(x), StaleVariableError);
  });
}

// The record of a deleted variable is reused by the next one; a stale
// handle of it must not order against, fail, wait for or delete the new one.
TEST_P(StaleVarTest, StaleHandleNeverReachesTheVariableThatReusesItsRecord) {
  run_with_timeout(30s, [&] {
    VarHandle x = engine_->new_var();
    engine_->delete_var(x);  // idle: its record is freed at once
    VarHandle y = new_var_on_record_of(*engine_, x);
    ASSERT_TRUE(y) << "the record was never reused";
    ASSERT_NE(y, x);
    VarHandle z = engine_->new_var();

    int y_value = 0;
    HeldWrite held(*engine_, y, [&] { y_value = 1; });  // pending on y
    std::atomic<int> stale_ran{0};
    std::atomic<int> y_deleted{0};
    const OperationCounts before = engine_->operation_counts();
    // Would store an error on y, and order after y's write.
    expect_stale(
        [&] {
          engine_->push({.name = "stale failing write",
                         .ctx = cpu(1),
                         .writes = {x},
                         .fn = [&](const RunContext&) {
                           stale_ran.fetch_add(1);
                           throw std::runtime_error("must never run");
                         }});
        },
        {"operation 'stale failing write'", "writes", "may hold another variable"});
    // Would make z's next write follow y's pending one.
    expect_stale(
        [&] {
          engine_->push({.name = "stale reader",
                         .ctx = cpu(0),
                         .reads = {x},
                         .writes = {z},
                         .fn = [&](const RunContext&) { stale_ran.fetch_add(1); }});
        },
        {"operation 'stale reader'", "reads"});
    // Listed twice, live and stale: still refused.
    expect_stale(
        [&] {
          engine_->push({.name = "both",
                         .ctx = cpu(0),
                         .reads = {x},
                         .writes = {y},
                         .fn = [&](const RunContext&) { stale_ran.fetch_add(1); }});
        },
        {"operation 'both'"});
    expect_stale([&] { engine_->wait_to_read(x); }, {"wait_to_read"});
    expect_stale([&] { engine_->wait_to_write(x); }, {"wait_to_write"});
    // Would delete y.
    expect_stale([&] { engine_->delete_var(x, [&] { y_deleted.fetch_add(1); }); }, {"delete_var"});
    EXPECT_EQ(engine_->operation_counts().pushed, before.pushed);

    if (threaded()) {
      // z does not wait for y's pending write: the stale read made no edge.
      int z_value = 0;
      engine_->push({.name = "z", .ctx = cpu(1), .writes = {z}, .fn = [&](const RunContext&) {
                       z_value = 5;
                     }});
      engine_->wait_to_read(z);
      EXPECT_EQ(z_value, 5);
    }
    held.finish();
    EXPECT_NO_THROW(engine_->wait_to_read(y)) << "y inherited the stale push's error";
    EXPECT_EQ(y_value, 1);
    engine_->push({.name = "y next",
                   .ctx = gpu(0),
                   .reads = {y},
                   .writes = {y},
                   .fn = [&](const RunContext& rc) {
                     testing::on_device(rc, [&] { y_value = y_value * 10 + 2; });
                   }});
    EXPECT_NO_THROW(engine_->wait_to_read(y));
    EXPECT_EQ(y_value, 12);
    EXPECT_EQ(stale_ran.load(), 0);
    EXPECT_EQ(y_deleted.load(), 0);
    EXPECT_NO_THROW(engine_->wait_for_all()) << "an error was raised";
    engine_->delete_var(y);
    engine_->delete_var(z);
    engine_->wait_for_all();
  });
}

// A record never wraps its generation: at the last one it is retired, so no
// later variable can share a generation with a stale handle.
TEST_P(StaleVarTest, ARecordWhoseGenerationsAreUsedUpIsRetired) {
  run_with_timeout(30s, [&] {
    VarHandle first = engine_->new_var();
    detail::VarBlock* record = detail::var_block(first);
    engine_->delete_var(first);
    // Four million variables later (the record is free, and this thread's).
    detail::generation_of(record).store(detail::kRetiredGeneration - 1);
    VarHandle last = new_var_on_record_of(*engine_, first);
    ASSERT_TRUE(last);
    EXPECT_EQ(last.generation(), detail::kRetiredGeneration - 1);
    int value = 0;
    engine_->push({.name = "last", .ctx = cpu(0), .writes = {last}, .fn = [&](const RunContext&) {
                     value = 3;
                   }});
    engine_->wait_to_read(last);
    EXPECT_EQ(value, 3);
    // Idle: freed (here: retired) on this thread, whose next variables would
    // come from that very record if it went back to the pool.
    engine_->delete_var(last);
    std::vector<VarHandle> later;
    for (int i = 0; i < 2000; ++i) {
      later.push_back(engine_->new_var());
      EXPECT_NE(detail::var_block(later.back()), record) << "a retired record came back";
    }
    for (VarHandle v : later) engine_->delete_var(v);
    expect_stale([&] { engine_->wait_to_read(last); }, {"(retired)"});
    expect_stale([&] { engine_->delete_var(first); }, {"delete_var"});
  });
}

// Clients create, use and delete variables at once, and keep misusing the
// handles they deleted: every misuse is refused, and every live variable
// sees exactly its own operations (run under ThreadSanitizer too).
TEST_P(StaleVarTest, ConcurrentClientsCreateDeleteAndMisuseHandles) {
  run_with_timeout(60s, [&] {
    constexpr int kClients = 4;
    constexpr int kRounds = 400;
    VarHandle shared = engine_->new_var();
    std::atomic<int> stale_ran{0};
    std::atomic<int> refused{0};
    std::atomic<int> wrong_values{0};
    std::atomic<int> deleters{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c) {
      clients.emplace_back([&, c] {
        VarHandle previous;
        for (int round = 0; round < kRounds; ++round) {
          VarHandle v = engine_->new_var();
          auto cell = std::make_shared<std::uint64_t>(0);
          std::uint64_t expected = 0;
          for (int k = 1; k <= 3; ++k) {
            engine_->push({.name = "client write",
                           .ctx = cpu((c + k) % 2),
                           .reads = {shared},
                           .writes = {v},
                           .fn = [cell, k](const RunContext&) { *cell = *cell * 10 + k; }});
            expected = expected * 10 + static_cast<std::uint64_t>(k);
          }
          if (previous) {
            // The previous round's handle: its record may be v's now.
            try {
              engine_->push({.name = "stale",
                             .ctx = cpu(c % 2),
                             .writes = {previous},
                             .fn = [&](const RunContext&) { stale_ran.fetch_add(1); }});
            } catch (const StaleVariableError&) {
              refused.fetch_add(1);
            }
            try {
              engine_->wait_to_write(previous);
            } catch (const StaleVariableError&) {
              refused.fetch_add(1);
            }
            try {
              engine_->delete_var(previous);
            } catch (const StaleVariableError&) {
              refused.fetch_add(1);
            }
          }
          if (round % 2 == 0) {
            engine_->wait_to_read(v);
            if (*cell != expected) wrong_values.fetch_add(1);
            engine_->delete_var(v, [&deleters] { deleters.fetch_add(1); });
          } else {
            // Deleted with its writes pending; the deleter sees them done.
            engine_->delete_var(v, [cell, expected, &wrong_values, &deleters] {
              if (*cell != expected) wrong_values.fetch_add(1);
              deleters.fetch_add(1);
            });
          }
          previous = v;
        }
      });
    }
    for (std::thread& t : clients) t.join();
    engine_->wait_for_all();
    EXPECT_EQ(stale_ran.load(), 0);
    EXPECT_EQ(refused.load(), kClients * (kRounds - 1) * 3);
    EXPECT_EQ(wrong_values.load(), 0);
    EXPECT_EQ(deleters.load(), kClients * kRounds);
    engine_->delete_var(shared);
  });
}

INSTANTIATE_TEST_SUITE_P(Engines, StaleVarTest, testing::engine_params(),
                         testing::engine_param_name);

}  // namespace
}  // namespace tagflow
