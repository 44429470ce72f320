// The threaded engine's part in modelled time (Note [Modelled time] in
// engine/device_model.h): which modelled moment each operation's host side
// runs at, so that the device work it issues starts no earlier. Only
// reached while the engine's GPUs are simulated with a device model.

#include <algorithm>
#include <mutex>

#include "engine/detail/model_clock.h"
#include "engine/detail/profile_marks.h"
#include "engine/detail/threaded_engine.h"

namespace tagflow::detail {

std::int64_t ThreadedEngine::modelled_time_ns() const {
  return model_ != nullptr ? model_->host_now() : -1;
}

void ThreadedEngine::note_modelled_issue(const OpBlock& op) {
  const std::int64_t issued = model_->host_now();
  if (issued <= 0) return;  // a pusher that never waited issues at 0
  std::lock_guard lock(modelled_mutex_);
  modelled_issue_[&op] = issued;
}

std::int64_t ThreadedEngine::modelled_time_of(const VarBlock& var, bool write) {
  std::int64_t t = var.modelled_ns.load(std::memory_order_relaxed);
  if (var.write_fence) t = std::max(t, var.write_fence.stream->modelled_time(var.write_fence.seq));
  if (write) {
    for (const Fence& f : var.read_fences) t = std::max(t, f.stream->modelled_time(f.seq));
  }
  return t;
}

void ThreadedEngine::enter_modelled_time(const OpBlock& op) {
  std::int64_t start = 0;
  {
    std::lock_guard lock(modelled_mutex_);
    if (!modelled_issue_.empty()) {
      if (auto it = modelled_issue_.find(&op); it != modelled_issue_.end()) {
        start = it->second;
        modelled_issue_.erase(it);
      }
    }
  }
  // Fences not finished yet are on a stream this operation's work waits on
  // (stream order or an event wait), which times them; finished ones read
  // their modelled time.
  for (const Dep& d : op.deps)
    start = std::max(start, modelled_time_of(*d.var, is_write(d.access)));
  model_->set_host_now(start);
  // Ready when it starts: the modelled host takes no time (Note [Modelled
  // traces] in model_clock.h); the stamp of a stream's callback is not its.
  if (op.profile() != nullptr) [[unlikely]]
    op.profile()->ready = start;
}

void ThreadedEngine::leave_modelled_time(const OpBlock& op) {
  const std::int64_t ended = model_->host_now();
  for (const Dep& d : op.deps) {
    if (is_write(d.access)) d.var->modelled_ns.store(ended, std::memory_order_relaxed);
  }
}

}  // namespace tagflow::detail
