// Engine calls that run out of memory: a push, wait or deletion that throws
// std::bad_alloc has changed nothing, and everything else runs as pushed
// (Note [Linking cannot fail] in engine/detail/threaded_engine.h).
//
// This program replaces the global operator new, so that a test can make
// every allocation of its own thread fail for the length of one engine call.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <optional>
#include <random>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "tests/engine/engine_fixture.h"
#include "tests/engine/watchdog.h"

namespace {

/// While set, every allocation of this thread throws std::bad_alloc.
thread_local bool t_out_of_memory = false;
/// So many of this thread's next allocations throw std::bad_alloc.
thread_local int t_failures_left = 0;

void* allocate(std::size_t size, std::size_t alignment) {
  if (t_out_of_memory) throw std::bad_alloc();
  if (t_failures_left > 0) {
    --t_failures_left;
    throw std::bad_alloc();
  }
  size = size == 0 ? 1 : size;
  void* p = alignment <= alignof(std::max_align_t)
                ? std::malloc(size)
                : std::aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(std::size_t size) { return allocate(size, 0); }
void* operator new[](std::size_t size) { return allocate(size, 0); }
void* operator new(std::size_t size, std::align_val_t a) {
  return allocate(size, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t size, std::align_val_t a) {
  return allocate(size, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace tagflow::testing {
namespace {

using namespace std::chrono_literals;

/// Runs `call` with every allocation of this thread failing; true when it
/// threw std::bad_alloc, false when it needed no memory and succeeded.
template <typename F>
bool fails_without_memory(F&& call) {
  t_out_of_memory = true;
  try {
    call();
  } catch (const std::bad_alloc&) {
    t_out_of_memory = false;
    return true;
  } catch (...) {
    t_out_of_memory = false;
    throw;
  }
  t_out_of_memory = false;
  return false;
}

/// Holds the operations pushed after it on `vars` until opened.
class Gate {
 public:
  Gate(Engine& engine, const std::vector<VarHandle>& vars) {
    Operation op{.name = "gate", .fn = [this](const RunContext&) {
                   while (!open_.load()) std::this_thread::sleep_for(100us);
                 }};
    for (VarHandle v : vars) op.writes.push_back(v);
    engine.push(std::move(op));
  }
  void open() { open_ = true; }

 private:
  std::atomic<bool> open_{false};
};

class AllocationFailureTest : public EngineTest {};

TEST_P(AllocationFailureTest, AReadThatCannotGrowItsReaderListIsNotPushed) {
  // Held behind a writer, the readers pile up on the variable: the fourth
  // outgrows the reader list's inline room, and that allocation fails.
  run_with_timeout(60s, [&] {
    Engine& e = *engine_;
    VarHandle v = e.new_var();
    std::atomic<int> ran{0};
    std::atomic<bool> fourth_ran{false};
    Gate gate(e, {v});
    for (int i = 0; i < 3; ++i) {
      e.push({.name = "reader", .reads = {v}, .fn = [&](const RunContext&) { ++ran; }});
    }
    Operation fourth{
        .name = "reader", .reads = {v}, .fn = [&](const RunContext&) { fourth_ran = true; }};
    const OperationCounts before = e.operation_counts();
    const bool failed = fails_without_memory([&] { e.push(std::move(fourth)); });
    EXPECT_TRUE(failed) << "the reader list's growth allocates";
    EXPECT_EQ(e.operation_counts().pushed, before.pushed) << "a push that threw was counted";
    gate.open();
    e.wait_for_all();  // a half-linked push would hold it forever
    EXPECT_EQ(ran, 3);
    EXPECT_FALSE(fourth_ran);
    // The variable works on: a writer after the readers, a reader after it.
    int value = 0;
    e.push({.name = "write", .writes = {v}, .fn = [&](const RunContext&) { value = 7; }});
    int seen = 0;
    e.push({.name = "read", .reads = {v}, .fn = [&](const RunContext&) { seen = value; }});
    e.wait_to_read(v);
    e.wait_for_all();
    EXPECT_EQ(seen, 7);
    const OperationCounts after = e.operation_counts();
    EXPECT_EQ(after.pushed, after.completed);
    e.delete_var(v);
  });
}

TEST_P(AllocationFailureTest, PushesThatRunOutOfMemoryChangeNothing) {
  // Random operations on a few variables, piled up behind a gate so that
  // reader lists grow and earlier operations' successor slots overflow; a
  // third of them pushed with every allocation failing. The cells must end
  // as a serial loop over exactly the pushes that did not throw leaves them.
  run_with_timeout(100s, [&] {
    Engine& e = *engine_;
    constexpr int kVars = 6;
    constexpr int kRounds = 6;
    constexpr int kOps = 300;
    std::vector<VarHandle> vars;
    for (int i = 0; i < kVars; ++i) vars.push_back(e.new_var());
    std::vector<std::uint64_t> cells(kVars, 1), expected(kVars, 1);
    std::mt19937_64 random(1234);
    int failures = 0;
    std::uint64_t pushed = 0;
    for (int round = 0; round < kRounds; ++round) {
      Gate gate(e, vars);
      ++pushed;
      for (int i = 0; i < kOps; ++i) {
        std::vector<int> reads, writes;
        for (int v = 0; v < kVars; ++v) {
          const auto roll = random() % 8;
          if (roll < 2) reads.push_back(v);
          if (roll == 2) writes.push_back(v);
        }
        if (writes.empty()) writes.push_back(static_cast<int>(random() % kVars));
        const auto tag = static_cast<std::uint64_t>(round * kOps + i);
        auto body = [&cells, reads, writes, tag] {
          std::uint64_t sum = tag;
          for (int r : reads) sum += cells[static_cast<std::size_t>(r)];
          for (int w : writes) {
            auto& cell = cells[static_cast<std::size_t>(w)];
            cell = cell * 31 + sum;
          }
        };
        Operation op{.name = "op", .ctx = cpu(i % 2), .fn = [body](const RunContext&) { body(); }};
        for (int r : reads) op.reads.push_back(vars[static_cast<std::size_t>(r)]);
        for (int w : writes) op.writes.push_back(vars[static_cast<std::size_t>(w)]);
        const OperationCounts before = e.operation_counts();
        bool failed = false;
        if (random() % 3 == 0) {
          failed = fails_without_memory([&] { e.push(std::move(op)); });
        } else {
          e.push(std::move(op));
        }
        if (failed) {
          ++failures;
          ASSERT_EQ(e.operation_counts().pushed, before.pushed) << "a push that threw was counted";
          continue;
        }
        ++pushed;
        std::uint64_t sum = tag;  // the serial loop
        for (int r : reads) sum += expected[static_cast<std::size_t>(r)];
        for (int w : writes) {
          auto& cell = expected[static_cast<std::size_t>(w)];
          cell = cell * 31 + sum;
        }
      }
      gate.open();
      e.wait_for_all();
    }
    EXPECT_EQ(cells, expected);
    const OperationCounts counts = e.operation_counts();
    EXPECT_EQ(counts.completed, counts.pushed);
    EXPECT_EQ(counts.pushed, pushed);
    EXPECT_GT(failures, 0) << "no push needed memory: the test did not test";
    for (VarHandle v : vars) e.delete_var(v);
  });
}

TEST_P(AllocationFailureTest, AWaitOrDeletionWithoutMemoryLeavesTheVariableAsItWas) {
  run_with_timeout(60s, [&] {
    Engine& e = *engine_;
    VarHandle v = e.new_var();
    int value = 0;
    {
      // A deletion behind a writer and a reader needs an operation of its own.
      Gate gate(e, {v});
      e.push({.name = "write", .writes = {v}, .fn = [&](const RunContext&) { value = 1; }});
      e.push({.name = "read", .reads = {v}, .fn = [](const RunContext&) {}});
      bool deleter_ran = false;
      const bool failed =
          fails_without_memory([&] { e.delete_var(v, [&deleter_ran] { deleter_ran = true; }); });
      gate.open();
      e.wait_for_all();
      if (!failed) {
        EXPECT_TRUE(deleter_ran);
        EXPECT_THROW(e.wait_to_read(v), StaleVariableError);
        v = e.new_var();
      } else {
        EXPECT_FALSE(deleter_ran);
      }
    }
    // The handle is live: a wait without memory either throws or waits, and
    // the variable takes more work either way.
    e.push({.name = "write", .writes = {v}, .fn = [&](const RunContext&) { value = 2; }});
    fails_without_memory([&] { e.wait_to_read(v); });  // either outcome keeps the variable
    e.push({.name = "write", .writes = {v}, .fn = [&](const RunContext&) { value = 3; }});
    e.wait_to_read(v);
    EXPECT_EQ(value, 3);
    e.wait_for_all();
    const OperationCounts counts = e.operation_counts();
    EXPECT_EQ(counts.completed, counts.pushed);
    e.delete_var(v);
    e.wait_for_all();
  });
}

std::unique_ptr<Engine> make_naive_engine() {
  EngineConfig config = EngineConfig::defaults();
  config.kind = EngineKind::kNaive;
  config.sim_gpus = 0;
  return make_engine(config);
}

TEST(NaiveEngineAllocationFailure, APushDeferredInsideAnOperationWithoutMemoryIsNotPushed) {
  // The naive engine runs a push at once, in the pushing thread (and an
  // operation that runs out of memory fails like any other); a push from
  // inside an operation is queued to run after it, and that queueing is
  // what may need memory here.
  run_with_timeout(60s, [] {
    auto engine = make_naive_engine();
    Engine& e = *engine;
    VarHandle v = e.new_var();
    std::vector<int> order;
    int failed = 0;
    e.push({.name = "parent", .writes = {v}, .fn = [&](const RunContext&) {
              for (int i = 0; i < 64; ++i) {
                Operation child{.name = "child",
                                .writes = {v},
                                .fn = [&order, i](const RunContext&) { order.push_back(i); }};
                if (fails_without_memory([&] { e.push(std::move(child)); })) ++failed;
              }
            }});
    e.wait_for_all();
    EXPECT_GT(failed, 0) << "no push needed memory: the test did not test";
    EXPECT_EQ(order.size(), static_cast<std::size_t>(64 - failed));
    for (std::size_t i = 1; i < order.size(); ++i) EXPECT_LT(order[i - 1], order[i]);
    const OperationCounts counts = e.operation_counts();
    EXPECT_EQ(counts.completed, counts.pushed);
    EXPECT_EQ(counts.pushed, static_cast<std::uint64_t>(1 + 64 - failed));
    e.delete_var(v);
  });
}

TEST(NaiveEngineAllocationFailure, ALentHolderWithoutMemoryStillAwaitsTheCompletion) {
  // While an asynchronous operation awaits its Completion, the naive
  // engine's thread runs what the completing thread waits for (Note
  // [Lending the naive engine]); the bookkeeping of that may need memory.
  // Without it, the operation still completes only when its Completion
  // comes, and what the completing thread waits for still runs.
  run_with_timeout(60s, [] {
    auto engine = make_naive_engine();
    Engine& e = *engine;
    VarHandle x = e.new_var();
    VarHandle w = e.new_var();
    for (int failures = 1; failures <= 3; ++failures) {
      SCOPED_TRACE(::testing::Message() << failures << " allocations failing");
      std::atomic<bool> done_called{false};
      std::atomic<bool> w_seen{false};
      std::thread completer;
      e.push({.name = "async",
              .ctx = cpu(0),
              .writes = {x},
              .fn = [&](const RunContext&, Completion done) {
                completer = std::thread([&, done = std::move(done)]() mutable {
                  std::this_thread::sleep_for(20ms);  // the engine's thread awaits by now
                  e.push(
                      {.name = "w", .ctx = cpu(1), .writes = {w}, .fn = [](const RunContext&) {}});
                  try {
                    e.wait_to_read(w);
                  } catch (const std::bad_alloc&) {  // "w" met the failures itself
                  }
                  w_seen.store(true);
                  std::this_thread::sleep_for(20ms);
                  done_called.store(true);
                  done.done();
                });
                t_failures_left = failures;  // this thread's next ones: its await's
              }});
      EXPECT_LT(t_failures_left, failures) << "no allocation failed: the test did not test";
      t_failures_left = 0;
      EXPECT_TRUE(done_called.load()) << "the push returned before the Completion came";
      EXPECT_TRUE(w_seen.load());
      completer.join();
      try {
        e.wait_to_read(x);
      } catch (const std::bad_alloc&) {  // the bookkeeping's failure, reported on x
      }
    }
    e.delete_var(x);
    e.delete_var(w);
  });
}

// Threaded engines only: the naive engine runs each push in the pushing
// thread, where the operation itself would meet the failing allocations.
INSTANTIATE_TEST_SUITE_P(Engines, AllocationFailureTest,
                         ::testing::Values(EngineParam{"threaded1", EngineKind::kThreaded, 1},
                                           EngineParam{"threaded2", EngineKind::kThreaded, 2},
                                           EngineParam{"threaded4", EngineKind::kThreaded, 4}),
                         engine_param_name);

}  // namespace
}  // namespace tagflow::testing
