#pragma once
// PooledAllocator: a caching allocator over device memory (one per GPU, real
// or simulated, and one for pinned staging memory).
//
// Note [Size classes]
// Requests are rounded up to a size class: 512 bytes at least, then four
// classes per power of two (1024, 1280, 1536, 1792, 2048, 2560, ...), so at
// most a quarter is wasted. A released block goes onto its class's free list
// and serves the next request of that class without touching the device:
// in steady state (a training loop allocating the same shapes every
// iteration) no cudaMalloc happens. Blocks are never split or merged; that
// keeps every operation O(1) under one short spin lock; only a miss, which
// goes to the device, takes a mutex.
//
// Host memory (cpu(i)) caches blocks up to 256 MiB. Reuse saves the C
// library's aligned allocation, which costs more than a small operation, and
// the page faults of fresh memory, a few percent of a large matrix product.
// Larger host blocks go back at once, so that one huge temporary does not
// stay resident; empty_cache(cpu(i)) returns the rest.
//
// A block is released only once every operation using it has completed, its
// device work included (Engine::delete_var's deleter), so a cached block can
// go to any stream. When the device (or the limit) cannot hold a new block,
// the cache is returned to the device and the request retried once; then
// OutOfMemoryError gives the device, the request and the figures. An
// allocator given a ReleaseGate returns nothing to the device while a
// collective is in flight (Note [No release during collectives] in
// release_gate.h).

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/context.h"
#include "engine/detail/spin_lock.h"
#include "storage/allocator.h"
#include "storage/detail/device_memory.h"
#include "storage/detail/release_gate.h"

namespace tagflow::detail {

class PooledAllocator final : public Allocator, private ReleaseGate::Client {
 public:
  /// Blocks larger than `max_cached_block` bytes (0: no bound) are not
  /// cached: they come from the device sized to 64 bytes and go back on
  /// release. With a `gate`, memory goes back to the device only while it
  /// counts no collective in flight (Note [No release during collectives]).
  PooledAllocator(Context ctx, std::unique_ptr<DeviceMemory> memory, std::uint64_t limit,
                  std::uint64_t max_cached_block = 0, ReleaseGate* gate = nullptr);
  /// Returns the cache, and the blocks whose release was put off, to the
  /// device whatever the gate counts: the device's memory goes with it.
  ~PooledAllocator() override;

  MemoryBlock allocate(std::uint64_t bytes) override;
  void release(MemoryBlock block) noexcept override;
  MemoryStats stats() const override;
  void empty_cache() override;
  void set_limit(std::uint64_t bytes) override;
  void reset_peak() override;

  /// The size class a request of `bytes` is served from (Note [Size classes]).
  static std::uint64_t size_class(std::uint64_t bytes);

 private:
  /// Classes up to 2^40 bytes; larger requests are served uncached.
  static constexpr std::size_t kClasses = 1 + 4 * 32;
  /// Index of a size class in `free_lists_`, or kClasses for none.
  static std::size_t class_index(std::uint64_t size);

  bool cacheable(std::uint64_t size) const {
    return (max_cached_block_ == 0 || size <= max_cached_block_) && class_index(size) < kClasses;
  }
  /// The slow path: a block from the device, releasing the cache once if the
  /// device (or the limit) has no room.
  /// allocate() without the profiler's record.
  MemoryBlock allocate_block(std::uint64_t bytes);
  MemoryBlock allocate_from_device(std::uint64_t bytes, std::uint64_t size);
  /// Reserves `size` bytes against the limit and allocates them; null when
  /// there is no room (the reservation is then undone).
  void* try_device_allocation(std::uint64_t size);
  /// Takes every cached block out (under `lock_`), then returns them to the
  /// device. Callers hold `device_mutex_`, and the gate's permission.
  void release_cache();
  /// release_cache() when the gate allows it (0), else put off until the
  /// last collective in flight ends: the number in flight. Callers hold
  /// `device_mutex_`.
  std::size_t release_cache_unless_collectives();
  /// The gate's call once the last collective in flight has ended.
  void release_deferred() noexcept override;

  /// A block not cached whose release waits for the collectives in flight.
  struct HeldBlock {
    void* data;
    std::uint64_t size;
  };

  Context ctx_;
  std::unique_ptr<DeviceMemory> memory_;
  std::uint64_t max_cached_block_;
  /// Serialises the slow path, so that one request at a time releases the
  /// cache and retries.
  std::mutex device_mutex_;
  /// Guards the free lists and the statistics: held for a few instructions,
  /// never across a call to the device.
  mutable SpinLock lock_;
  std::array<std::vector<void*>, kClasses> free_lists_;
  /// Blocks too large to cache, released while collectives were in flight:
  /// counted as cached, and returned with the cache.
  std::vector<HeldBlock> held_;
  MemoryStats stats_;
  ReleaseGate* gate_;
};

}  // namespace tagflow::detail
