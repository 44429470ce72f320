#include "ops/kernels/copy.h"

#include <cstring>

#include "engine/detail/sim_runtime.h"
#include "engine/engine.h"
#include "engine/stream.h"
#include "ops/priority.h"

namespace tagflow::detail {

void push_copy(const CopyRequest& request) {
  if (request.bytes == 0) return;
  Operation op{.name = "copy",
               .reads = {request.src_var},
               .writes = {request.dst_var},
               .priority = current_priority()};
  if (!request.src_ctx.is_gpu() && !request.dst_ctx.is_gpu()) {
    op.ctx = request.dst_ctx;
    op.fn = [r = request](const RunContext&) { std::memcpy(r.dst, r.src, r.bytes); };
  } else {
    op.ctx = request.dst_ctx.is_gpu() ? request.dst_ctx : request.src_ctx;
    op.queue = QueueKind::kCopy;
    op.fn = [r = request](const RunContext& rc) {
      if (rc.stream->native_handle() != nullptr) {
        enqueue_gpu_copy(r, *rc.stream);
      } else {
        sim::enqueue_copy(
            *rc.stream, r.src_ctx, r.dst_ctx, r.bytes,
            [dst = r.dst, src = r.src, bytes = r.bytes] { std::memcpy(dst, src, bytes); });
      }
    };
  }
  Engine::get().push(std::move(op));
}

}  // namespace tagflow::detail
