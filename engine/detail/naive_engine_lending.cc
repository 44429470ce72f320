// The naive engine while its holder awaits another thread (Note [Lending the
// naive engine] in naive_engine.h): asynchronous operations launched and
// finished, pushes handed over, waits on idle variables answered, and work
// a waiting thread needs run meanwhile.

#include <algorithm>
#include <exception>
#include <mutex>
#include <new>
#include <optional>
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
  // What was handed over stays where it is: the holder runs it, and what it
  // deferred, in push order once no await is left (run_exclusively).
  const std::lock_guard lock(state_mutex_);
  --awaiting_;
}

bool NaiveEngine::free_after(const Deferred& item, UseMap& earlier) {
  bool free = true;
  if (!item.op) {
    const VarBlock* var = var_block(item.deleted);
    free = !earlier.contains(var);
    earlier[var] = {true, true};
    return free;
  }
  for (const Dep& d : item.op->deps) {
    const auto it = earlier.find(d.var);
    if (it == earlier.end()) continue;
    if (it->second.written || (is_write(d.access) && it->second.read)) free = false;
  }
  for (const Dep& d : item.op->deps) {
    KeptUses& uses = earlier[d.var];
    (is_write(d.access) ? uses.written : uses.read) = true;
  }
  return free;
}

bool NaiveEngine::conflicts_with_running(const Deferred& item) const {
  // Only the holder changes running_, and not while the engine is lent.
  return std::any_of(running_.begin(), running_.end(),
                     [&](const Running& r) { return conflicts_with_deps(item, r.op->deps); });
}

bool NaiveEngine::pending_use(const VarBlock* var, bool or_reads, std::uint64_t below) const {
  auto uses = [&](const Deferred& item) {
    return item.ticket < below && item_uses(item, var, or_reads);
  };
  for (const auto& [op, ticket] : running_) {
    if (ticket >= below) continue;
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
    // The first push, deferred or handed over, in push order (each queue
    // is), that conflicts with nothing running and with no push before it.
    // What earlier ones use is noted as the scan goes; without memory for
    // that, it compares pairs instead (the await cannot fail: Note [Lending
    // the naive engine]).
    UseMap& earlier = ready_scratch_;
    earlier.clear();
    bool indexed = true;
    auto free_of_earlier = [&](const Deferred& item) {
      if (indexed) {
        try {
          return free_after(item, earlier);
        } catch (const std::bad_alloc&) {
          indexed = false;
        }
      }
      auto before_and_conflicting = [&](const Deferred& e) {
        return e.ticket < item.ticket && conflicts(item, e);
      };
      return std::none_of(deferred_.begin(), deferred_.end(), before_and_conflicting) &&
             std::none_of(handed_over_.begin(), handed_over_.end(), before_and_conflicting);
    };
    auto d = deferred_.begin();
    auto h = handed_over_.begin();
    while (d != deferred_.end() || h != handed_over_.end()) {
      const bool deferred =
          h == handed_over_.end() || (d != deferred_.end() && d->ticket < h->ticket);
      Deferred& item = deferred ? *d : *h;
      if (free_of_earlier(item) && !conflicts_with_running(item)) {
        out = std::move(item);
        if (deferred) {
          deferred_.erase(d);
        } else {
          handed_over_.erase(h);
        }
        return true;
      }
      if (deferred) {
        ++d;
      } else {
        ++h;
      }
    }
    return false;
  }
  // A controlled schedule: kept items run at waits, so only while a wait
  // asks for them, picked among the ready ones that conflict with nothing
  // running.
  if (lent_waiters_ == 0 || lent_failure_) return false;
  try {
    const std::vector<std::uint64_t> ready = ready_kept(true);
    if (ready.empty()) return false;
    const std::uint64_t chosen = scheduler_->pick(ready);
    const auto it = std::find_if(kept_.begin(), kept_.end(),
                                 [&](const Deferred& item) { return item.ticket == chosen; });
    out = std::move(*it);
    kept_.erase(it);
    return true;
  } catch (...) {  // a replay that diverged, or no memory: for a waiter to throw
    lent_failure_ = std::current_exception();
    state_changed_.notify_all();
    return false;
  }
}

bool NaiveEngine::launch_async(OpBlock& block, const RunContext& rc, Await& await) {
  std::optional<ScopedDevice> on_device;
  try {
    if (rc.stream != nullptr) on_device.emplace(*backend_, block.ctx.index);
    if (block.profile() != nullptr && rc.stream != nullptr) [[unlikely]] {
      rc.stream->enqueue_timestamp(&block.profile()->device_started);
    }
    block.extra().signal = &await.signal;
    block.extras->engine = this;  // for its Completion
  } catch (...) {
    block.error = block.wrap(std::current_exception());
    return false;
  }
  // From the closure's start: a thread it hands the Completion to may push
  // before this thread is waiting (Note [Naive engine order]).
  begin_await();
  {
    Completion completion = OpBlock::make_completion(&block);
    try {
      block.fn.body()(rc, &completion);
    } catch (...) {
      await.launch_error = std::current_exception();
    }
  }  // a Completion the closure did not take is dropped here: fails the op
  if (block.profile() != nullptr) [[unlikely]]
    block.profile()->returned = profiler_now();
  block.stage.store(OperationStage::kLaunched, std::memory_order_relaxed);
  return true;
}

void NaiveEngine::finish_async(Await& await) {
  OpBlock& block = *await.item->op;
  await.finished = true;
  end_await();
  try {
    if (await.launch_error) std::rethrow_exception(await.launch_error);
    if (await.signal.error) std::rethrow_exception(await.signal.error);
    if (await.stream != nullptr) {
      const ScopedDevice on_device(*backend_, block.ctx.index);
      finish_on_device(block, *await.stream);
    }
  } catch (...) {
    block.error = block.wrap(std::current_exception());
  }
  forget_running(block);
  try {
    complete(block, await.stream);
  } catch (...) {  // as in run_item: maybe within another operation's await
    errors_->record(std::current_exception());
    notify_tracker(block, std::current_exception());
  }
  finish_ticket(await.item->ticket);
  await.item->ticket_finished = true;
}

void NaiveEngine::finish_on_device(OpBlock& block, Stream& stream) {
  if (block.profile() != nullptr) [[unlikely]] {
    stream.enqueue_timestamp(&block.profile()->device_ended);
  }
  const std::uint64_t mark = stream.record();
  await_device(stream, mark);
  // Note [Errors of device work] in engine/stream.h: a failure is sticky,
  // so every operation after it on this stream fails too.
  if (std::exception_ptr device_error = stream.error_at(mark)) [[unlikely]]
    std::rethrow_exception(device_error);
}

void NaiveEngine::await_completion(Await& mine) {
  // Returns only once mine's Completion came: its frame, and the signal the
  // completing thread tells, live until then. What fails on the way (no
  // memory for the bookkeeping) is thrown after.
  std::exception_ptr failure;
  std::unique_lock lock(state_mutex_);
  while (!mine.finished) {  // else by an await nested in this one
    // The innermost first: an outer await whose completion came is finished
    // here, since its frame runs only once this one returns.
    Await* completed = nullptr;
    for (Await* a = awaits_; a != nullptr && completed == nullptr; a = a->outer) {
      if (a->finished) continue;
      const std::lock_guard signal_lock(a->signal.mutex);
      if (a->signal.done) completed = a;  // set by complete_async under state_mutex_
    }
    Deferred next;
    if (completed != nullptr || take_runnable(next)) {
      lent_ = false;  // from here the holder changes its queues
      lock.unlock();
      try {
        if (completed != nullptr) {
          finish_async(*completed);
        } else {
          run_item(next);
        }
      } catch (...) {
        if (!failure) failure = std::current_exception();
      }
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
  lock.unlock();
  if (failure) std::rethrow_exception(failure);
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
