// Memory of real GPUs: cudaMalloc per device and cudaHostAlloc for pinned
// staging. Built without CUDA, asking for either is a DeviceError (no real
// GPU can exist then, so only a misuse can get here).

#include "engine/error.h"
#include "storage/detail/device_memory.h"

#ifdef TAGFLOW_HAVE_CUDA
#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include "engine/detail/cuda_check.h"
#include "engine/detail/cuda_device_guard.h"
#endif

namespace tagflow::detail {

#ifdef TAGFLOW_HAVE_CUDA

namespace {

/// Releases run from engine threads and destructors: a failure there is
/// logged (the device is then broken and the next launch reports it).
void log_release_failure(cudaError_t status, const char* call, Context where) noexcept {
  if (status == cudaSuccess) return;
  try {
    spdlog::error("{}", cuda_failure(status, call, where));
  } catch (...) {  // out of memory for the message: the next launch still reports it
  }
}

void log_release_message(const char* message) noexcept {
  try {
    spdlog::error("{}", message);
  } catch (...) {  // as above
  }
}

class CudaDeviceMemory final : public DeviceMemory {
 public:
  explicit CudaDeviceMemory(int device) : device_(gpu(device)) {
    const CudaDeviceGuard on_device(device);
    std::size_t free_bytes = 0;
    std::size_t total_bytes = 0;
    check_cuda(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo", device_);
    capacity_ = total_bytes;
  }
  // cudaMalloc and cudaFree act on the current device: each selects its own
  // and gives the caller's back (a naive engine's pusher or an engine
  // worker must not find itself moved to another GPU).
  void* allocate(std::uint64_t bytes) override {
    const CudaDeviceGuard on_device(device_.index);
    void* data = nullptr;
    const cudaError_t status = cudaMalloc(&data, bytes);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // clear it: out of memory is not sticky
      return nullptr;
    }
    check_cuda(status, "cudaMalloc", device_);
    return data;
  }
  void release(void* data, std::uint64_t) noexcept override {
    try {
      const CudaDeviceGuard on_device(device_.index);
      log_release_failure(cudaFree(data), "cudaFree", device_);
    } catch (const std::exception& e) {  // the device could not be selected
      log_release_message(e.what());
    }
  }
  std::uint64_t capacity() const override { return capacity_; }

 private:
  Context device_;
  std::uint64_t capacity_ = 0;
};

class CudaPinnedMemory final : public DeviceMemory {
 public:
  void* allocate(std::uint64_t bytes) override {
    void* data = nullptr;
    const cudaError_t status = cudaHostAlloc(&data, bytes, cudaHostAllocPortable);
    if (status == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    check_cuda(status, "cudaHostAlloc", cpu_pinned(0));
    return data;
  }
  void release(void* data, std::uint64_t) noexcept override {
    log_release_failure(cudaFreeHost(data), "cudaFreeHost", cpu_pinned(0));
  }
  std::uint64_t capacity() const override { return 0; }
};

}  // namespace

std::unique_ptr<DeviceMemory> make_cuda_memory(int device) {
  return std::make_unique<CudaDeviceMemory>(device);
}

std::unique_ptr<DeviceMemory> make_cuda_pinned_memory() {
  return std::make_unique<CudaPinnedMemory>();
}

#else

std::unique_ptr<DeviceMemory> make_cuda_memory(int device) {
  throw_error<DeviceError>("gpu({}): tagflow was built without CUDA (TAGFLOW_CUDA=OFF)", device);
}

std::unique_ptr<DeviceMemory> make_cuda_pinned_memory() {
  throw_error<DeviceError>("pinned memory: tagflow was built without CUDA (TAGFLOW_CUDA=OFF)");
}

#endif

}  // namespace tagflow::detail
