#include "engine/watchdog.h"

#include <algorithm>

#include "engine/detail/lifetime.h"
#include "engine/error.h"

namespace tagflow {

Watchdog::Watchdog(Engine& engine, std::chrono::milliseconds stall, Callback on_stall)
    : engine_(engine),
      stall_(stall),
      on_stall_(std::move(on_stall)),
      fork_check_(std::make_unique<detail::ForkCheck>()) {
  TAGFLOW_CHECK(stall_.count() > 0, "Watchdog: expected a positive stall time, got {} ms",
                stall_.count());
  TAGFLOW_CHECK(static_cast<bool>(on_stall_), "Watchdog: expected a callback, got none");
  thread_ = std::thread([this] { run(); });
}

Watchdog::~Watchdog() {
  if (fork_check_->forked()) [[unlikely]] {
    thread_.detach();
    detail::abandon(std::move(state_));
    return;
  }
  {
    std::lock_guard lock(state_->mutex);
    state_->stopping = true;
  }
  state_->stop_cv.notify_all();
  thread_.join();
}

int Watchdog::stalls() const {
  std::lock_guard lock(state_->mutex);
  return state_->stalls;
}

void Watchdog::run() {
  // Looks ten times per stall period: a stall is reported between `stall`
  // and 1.1 x `stall` after the last completion it saw.
  const auto period =
      std::clamp(stall_ / 10, std::chrono::milliseconds(1), std::chrono::milliseconds(1000));
  using Clock = std::chrono::steady_clock;
  OperationCounts last = engine_.operation_counts();
  auto last_progress = Clock::now();
  bool reported = false;
  State& state = *state_;
  std::unique_lock lock(state.mutex);
  while (!state.stop_cv.wait_for(lock, period, [&] { return state.stopping; })) {
    const OperationCounts now = engine_.operation_counts();
    const auto t = Clock::now();
    if (now.completed != last.completed || now.pending() == 0) {
      last = now;
      last_progress = t;
      reported = false;
      continue;
    }
    if (reported || t - last_progress < stall_) continue;
    reported = true;
    lock.unlock();  // the callback may take long, or ask for stalls()
    on_stall_(engine_.dependency_state());
    lock.lock();
    ++state.stalls;
  }
}

}  // namespace tagflow
