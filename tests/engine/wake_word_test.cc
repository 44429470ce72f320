// WakeWord under contention: no wake-up is lost, whatever the interleaving.
// A lost wake-up shows as a consumer asleep with work pending: the watchdog
// then fails the test instead of letting it hang.

#include "engine/detail/wake_word.h"

#include <atomic>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "tests/engine/watchdog.h"

namespace tagflow::detail {
namespace {

using namespace std::chrono_literals;
using testing::run_with_timeout;

/// Producers hand out items one at a time and wake one consumer per item;
/// consumers sleep whenever they see none. Every item must be taken.
void produce_and_consume(int producers, int consumers, int items_each) {
  WakeWord word;
  std::atomic<long> available{0};
  std::atomic<long> taken{0};
  const long total = static_cast<long>(producers) * items_each;
  std::vector<std::thread> threads;
  for (int c = 0; c < consumers; ++c) {
    threads.emplace_back([&] {
      for (;;) {
        const std::uint32_t seen = word.epoch();
        long now = available.load();
        while (now > 0 && !available.compare_exchange_weak(now, now - 1)) {
        }
        if (now > 0) {
          if (taken.fetch_add(1) + 1 == total) word.wake_all();  // let the others out
          continue;
        }
        if (taken.load() == total) return;
        word.wait(seen);
      }
    });
  }
  for (int p = 0; p < producers; ++p) {
    threads.emplace_back([&] {
      for (int i = 0; i < items_each; ++i) {
        available.fetch_add(1);
        word.wake_one();
        if (i % 64 == 0) std::this_thread::yield();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(taken.load(), total);
  EXPECT_EQ(available.load(), 0);
}

TEST(WakeWord, NoWakeUpIsLostBetweenOneProducerAndOneConsumer) {
  run_with_timeout(60s, [] {
    for (int round = 0; round < 200; ++round) produce_and_consume(1, 1, 2000);
  });
}

TEST(WakeWord, NoWakeUpIsLostWhenConsumersRaceForEachItem) {
  // Like a worker pool: two consumers race for what one producer hands out,
  // so a consumer often finds the item gone just after the bump and sleeps.
  run_with_timeout(60s, [] {
    for (int round = 0; round < 400; ++round) produce_and_consume(1, 2, 5000);
  });
}

TEST(WakeWord, NoWakeUpIsLostWithManyProducersAndConsumers) {
  run_with_timeout(60s, [] {
    for (int round = 0; round < 50; ++round) produce_and_consume(3, 4, 3000);
  });
}

TEST(WakeWord, WakeAllReleasesEverySleeper) {
  run_with_timeout(30s, [] {
    for (int round = 0; round < 100; ++round) {
      WakeWord word;
      std::atomic<bool> open{false};
      std::vector<std::thread> sleepers;
      for (int i = 0; i < 4; ++i) {
        sleepers.emplace_back([&] {
          for (;;) {
            const std::uint32_t seen = word.epoch();
            if (open.load()) return;
            word.wait(seen);
          }
        });
      }
      std::this_thread::sleep_for(std::chrono::microseconds(round % 7 * 50));
      open = true;
      word.wake_all();
      for (auto& t : sleepers) t.join();
    }
  });
}

}  // namespace
}  // namespace tagflow::detail
