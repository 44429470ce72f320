#include "engine/detail/worker_pool.h"

#include <algorithm>

#include "engine/detail/lifetime.h"
#include "engine/error.h"

#include "engine/detail/threaded_engine.h"

namespace tagflow::detail {

void run_deleter(Engine::VarDeleter& deleter) noexcept {
  // Deleters also run while statics are destroyed: log_error then bypasses spdlog.
  try {
    deleter();
  } catch (const std::exception& e) {
    log_error("a variable's deleter threw (ignored): ", e.what());
  } catch (...) {
    log_error("a variable's deleter threw an unknown exception (ignored)");
  }
}

void check_not_inside_operation(const char* what) {
  const WorkerIdentity& me = this_worker();
  if (me.running != nullptr) [[unlikely]] {
    throw_error<WaitInsideOperationError>(
        "{} called from inside engine operation '{}': the wait would block the worker "
        "that has to run what it waits for (deadlock). Push a dependent operation instead, "
        "or wait from a host thread.",
        what, me.running);
  }
}

// --- WorkerPool ------------------------------------------------------------------

WorkerPool::WorkerPool(ThreadedEngine& engine, Context ctx, QueueKind kind, int num_workers,
                       std::unique_ptr<Stream> stream, DeviceBackend* backend)
    : engine_(engine),
      ctx_(ctx),
      kind_(kind),
      stream_(std::move(stream)),
      backend_(backend),
      counters_(std::make_unique<Counter[]>(static_cast<std::size_t>(num_workers))) {
  threads_.reserve(static_cast<std::size_t>(num_workers));
  for (int i = 0; i < num_workers; ++i) threads_.emplace_back([this, i] { run(i); });
}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::stop() {
  if (stopping_.exchange(true)) return;
  wake_.wake_all();
  for (std::thread& t : threads_) t.join();
}

std::uint64_t WorkerPool::completed(int slot) const {
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    total += counters_[i].completed[slot].load(std::memory_order_acquire);
  }
  return total;
}

void WorkerPool::enqueue(OpBlock* op) {
  queue_.push(op);
  // A read-modify-write, not a plain load: it is ordered with the idle
  // worker's own update in next_op(), so either that worker sees the
  // operation or we see it asleep. (A fence would do on x86; this is also
  // what ThreadSanitizer can check.) A spinning worker will find the
  // operation by itself: no wake-up then (Note [Idle workers]).
  const std::uint32_t idle = idle_.fetch_add(0, std::memory_order_seq_cst);
  if (spinners(idle) == 0 && sleepers(idle) > 0) wake_one();
}

void WorkerPool::wake_one() { wake_.wake_one(); }

OpBlock* WorkerPool::next_op() {
  if (OpBlock* op = queue_.pop()) return op;
  OpBlock::flush_returns();  // no operation memory stranded while idle
  engine_.notify_idle();
  for (;;) {
    if (stopping_.load(std::memory_order_acquire)) return nullptr;
    // At most one worker polls; the others sleep until it hands work on.
    std::uint32_t idle = idle_.load(std::memory_order_relaxed);
    bool spinning = false;
    while (spinners(idle) == 0) {
      if (idle_.compare_exchange_weak(idle, idle + kOneSpinner, std::memory_order_seq_cst)) {
        spinning = true;
        break;
      }
    }
    if (spinning) {
      const int budget = engine_.spin_budget();
      for (int polls = 0; polls < budget; ++polls) {
        if (queue_.maybe_nonempty()) {
          if (OpBlock* op = queue_.pop()) {
            const std::uint32_t now = idle_.fetch_sub(kOneSpinner, std::memory_order_seq_cst);
            // More waiting than this worker can take: bring a sleeper in.
            if (queue_.maybe_nonempty() && sleepers(now) > 0) wake_one();
            return op;
          }
        }
        if (stopping_.load(std::memory_order_relaxed)) break;
        // Now and then let a thread waiting for this core run: on a busy
        // machine that is often the one about to push the work.
        if ((polls & 7) == 7) {
          std::this_thread::yield();
        } else {
          cpu_relax();
        }
      }
      // From spinner to sleeper in one step, then look once more.
      idle_.fetch_add(kOneSleeper - kOneSpinner, std::memory_order_seq_cst);
    } else {
      idle_.fetch_add(kOneSleeper, std::memory_order_seq_cst);
    }
    const std::uint32_t epoch = wake_.epoch();
    if (!queue_.maybe_nonempty() && !stopping_.load(std::memory_order_seq_cst)) {
      wake_.wait(epoch);
    }
    idle_.fetch_sub(kOneSleeper, std::memory_order_seq_cst);
    if (OpBlock* op = queue_.pop()) {
      // Woken with more work behind: pass the wake-up on.
      const std::uint32_t now = idle_.load(std::memory_order_relaxed);
      if (queue_.maybe_nonempty() && spinners(now) == 0 && sleepers(now) > 0) wake_one();
      return op;
    }
  }
}

void WorkerPool::run(int index) {
  WorkerIdentity& me = this_worker();
  me.pool = this;
  me.index = index;
  // Once, for the thread's life: every kernel this worker launches goes to
  // this GPU's stream. An operation that selects another device must restore it.
  if (backend_ != nullptr) {
    try {
      backend_->set_device(ctx_.index);
    } catch (...) {
      device_error_ = std::current_exception();
    }
  }
  while (OpBlock* op = next_op()) {
    while (op != nullptr) op = engine_.execute(op, *this, index);
  }
  me.pool = nullptr;
}

}  // namespace tagflow::detail
