// The naive engine under a controlled schedule (Note [Controlled schedules]
// in engine/schedule.h): pushes kept, and the ready ones run in the order
// the schedule picks, at each wait.

#include <algorithm>
#include <chrono>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "engine/detail/naive_engine.h"
#include "engine/detail/stall_watch.h"

namespace tagflow::detail {

void NaiveEngine::keep(Deferred item) {
  bool too_many = false;
  {
    std::unique_lock lock(state_mutex_);
    // What may need memory first: a push that throws std::bad_alloc has
    // changed nothing (the schedule's entry for a ticket not handed out is
    // overwritten when it is). A refused item goes back to `item`, to be
    // destroyed once the lock is let go (its closure may call the engine).
    kept_.push_back(std::move(item));
    try {
      scheduler_->on_push(next_ticket_.load(std::memory_order_relaxed));
      admit(kept_.back());
    } catch (...) {
      item = std::move(kept_.back());
      kept_.pop_back();
      throw;
    }
    kept_.back().ticket = next_ticket_.fetch_add(1, std::memory_order_seq_cst);
    if (lent_waiters_ > 0) state_changed_.notify_all();  // maybe what they wait for
    // A thread pushing while the engine is held leaves the work to its
    // holder (it may be the one to complete the holder's operation), and
    // pauses while the backlog is large, as a handed-over push does.
    too_many = kept_.size() > kMaxKept && !inside_own_operation();
    if (too_many && (busy_ || kept_waiters_.load(std::memory_order_relaxed) > 0)) {
      throttle_kept(lock);
      too_many = false;
    }
  }
  if (too_many) {
    // Down to half, or until a wait wants the engine: waits come first.
    run_kept([this] {
      return kept_.size() <= kMaxKept / 2 || kept_waiters_.load(std::memory_order_relaxed) > 0;
    });
  }
}

std::vector<std::uint64_t> NaiveEngine::ready_kept(bool lent) const {
  // Kept between calls: clear() keeps the buckets, so a pick allocates little.
  UseMap& earlier = ready_scratch_;
  earlier.clear();
  std::vector<std::uint64_t> ready;
  // A pick costs the same whatever the backlog. The lent holder looks past
  // the oldest: they may all wait for what runs (the completing thread
  // pushing on what its operation writes), and a later one be what a
  // waiting thread needs.
  for (std::size_t i = 0; i < kept_.size(); ++i) {
    if (lent ? ready.size() == kMaxKept : i == kMaxKept) break;
    const Deferred& item = kept_[i];
    if (free_after(item, earlier) && !(lent && conflicts_with_running(item))) {
      ready.push_back(item.ticket);
    }
  }
  return ready;
}

bool NaiveEngine::kept_uses(const VarBlock* var, bool or_reads, std::uint64_t below) const {
  for (const Deferred& item : kept_) {
    if (item.ticket >= below) break;  // in push order
    if (!item.op) {
      if (var_block(item.deleted) == var) return true;
      continue;
    }
    for (const Dep& d : item.op->deps) {
      if (d.var == var && (or_reads || is_write(d.access))) return true;
    }
  }
  return false;
}

void NaiveEngine::run_kept(const std::function<bool()>& done, std::uint64_t below) {
  {
    std::unique_lock lock(state_mutex_);
    if (busy_) {
      // The holder may await this very thread: while it lends the engine
      // it runs kept items for us (Note [Lending the naive engine]).
      ++lent_waiters_;
      state_changed_.notify_all();
      state_changed_.wait(
          lock, [&] { return !busy_ || lent_failure_ || (lent_ && (kept_.empty() || done())); });
      --lent_waiters_;
    }
    if (lent_failure_) std::rethrow_exception(std::exchange(lent_failure_, nullptr));
    if (busy_) return;  // done while lent
    busy_ = true;
  }
  owner_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  std::exception_ptr failure;
  for (;;) {
    Deferred next;
    {
      std::lock_guard lock(state_mutex_);
      if (kept_.empty() || done()) break;
      try {
        std::vector<std::uint64_t> ready = ready_kept(false);
        std::erase_if(ready, [&](std::uint64_t ticket) { return ticket >= below; });
        const std::uint64_t chosen = scheduler_->pick(ready);
        const auto it = std::find_if(kept_.begin(), kept_.end(),
                                     [&](const Deferred& d) { return d.ticket == chosen; });
        next = std::move(*it);
        kept_.erase(it);
      } catch (...) {  // a replay that diverged: nothing more runs in its order
        failure = std::current_exception();
        break;
      }
    }
    run_item(next);
  }
  owner_.store(std::thread::id(), std::memory_order_relaxed);
  release();
  if (failure) std::rethrow_exception(failure);
}

void NaiveEngine::throttle_kept(std::unique_lock<std::mutex>& lock) {
  // As throttle_handed_over, on the kept items: the thread running them may
  // wait for this one (a completion), so a stall lets it go on. Progress is
  // every operation run, not the mark below which all tickets finished: a
  // schedule runs tickets out of order (PCT delays some on purpose), so that
  // mark may stand still while the picks go on, and a pusher that took it
  // for a stall ran ahead without bound. Under a schedule nothing is handed
  // over, so stalled_below_ counts operations here.
  const auto progress = [this] { return completed_.load(std::memory_order_relaxed); };
  if (progress() == stalled_below_) return;
  all_waiters_.fetch_add(1, std::memory_order_seq_cst);
  StallWatch watch(progress());
  while (kept_.size() > kMaxKept / 2) {
    state_changed_.wait_for(lock, std::chrono::milliseconds(2));
    if (watch.stalled(progress())) {
      stalled_below_ = progress();
      break;
    }
    if (!busy_ && kept_waiters_.load(std::memory_order_relaxed) == 0) break;  // nobody runs them
  }
  all_waiters_.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace tagflow::detail
