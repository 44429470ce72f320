#pragma once
// Copies between devices as engine operations. Internal to ops/.
//
// Note [Where copies run]
// A copy is pushed reading the source's variable and writing the
// destination's:
//  - host to host (cpu(i), cpu_pinned(i)): on the destination's CPU pool;
//  - involving a GPU: on that GPU's copy queue (the destination's when both
//    are GPUs), so transfers overlap the compute stream. Host to GPU goes
//    through pinned staging memory, GPU to host comes back through it, GPU to
//    GPU is a peer copy. On simulated GPUs each is a memcpy in stream order.

#include <cstdint>

#include "engine/context.h"
#include "engine/operation.h"

namespace tagflow::detail {

struct CopyRequest {
  Context src_ctx;
  const void* src = nullptr;
  VarHandle src_var = nullptr;
  Context dst_ctx;
  void* dst = nullptr;
  VarHandle dst_var = nullptr;
  std::uint64_t bytes = 0;
};

/// Pushes the copy (Note [Where copies run]); returns at once.
void push_copy(const CopyRequest& request);

/// Enqueues a copy on a real GPU's stream (`stream`, as void*), called from
/// the copy operation's closure. Defined in copy_gpu.cc; throws DeviceError
/// when tagflow was built without CUDA.
void enqueue_gpu_copy(const CopyRequest& request, Stream& stream);

}  // namespace tagflow::detail
