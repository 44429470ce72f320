#include "engine/operation_handle.h"

#include <utility>

#include "engine/detail/lifetime.h"
#include "engine/detail/operation_state.h"
#include "engine/detail/worker_pool.h"
#include "engine/error.h"

namespace tagflow {

// --- OperationHandle -------------------------------------------------------------

OperationHandle::OperationHandle(const OperationHandle& other) noexcept
    : state_(other.state_ != nullptr ? other.state_->retain() : nullptr) {}

OperationHandle& OperationHandle::operator=(const OperationHandle& other) noexcept {
  if (this != &other) {
    if (other.state_ != nullptr) other.state_->retain();
    if (state_ != nullptr) state_->release();
    state_ = other.state_;
  }
  return *this;
}

OperationHandle::OperationHandle(OperationHandle&& other) noexcept
    : state_(std::exchange(other.state_, nullptr)) {}

OperationHandle& OperationHandle::operator=(OperationHandle&& other) noexcept {
  if (this != &other) {
    if (state_ != nullptr) state_->release();
    state_ = std::exchange(other.state_, nullptr);
  }
  return *this;
}

OperationHandle::~OperationHandle() {
  if (state_ != nullptr) state_->release();
}

bool OperationHandle::done() const noexcept { return state_ != nullptr && state_->done(); }

std::exception_ptr OperationHandle::error() const noexcept {
  return state_ != nullptr ? state_->error() : nullptr;
}

void OperationHandle::wait() const {
  TAGFLOW_CHECK(state_ != nullptr,
                "OperationHandle::wait: the handle is empty (default-constructed or moved "
                "from); expected one returned by Engine::push_tracked");
  state_->wait();
}

void OperationHandle::on_done(Callback callback) const {
  TAGFLOW_CHECK(state_ != nullptr,
                "OperationHandle::on_done: the handle is empty (default-constructed or moved "
                "from); expected one returned by Engine::push_tracked");
  TAGFLOW_CHECK(static_cast<bool>(callback),
                "OperationHandle::on_done: expected a callback, got "
                "an empty one");
  state_->on_done(std::move(callback));
}

namespace detail {

// --- OperationState: Note [Operation handles] --------------------------------------

namespace {

/// What a wait from inside a handle's callback is told it was called from.
constexpr const char* kCallbackLabel = "OperationHandle callback";

}  // namespace

OperationHandle OperationState::make_handle() { return OperationHandle(new OperationState); }

void OperationState::complete(std::exception_ptr error,
                              std::shared_ptr<ErrorReport> report) noexcept {
  std::unique_lock lock(mutex_);
  if (completing_) return;
  completing_ = true;
  error_ = std::move(error);
  if (error_) report_ = std::move(report);
  // Callbacks registered while these run are appended, and run next.
  while (!callbacks_.empty()) {
    {
      std::vector<Callback> due = std::move(callbacks_);
      callbacks_.clear();
      lock.unlock();
      for (Callback& callback : due) run_callback(callback);
    }  // and destroyed outside the lock: what they captured may register more
    lock.lock();
  }
  done_.store(true, std::memory_order_release);
  lock.unlock();
  // The operation's reference, held by the caller, keeps the state alive here.
  finished_.notify_all();
}

void OperationState::run_callback(Callback& callback) const noexcept {
  WorkerIdentity& me = this_worker();
  const char* outer = me.running;
  if (outer == nullptr) me.running = kCallbackLabel;  // waits then throw, not deadlock
  try {
    callback(error_);
  } catch (const std::exception& e) {
    log_error("an OperationHandle callback threw (ignored): ", e.what());
  } catch (...) {
    log_error("an OperationHandle callback threw an unknown exception (ignored)");
  }
  me.running = outer;
}

void OperationState::wait() const {
  check_not_inside_operation("OperationHandle::wait");
  if (!done() && runner_ != nullptr) runner_(runner_engine_, *this);
  if (!done()) {
    if (fork_check_.forked()) [[unlikely]]
      throw_fork_error("OperationHandle::wait");
    std::unique_lock lock(mutex_);
    finished_.wait(lock, [&] { return done(); });
  }
  if (error_) {
    if (report_ != nullptr) report_->seen(error_);
    std::rethrow_exception(error_);
  }
}

void OperationState::on_done(Callback callback) {
  {
    std::lock_guard lock(mutex_);
    if (!done()) {
      callbacks_.push_back(std::move(callback));
      return;
    }
  }
  run_callback(callback);
}

}  // namespace detail

}  // namespace tagflow
