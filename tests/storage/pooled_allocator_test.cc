// PooledAllocator on a counting device: size classes, reuse without device
// allocations, statistics computed by hand, the out-of-memory path,
// concurrent use, and nothing going back to the device while a gate counts
// collectives in flight (Note [No release during collectives]).

#include "storage/detail/pooled_allocator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/watchdog.h"

namespace tagflow::detail {
namespace {

using namespace std::chrono_literals;

/// Host memory that counts what it hands out and can run out. Given a gate,
/// it also counts the releases made while the gate had collectives in flight.
class CountingMemory final : public DeviceMemory {
 public:
  struct Counters {
    std::atomic<int> allocated{0};
    std::atomic<int> released{0};
    std::atomic<std::uint64_t> held{0};
    std::uint64_t capacity = 0;  // 0: unlimited
    const ReleaseGate* gate = nullptr;
    std::atomic<int> released_during_collectives{0};
  };
  explicit CountingMemory(Counters& c) : c_(c) {}
  void* allocate(std::uint64_t bytes) override {
    if (c_.capacity != 0 && c_.held + bytes > c_.capacity) return nullptr;
    ++c_.allocated;
    c_.held += bytes;
    return std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  void release(void* data, std::uint64_t bytes) noexcept override {
    if (c_.gate != nullptr && c_.gate->collectives_in_flight() != 0) {
      ++c_.released_during_collectives;
    }
    ++c_.released;
    c_.held -= bytes;
    std::free(data);
  }
  std::uint64_t capacity() const override { return c_.capacity; }

 private:
  Counters& c_;
};

TEST(PooledAllocatorTest, SizeClassesCoverTheRequestWastingAtMostAQuarter) {
  std::uint64_t previous = 0;
  for (std::uint64_t bytes = 1; bytes < (std::uint64_t{1} << 22); bytes += 1 + bytes / 7) {
    const std::uint64_t c = PooledAllocator::size_class(bytes);
    EXPECT_GE(c, bytes);
    EXPECT_GE(c, previous) << "classes must grow with the request";
    if (bytes > 512) {
      EXPECT_LE(static_cast<double>(c), 1.25 * static_cast<double>(bytes)) << bytes;
    } else {
      EXPECT_EQ(c, 512u);
    }
    previous = c;
  }
  EXPECT_EQ(PooledAllocator::size_class(1025), 1280u);
  EXPECT_EQ(PooledAllocator::size_class(2048), 2048u);
  EXPECT_EQ(PooledAllocator::size_class(2049), 2560u);
}

TEST(PooledAllocatorTest, ReleasedBlocksAreReusedWithoutDeviceAllocations) {
  CountingMemory::Counters counters;
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
  std::vector<MemoryBlock> blocks;
  for (int i = 0; i < 8; ++i) blocks.push_back(pool.allocate(1000));
  for (const MemoryBlock& b : blocks) std::memset(b.data, 0xab, 1000);  // usable
  for (const MemoryBlock& b : blocks) pool.release(b);
  EXPECT_EQ(counters.allocated.load(), 8);
  for (int iteration = 0; iteration < 100; ++iteration) {  // a training loop, steady state
    std::vector<MemoryBlock> again;
    for (int i = 0; i < 8; ++i) again.push_back(pool.allocate(900 + i * 10));  // same class
    for (const MemoryBlock& b : again) pool.release(b);
  }
  EXPECT_EQ(counters.allocated.load(), 8) << "steady state must not reach the device";
  const MemoryStats s = pool.stats();
  EXPECT_EQ(s.allocations, 8u + 800u);
  EXPECT_EQ(s.device_allocations, 8u);
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.cached, 8u * 1024u);
  EXPECT_EQ(s.peak, 8u * 1024u);
}

TEST(PooledAllocatorTest, StatisticsFollowEveryStep) {
  CountingMemory::Counters counters;
  PooledAllocator pool(gpu(1), std::make_unique<CountingMemory>(counters), 0);
  MemoryBlock a = pool.allocate(100);    // class 512
  MemoryBlock b = pool.allocate(5000);   // class 5120
  MemoryBlock c = pool.allocate(70000);  // class 81920
  EXPECT_EQ(a.size, 512u);
  EXPECT_EQ(b.size, 5120u);
  EXPECT_EQ(c.size, 81920u);
  EXPECT_EQ(pool.stats().in_use, 512u + 5120u + 81920u);
  pool.release(c);
  EXPECT_EQ(pool.stats().in_use, 512u + 5120u);
  EXPECT_EQ(pool.stats().cached, 81920u);
  EXPECT_EQ(pool.stats().peak, 512u + 5120u + 81920u);
  pool.reset_peak();
  EXPECT_EQ(pool.stats().peak, 512u + 5120u);
  pool.empty_cache();
  EXPECT_EQ(pool.stats().cached, 0u);
  EXPECT_EQ(counters.released.load(), 1);
  pool.release(a);
  pool.release(b);
  pool.empty_cache();
  EXPECT_EQ(counters.held.load(), 0u);
  EXPECT_EQ(pool.allocate(0).data, nullptr);
}

TEST(PooledAllocatorTest, OutOfMemoryReleasesTheCacheRetriesThenSaysWhy) {
  CountingMemory::Counters counters;
  counters.capacity = 1 << 20;  // a 1 MiB device
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
  MemoryBlock big = pool.allocate(600 * 1024);
  pool.release(big);                              // cached: the device is still 600 KiB full
  MemoryBlock other = pool.allocate(700 * 1024);  // another class: needs the cache back
  EXPECT_EQ(counters.released.load(), 1);
  EXPECT_EQ(pool.stats().cached, 0u);
  try {
    (void)pool.allocate(512 * 1024);
    FAIL() << "expected OutOfMemoryError";
  } catch (const OutOfMemoryError& e) {
    EXPECT_EQ(e.device(), gpu(0));
    EXPECT_EQ(e.requested(), 512u * 1024u);
    EXPECT_EQ(e.stats().in_use, other.size);
    const std::string text = e.what();
    EXPECT_NE(text.find("out of memory on gpu(0)"), std::string::npos) << text;
    EXPECT_NE(text.find("tried to allocate 512.0 KiB"), std::string::npos) << text;
    EXPECT_NE(text.find("768.0 KiB in use"), std::string::npos) << text;
    EXPECT_NE(text.find("0 B cached"), std::string::npos) << text;
    EXPECT_NE(text.find("device total 1.0 MiB"), std::string::npos) << text;
  }
  // Nothing was lost: the live block is intact and the pool still serves.
  pool.release(other);
  MemoryBlock again = pool.allocate(700 * 1024);
  EXPECT_EQ(again.data, other.data);
  pool.release(again);
}

TEST(PooledAllocatorTest, TheLimitCountsCachedBytesAndCanBeChanged) {
  CountingMemory::Counters counters;
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 64 * 1024);
  MemoryBlock a = pool.allocate(40 * 1024);
  EXPECT_THROW((void)pool.allocate(40 * 1024), OutOfMemoryError);
  try {
    (void)pool.allocate(40 * 1024);
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("limit 64.0 KiB"), std::string::npos) << e.what();
  }
  pool.set_limit(0);
  MemoryBlock b = pool.allocate(40 * 1024);
  pool.release(a);
  pool.release(b);
}

/// Runs `threads` threads that each allocate `steps` blocks of 64 bytes to
/// 64 + `spread` bytes, keep the last `live` ones, stamp every byte of each
/// with their number and check the stamp before releasing it; returns how
/// many blocks were found overwritten (handed to two threads at once).
int stamped_blocks_overwritten(PooledAllocator& pool, int threads, int steps, std::size_t live,
                               int spread) {
  std::atomic<int> overlaps{0};
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      const auto stamp = static_cast<unsigned char>(t + 1);
      auto intact = [&](const MemoryBlock& b) {
        const auto* bytes = static_cast<const unsigned char*>(b.data);
        return bytes[0] == stamp && bytes[b.size / 2] == stamp && bytes[b.size - 1] == stamp;
      };
      std::vector<MemoryBlock> mine;
      for (int i = 0; i < steps; ++i) {
        const std::uint64_t bytes = 64 + static_cast<std::uint64_t>((i * 131 + t * 101) % spread);
        MemoryBlock b = pool.allocate(bytes);
        std::memset(b.data, stamp, b.size);
        mine.push_back(b);
        if (mine.size() > live) {
          if (!intact(mine.front())) ++overlaps;
          pool.release(mine.front());
          mine.erase(mine.begin());
        }
      }
      for (const MemoryBlock& b : mine) {
        if (!intact(b)) ++overlaps;
        pool.release(b);
      }
    });
  }
  for (auto& th : running) th.join();
  return overlaps.load();
}

TEST(PooledAllocatorTest, ManyThreadsAllocateAndReleaseConcurrently) {
  CountingMemory::Counters counters;
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
  constexpr int kThreads = 8;
  EXPECT_EQ(stamped_blocks_overwritten(pool, kThreads, 2000, 16, 9000), 0);
  const MemoryStats s = pool.stats();
  EXPECT_EQ(s.in_use, 0u);
  EXPECT_EQ(s.allocations, static_cast<std::uint64_t>(kThreads) * 2000u);
  EXPECT_LT(s.device_allocations, s.allocations / 10) << "the pool must serve most requests";
}

// Note [Per-thread magazines]: one thread allocates every block and another
// releases it, as a pushing thread and a worker do. The blocks must come
// back to the allocating thread through the shared lists (not from the
// device each time), and the statistics must be exact at the end.
TEST(PooledAllocatorTest, BlocksReleasedOnAnotherThreadComeBackToTheAllocatingOne) {
  testing::run_with_timeout(30s, [] {
    CountingMemory::Counters counters;
    PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
    constexpr int kBlocks = 20000;
    constexpr int kInFlight = 8;
    std::vector<MemoryBlock> handed(kBlocks);
    std::atomic<int> made{0};
    std::atomic<int> released{0};
    std::thread releaser([&] {
      for (int i = 0; i < kBlocks; ++i) {
        while (made.load(std::memory_order_acquire) <= i) std::this_thread::yield();
        const MemoryBlock& b = handed[static_cast<std::size_t>(i)];
        EXPECT_EQ(static_cast<unsigned char*>(b.data)[0], static_cast<unsigned char>(i));
        pool.release(b);
        released.store(i + 1, std::memory_order_release);
      }
    });
    for (int i = 0; i < kBlocks; ++i) {
      // At most kInFlight blocks live at once, as with arrays dropped in a loop.
      while (i - released.load(std::memory_order_acquire) >= kInFlight) std::this_thread::yield();
      MemoryBlock b = pool.allocate(100 + static_cast<std::uint64_t>(i % 300));  // class 512
      std::memset(b.data, static_cast<unsigned char>(i), b.size);
      handed[static_cast<std::size_t>(i)] = b;
      made.store(i + 1, std::memory_order_release);
    }
    releaser.join();
    const MemoryStats s = pool.stats();
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.allocations, static_cast<std::uint64_t>(kBlocks));
    EXPECT_EQ(s.cached, s.device_allocations * 512u);
    EXPECT_EQ(static_cast<std::uint64_t>(counters.allocated.load()), s.device_allocations);
    // Two magazines and the blocks in flight: about a hundred, not 20,000.
    EXPECT_LT(s.device_allocations, 200u) << "released blocks must reach the allocating thread";
    // Exact within the other thread's unposted bytes (Note [Figures of the
    // magazines]): under 64 KiB.
    EXPECT_GE(s.peak, 512u);
    EXPECT_LE(s.peak, 512u * (kInFlight + 1) + 64u * 1024u);
    pool.empty_cache();
    EXPECT_EQ(pool.stats().cached, 0u);
    EXPECT_EQ(counters.held.load(), 0u) << "empty_cache must take the magazines' blocks too";
  });
}

/// Runs each job given to it on one thread that lives as long as it does,
/// and waits for the job: a worker that releases what another thread made.
class ReleasingThread {
 public:
  ReleasingThread()
      : thread_([this] {
          std::unique_lock lock(mutex_);
          for (;;) {
            cv_.wait(lock, [&] { return stop_ || job_; });
            if (!job_) return;
            job_();
            job_ = nullptr;
            cv_.notify_all();
          }
        }) {}
  ~ReleasingThread() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void run(std::function<void()> job) {
    std::unique_lock lock(mutex_);
    job_ = std::move(job);
    cv_.notify_all();
    cv_.wait(lock, [&] { return !job_; });
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool stop_ = false;
  std::thread thread_;
};

// One thread allocates, another releases, under a limit of 16 blocks and
// with a collective in flight (so the cache cannot go back to the device):
// the allocating thread must find the released blocks in the other thread's
// magazine instead of asking the device, or it runs out of memory with one
// block live.
TEST(PooledAllocatorTest, UnderALimitBlocksReleasedElsewhereAreReusedNotRequestedAgain) {
  testing::run_with_timeout(30s, [] {
    for (const bool collective : {false, true}) {
      CountingMemory::Counters counters;
      ReleaseGate gate;
      PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 16 * 4096, 0, &gate);
      ReleasingThread releaser;
      if (collective) gate.collective_began();
      for (int i = 0; i < 1000; ++i) {
        MemoryBlock b;
        ASSERT_NO_THROW(b = pool.allocate(4000))
            << "request " << i << ", collective " << collective;
        releaser.run([&] { pool.release(b); });
      }
      if (collective) gate.collective_ended();
      const MemoryStats s = pool.stats();
      EXPECT_EQ(s.in_use, 0u);
      EXPECT_EQ(s.allocations, 1000u);
      EXPECT_LE(s.device_allocations, 2u) << "collective " << collective;
      EXPECT_EQ(counters.released.load(), 0) << "nothing had to go back to make room";
    }
  });
}

// With one thread the peak is exact, whether blocks come from its magazine
// or from the device, before and after reset_peak (Note [Figures of the
// magazines]).
TEST(PooledAllocatorTest, OneThreadsPeakIsExact) {
  CountingMemory::Counters counters;
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
  std::vector<MemoryBlock> small;
  for (int i = 0; i < 128; ++i) small.push_back(pool.allocate(512));
  for (const MemoryBlock& b : small) pool.release(b);
  small.clear();
  for (int i = 0; i < 127; ++i) small.push_back(pool.allocate(512));  // from the magazine
  MemoryBlock big = pool.allocate(1 << 20);                           // from the device
  pool.release(big);  // the peak is now past: stats() cannot take it from in_use
  EXPECT_EQ(pool.stats().peak, 127u * 512u + (1u << 20));
  for (int i = 0; i < 126; ++i) pool.release(small[static_cast<std::size_t>(i)]);
  pool.reset_peak();
  EXPECT_EQ(pool.stats().peak, 512u);
  big = pool.allocate(1 << 20);
  EXPECT_EQ(pool.stats().in_use, 512u + (1u << 20));
  pool.release(big);
  EXPECT_EQ(pool.stats().peak, 512u + (1u << 20));
  pool.release(small[126]);
  EXPECT_EQ(pool.stats().in_use, 0u);
}

// Blocks left in the magazine of a thread that has ended are still cached:
// counted, handed back by empty_cache, and released when a request needs room.
TEST(PooledAllocatorTest, BlocksInTheMagazineOfAnEndedThreadAreReleasedWhenNeeded) {
  CountingMemory::Counters counters;
  counters.capacity = 64 * 1024;
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
  std::thread([&] {
    std::vector<MemoryBlock> blocks;
    for (int i = 0; i < 16; ++i) blocks.push_back(pool.allocate(4096));
    for (const MemoryBlock& b : blocks) pool.release(b);
  }).join();
  EXPECT_EQ(pool.stats().cached, 16u * 4096u);
  EXPECT_EQ(pool.stats().in_use, 0u);
  // Another class, larger than what is left: only the cached blocks make room.
  MemoryBlock big = pool.allocate(40 * 1024);
  EXPECT_EQ(pool.stats().cached, 0u);
  EXPECT_EQ(counters.held.load(), big.size);
  pool.release(big);
  std::thread([&] {
    for (int i = 0; i < 3; ++i) pool.release(pool.allocate(2000));
  }).join();
  pool.empty_cache();
  EXPECT_EQ(counters.held.load(), 0u);
  EXPECT_EQ(pool.stats().cached, 0u);
  EXPECT_EQ(pool.stats().allocations, 16u + 1u + 3u);
}

// More threads than magazines: threads share them, and nothing is handed
// to two threads at once.
TEST(PooledAllocatorTest, MoreThreadsThanMagazinesShareThem) {
  testing::run_with_timeout(60s, [] {
    CountingMemory::Counters counters;
    PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0);
    constexpr int kThreads = 150;
    EXPECT_EQ(stamped_blocks_overwritten(pool, kThreads, 300, 4, 20000), 0);
    const MemoryStats s = pool.stats();
    EXPECT_EQ(s.in_use, 0u);
    EXPECT_EQ(s.allocations, static_cast<std::uint64_t>(kThreads) * 300u);
    pool.empty_cache();
    EXPECT_EQ(counters.held.load(), 0u);
  });
}

TEST(PooledAllocatorTest, EmptyCacheWaitsForNoCollectiveAndReleasesOnceTheLastEnds) {
  testing::run_with_timeout(10s, [] {
    ReleaseGate gate;
    CountingMemory::Counters counters;
    counters.gate = &gate;
    PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0, 0, &gate);
    std::vector<MemoryBlock> blocks;
    for (int i = 0; i < 4; ++i) blocks.push_back(pool.allocate(3000));  // class 3072
    for (const MemoryBlock& b : blocks) pool.release(b);
    gate.collective_began();
    gate.collective_began();
    pool.empty_cache();  // returns at once
    EXPECT_EQ(counters.released.load(), 0);
    EXPECT_EQ(pool.stats().cached, 4u * 3072u);
    MemoryBlock reused = pool.allocate(3000);  // the cache still serves
    EXPECT_EQ(counters.allocated.load(), 4);
    gate.collective_ended();
    EXPECT_EQ(counters.released.load(), 0) << "a collective is still in flight";
    gate.collective_ended();
    EXPECT_EQ(counters.released.load(), 3) << "the cache goes back once the last one ended";
    EXPECT_EQ(pool.stats().cached, 0u);
    EXPECT_EQ(pool.stats().in_use, 3072u);
    pool.release(reused);
    pool.empty_cache();  // no collective in flight: at once
    EXPECT_EQ(counters.released.load(), 4);
    EXPECT_EQ(counters.held.load(), 0u);
    EXPECT_EQ(counters.released_during_collectives.load(), 0);
  });
}

TEST(PooledAllocatorTest, OutOfMemoryKeepsTheCacheWhileACollectiveIsInFlightAndSaysSo) {
  testing::run_with_timeout(10s, [] {
    ReleaseGate gate;
    CountingMemory::Counters counters;
    counters.capacity = 1 << 20;  // a 1 MiB device
    counters.gate = &gate;
    PooledAllocator pool(gpu(1), std::make_unique<CountingMemory>(counters), 0, 0, &gate);
    MemoryBlock big = pool.allocate(600 * 1024);
    pool.release(big);  // cached: the device is still 600 KiB full
    gate.collective_began();
    try {
      (void)pool.allocate(700 * 1024);  // needs the cache back: refused, not waited for
      ADD_FAILURE() << "expected OutOfMemoryError";
    } catch (const OutOfMemoryError& e) {
      EXPECT_EQ(e.collectives_in_flight(), 1u);
      EXPECT_EQ(e.stats().cached, big.size);
      const std::string text = e.what();
      EXPECT_NE(text.find("out of memory on gpu(1): tried to allocate 700.0 KiB"),
                std::string::npos)
          << text;
      EXPECT_NE(text.find("640.0 KiB cached (kept: 1 collective in flight"), std::string::npos)
          << text;
    }
    EXPECT_EQ(counters.released.load(), 0);
    EXPECT_EQ(pool.stats().cached, big.size);
    gate.collective_ended();  // the failed request put the release off until now
    EXPECT_EQ(counters.released.load(), 1);
    EXPECT_EQ(pool.stats().cached, 0u);
    MemoryBlock other = pool.allocate(700 * 1024);
    EXPECT_NE(other.data, nullptr);
    pool.release(other);
    EXPECT_EQ(counters.released_during_collectives.load(), 0);
  });
}

TEST(PooledAllocatorTest, UncachedBlocksAreHeldWhileACollectiveIsInFlight) {
  ReleaseGate gate;
  CountingMemory::Counters counters;
  counters.gate = &gate;
  PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0,
                       /*max_cached_block=*/4096, &gate);
  MemoryBlock large = pool.allocate(10000);  // not cached: sized to 64 bytes
  EXPECT_EQ(large.size, 10048u);
  gate.collective_began();
  pool.release(large);
  EXPECT_EQ(counters.released.load(), 0);
  EXPECT_EQ(pool.stats().in_use, 0u);
  EXPECT_EQ(pool.stats().cached, 10048u) << "held blocks count as cached";
  gate.collective_ended();
  EXPECT_EQ(counters.released.load(), 1);
  EXPECT_EQ(pool.stats().cached, 0u);
  MemoryBlock again = pool.allocate(10000);
  pool.release(again);  // nothing in flight: straight back
  EXPECT_EQ(counters.released.load(), 2);
  EXPECT_EQ(counters.released_during_collectives.load(), 0);
}

// Threads allocate from a small device (so requests often need the cache
// back) and empty the cache while another thread begins and ends
// collectives: no block goes back while one is in flight, nothing is lost,
// and the cache is empty once the last one has ended.
TEST(PooledAllocatorTest, NoReleaseOverlapsACollectiveUnderConcurrentUse) {
  testing::run_with_timeout(60s, [] {
    ReleaseGate gate;
    CountingMemory::Counters counters;
    counters.capacity = 256 * 1024;
    counters.gate = &gate;
    PooledAllocator pool(gpu(0), std::make_unique<CountingMemory>(counters), 0, 0, &gate);
    std::atomic<bool> stop{false};
    std::atomic<int> refused{0};
    std::thread collectives([&] {
      while (!stop) {
        gate.collective_began();
        std::this_thread::sleep_for(200us);
        gate.collective_ended();
        std::this_thread::sleep_for(100us);
      }
    });
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 20000; ++i) {
          const std::uint64_t bytes =
              512 + static_cast<std::uint64_t>((i * 7919 + t * 104729) % (48 * 1024));
          try {
            MemoryBlock b = pool.allocate(bytes);
            static_cast<char*>(b.data)[bytes - 1] = 1;
            pool.release(b);
          } catch (const OutOfMemoryError& e) {
            if (e.collectives_in_flight() != 0) ++refused;
          }
          if (i % 100 == t) pool.empty_cache();
        }
      });
    }
    for (auto& th : threads) th.join();
    stop = true;
    collectives.join();
    EXPECT_EQ(counters.released_during_collectives.load(), 0);
    EXPECT_EQ(gate.collectives_in_flight(), 0u);
    EXPECT_EQ(pool.stats().in_use, 0u);
    pool.empty_cache();
    EXPECT_EQ(pool.stats().cached, 0u);
    EXPECT_EQ(counters.held.load(), 0u) << "every block went back to the device";
    RecordProperty("refused_for_collectives", refused.load());
  });
}

}  // namespace
}  // namespace tagflow::detail
