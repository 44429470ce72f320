// Tests of storage/detail/device_memory.h's host-backed memories: a
// simulated GPU's capacity is enforced (a block beyond it is refused and
// nothing is taken; released bytes can be taken again, from many threads),
// and untouched memory reserves more than the host holds.

#include "storage/detail/device_memory.h"

#include <cstdint>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tagflow::detail {
namespace {

constexpr std::uint64_t kMiB = 1 << 20;

TEST(DeviceMemoryTest, HostMemoryEnforcesItsCapacity) {
  auto memory = make_host_memory(10 * kMiB);
  EXPECT_EQ(memory->capacity(), 10 * kMiB);
  void* a = memory->allocate(6 * kMiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(memory->allocate(5 * kMiB), nullptr);  // 11 MiB > 10
  void* b = memory->allocate(4 * kMiB);            // exactly full
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(memory->allocate(1), nullptr);
  memory->release(a, 6 * kMiB);
  void* c = memory->allocate(6 * kMiB);
  ASSERT_NE(c, nullptr);
  memory->release(b, 4 * kMiB);
  memory->release(c, 6 * kMiB);
}

TEST(DeviceMemoryTest, UncappedHostMemoryTakesAnything) {
  auto memory = make_host_memory();
  void* a = memory->allocate(64 * kMiB);
  ASSERT_NE(a, nullptr);
  memory->release(a, 64 * kMiB);
}

TEST(DeviceMemoryTest, CapacityHoldsUnderConcurrentUse) {
  auto memory = make_untouched_memory(64 * kMiB);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 2000; ++i) {
        if (void* p = memory->allocate(20 * kMiB)) memory->release(p, 20 * kMiB);
      }
    });
  }
  for (auto& t : threads) t.join();
  // Every block went back: the whole capacity is free again.
  std::vector<void*> held;
  for (int i = 0; i < 3; ++i) held.push_back(memory->allocate(20 * kMiB));
  for (void* p : held) EXPECT_NE(p, nullptr);
  EXPECT_EQ(memory->allocate(20 * kMiB), nullptr);
  for (void* p : held) memory->release(p, 20 * kMiB);
}

TEST(DeviceMemoryTest, UntouchedMemoryReservesMoreThanTheHostHas) {
  constexpr std::uint64_t k128GiB = std::uint64_t{1} << 37;
  auto memory = make_untouched_memory(2 * k128GiB);
  void* a = memory->allocate(k128GiB);
  ASSERT_NE(a, nullptr);
  memory->release(a, k128GiB);
}

}  // namespace
}  // namespace tagflow::detail
