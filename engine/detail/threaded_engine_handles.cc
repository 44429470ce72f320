// The threaded engine's operation handles: a tracked push, and how a
// completing operation tells its handle, at once or once its device work has
// finished (Note [Operation handles] in operation_state.h).

#include <exception>
#include <utility>

#include "engine/detail/operation_state.h"
#include "engine/detail/threaded_engine.h"

namespace tagflow::detail {

OperationHandle ThreadedEngine::push_tracked(Operation op) {
  OperationHandle handle = OperationState::make_handle();
  push_block(op, OperationState::of(handle));
  return handle;
}

void ThreadedEngine::notify_tracker(OpBlock& op) noexcept {
  const OperationStateRef state(
      std::exchange(op.extras->tracker, nullptr));  // the operation's reference
  const Fence fence = op.fence();
  if (!fence) {  // a host operation, or a GPU one that could not mark its stream
    state->complete(op.error, errors_);
    return;
  }
  // Once the device work has finished (at once if it has), what wait_to_read
  // on a variable the operation writes would then see.
  try {
    fence.stream->when_finished(fence.seq, [ref = OperationStateRef(state->retain()), fence,
                                            error = op.error, report = errors_] {
      ref->complete(error ? error : fence_error(fence), report);
    });
  } catch (...) {  // the stream cannot track it: report that, so that no waiter hangs
    state->complete(
        op.error ? op.error : device_work_error(*fence.stream, std::current_exception()), errors_);
  }
}

}  // namespace tagflow::detail
