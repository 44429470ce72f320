// The threaded engine's side of the profiler (engine/profiler.h): the
// flows recorded at push, and the marks around each operation's work.

#include <new>
#include <utility>

#include "engine/detail/threaded_engine.h"

namespace tagflow::detail {

void ThreadedEngine::note_flows(const OpBlock& op) noexcept {
  // Called while linking, which must not stop half-way (Note [Linking cannot
  // fail]): without memory, the profile loses a flow, never a wrong one.
  for (const Dep& d : op.deps) {
    if (op.profile() != nullptr && reads_value(d.access)) {
      const auto writer = profiled_writers_.find(d.var);
      if (writer != profiled_writers_.end()) {
        try {
          record_flow(writer->second, op.seq);
        } catch (const std::bad_alloc&) {
        }
      }
    }
    // A write by an operation pushed while not profiling ends the record.
    if (is_write(d.access)) {
      try {
        if (op.profile() != nullptr && op.kind == OpKind::kUser) {
          profiled_writers_[d.var] = op.seq;
          continue;
        }
      } catch (const std::bad_alloc&) {
      }
      profiled_writers_.erase(d.var);
    }
  }
}

void ThreadedEngine::profile_start(OpBlock& op, Stream* stream, int worker) {
  ProfileMarks* marks = op.profile();
  marks->started = profiler_now();
  marks->worker = worker;
  if (stream == nullptr) return;
  try {  // the device work starts when the stream reaches this mark
    stream->enqueue_timestamp(&marks->device_started);
  } catch (...) {
    // A broken stream: the operation fails on its own; no device times.
  }
}

void ThreadedEngine::profile_device_end(OpBlock& op, Stream* stream) {
  try {  // before the operation's fence: resolved before the fence's callbacks
    stream->enqueue_timestamp(&op.profile()->device_ended);
  } catch (...) {
  }
}

void ThreadedEngine::profile_end(OpBlock& op, Stream* stream) {
  ProfileMarks* marks = std::exchange(op.extras->profile, nullptr);
  marks->ended = profiler_now();
  marks->name = op.name;
  marks->ctx = op.ctx;
  marks->queue = op.queue;
  marks->priority = op.priority;
  marks->seq = op.seq;
  marks->failed = op.error != nullptr;
  if (stream == nullptr) {
    record_op(marks);
    return;
  }
  try {  // handed on once the stream has passed the operation's work
    if (const Fence fence = op.fence()) {
      stream->when_finished(fence.seq, [marks] { record_op(marks); });
      return;
    }
  } catch (...) {
  }
  // A broken stream: its timestamps may still be written later, so the
  // marks are left alone (a few bytes per failed operation); the profile
  // gets a copy without device times.
  auto* copy = new ProfileMarks(*marks);
  copy->device_started = copy->device_ended = -1;
  record_op(copy);
}

}  // namespace tagflow::detail
