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
// Note [Per-thread magazines]
// A small block is usually allocated by one thread (the one that pushes the
// operation making an array) and released by another (the worker whose
// operation wrote the array last, Note [Deletion after the last writer] in
// engine/detail/threaded_engine.h). With one free list under one lock, the
// lock's line, the list's and the statistics' then go back and forth between
// the two cores on every operation: 40% of a 4-element `c = a + b`. So
// blocks of up to 32 KiB first go to a magazine of the releasing thread (one
// of 64 per allocator, picked by the thread's number; a thread only ever
// locks its own, uncontended unless more than 64 threads share them), and an
// allocation first looks in the allocating thread's magazine. Magazines and
// the shared free lists trade half a magazine at a time (up to 32 blocks,
// fewer for larger classes so that a thread keeps at most about 256 KiB of a
// class), under the shared lock. What stays shared per operation is one
// counter line (bytes in use, with the peak beside it): the statistics stay
// exact. Blocks in magazines count as cached, are handed back by
// empty_cache() and before an allocation fails for want of memory, and a
// request that finds its own magazine and the shared lists empty takes half
// of what another thread's magazine holds of its class (both magazines
// locked, in address order) before it goes to the device: a thread that
// only releases never fills its magazine when the allocating thread keeps
// emptying it, so without this every request would reach the device, and
// under a limit empty the whole cache each time.
//
// Note [Figures of the magazines]
// A shared count of the bytes in use, written by every allocation and
// release, would put one contended line back on every operation (a fifth of
// a 4-element `c = a + b`). So a magazine keeps its own count of the bytes
// it handed out less those it took back, and posts it to the shared count
// once it reaches 64 KiB either way. `stats()` adds every magazine's
// unposted bytes (under their locks): `in_use` and `cached` are exact
// whenever no allocation or release runs meanwhile. The peak is checked at
// each allocation against the shared count plus the allocating thread's
// unposted bytes (an allocation outside magazines posts them first), so
// with one thread it is exact; with several, each
// other thread's unposted bytes (less than 64 KiB each way) can make it
// higher or lower than the true highest figure by that much.
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
#include <atomic>
#include <bit>
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
  static std::uint64_t size_class(std::uint64_t bytes) {
    constexpr std::uint64_t kSmallest = 512;
    if (bytes <= kSmallest) return kSmallest;
    // Four classes per power of two: round up to a multiple of a quarter of
    // the power of two just below `bytes`.
    const std::uint64_t power = std::bit_floor(bytes - 1);
    const std::uint64_t step = power / 4;
    return (bytes + step - 1) / step * step;
  }

 private:
  /// Classes up to 2^40 bytes; larger requests are served uncached.
  static constexpr std::size_t kClasses = 1 + 4 * 32;
  /// Index of a size class in `free_lists_`, or kClasses for none.
  static std::size_t class_index(std::uint64_t size) {
    if (size <= 512) return 0;
    const std::uint64_t power = std::bit_floor(size - 1);
    const std::uint64_t step = power / 4;
    const auto octave = static_cast<std::size_t>(std::countr_zero(power)) - 9;
    // A class value is 5, 6, 7 or 8 steps (Note [Size classes]).
    const std::size_t index = 1 + 4 * octave + static_cast<std::size_t>(size / step - 5);
    return size % step == 0 && index < kClasses ? index : kClasses;
  }

  bool cacheable(std::uint64_t size) const {
    return (max_cached_block_ == 0 || size <= max_cached_block_) && class_index(size) < kClasses;
  }
  /// allocate() without the profiler's record: the calling thread's
  /// magazine inline, the rest in allocate_elsewhere.
  MemoryBlock allocate_block(std::uint64_t bytes);
  /// A block of class `size` (index `index`) that the calling thread's
  /// magazine does not hold: from the shared lists, another thread's
  /// magazine, or the device.
  MemoryBlock allocate_elsewhere(std::uint64_t bytes, std::uint64_t size, std::size_t index);
  /// The slow path: a block from the device, releasing the cache once if the
  /// device (or the limit) has no room.
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

  /// Note [Per-thread magazines]: the classes up to 32 KiB, the blocks of
  /// one class a magazine holds at most, and the magazines per allocator.
  static constexpr std::size_t kMagazineClasses = 25;
  static constexpr std::uint32_t kMagazineBlocks = 64;
  static constexpr std::size_t kMagazines = 64;
  /// Blocks a magazine keeps of a class (even, at least 8).
  static std::uint32_t magazine_capacity(std::size_t index);
  /// Blocks freed and not yet handed out again, kept by one thread.
  struct alignas(64) Magazine {
    SpinLock lock;
    /// Requests served from this magazine or by the shared lists for it.
    std::uint64_t allocations = 0;
    /// Bytes this magazine handed out less those it took back, not yet
    /// added to `in_use_` (Note [Figures of the magazines]).
    std::int64_t unposted = 0;
    std::array<std::uint32_t, kMagazineClasses> counts{};
    std::array<std::array<void*, kMagazineBlocks>, kMagazineClasses> blocks{};
  };
  /// The slot of the calling thread's magazine.
  std::atomic<Magazine*>& my_slot() noexcept;
  /// The calling thread's magazine, made on first use; null when there is no
  /// memory to make it (the shared lists then serve).
  Magazine* my_magazine() noexcept;
  /// A block of class `index` taken from another thread's magazine, with
  /// more of them moved into `own` (the caller's, unlocked); null when no
  /// magazine holds one. Counted as an allocation through `own`.
  void* take_from_other_magazines(Magazine& own, std::size_t index, std::uint64_t size);
  /// A block of class `index` from `m` (locked), refilled from the shared
  /// lists when empty; null when both are empty.
  void* take_from_magazine(Magazine& m, std::size_t index);
  /// Keeps `data` in `m` (locked), moving half of a full class to the
  /// shared lists first; false when there was no memory for that move.
  bool keep_in_magazine(Magazine& m, std::size_t index, void* data) noexcept;
  /// Counts an allocation of `size` bytes handed out now, outside magazines.
  void count_in_use(std::uint64_t size) noexcept;
  /// Counts `delta` bytes handed out (positive) or taken back (negative)
  /// through `m` (locked), as Note [Figures of the magazines] says.
  void count_in_magazine(Magazine& m, std::int64_t delta) noexcept;
  /// Bytes in use now: the shared count and every magazine's unposted bytes.
  std::uint64_t exact_in_use() const;
  /// Raises the peak to `in_use` if it is higher.
  void raise_peak(std::uint64_t in_use) noexcept;

  Context ctx_;
  std::unique_ptr<DeviceMemory> memory_;
  std::uint64_t max_cached_block_;
  /// Serialises the slow path, so that one request at a time releases the
  /// cache and retries.
  std::mutex device_mutex_;
  /// Guards the shared free lists and the figures below: held for a few
  /// instructions, never across a call to the device. Taken after a
  /// magazine's lock, never before.
  mutable SpinLock lock_;
  std::array<std::vector<void*>, kClasses> free_lists_;
  /// Blocks too large to cache, released while collectives were in flight:
  /// counted as cached, and returned with the cache.
  std::vector<HeldBlock> held_;
  /// Bytes taken from the device (or reserved for a request on its way
  /// there) and not given back: in use plus cached.
  std::uint64_t owned_ = 0;
  /// Requests served without a magazine, and those that went to the device.
  std::uint64_t allocations_ = 0;
  std::uint64_t device_allocations_ = 0;
  std::uint64_t limit_;
  std::uint64_t capacity_;
  ReleaseGate* gate_;
  /// Made on first use by a thread whose number falls on them; freed with
  /// the allocator.
  std::array<std::atomic<Magazine*>, kMagazines> magazines_{};
  /// Bytes held by live blocks, less what magazines have not posted yet (so
  /// it may be negative for a while), and the highest figure since the last
  /// reset (Note [Figures of the magazines]).
  alignas(64) std::atomic<std::int64_t> in_use_{0};
  std::atomic<std::uint64_t> peak_{0};
};

}  // namespace tagflow::detail
