#pragma once
// ErrorReport: which error each wait_for_all() rethrows, the same rule on
// every engine. Internal to engine/.
//
// Note [Errors seen by wait_for_all]
// wait_for_all() rethrows the first error raised since the previous
// wait_for_all() returned, whichever thread pushed the failing operation
// and whichever thread waits. Errors are kept in windows: a window opens
// when a wait_for_all returns having reported (or having found nothing), and
// every wait_for_all reports the first error of the window that was open
// when it was called. So threads that wait at the same time all see the same
// error, none consuming another's, and a wait that begins after one returned
// sees only what was raised since. The first error of each of the last 64
// windows that had one is kept for waiters still on their way out.

#include <atomic>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <utility>

namespace tagflow::detail {

class ErrorReport {
 public:
  /// Keeps `error` if it is the first of the open window (cheap otherwise).
  void record(const std::exception_ptr& error) {
    if (has_error_.load(std::memory_order_relaxed)) return;
    std::lock_guard lock(mutex_);
    if (!first_) {
      first_ = error;
      has_error_.store(true, std::memory_order_release);
    }
  }

  /// The window a waiter starts in: call before waiting.
  std::uint64_t open_window() const {
    std::lock_guard lock(mutex_);
    return window_;
  }

  /// What a waiter that started in `window` reports once its wait is over:
  /// the first error of that window, or null. The first such waiter closes
  /// the window.
  std::exception_ptr close(std::uint64_t window) {
    std::lock_guard lock(mutex_);
    if (window == window_) {
      std::exception_ptr error = std::exchange(first_, nullptr);
      has_error_.store(false, std::memory_order_relaxed);
      if (error) {
        closed_.emplace_back(window, error);
        if (closed_.size() > kKept) closed_.pop_front();
      }
      ++window_;
      return error;
    }
    for (const auto& [id, error] : closed_) {
      if (id == window) return error;
    }
    return nullptr;  // that window had no error (or is long gone)
  }

  /// The first error of the open window, or null (for warnings at exit).
  std::exception_ptr unreported() const {
    std::lock_guard lock(mutex_);
    return first_;
  }

 private:
  static constexpr std::size_t kKept = 64;

  std::atomic<bool> has_error_{false};
  mutable std::mutex mutex_;
  std::uint64_t window_ = 0;
  std::exception_ptr first_;
  std::deque<std::pair<std::uint64_t, std::exception_ptr>> closed_;
};

}  // namespace tagflow::detail
