#include "storage/detail/device_memory.h"

#include <cstdlib>

namespace tagflow::detail {

namespace {

class HostMemory final : public DeviceMemory {
 public:
  explicit HostMemory(std::uint64_t capacity) : capacity_(capacity) {}
  void* allocate(std::uint64_t bytes) override {
    constexpr std::uint64_t kAlignment = 64;
    return std::aligned_alloc(kAlignment, (bytes + kAlignment - 1) / kAlignment * kAlignment);
  }
  void release(void* data, std::uint64_t) noexcept override { std::free(data); }
  std::uint64_t capacity() const override { return capacity_; }

 private:
  std::uint64_t capacity_;
};

}  // namespace

std::unique_ptr<DeviceMemory> make_host_memory(std::uint64_t capacity) {
  return std::make_unique<HostMemory>(capacity);
}

}  // namespace tagflow::detail
