// The threaded engine's device fences: what an operation ready to run must
// wait for on other streams or on the host, and the errors of device work
// that reach it through them (Note [Completion on device queues] and Note
// [Errors of device work] in engine/stream.h).

#include <deque>
#include <exception>
#include <mutex>
#include <utility>

#include "engine/detail/threaded_engine.h"
#include "engine/error.h"

namespace tagflow::detail {

bool ThreadedEngine::hold_for_fences(OpBlock* op) {
  Stream* own_stream = op->pool != nullptr ? op->pool->stream() : nullptr;
  SmallVector<Fence, 4> host_waits;
  auto consider = [&](const Fence& fence) {
    if (!fence || fence.stream == own_stream || fence.stream->finished(fence.seq)) return;
    if (own_stream != nullptr) {
      op->extra().stream_waits.push_back(fence);
    } else {
      host_waits.push_back(fence);
    }
  };
  for (const Dep& d : op->deps) {
    consider(d.var->write_fence);
    if (is_write(d.access)) {
      for (const Fence& f : d.var->read_fences) consider(f);
    }
  }
  if (host_waits.empty()) {
    take_fence_errors(op);
    return false;
  }
  // Held back until its device inputs have finished; the last fence to
  // finish hands it on, from the stream's thread.
  op->stage.store(OperationStage::kHeldForDevice, std::memory_order_relaxed);
  op->pending.store(static_cast<std::int32_t>(host_waits.size()) + 1, std::memory_order_relaxed);
  for (const Fence& f : host_waits) {
    f.stream->when_finished(f.seq, [this, op] {
      if (op->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        take_fence_errors(op);
        run_or_enqueue(op, nullptr);
      }
    });
  }
  // Our own reference: if every fence finished meanwhile, we hand it on.
  if (op->pending.fetch_sub(1, std::memory_order_acq_rel) != 1) return true;
  take_fence_errors(op);
  return false;
}

std::exception_ptr ThreadedEngine::device_work_error(const Stream& stream,
                                                     std::exception_ptr cause) {
  // One error per fault, whichever wait or wait_for_all asks: so a fault a
  // wait rethrew is the error wait_for_all would report, and it is reported
  // once (Note [Errors seen by wait_for_all] in error_report.h). Faults are
  // sticky and rare; the last kKept are kept.
  static constexpr std::size_t kKept = 64;
  static std::mutex mutex;
  static auto* const made = new std::deque<std::pair<std::exception_ptr, std::exception_ptr>>();
  const std::lock_guard lock(mutex);
  for (const auto& [known, error] : *made) {
    if (known == cause) return error;
  }
  std::exception_ptr error = std::make_exception_ptr(
      OperationError(stream.kind() == QueueKind::kCopy ? "device work on the copy stream"
                                                       : "device work on the compute stream",
                     stream.context(), cause));
  made->emplace_back(std::move(cause), error);
  if (made->size() > kKept) made->pop_front();
  return error;
}

std::exception_ptr ThreadedEngine::fence_error(const Fence& fence) {
  if (!fence || !fence.stream->finished(fence.seq)) return nullptr;
  std::exception_ptr cause = fence.stream->error_at(fence.seq);
  if (!cause) [[likely]]
    return nullptr;
  return device_work_error(*fence.stream, std::move(cause));
}

void ThreadedEngine::take_fence_errors(OpBlock* op) {
  // Note [Errors of device work] in engine/stream.h. Fences not yet finished
  // are on a stream this operation's own work follows on the device: their
  // failure then reaches its own mark instead.
  if (op->error || op->kind != OpKind::kUser) return;
  for (const Dep& d : op->deps) {
    if (!reads_value(d.access)) continue;
    if (std::exception_ptr error = fence_error(d.var->write_fence)) [[unlikely]] {
      op->error = std::move(error);  // inherited: the operation is skipped
      return;
    }
  }
}

}  // namespace tagflow::detail
