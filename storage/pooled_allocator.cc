#include "tagflow/storage/pooled_allocator.h"

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
                                 std::uint64_t limit, std::uint64_t max_cached_block)
    : ctx_(ctx), memory_(std::move(memory)), max_cached_block_(max_cached_block) {
  stats_.limit = limit;
  stats_.capacity = memory_->capacity();
}

PooledAllocator::~PooledAllocator() {
  // Blocks still in use belong to arrays that outlive the allocator (a
  // process exiting); only the cache is ours to return.
  std::lock_guard lock(mutex_);
  release_cache_locked();
}

MemoryBlock PooledAllocator::allocate(std::uint64_t bytes) {
  if (bytes == 0) return {};
  std::uint64_t size = size_class(bytes);
  if (!cacheable(size)) size = (bytes + 63) / 64 * 64;
  std::lock_guard lock(mutex_);
  void* data = nullptr;
  if (auto it = free_lists_.find(size); it != free_lists_.end() && !it->second.empty()) {
    data = it->second.back();
    it->second.pop_back();
    stats_.cached -= size;
  } else {
    data = allocate_from_device(size);
    if (data == nullptr) {
      release_cache_locked();
      data = allocate_from_device(size);
    }
    if (data == nullptr) throw OutOfMemoryError(ctx_, bytes, stats_);
    ++stats_.device_allocations;
  }
  ++stats_.allocations;
  stats_.in_use += size;
  stats_.peak = std::max(stats_.peak, stats_.in_use);
  return {data, size};
}

void* PooledAllocator::allocate_from_device(std::uint64_t size) {
  const std::uint64_t held = stats_.in_use + stats_.cached;
  if (stats_.limit != 0 && held + size > stats_.limit) return nullptr;
  return memory_->allocate(size);
}

void PooledAllocator::release(MemoryBlock block) noexcept {
  if (block.data == nullptr) return;
  if (!cacheable(block.size)) {
    memory_->release(block.data, block.size);
    std::lock_guard lock(mutex_);
    stats_.in_use -= block.size;
    return;
  }
  std::lock_guard lock(mutex_);
  try {
    free_lists_[block.size].push_back(block.data);
  } catch (...) {  // no memory for the list itself: hand the block back instead
    memory_->release(block.data, block.size);
    stats_.in_use -= block.size;
    return;
  }
  stats_.in_use -= block.size;
  stats_.cached += block.size;
}

void PooledAllocator::release_cache_locked() {
  for (auto& [size, blocks] : free_lists_) {
    for (void* data : blocks) memory_->release(data, size);
    stats_.cached -= size * blocks.size();
  }
  free_lists_.clear();
}

void PooledAllocator::empty_cache() {
  std::lock_guard lock(mutex_);
  release_cache_locked();
}

MemoryStats PooledAllocator::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void PooledAllocator::set_limit(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  stats_.limit = bytes;
}

void PooledAllocator::reset_peak() {
  std::lock_guard lock(mutex_);
  stats_.peak = stats_.in_use;
}

}  // namespace tagflow::detail
