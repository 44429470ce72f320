// The naive engine while its holder awaits another thread (Note [Lending the
// naive engine] in naive_engine.h): pushes handed over, waits on idle
// variables answered, and work a waiting thread needs run meanwhile.

#include <algorithm>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

#include "engine/detail/naive_engine.h"

namespace tagflow::detail {
namespace {

/// True when `item` (an operation, or a deletion) uses `var`: writes it, or
/// with `or_reads` uses it at all. A deletion uses its variable every way.
template <typename Item>
bool item_uses(const Item& item, const VarBlock* var, bool or_reads) {
  if (!item.op) return var_block(item.deleted) == var;
  return std::any_of(item.op->deps.begin(), item.op->deps.end(), [&](const Dep& d) {
    return d.var == var && (or_reads || is_write(d.access));
  });
}

/// True when running `item` before or beside an operation with `deps`
/// could change what either sees: a variable both use, one of them writing.
template <typename Item, typename Deps>
bool conflicts_with_deps(const Item& item, const Deps& deps) {
  return std::any_of(deps.begin(), deps.end(),
                     [&](const Dep& d) { return item_uses(item, d.var, is_write(d.access)); });
}

/// The same between two pushes not yet run.
template <typename Item>
bool conflicts(const Item& a, const Item& b) {
  if (!b.op) return item_uses(a, var_block(b.deleted), true);
  return conflicts_with_deps(a, b.op->deps);
}

}  // namespace

void NaiveEngine::begin_await() {
  {
    const std::lock_guard lock(state_mutex_);
    ++awaiting_;
  }
  state_changed_.notify_all();  // threads waiting for the engine hand over now
}

void NaiveEngine::end_await() {
  const std::lock_guard lock(state_mutex_);
  if (--awaiting_ > 0) return;  // an outer await goes on
  if (handed_over_.empty()) return;
  // Push order, whichever thread pushed: a push the closure deferred may
  // come after one handed over meanwhile (Note [Naive engine order]).
  for (Deferred& d : handed_over_) deferred_.push_back(std::move(d));
  handed_over_.clear();
  std::stable_sort(deferred_.begin(), deferred_.end(),
                   [](const Deferred& a, const Deferred& b) { return a.ticket < b.ticket; });
}

bool NaiveEngine::conflicts_with_running(const Deferred& item) const {
  // Only the holder changes running_, and not while the engine is lent.
  return std::any_of(running_.begin(), running_.end(),
                     [&](const OpBlock* op) { return conflicts_with_deps(item, op->deps); });
}

bool NaiveEngine::pending_use(const VarBlock* var, bool or_reads) const {
  auto uses = [&](const Deferred& item) { return item_uses(item, var, or_reads); };
  for (const OpBlock* op : running_) {
    for (const Dep& d : op->deps) {
      if (d.var == var && (or_reads || is_write(d.access))) return true;
    }
  }
  return std::any_of(deferred_.begin(), deferred_.end(), uses) ||
         std::any_of(handed_over_.begin(), handed_over_.end(), uses) ||
         std::any_of(kept_.begin(), kept_.end(), uses);
}

bool NaiveEngine::take_runnable(Deferred& out) {
  if (!scheduler_) {
    // The first handed-over push that conflicts with nothing before it not
    // yet run: the running operations, what they deferred, and the pushes
    // handed over before it.
    for (auto it = handed_over_.begin(); it != handed_over_.end(); ++it) {
      if (conflicts_with_running(*it)) continue;
      if (std::any_of(deferred_.begin(), deferred_.end(),
                      [&](const Deferred& d) { return conflicts(*it, d); })) {
        continue;
      }
      if (std::any_of(handed_over_.begin(), it,
                      [&](const Deferred& d) { return conflicts(*it, d); }))
        continue;
      out = std::move(*it);
      handed_over_.erase(it);
      return true;
    }
    return false;
  }
  // A controlled schedule: kept items run at waits, so only while a wait
  // asks for them, picked among the ready ones that conflict with nothing
  // running.
  if (lent_waiters_ == 0 || lent_failure_) return false;
  std::vector<std::uint64_t> ready;
  try {
    ready = ready_kept();
    std::erase_if(ready, [&](std::uint64_t ticket) {
      const auto it = std::find_if(kept_.begin(), kept_.end(),
                                   [&](const Deferred& d) { return d.ticket == ticket; });
      return conflicts_with_running(*it);
    });
    if (ready.empty()) return false;
    const std::uint64_t chosen = scheduler_->pick(ready);
    const auto it = std::find_if(kept_.begin(), kept_.end(),
                                 [&](const Deferred& d) { return d.ticket == chosen; });
    out = std::move(*it);
    kept_.erase(it);
    return true;
  } catch (...) {  // a replay that diverged, or no memory: for a waiter to throw
    lent_failure_ = std::current_exception();
    state_changed_.notify_all();
    return false;
  }
}

void NaiveEngine::await_completion(WaitSignal& finished) {
  std::unique_lock lock(state_mutex_);
  for (;;) {
    {
      const std::lock_guard signal_lock(finished.mutex);
      if (finished.done) break;  // set by complete_async under state_mutex_
    }
    Deferred next;
    if (take_runnable(next)) {
      lent_ = false;  // from here the holder changes its queues
      lock.unlock();
      run_item(next);
      lock.lock();
      continue;
    }
    if (!lent_) {
      lent_ = true;
      state_changed_.notify_all();  // waiters see what is pending now
    }
    state_changed_.wait(lock);
  }
  lent_ = false;
}

void NaiveEngine::await_device(Stream& stream, std::uint64_t mark) {
  // Host work on the stream may push, or wait on an idle variable: lent,
  // without running anything (this thread is blocked in the stream).
  begin_await();
  {
    const std::lock_guard lock(state_mutex_);
    lent_ = true;
  }
  state_changed_.notify_all();
  struct Unlend {
    NaiveEngine& engine;
    ~Unlend() {
      {
        const std::lock_guard lock(engine.state_mutex_);
        engine.lent_ = false;
      }
      engine.end_await();
    }
  } unlend{*this};
  stream.synchronize(mark);
}

}  // namespace tagflow::detail
