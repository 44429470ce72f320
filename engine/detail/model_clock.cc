#include "engine/detail/model_clock.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace tagflow::detail::sim {

namespace {

/// A thread's clock, valid for the ModelClock whose id it carries: a thread
/// that outlives one engine starts again at 0 in the next.
struct ThreadClock {
  std::uint64_t owner = 0;
  std::int64_t ns = 0;
};

ThreadClock& this_thread_clock() {
  thread_local ThreadClock clock;
  return clock;
}

std::atomic<std::uint64_t> next_id{1};
std::atomic<const ModelClock*> active_clock{nullptr};

}  // namespace

ModelClock::ModelClock(DeviceModel model, int num_gpus, bool timing_only)
    : model_(std::move(model)),
      num_gpus_(num_gpus),
      timing_only_(timing_only),
      id_(next_id.fetch_add(1, std::memory_order_relaxed)) {
  active_clock.store(this, std::memory_order_release);
}

ModelClock::~ModelClock() {
  const ModelClock* self = this;
  active_clock.compare_exchange_strong(self, nullptr, std::memory_order_acq_rel);
}

const ModelClock* ModelClock::active() { return active_clock.load(std::memory_order_acquire); }

std::int64_t ModelClock::host_now() const {
  const ThreadClock& clock = this_thread_clock();
  return clock.owner == id_ ? clock.ns : 0;
}

void ModelClock::set_host_now(std::int64_t ns) const { this_thread_clock() = {id_, ns}; }

void ModelClock::host_reach(std::int64_t ns) const {
  ThreadClock& clock = this_thread_clock();
  if (clock.owner != id_) clock = {id_, 0};
  clock.ns = std::max(clock.ns, ns);
}

void ModelClock::note_finished(std::int64_t ns) {
  std::int64_t now = latest_.load(std::memory_order_relaxed);
  while (now < ns && !latest_.compare_exchange_weak(now, ns, std::memory_order_acq_rel)) {
  }
}

std::int64_t ModelClock::to_ns(double seconds) {
  return std::max<std::int64_t>(1, std::llround(seconds * 1e9));
}

}  // namespace tagflow::detail::sim
