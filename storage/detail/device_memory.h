#pragma once
// DeviceMemory: where an allocator's blocks come from (host memory, the
// memory of a CUDA device, CUDA pinned host memory). Internal to storage/.

#include <cstdint>
#include <memory>

namespace tagflow::detail {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  /// `bytes` bytes, or null when the device is out of memory.
  virtual void* allocate(std::uint64_t bytes) = 0;
  virtual void release(void* data, std::uint64_t bytes) noexcept = 0;
  /// The device's total memory, or 0 when unknown (host memory).
  virtual std::uint64_t capacity() const = 0;
};

/// Host memory aligned to 64 bytes (cpu(i), simulated GPUs, and pinned
/// staging when no real GPU exists). A `capacity` other than 0 (a simulated
/// GPU's) is enforced: allocations beyond it fail.
std::unique_ptr<DeviceMemory> make_host_memory(std::uint64_t capacity = 0);
/// Address space that is never touched (a timing-only simulated GPU, whose
/// kernels do not run): reserved without committing memory, so that a
/// modelled card's capacity fits on a small host. `capacity` as above.
std::unique_ptr<DeviceMemory> make_untouched_memory(std::uint64_t capacity);
/// Memory of CUDA device `device` (cudaMalloc). Throws DeviceError when
/// tagflow was built without CUDA.
std::unique_ptr<DeviceMemory> make_cuda_memory(int device);
/// Page-locked host memory (cudaHostAlloc), for staging host<->GPU copies.
std::unique_ptr<DeviceMemory> make_cuda_pinned_memory();

}  // namespace tagflow::detail
