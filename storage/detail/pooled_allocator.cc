#include "storage/detail/pooled_allocator.h"

#include "engine/detail/profile_marks.h"

#include <algorithm>
#include <bit>

namespace tagflow::detail {

std::uint64_t PooledAllocator::size_class(std::uint64_t bytes) {
  constexpr std::uint64_t kSmallest = 512;
  if (bytes <= kSmallest) return kSmallest;
  // Four classes per power of two: round up to a multiple of a quarter of
  // the power of two just below `bytes`.
  const std::uint64_t power = std::bit_floor(bytes - 1);
  const std::uint64_t step = power / 4;
  return (bytes + step - 1) / step * step;
}

PooledAllocator::PooledAllocator(Context ctx, std::unique_ptr<DeviceMemory> memory,
                                 std::uint64_t limit, std::uint64_t max_cached_block,
                                 ReleaseGate* gate)
    : ctx_(ctx), memory_(std::move(memory)), max_cached_block_(max_cached_block), gate_(gate) {
  stats_.limit = limit;
  stats_.capacity = memory_->capacity();
}

std::size_t PooledAllocator::class_index(std::uint64_t size) {
  if (size <= 512) return 0;
  const std::uint64_t power = std::bit_floor(size - 1);
  const std::uint64_t step = power / 4;
  const std::size_t octave = static_cast<std::size_t>(std::countr_zero(power)) - 9;
  // A class value is 5, 6, 7 or 8 steps (Note [Size classes]).
  const std::size_t index = 1 + 4 * octave + static_cast<std::size_t>(size / step - 5);
  return size % step == 0 && index < kClasses ? index : kClasses;
}

PooledAllocator::~PooledAllocator() {
  if (gate_ != nullptr) gate_->forget(*this);
  // Blocks still in use belong to arrays that outlive the allocator (a
  // process exiting); only the cache is ours to return.
  release_cache();
}

MemoryBlock PooledAllocator::allocate(std::uint64_t bytes) {
  const MemoryBlock block = allocate_block(bytes);
  if (profiling() && block.data != nullptr) [[unlikely]] {
    record_allocation(ctx_, block.size, /*release=*/false);
  }
  return block;
}

MemoryBlock PooledAllocator::allocate_block(std::uint64_t bytes) {
  if (bytes == 0) return {};
  std::uint64_t size = size_class(bytes);
  if (!cacheable(size)) {
    size = (bytes + 63) / 64 * 64;
  } else {
    std::lock_guard lock(lock_);
    std::vector<void*>& list = free_lists_[class_index(size)];
    if (!list.empty()) {
      void* data = list.back();
      list.pop_back();
      stats_.cached -= size;
      stats_.in_use += size;
      stats_.peak = std::max(stats_.peak, stats_.in_use);
      ++stats_.allocations;
      return {data, size};
    }
  }
  return allocate_from_device(bytes, size);
}

MemoryBlock PooledAllocator::allocate_from_device(std::uint64_t bytes, std::uint64_t size) {
  std::lock_guard slow(device_mutex_);
  void* data = try_device_allocation(size);
  std::size_t kept_by = 0;  // collectives in flight that kept the cache
  if (data == nullptr) {
    // Not waiting for them: this thread may be one a collective waits for
    // (Note [No release during collectives] in release_gate.h).
    kept_by = release_cache_unless_collectives();
    if (kept_by == 0) data = try_device_allocation(size);
  }
  std::lock_guard lock(lock_);
  if (data == nullptr) throw OutOfMemoryError(ctx_, bytes, stats_, kept_by);
  ++stats_.allocations;
  ++stats_.device_allocations;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  return {data, size};
}

void* PooledAllocator::try_device_allocation(std::uint64_t size) {
  {
    std::lock_guard lock(lock_);
    if (stats_.limit != 0 && stats_.in_use + stats_.cached + size > stats_.limit) return nullptr;
    stats_.in_use += size;  // reserved: concurrent requests count it against the limit
  }
  void* data = nullptr;
  try {
    data = memory_->allocate(size);
  } catch (...) {
    std::lock_guard lock(lock_);
    stats_.in_use -= size;
    throw;
  }
  if (data == nullptr) {
    std::lock_guard lock(lock_);
    stats_.in_use -= size;
  }
  return data;
}

void PooledAllocator::release(MemoryBlock block) noexcept {
  if (block.data == nullptr) return;
  if (profiling()) [[unlikely]] {
    try {
      record_allocation(ctx_, block.size, /*release=*/true);
    } catch (...) {  // no memory for the record: the profile misses one release
    }
  }
  if (cacheable(block.size)) {
    std::lock_guard lock(lock_);
    try {
      free_lists_[class_index(block.size)].push_back(block.data);
      stats_.in_use -= block.size;
      stats_.cached += block.size;
      return;
    } catch (...) {  // no memory for the list itself: hand the block back instead
    }
  }
  if (gate_ != nullptr) {
    try {
      const std::size_t kept_by =
          gate_->release_or_defer(*this, [&] { memory_->release(block.data, block.size); });
      std::lock_guard lock(lock_);
      if (kept_by != 0) held_.push_back({block.data, block.size});  // counted as cached
      stats_.in_use -= block.size;
      if (kept_by != 0) stats_.cached += block.size;
      return;
    } catch (...) {  // no memory to hold the block: it goes back now, as ungated
    }
  }
  memory_->release(block.data, block.size);
  std::lock_guard lock(lock_);
  stats_.in_use -= block.size;
}

void PooledAllocator::release_cache() {
  std::array<std::vector<void*>, kClasses> taken;
  std::vector<HeldBlock> held;
  {
    std::lock_guard lock(lock_);
    taken.swap(free_lists_);
    held.swap(held_);
    stats_.cached = 0;
  }
  for (const HeldBlock& block : held) memory_->release(block.data, block.size);
  for (std::size_t index = 0; index < kClasses; ++index) {
    if (taken[index].empty()) continue;
    const std::uint64_t size = index == 0 ? 512 : [&] {
      const std::uint64_t power = std::uint64_t{512} << ((index - 1) / 4);
      return power / 4 * (5 + (index - 1) % 4);
    }();
    for (void* data : taken[index]) memory_->release(data, size);
  }
}

std::size_t PooledAllocator::release_cache_unless_collectives() {
  {
    std::lock_guard lock(lock_);
    if (stats_.cached == 0) return 0;  // nothing to release, nothing to put off
  }
  if (gate_ == nullptr) {
    release_cache();
    return 0;
  }
  return gate_->release_or_defer(*this, [this] { release_cache(); });
}

void PooledAllocator::release_deferred() noexcept {
  std::lock_guard slow(device_mutex_);
  release_cache();
}

void PooledAllocator::empty_cache() {
  std::lock_guard slow(device_mutex_);
  (void)release_cache_unless_collectives();
}

MemoryStats PooledAllocator::stats() const {
  std::lock_guard lock(lock_);
  return stats_;
}

void PooledAllocator::set_limit(std::uint64_t bytes) {
  std::lock_guard lock(lock_);
  stats_.limit = bytes;
}

void PooledAllocator::reset_peak() {
  std::lock_guard lock(lock_);
  stats_.peak = stats_.in_use;
}

}  // namespace tagflow::detail
