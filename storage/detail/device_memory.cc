#include "storage/detail/device_memory.h"

#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>

namespace tagflow::detail {

namespace {

/// The bytes a simulated device has handed out, against its capacity (0:
/// none, as for host memory): a simulated GPU runs out where its model does.
class Capacity {
 public:
  explicit Capacity(std::uint64_t capacity) : capacity_(capacity) {}
  std::uint64_t capacity() const { return capacity_; }
  /// False, taking nothing, when `bytes` more would exceed the capacity.
  bool take(std::uint64_t bytes) {
    if (capacity_ == 0) return true;
    std::uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > capacity_ - used) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  void give(std::uint64_t bytes) {
    if (capacity_ != 0) used_.fetch_sub(bytes, std::memory_order_relaxed);
  }

 private:
  std::uint64_t capacity_;
  std::atomic<std::uint64_t> used_{0};
};

class HostMemory final : public DeviceMemory {
 public:
  explicit HostMemory(std::uint64_t capacity) : capacity_(capacity) {}
  void* allocate(std::uint64_t bytes) override {
    constexpr std::uint64_t kAlignment = 64;
    if (!capacity_.take(bytes)) return nullptr;
    void* data = std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
    if (data == nullptr) capacity_.give(bytes);
    return data;
  }
  void release(void* data, std::uint64_t bytes) noexcept override {
    std::free(data);
    capacity_.give(bytes);
  }
  std::uint64_t capacity() const override { return capacity_.capacity(); }

 private:
  Capacity capacity_;
};

class UntouchedMemory final : public DeviceMemory {
 public:
  explicit UntouchedMemory(std::uint64_t capacity) : capacity_(capacity) {}
  void* allocate(std::uint64_t bytes) override {
    if (!capacity_.take(bytes)) return nullptr;
    // Pages are only backed once written; MAP_NORESERVE keeps them out of
    // the commit limit, so reserving more than the host has is allowed.
    void* data = ::mmap(nullptr, std::max<std::uint64_t>(bytes, 1), PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (data != MAP_FAILED) return data;
    capacity_.give(bytes);
    return nullptr;
  }
  void release(void* data, std::uint64_t bytes) noexcept override {
    ::munmap(data, std::max<std::uint64_t>(bytes, 1));
    capacity_.give(bytes);
  }
  std::uint64_t capacity() const override { return capacity_.capacity(); }

 private:
  Capacity capacity_;
};

}  // namespace

std::unique_ptr<DeviceMemory> make_untouched_memory(std::uint64_t capacity) {
  return std::make_unique<UntouchedMemory>(capacity);
}

std::unique_ptr<DeviceMemory> make_host_memory(std::uint64_t capacity) {
  return std::make_unique<HostMemory>(capacity);
}

}  // namespace tagflow::detail
