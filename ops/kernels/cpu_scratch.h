#pragma once
// CpuScratch: working memory of a CPU kernel (lowered images, oneDNN's
// blocked copies and scratchpads), from the pooled allocator of the device
// the kernel runs for. Internal to ops/.

#include <cstdint>

#include "engine/context.h"
#include "storage/storage.h"

namespace tagflow::detail {

/// Bytes from the pooled allocator of `ctx`, 64-byte aligned, given back
/// when the object is destroyed. A kernel's working memory can be far larger
/// than the arrays it reads, so it counts against the device's memory: a
/// request beyond what the device may hold throws OutOfMemoryError instead
/// of std::bad_alloc.
class CpuScratch {
 public:
  CpuScratch(Context ctx, std::uint64_t bytes)
      : allocator_(Storage::get().allocator(ctx)), block_(allocator_.allocate(bytes)) {}
  ~CpuScratch() { allocator_.release(block_); }
  CpuScratch(const CpuScratch&) = delete;
  CpuScratch& operator=(const CpuScratch&) = delete;

  void* data() const { return block_.data; }
  float* floats() const { return static_cast<float*>(block_.data); }

 private:
  Allocator& allocator_;
  MemoryBlock block_;
};

}  // namespace tagflow::detail
