#pragma once
// Allocator: the memory of one device, as the layers above see it. Storage
// (storage.h) keeps one per context. Internal to storage/ and ops/.
//
// Threads: safe to call concurrently. Every allocator Storage makes takes
// its own locks; a block may be released on another thread than the one
// that allocated it.

#include <cstdint>

#include "storage/memory_stats.h"

namespace tagflow::detail {

/// A block handed out by an allocator. `size` is what the allocator
/// reserved for it (at least what was asked for).
struct MemoryBlock {
  void* data = nullptr;
  std::uint64_t size = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  /// A block of at least `bytes` bytes, 64-byte aligned (256 on real GPUs).
  /// Zero bytes give an empty block. Throws OutOfMemoryError when the
  /// device cannot hold it, after releasing the allocator's cache.
  virtual MemoryBlock allocate(std::uint64_t bytes) = 0;
  /// Gives `block` back. Callers guarantee that no work uses it any more
  /// (see Engine::delete_var's deleter). Safe from any thread.
  virtual void release(MemoryBlock block) noexcept = 0;
  virtual MemoryStats stats() const = 0;
  /// Returns cached blocks to the device.
  virtual void empty_cache() = 0;
  /// Bytes the device may hold (in use plus cached); 0 removes the limit.
  virtual void set_limit(std::uint64_t bytes) = 0;
  /// Restarts the peak from the bytes in use now.
  virtual void reset_peak() = 0;
};

}  // namespace tagflow::detail
