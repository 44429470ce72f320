#pragma once
// ErrorReport: which error each wait_for_all() rethrows, and which one the
// exit warning names, the same rule on every engine. Internal to engine/.
//
// Note [Errors seen by wait_for_all]
// An error is reported to each waiter that asks for it, and wait_for_all()
// asks for the errors nobody has seen:
//  - A wait on what failed (wait_to_read, wait_to_write, a handle's wait())
//    rethrows its error every time it is called, and marks it seen (seen()).
//  - wait_for_all() rethrows the first error, raised since the previous
//    wait_for_all() returned, that no wait had rethrown by the time it
//    returns; whichever thread pushed the failing operation and whichever
//    thread waits. Errors are kept in windows: a window opens when a
//    wait_for_all returns having reported (or having found nothing), and
//    every wait_for_all reports from the window that was open when it was
//    called. So threads that wait at the same time all see the same error,
//    none consuming another's, and a wait that begins after one returned
//    sees only what was raised since.
//  - The engine's exit warning names an error that nothing reported.
// An error caught from wait_to_read() therefore does not come back from the
// next wait_for_all() with only healthy work pushed since, nor at exit. The
// operations that inherit a failure (they read what it wrote) carry the same
// error, which is recorded once; so is a GPU's fault, which the waits and
// wait_for_all meet as one OperationError (ThreadedEngine::device_work_error).
// Errors are told apart by identity only: an error's object is never read
// here, since the engine's threads release it without a lock. A window
// keeps its first kPerWindow distinct errors; the first error of each of the
// last kKept closed windows that had one is kept for waiters still on their
// way out; the last kSeen errors rethrown by waits are remembered, so that
// an operation that inherits one and completes later does not bring it back.

#include <algorithm>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <utility>
#include <vector>

namespace tagflow::detail {

class ErrorReport {
 public:
  /// Keeps `error` in the open window, unless a wait has rethrown it or the
  /// window holds it already.
  void record(const std::exception_ptr& error) {
    std::lock_guard lock(mutex_);
    if (contains(seen_, error) || contains(open_, error) || open_.size() >= kPerWindow) return;
    open_.push_back(error);
  }

  /// A wait rethrew `error`: no wait_for_all reports it, nor the exit warning.
  void seen(const std::exception_ptr& error) {
    if (!error) return;
    std::lock_guard lock(mutex_);
    std::erase(open_, error);
    if (contains(seen_, error)) return;
    seen_.push_back(error);
    if (seen_.size() > kSeen) seen_.pop_front();
  }

  /// The window a waiter starts in: call before waiting.
  std::uint64_t open_window() const {
    std::lock_guard lock(mutex_);
    return window_;
  }

  /// What a waiter that started in `window` reports once its wait is over:
  /// the first error of that window no wait had rethrown, or null. The first
  /// such waiter closes the window.
  std::exception_ptr close(std::uint64_t window) {
    std::lock_guard lock(mutex_);
    if (window == window_) {
      std::exception_ptr error = open_.empty() ? nullptr : open_.front();
      open_.clear();
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

  /// The first error of the open window nothing has reported, or null (for
  /// the warning at exit).
  std::exception_ptr unreported() const {
    std::lock_guard lock(mutex_);
    return open_.empty() ? nullptr : open_.front();
  }

 private:
  static constexpr std::size_t kPerWindow = 64;
  static constexpr std::size_t kKept = 64;
  static constexpr std::size_t kSeen = 64;

  template <typename List>
  static bool contains(const List& list, const std::exception_ptr& error) {
    return std::find(list.begin(), list.end(), error) != list.end();
  }
  mutable std::mutex mutex_;
  std::uint64_t window_ = 0;
  /// The open window's errors that no wait has rethrown, in the order raised.
  std::vector<std::exception_ptr> open_;
  std::deque<std::exception_ptr> seen_;
  std::deque<std::pair<std::uint64_t, std::exception_ptr>> closed_;
};

}  // namespace tagflow::detail
