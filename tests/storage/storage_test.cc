// Storage over the process-wide engine (two simulated GPUs): which devices
// exist and the error for one that does not, host alignment and limits,
// memory returned only after the operations using it have finished, which
// devices keep their cache while collectives are in flight, and the
// TAGFLOW_MEMORY_LIMIT setting.

#include "storage/storage.h"

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/stream.h"
#include "storage/detail/release_gate.h"
#include "tests/engine/watchdog.h"

namespace tagflow {
namespace {

using namespace std::chrono_literals;
using detail::MemoryBlock;
using detail::Storage;

std::string error_text(Context ctx) {
  try {
    check_device(ctx);
  } catch (const DeviceError& e) {
    return e.what();
  }
  return "";
}

TEST(StorageTest, DevicesThatDoNotExistAreNamedWithHowManyDo) {
  ASSERT_EQ(num_gpus(), 2) << "the test main asks for two simulated GPUs";
  EXPECT_EQ(error_text(gpu(10)), "gpu(10) does not exist: 2 GPUs (gpu(0)..gpu(1), simulated)");
  EXPECT_EQ(error_text(gpu(2)), "gpu(2) does not exist: 2 GPUs (gpu(0)..gpu(1), simulated)");
  EXPECT_EQ(error_text(cpu(64)), "cpu(64) does not exist: CPU devices are cpu(0)..cpu(63)");
  EXPECT_EQ(error_text(gpu(1)), "");
  EXPECT_EQ(error_text(cpu(3)), "");
  EXPECT_THROW((void)memory_stats(gpu(10)), DeviceError);
  EXPECT_THROW(Storage::get().allocator(gpu(-1)), DeviceError);
}

TEST(StorageTest, HostBlocksAreAlignedPooledWhenSmallAndCounted) {
  Context ctx = cpu(5);  // a device no other test uses
  detail::Allocator& host = Storage::get().allocator(ctx);
  const MemoryStats before = host.stats();
  MemoryBlock a = host.allocate(1);
  MemoryBlock b = host.allocate(1000);
  const std::uint64_t big_bytes =
      Storage::kMaxCachedHostBlock + 1;  // not cached: exact to 64 bytes
  MemoryBlock big = host.allocate(big_bytes);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(a.data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(big.data) % 64, 0u);
  EXPECT_EQ(big.size, Storage::kMaxCachedHostBlock + 64);
  EXPECT_EQ(host.stats().in_use - before.in_use, 512u + 1024u + big.size);
  EXPECT_EQ(host.stats().allocations - before.allocations, 3u);
  set_memory_limit(ctx, host.stats().in_use + 100);
  EXPECT_THROW((void)host.allocate(1000), OutOfMemoryError);
  set_memory_limit(ctx, 0);
  host.release(a);
  host.release(b);
  host.release(big);
  EXPECT_EQ(host.stats().in_use, before.in_use);
  EXPECT_EQ(host.stats().cached - before.cached, 512u + 1024u) << "large blocks are not cached";
  MemoryBlock again = host.allocate(900);
  EXPECT_EQ(again.data, b.data) << "a small block is reused";
  host.release(again);
  empty_cache(ctx);
  EXPECT_EQ(host.stats().cached, 0u);
}

// The block goes back to the pool only once the device work that uses it
// has finished: a slow kernel on a simulated GPU keeps it in use.
TEST(StorageTest, MemoryReturnsToThePoolOnlyAfterItsLastOperationFinished) {
  for (Context ctx : {cpu(6), gpu(1)}) {
    Engine& engine = Engine::get();
    detail::Allocator& allocator = Storage::get().allocator(ctx);
    const std::uint64_t in_use_before = allocator.stats().in_use;
    MemoryBlock block = allocator.allocate(4096);
    VarHandle var = engine.new_var();
    std::atomic<bool> kernel_done{false};
    engine.push({.name = "slow kernel",
                 .ctx = ctx,
                 .writes = {var},
                 .fn = [&kernel_done, block](const RunContext& rc) {
                   auto body = [&kernel_done, block] {
                     std::this_thread::sleep_for(50ms);
                     static_cast<char*>(block.data)[0] = 1;
                     kernel_done = true;
                   };
                   if (rc.stream != nullptr) {
                     rc.stream->enqueue_host(body);
                   } else {
                     body();
                   }
                 }});
    std::atomic<bool> released{false};
    engine.delete_var(var, [&, block] {
      EXPECT_TRUE(kernel_done.load()) << ctx << ": released while its kernel ran";
      allocator.release(block);
      released = true;
    });
    EXPECT_EQ(allocator.stats().in_use, in_use_before + block.size) << ctx;
    for (int i = 0; i < 5000 && !released; ++i) std::this_thread::sleep_for(1ms);
    ASSERT_TRUE(released.load()) << ctx;
    EXPECT_EQ(allocator.stats().in_use, in_use_before) << ctx;
  }
}

TEST(StorageTest, PooledDevicesReuseTheirBlocks) {
  detail::Allocator& pool = Storage::get().allocator(gpu(0));
  MemoryBlock a = pool.allocate(123456);
  pool.release(a);
  const MemoryStats before = pool.stats();
  MemoryBlock b = pool.allocate(123000);
  EXPECT_EQ(b.data, a.data);
  EXPECT_EQ(pool.stats().device_allocations, before.device_allocations);
  pool.release(b);
  empty_cache(gpu(0));
  EXPECT_EQ(memory_stats(gpu(0)).cached, 0u);
}

// Note [No release during collectives]: GPUs (simulated ones too) and
// pinned memory keep their cache while the process gate counts a
// collective in flight; cpu(i) memory goes back at once.
TEST(StorageTest, GpuAndPinnedCachesGoBackOnlyOnceNoCollectiveIsInFlight) {
  testing::run_with_timeout(10s, [] {
    detail::ReleaseGate& gate = detail::ReleaseGate::process();
    const Context host = cpu(8);  // a device no other test uses
    std::vector<Context> gated = {gpu(0), gpu(1), cpu_pinned(0)};
    for (Context ctx : gated) {
      detail::Allocator& allocator = Storage::get().allocator(ctx);
      allocator.release(allocator.allocate(70000));
    }
    detail::Allocator& host_allocator = Storage::get().allocator(host);
    host_allocator.release(host_allocator.allocate(70000));
    gate.collective_began();
    for (Context ctx : gated) {
      empty_cache(ctx);  // returns at once
      EXPECT_GE(memory_stats(ctx).cached, 70000u) << ctx << ": released during a collective";
    }
    empty_cache(host);
    EXPECT_EQ(memory_stats(host).cached, 0u) << "host memory waits for no device";
    gate.collective_ended();
    for (Context ctx : gated) {
      EXPECT_EQ(memory_stats(ctx).cached, 0u) << ctx << ": kept after the collective ended";
    }
  });
}

TEST(StorageTest, MemoryLimitIsReadFromTheEnvironment) {
  const char* saved = std::getenv("TAGFLOW_MEMORY_LIMIT");
  std::string saved_value = saved != nullptr ? saved : "";
  setenv("TAGFLOW_MEMORY_LIMIT", "512M", 1);
  EXPECT_EQ(EngineConfig::from_env().memory_limit, 512u << 20);
  setenv("TAGFLOW_MEMORY_LIMIT", "3000", 1);
  EXPECT_EQ(EngineConfig::from_env().memory_limit, 3000u);
  setenv("TAGFLOW_MEMORY_LIMIT", "2G", 1);
  EXPECT_EQ(EngineConfig::from_env().memory_limit, std::uint64_t{2} << 30);
  for (const char* bad : {"12X", "-5", "M", "1.5G"}) {
    setenv("TAGFLOW_MEMORY_LIMIT", bad, 1);
    try {
      (void)EngineConfig::from_env();
      ADD_FAILURE() << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("TAGFLOW_MEMORY_LIMIT: expected a byte count"),
                std::string::npos)
          << e.what();
    }
  }
  if (saved != nullptr) {
    setenv("TAGFLOW_MEMORY_LIMIT", saved_value.c_str(), 1);
  } else {
    unsetenv("TAGFLOW_MEMORY_LIMIT");
  }
}

}  // namespace
}  // namespace tagflow
