#pragma once
// OperationHandle: what Engine::push_tracked returns, to learn when one
// pushed operation has completed without inventing a variable to wait on.
//
//   OperationHandle h = engine.push_tracked({.name = "save", .ctx = cpu(0),
//                                            .reads = {weights}, .fn = save_to_disk});
//   h.on_done([](std::exception_ptr error) { if (!error) metrics.saved(); });
//   ...
//   h.wait();   // returns once "save" has completed; rethrows its error
//
// See Note [Operation handles] in engine/detail/operation_state.h.
//
// Threads: concurrent reads, exclusive writes. done(), wait(), error() and
// on_done() may be called from any threads, on one handle or its copies;
// assigning to one handle object is a write, as for std::shared_ptr.

#include <exception>

#include "engine/inline_function.h"

namespace tagflow {

namespace detail {
class OperationState;
}  // namespace detail

/// A copyable, thread-safe reference to one pushed operation. Copies share
/// one state, which lives as long as the last copy: a handle may outlive its
/// engine (an engine drains its work when destroyed, so by then the
/// operation has completed and the handle keeps answering).
///
/// "Completed" means what wait_to_read means on a variable the operation
/// writes: its closure has returned (or its Completion was called) and, on a
/// GPU, its device work has finished. The outcome is the error wait_to_read
/// on such a variable would rethrow: the operation's own failure, an error it
/// inherited from what it reads (it was then skipped), or a failure of its
/// device work (Note [Errors of device work] in engine/stream.h). An error
/// that wait() rethrows has been reported: wait_for_all and the exit warning
/// leave it out; error() and the callbacks leave it for wait_for_all (Note
/// [Errors seen by wait_for_all] in engine/detail/error_report.h).
class OperationHandle {
 public:
  /// Called once the operation has completed, with its error (null on
  /// success). Keep it small: it runs on the thread that completes the
  /// operation (a worker, the thread calling a Completion, a GPU stream's
  /// thread once the device work has finished, the pusher on the naive
  /// engine), and holds up what that thread does next. It must not throw (an
  /// exception is logged and dropped) and must not wait on the engine or on
  /// a handle (that throws WaitInsideOperationError); pushing is fine.
  using Callback = detail::InlineFunction<void(std::exception_ptr), 48>;

  /// An empty handle: done() is false, error() null; wait() and on_done()
  /// throw tagflow::Error.
  OperationHandle() noexcept = default;
  OperationHandle(const OperationHandle& other) noexcept;
  OperationHandle& operator=(const OperationHandle& other) noexcept;
  OperationHandle(OperationHandle&& other) noexcept;
  OperationHandle& operator=(OperationHandle&& other) noexcept;
  ~OperationHandle();

  /// True when the handle refers to an operation (it came from push_tracked).
  explicit operator bool() const noexcept { return state_ != nullptr; }

  /// True once the operation has completed and the callbacks registered
  /// before then have returned. Never blocks; false for an empty handle.
  bool done() const noexcept;
  /// Blocks until done(); then rethrows the operation's error, if any.
  /// Throws WaitInsideOperationError when called from inside an engine
  /// operation or a handle's callback, tagflow::Error on an empty handle, and
  /// ForkError in a child forked while the operation was pending.
  void wait() const;
  /// The operation's error once done(); null while pending, on success, and
  /// for an empty handle. Never throws.
  std::exception_ptr error() const noexcept;
  /// Calls `callback` exactly once with the operation's error (null on
  /// success): from the thread that completes the operation, or at once on
  /// this thread if it has completed already. Several may be registered,
  /// from any thread; they run in the order they were registered. Throws
  /// tagflow::Error on an empty handle.
  ///
  ///   h.on_done([&](std::exception_ptr e) { finished.fetch_add(1); });
  void on_done(Callback callback) const;

 private:
  friend class detail::OperationState;
  /// Adopts one reference to `state`.
  explicit OperationHandle(detail::OperationState* state) noexcept : state_(state) {}

  detail::OperationState* state_ = nullptr;
};

}  // namespace tagflow
