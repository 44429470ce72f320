// Tests of detail::SimStream, the simulated GPU stream: in-order host work,
// marks (record / finished / synchronize), device-side waits between streams,
// when_finished callbacks, the sticky error, and destruction with work
// pending. Streams are held with a host function blocked on a Gate, so "not
// yet" is checked while the stream provably cannot progress. Every test runs
// under a watchdog: a hang aborts with the test's name.

#include "engine/detail/sim_stream.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "engine/detail/sim_runtime.h"
#include "engine/engine.h"
#include "tests/engine/watchdog.h"

namespace tagflow::detail {
namespace {

using namespace std::chrono_literals;

using testing::run_with_timeout;

constexpr auto kLimit = 30s;
/// How long a "has not happened yet" check gives the stream to misbehave.
constexpr auto kSettle = 50ms;

/// Holds a stream: `hold()` is a host function that blocks until `open()`.
/// Opens itself when destroyed, so a failed assertion never leaves a stream
/// blocked (declare it after the streams it holds).
class Gate {
 public:
  Gate() : opened_(promise_.get_future().share()) {}
  ~Gate() { open(); }
  Gate(const Gate&) = delete;
  Gate& operator=(const Gate&) = delete;

  Stream::HostFunction hold() {
    return [opened = opened_, entered = entered_] {
      entered->store(true);
      opened.wait();
    };
  }
  void open() {
    std::call_once(once_, [this] { promise_.set_value(); });
  }
  /// True once the stream has reached the blocking host function.
  bool entered() const { return entered_->load(); }

 private:
  std::promise<void> promise_;
  std::shared_future<void> opened_;
  std::shared_ptr<std::atomic<bool>> entered_ = std::make_shared<std::atomic<bool>>(false);
  std::once_flag once_;
};

/// Enqueues host work as the engine's workers do, from a thread whose
/// current device is the stream's (not needed for host work, but the habit
/// kernels need: Note [Simulated CUDA rules]).
void launch(Stream& stream, Stream::HostFunction fn) {
  const sim::ScopedDevice on_device(stream.context().index);
  stream.enqueue_host(std::move(fn));
}

/// Signals from a stream's thread (a host function or a callback) to the test.
class Signal {
 public:
  void set() {
    std::call_once(once_, [this] { promise_.set_value(); });
  }
  /// True if set within `limit`.
  bool wait_for(std::chrono::milliseconds limit = 5000ms) {
    return future_.wait_for(limit) == std::future_status::ready;
  }

 private:
  std::promise<void> promise_;
  std::shared_future<void> future_ = promise_.get_future().share();
  std::once_flag once_;
};

TEST(SimStream, RunsHostWorkInEnqueueOrder) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    EXPECT_EQ(stream.context(), gpu(0));
    EXPECT_EQ(stream.kind(), QueueKind::kCompute);
    EXPECT_EQ(stream.native_handle(), nullptr);
    std::vector<int> order;  // touched only by the stream's thread until synchronize
    constexpr int kN = 2000;
    for (int i = 0; i < kN; ++i) launch(stream, [&order, i] { order.push_back(i); });
    stream.synchronize(stream.record());
    ASSERT_EQ(order.size(), static_cast<std::size_t>(kN));
    for (int i = 0; i < kN; ++i) ASSERT_EQ(order[static_cast<std::size_t>(i)], i);
  });
}

TEST(SimStream, KeepsEachEnqueuingThreadsOrder) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCopy);
    constexpr int kThreads = 4;
    constexpr int kPerThread = 1000;
    std::vector<std::vector<int>> seen(kThreads);
    {
      std::vector<std::jthread> threads;
      for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&stream, &seen, t] {
          for (int i = 0; i < kPerThread; ++i) {
            launch(stream, [&seen, t, i] { seen[static_cast<std::size_t>(t)].push_back(i); });
          }
        });
      }
    }
    stream.synchronize(stream.record());
    for (int t = 0; t < kThreads; ++t) {
      const auto& s = seen[static_cast<std::size_t>(t)];
      ASSERT_EQ(s.size(), static_cast<std::size_t>(kPerThread)) << "thread " << t;
      for (int i = 0; i < kPerThread; ++i)
        ASSERT_EQ(s[static_cast<std::size_t>(i)], i) << "thread " << t;
    }
  });
}

TEST(SimStream, RecordReturnsStrictlyIncreasingMarks) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(1), QueueKind::kCompute);
    std::uint64_t previous = stream.record();  // a mark with nothing before it
    EXPECT_GT(previous, 0u) << "0 must not be a mark: finished(0) holds before any work";
    for (int i = 0; i < 100; ++i) {
      if (i % 3 == 0) launch(stream, [] {});
      const std::uint64_t seq = stream.record();
      EXPECT_GT(seq, previous);
      previous = seq;
    }
    stream.synchronize(previous);
    EXPECT_TRUE(stream.finished(previous));
  });
}

TEST(SimStream, MarkFinishesOnlyAfterAllEarlierWorkRan) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    Gate gate;
    const std::uint64_t before = stream.record();
    launch(stream, gate.hold());
    std::atomic<int> ran{0};
    constexpr int kN = 100;
    for (int i = 0; i < kN; ++i) launch(stream, [&ran] { ran.fetch_add(1); });
    const std::uint64_t seq = stream.record();
    launch(stream, [] {});
    const std::uint64_t after = stream.record();

    stream.synchronize(before);
    EXPECT_TRUE(stream.finished(before));
    while (!gate.entered()) std::this_thread::yield();
    std::this_thread::sleep_for(kSettle);
    EXPECT_FALSE(stream.finished(seq)) << "the stream is held before the mark";
    EXPECT_FALSE(stream.finished(after));
    EXPECT_EQ(ran.load(), 0);

    gate.open();
    stream.synchronize(seq);
    EXPECT_TRUE(stream.finished(seq));
    EXPECT_EQ(ran.load(), kN) << "synchronize returned before the work up to the mark ran";
    stream.synchronize(after);
    EXPECT_TRUE(stream.finished(after));
    EXPECT_TRUE(stream.finished(seq)) << "an earlier mark stays finished";
  });
}

TEST(SimStream, FinishedIsFalseInsideTheWorkBeforeTheMark) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    std::atomic<std::uint64_t> seq{0};
    std::atomic<int> finished_inside{-1};
    Gate gate;
    launch(stream, gate.hold());  // so `seq` is set before the next runs
    launch(stream, [&stream, &seq, &finished_inside] {
      finished_inside.store(stream.finished(seq.load()) ? 1 : 0);
    });
    seq.store(stream.record());
    gate.open();
    stream.synchronize(seq.load());
    EXPECT_EQ(finished_inside.load(), 0);
  });
}

TEST(SimStream, WaitDelaysLaterWorkUntilTheOtherStreamReachesTheMark) {
  run_with_timeout(kLimit, [] {
    SimStream other(gpu(0), QueueKind::kCopy);
    SimStream stream(gpu(1), QueueKind::kCompute);
    Gate gate;
    std::atomic<bool> other_work_done{false};
    std::atomic<bool> dependent_ran{false};
    std::atomic<bool> dependent_saw_other_done{false};
    std::atomic<bool> earlier_ran{false};

    launch(other, gate.hold());
    launch(other, [&other_work_done] { other_work_done.store(true); });
    const std::uint64_t other_seq = other.record();

    launch(stream, [&earlier_ran] { earlier_ran.store(true); });  // before the wait: not delayed
    stream.wait(other, other_seq);
    launch(stream, [&] {
      dependent_saw_other_done.store(other_work_done.load());
      dependent_ran.store(true);
    });
    const std::uint64_t seq = stream.record();

    while (!gate.entered()) std::this_thread::yield();
    std::this_thread::sleep_for(kSettle);
    EXPECT_TRUE(earlier_ran.load()) << "work enqueued before the wait was delayed";
    EXPECT_FALSE(dependent_ran.load())
        << "work after wait(other, seq) ran before other reached seq";
    EXPECT_FALSE(stream.finished(seq));

    gate.open();
    stream.synchronize(seq);
    EXPECT_TRUE(dependent_ran.load());
    EXPECT_TRUE(dependent_saw_other_done.load());
    EXPECT_TRUE(other.finished(other_seq));
  });
}

TEST(SimStream, WaitOnAFinishedMarkDoesNotDelay) {
  run_with_timeout(kLimit, [] {
    SimStream other(gpu(0), QueueKind::kCompute);
    SimStream stream(gpu(0), QueueKind::kCopy);
    const std::uint64_t done_seq = other.record();
    other.synchronize(done_seq);
    Gate gate;
    launch(other, gate.hold());  // other is now held past done_seq
    other.record();

    Signal ran;
    stream.wait(other, done_seq);
    launch(stream, [&ran] { ran.set(); });
    EXPECT_TRUE(ran.wait_for()) << "waiting on a mark already finished held the stream";
  });
}

TEST(SimStream, WaitOnItselfDoesNotDeadlock) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    launch(stream, [] {});
    const std::uint64_t seq = stream.record();
    stream.wait(stream, seq);
    std::atomic<bool> ran{false};
    launch(stream, [&ran] { ran.store(true); });
    stream.synchronize(stream.record());
    EXPECT_TRUE(ran.load());
  });
}

TEST(SimStream, WhenFinishedFiresOnceAfterTheMark) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    Gate gate;
    std::atomic<bool> work_done{false};
    launch(stream, gate.hold());
    launch(stream, [&work_done] { work_done.store(true); });
    const std::uint64_t seq = stream.record();

    std::atomic<int> calls{0};
    std::atomic<bool> saw_work_done{false};
    std::atomic<bool> saw_finished{false};
    Signal fired;
    stream.when_finished(seq, [&] {
      saw_work_done.store(work_done.load());
      saw_finished.store(stream.finished(seq));
      calls.fetch_add(1);
      fired.set();
    });
    while (!gate.entered()) std::this_thread::yield();
    std::this_thread::sleep_for(kSettle);
    EXPECT_EQ(calls.load(), 0) << "the callback fired before its mark finished";

    gate.open();
    ASSERT_TRUE(fired.wait_for());
    EXPECT_TRUE(saw_work_done.load());
    EXPECT_TRUE(saw_finished.load());
    // Later marks do not fire it again.
    for (int i = 0; i < 3; ++i) {
      launch(stream, [] {});
      stream.synchronize(stream.record());
    }
    EXPECT_EQ(calls.load(), 1);
  });
}

TEST(SimStream, WhenFinishedOnAFinishedMarkRunsAtOnceInTheCaller) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    const std::uint64_t seq = stream.record();
    stream.synchronize(seq);
    int calls = 0;
    std::thread::id ran_on;
    stream.when_finished(seq, [&] {
      ++calls;
      ran_on = std::this_thread::get_id();
    });
    EXPECT_EQ(calls, 1) << "not run before when_finished returned";
    EXPECT_EQ(ran_on, std::this_thread::get_id());
    stream.synchronize(stream.record());
    EXPECT_EQ(calls, 1);
  });
}

TEST(SimStream, CallbacksFireMarkByMarkInOrder) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(1), QueueKind::kCopy);
    Gate first;
    Gate second;
    launch(stream, first.hold());
    const std::uint64_t seq1 = stream.record();
    launch(stream, second.hold());
    const std::uint64_t seq2 = stream.record();

    std::mutex mutex;
    std::vector<int> fired;  // guarded by mutex
    auto note = [&](int which) {
      std::lock_guard lock(mutex);
      fired.push_back(which);
    };
    auto fired_now = [&] {
      std::lock_guard lock(mutex);
      return fired;
    };
    Signal first_fired;
    Signal all_fired;
    stream.when_finished(seq2, [&] {
      note(2);
      all_fired.set();
    });
    stream.when_finished(seq1, [&] {
      note(1);
      first_fired.set();
    });
    stream.when_finished(seq1, [&] { note(11); });

    first.open();
    ASSERT_TRUE(first_fired.wait_for());
    while (!second.entered()) std::this_thread::yield();
    std::this_thread::sleep_for(kSettle);
    // Both callbacks of the first mark, in either order; none of the second's.
    std::vector<int> so_far = fired_now();
    std::sort(so_far.begin(), so_far.end());
    EXPECT_EQ(so_far, (std::vector<int>{1, 11})) << "only the first mark's callbacks may fire";

    second.open();
    ASSERT_TRUE(all_fired.wait_for());
    stream.synchronize(stream.record());
    const std::vector<int> all = fired_now();
    ASSERT_EQ(all.size(), 3u) << "a callback fired twice or not at all";
    EXPECT_EQ(all.back(), 2);
  });
}

TEST(SimStream, HostWorkRunsAsAnEngineOperation) {
  // Waiting on the engine from stream work would deadlock like on a worker;
  // the stream thread is marked so such a wait is reported.
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    std::atomic<int> inside{-1};
    launch(stream, [&inside] { inside.store(inside_engine_operation() ? 1 : 0); });
    stream.synchronize(stream.record());
    EXPECT_EQ(inside.load(), 1);
    EXPECT_FALSE(inside_engine_operation()) << "the test thread is not an engine operation";
  });
}

TEST(SimStream, ThrownErrorIsStickyAndLaterWorkDoesNotRun) {
  run_with_timeout(kLimit, [] {
    SimStream stream(gpu(0), QueueKind::kCompute);
    const std::uint64_t before = stream.record();
    stream.synchronize(before);
    EXPECT_EQ(stream.error(), nullptr);

    // A simulated kernel that throws is a device fault (Note [Simulated CUDA
    // rules]): nothing after it runs, and every later mark carries it.
    std::atomic<int> after{0};
    Gate gate;  // everything is enqueued before the fault happens
    launch(stream, gate.hold());
    launch(stream, [] { throw std::runtime_error("first failure"); });
    launch(stream, [&after] { after.fetch_add(1); });
    launch(stream, [] { throw std::logic_error("second failure"); });
    const std::uint64_t seq = stream.record();
    gate.open();
    stream.synchronize(seq);
    EXPECT_TRUE(stream.finished(seq)) << "marks still finish, so that nobody waits forever";
    EXPECT_EQ(after.load(), 0) << "work after a device fault ran";
    EXPECT_EQ(stream.error_at(before), nullptr);

    std::exception_ptr error = stream.error();
    ASSERT_NE(error, nullptr);
    EXPECT_EQ(stream.error_at(seq), error);
    try {
      std::rethrow_exception(error);
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "first failure") << "the error must be the first one";
    } catch (...) {
      ADD_FAILURE() << "the sticky error is not the first exception thrown";
    }
    const std::uint64_t later = stream.record();
    stream.synchronize(later);
    EXPECT_EQ(stream.error_at(later), error);
    // New work is refused with the fault, as CUDA answers every call after one.
    EXPECT_THROW(launch(stream, [&after] { after.fetch_add(1); }), std::runtime_error);
    sim::reset_device(0);  // the device is process-wide: give it back clean
  });
}

TEST(SimStream, DestructionRunsPendingWorkFirst) {
  run_with_timeout(kLimit, [] {
    std::atomic<int> ran{0};
    std::atomic<int> callbacks{0};
    std::atomic<bool> waited_work_ran{false};
    constexpr int kN = 500;
    auto other = std::make_unique<SimStream>(gpu(1), QueueKind::kCompute);
    auto stream = std::make_unique<SimStream>(gpu(0), QueueKind::kCompute);
    Gate gate;
    Gate other_gate;
    launch(*stream, gate.hold());
    for (int i = 0; i < kN; ++i) launch(*stream, [&ran] { ran.fetch_add(1); });
    const std::uint64_t seq = stream->record();
    stream->when_finished(seq, [&callbacks] { callbacks.fetch_add(1); });
    // A pending device-side wait on another stream, itself held.
    launch(*other, other_gate.hold());
    const std::uint64_t other_seq = other->record();
    stream->wait(*other, other_seq);
    launch(*stream, [&waited_work_ran] { waited_work_ran.store(true); });
    stream->record();
    EXPECT_EQ(ran.load(), 0);

    // Released from another thread once the destructor is already waiting.
    std::jthread releaser([&gate, &other_gate] {
      std::this_thread::sleep_for(kSettle);
      gate.open();
      std::this_thread::sleep_for(kSettle);
      other_gate.open();
    });
    stream.reset();
    EXPECT_EQ(ran.load(), kN) << "the destructor returned before pending work ran";
    EXPECT_EQ(callbacks.load(), 1) << "a callback pending at destruction was lost";
    EXPECT_TRUE(waited_work_ran.load()) << "work behind a device-side wait was dropped";
    EXPECT_TRUE(other->finished(other_seq));
  });
}

TEST(SimStream, DestroyingAnIdleStreamDoesNotHang) {
  run_with_timeout(kLimit, [] {
    for (int i = 0; i < 50; ++i) {
      SimStream stream(gpu(0), i % 2 == 0 ? QueueKind::kCompute : QueueKind::kCopy);
      if (i % 3 == 0) launch(stream, [] {});
    }
  });
}

}  // namespace
}  // namespace tagflow::detail
