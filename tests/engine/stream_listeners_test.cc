// The listeners of a CUDA stream's destruction and PerStreamHandles
// (engine/detail/stream_listeners.h), without a GPU: fake streams (distinct
// addresses) and fake handles (integers). A handle is made once per (device,
// stream), a stream's destruction destroys exactly its handle, the same
// stream value on another device is another stream, and a value that comes
// back after its stream was destroyed gets a new handle. Concurrent use is
// checked against a serial count.

#include "engine/detail/stream_listeners.h"

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace tagflow::testing {
namespace {

using detail::notify_cuda_stream_destroyed;
using detail::on_cuda_stream_destroyed;
using detail::PerStreamHandles;

/// A fake native stream: a unique address no real stream has.
void* fake_stream(int i) {
  static auto* slots = new std::vector<char>(4096);
  return slots->data() + i;
}

/// What the handle maps of these tests made and destroyed. One per test
/// (a map's destroy function is a plain function pointer, so it is global).
struct Ledger {
  std::mutex mutex;
  std::vector<std::pair<int, int>> destroyed;  // (device, handle)
  std::atomic<int> made{0};
};
Ledger& ledger() {
  static auto* ledger = new Ledger;
  return *ledger;
}
void destroy_fake(int device, int handle) {
  std::lock_guard lock(ledger().mutex);
  ledger().destroyed.emplace_back(device, handle);
}

/// A new handle map: like the library's, made with `new` and never deleted
/// (its listener stays registered).
PerStreamHandles<int>& new_map() { return *new PerStreamHandles<int>(&destroy_fake); }

int make_handle() { return ++ledger().made; }

TEST(StreamListenersTest, ListenersAreCalledInOrderWithDeviceAndStream) {
  auto calls = std::make_shared<std::vector<std::pair<int, void*>>>();
  auto order = std::make_shared<std::vector<int>>();
  on_cuda_stream_destroyed([calls, order](int device, void* stream) {
    calls->emplace_back(device, stream);
    order->push_back(1);
  });
  on_cuda_stream_destroyed([order](int, void*) { order->push_back(2); });
  notify_cuda_stream_destroyed(3, fake_stream(10));
  ASSERT_EQ(calls->size(), 1u);
  EXPECT_EQ((*calls)[0], std::make_pair(3, fake_stream(10)));
  EXPECT_EQ(*order, (std::vector<int>{1, 2}));
}

TEST(StreamListenersTest, AThrowingListenerDoesNotStopTheOthers) {
  auto reached = std::make_shared<int>(0);
  on_cuda_stream_destroyed([](int, void*) { throw std::runtime_error("listener failed"); });
  on_cuda_stream_destroyed([reached](int, void*) { ++*reached; });
  notify_cuda_stream_destroyed(0, fake_stream(11));  // noexcept: must not terminate
  EXPECT_EQ(*reached, 1);
}

TEST(StreamListenersTest, OneHandlePerDeviceAndStreamDestroyedWithItsStream) {
  PerStreamHandles<int>& map = new_map();
  void* const s = fake_stream(20);
  void* const t = fake_stream(21);
  const int a = map.get(0, s, make_handle);
  EXPECT_EQ(map.get(0, s, []() -> int { throw std::logic_error("made twice"); }), a);
  const int b = map.get(0, t, make_handle);
  const int c = map.get(1, s, make_handle);  // the same value on another GPU: another stream
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_NE(b, c);
  EXPECT_EQ(map.size(), 3u);

  {
    std::lock_guard lock(ledger().mutex);
    ledger().destroyed.clear();
  }
  notify_cuda_stream_destroyed(0, s);  // what ~CudaStream does
  {
    std::lock_guard lock(ledger().mutex);
    EXPECT_EQ(ledger().destroyed, (std::vector<std::pair<int, int>>{{0, a}}));
  }
  EXPECT_EQ(map.size(), 2u);
  EXPECT_EQ(map.get(0, t, make_handle), b);
  EXPECT_EQ(map.get(1, s, make_handle), c);

  // The value comes back for a new stream of gpu(0): a new handle, not the dead one.
  const int again = map.get(0, s, make_handle);
  EXPECT_NE(again, a);
  EXPECT_EQ(map.size(), 3u);

  // A stream that never had a handle: nothing destroyed.
  {
    std::lock_guard lock(ledger().mutex);
    ledger().destroyed.clear();
  }
  notify_cuda_stream_destroyed(2, fake_stream(22));
  {
    std::lock_guard lock(ledger().mutex);
    EXPECT_TRUE(ledger().destroyed.empty());
  }
}

TEST(StreamListenersTest, EveryMapForgetsTheStream) {
  PerStreamHandles<int>& blas = new_map();
  PerStreamHandles<int>& dnn = new_map();
  void* const s = fake_stream(30);
  const int a = blas.get(4, s, make_handle);
  const int b = dnn.get(4, s, make_handle);
  {
    std::lock_guard lock(ledger().mutex);
    ledger().destroyed.clear();
  }
  notify_cuda_stream_destroyed(4, s);
  EXPECT_EQ(blas.size(), 0u);
  EXPECT_EQ(dnn.size(), 0u);
  std::lock_guard lock(ledger().mutex);
  EXPECT_EQ(ledger().destroyed, (std::vector<std::pair<int, int>>{{4, a}, {4, b}}));
}

TEST(StreamListenersTest, AFailedMakeKeepsNothing) {
  PerStreamHandles<int>& map = new_map();
  void* const s = fake_stream(40);
  EXPECT_THROW(map.get(0, s, []() -> int { throw std::runtime_error("cublasCreate failed"); }),
               std::runtime_error);
  EXPECT_EQ(map.size(), 0u);
  const int made = map.get(0, s, make_handle);
  EXPECT_EQ(map.get(0, s, make_handle), made);
}

TEST(StreamListenersTest, ConcurrentUseAndDestructionAgreeWithASerialCount) {
  // Threads take handles for their own streams while streams of other
  // threads are destroyed: each (device, stream) is made once per life and
  // destroyed once, whatever the interleaving.
  PerStreamHandles<int>& map = new_map();
  constexpr int kThreads = 4;
  constexpr int kRounds = 200;
  std::atomic<int> destroyed_here{0};
  auto counter = std::make_shared<std::atomic<int>>(0);
  on_cuda_stream_destroyed([counter](int device, void*) {
    if (device >= 100) ++*counter;  // only this test's devices
  });
  std::vector<std::thread> threads;
  const int made_before = ledger().made.load();
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      void* const s = fake_stream(100 + t);
      for (int r = 0; r < kRounds; ++r) {
        const int first = map.get(100 + t, s, make_handle);
        EXPECT_EQ(map.get(100 + t, s, make_handle), first);
        notify_cuda_stream_destroyed(100 + t, s);
        ++destroyed_here;
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(map.size(), 0u);
  EXPECT_EQ(counter->load(), kThreads * kRounds);
  EXPECT_EQ(destroyed_here.load(), kThreads * kRounds);
  // One handle made per stream life here (other maps made none meanwhile).
  EXPECT_EQ(ledger().made.load() - made_before, kThreads * kRounds);
}

}  // namespace
}  // namespace tagflow::testing
