#include "tagflow/storage/host_allocator.h"

#include <cstdlib>

namespace tagflow::detail {

namespace {
constexpr std::uint64_t kAlignment = 64;
constexpr std::uint64_t round_up(std::uint64_t bytes) {
  return (bytes + kAlignment - 1) / kAlignment * kAlignment;
}
}  // namespace

HostAllocator::HostAllocator(Context ctx, std::uint64_t limit) : ctx_(ctx), limit_(limit) {}

MemoryBlock HostAllocator::allocate(std::uint64_t bytes) {
  if (bytes == 0) return {};
  const std::uint64_t size = round_up(bytes);
  // Claim the bytes first, so that concurrent requests cannot overshoot the limit.
  const std::uint64_t limit = limit_.load(std::memory_order_relaxed);
  std::uint64_t in_use = in_use_.load(std::memory_order_relaxed);
  do {
    if (limit != 0 && in_use + size > limit) throw OutOfMemoryError(ctx_, bytes, stats());
  } while (!in_use_.compare_exchange_weak(in_use, in_use + size, std::memory_order_relaxed));
  void* data = std::aligned_alloc(kAlignment, size);
  if (data == nullptr) {
    in_use_.fetch_sub(size, std::memory_order_relaxed);
    throw OutOfMemoryError(ctx_, bytes, stats());
  }
  std::uint64_t peak = peak_.load(std::memory_order_relaxed);
  while (in_use + size > peak &&
         !peak_.compare_exchange_weak(peak, in_use + size, std::memory_order_relaxed)) {
  }
  allocations_.fetch_add(1, std::memory_order_relaxed);
  return {data, size};
}

void HostAllocator::release(MemoryBlock block) noexcept {
  if (block.data == nullptr) return;
  std::free(block.data);
  in_use_.fetch_sub(block.size, std::memory_order_relaxed);
}

MemoryStats HostAllocator::stats() const {
  const std::uint64_t allocations = allocations_.load(std::memory_order_relaxed);
  return {.in_use = in_use_.load(std::memory_order_relaxed),
          .cached = 0,
          .peak = peak_.load(std::memory_order_relaxed),
          .allocations = allocations,
          .device_allocations = allocations,
          .limit = limit_.load(std::memory_order_relaxed),
          .capacity = 0};
}

void HostAllocator::set_limit(std::uint64_t bytes) {
  limit_.store(bytes, std::memory_order_relaxed);
}

void HostAllocator::reset_peak() {
  peak_.store(in_use_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace tagflow::detail
