#pragma once
// HostAllocator: 64-byte aligned host memory for cpu(i), straight from the C
// library (it already caches small blocks per thread), with statistics and
// the device limit. Internal to storage/.

#include <atomic>
#include <cstdint>

#include "tagflow/engine/context.h"
#include "tagflow/storage/allocator.h"

namespace tagflow::detail {

class HostAllocator final : public Allocator {
 public:
  HostAllocator(Context ctx, std::uint64_t limit);

  MemoryBlock allocate(std::uint64_t bytes) override;
  void release(MemoryBlock block) noexcept override;
  MemoryStats stats() const override;
  void empty_cache() override {}
  void set_limit(std::uint64_t bytes) override;
  void reset_peak() override;

 private:
  Context ctx_;
  std::atomic<std::uint64_t> in_use_{0};
  std::atomic<std::uint64_t> peak_{0};
  std::atomic<std::uint64_t> allocations_{0};
  std::atomic<std::uint64_t> limit_;
};

}  // namespace tagflow::detail
