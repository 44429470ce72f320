#pragma once
// Storage: the memory of every device, one allocator per context, made on
// first use: a pooled caching allocator (Note [Size classes] in
// pooled_allocator.h) over 64-byte aligned host memory for cpu(i), over
// device memory for each GPU (host memory for simulated ones), and over
// pinned memory for cpu_pinned. Arrays hold a MemoryBlock and hand it back through
// the engine once their last operation has completed.
//
//   MemoryStats s = memory_stats(gpu(0));
//   std::cout << s.in_use << " bytes in use, " << s.cached << " cached\n";
//   empty_cache(gpu(0));
//
// Threads: safe to call concurrently. The functions here, and the allocator
// of a context made on first use, may be called from any thread. While other
// threads allocate and release, memory_stats() may miss what they do
// meanwhile, and its peak may be off by up to 64 KiB per such thread (Note
// [Figures of the magazines] in storage/detail/pooled_allocator.h).

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "engine/context.h"
#include "storage/allocator.h"
#include "storage/memory_stats.h"

namespace tagflow {

/// Memory figures of `ctx`. Throws DeviceError for a device that does not exist.
MemoryStats memory_stats(Context ctx);
/// Returns the cached blocks of `ctx` to the device. On a GPU, or pinned
/// memory, while NCCL collectives are in flight, returns at once and the
/// blocks go back once the last of them has ended (Note [No release during
/// collectives] in storage/detail/release_gate.h).
void empty_cache(Context ctx);
/// Bytes `ctx` may hold, in use plus cached; 0 removes the limit. The
/// default comes from TAGFLOW_MEMORY_LIMIT.
void set_memory_limit(Context ctx, std::uint64_t bytes);
/// Restarts the peak of `ctx` from the bytes in use now.
void reset_peak_memory(Context ctx);

/// Throws DeviceError unless `ctx` names a device of this process, e.g.
/// "gpu(10) does not exist: 2 GPUs (gpu(0)..gpu(1), simulated)".
void check_device(Context ctx);

namespace detail {

class Storage {
 public:
  /// The process-wide storage, over the process-wide engine's devices.
  static Storage& get();

  /// The allocator of `ctx`, made on first use. Throws DeviceError for a
  /// device that does not exist.
  Allocator& allocator(Context ctx);

  /// Devices of each type Storage can serve (cpu(i) and cpu_pinned(i) for
  /// i below this; GPUs below the engine's count).
  static constexpr int kMaxDevices = 64;
  /// Largest block cached on cpu(i) (Note [Size classes] in pooled_allocator.h).
  static constexpr std::uint64_t kMaxCachedHostBlock = std::uint64_t{256} << 20;

 private:
  Storage();
  std::unique_ptr<Allocator> make_allocator(Context ctx);

  std::uint64_t default_limit_;
  bool real_gpus_;
  std::mutex make_mutex_;
  std::array<std::array<std::atomic<Allocator*>, kMaxDevices>, 3> allocators_{};
  std::vector<std::unique_ptr<Allocator>> owned_;
};

}  // namespace detail
}  // namespace tagflow
