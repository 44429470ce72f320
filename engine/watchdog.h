#pragma once
// Watchdog: notices when an engine's work stops moving. While operations are
// pending and none completes for the given time, it calls its callback once
// with the engine's dependency state (again after a later stall, once
// something completed in between):
//
//   Watchdog watchdog(Engine::get(), std::chrono::seconds(30),
//                     [](const DependencyState& state) {
//                       std::fputs(state.describe().c_str(), stderr);
//                       std::_Exit(3);  // a stuck service restarts rather than hang
//                     });
//
// The process-wide engine runs one that logs the state when TAGFLOW_WATCHDOG
// is set; `tagflow stress --watchdog` prints it and exits non-zero.
//
// Threads: safe to call concurrently. stalls() may be read from any thread;
// the callback runs on the watchdog's own thread.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "engine/engine.h"

namespace tagflow {

namespace detail {
class ForkCheck;
}  // namespace detail

class Watchdog {
 public:
  using Callback = std::function<void(const DependencyState&)>;

  /// Starts watching `engine`, which must outlive the watchdog. Throws
  /// tagflow::Error for a `stall` that is not positive or a missing callback.
  Watchdog(Engine& engine, std::chrono::milliseconds stall, Callback on_stall);
  /// Stops watching (waits for a callback under way to return). In a child
  /// forked since it started, where its thread does not exist, it only lets
  /// go of it (Note [Engine lifetime] in engine.h).
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  /// How many stalls it has reported so far (callbacks that have returned).
  int stalls() const;

 private:
  void run();

  /// What the thread waits on: on the heap, so that a forked child can
  /// keep it rather than destroy a condition variable its parent's thread
  /// waits on (that would wait for the thread forever).
  struct State {
    std::mutex mutex;
    std::condition_variable stop_cv;
    bool stopping = false;
    int stalls = 0;
  };

  Engine& engine_;
  std::chrono::milliseconds stall_;
  Callback on_stall_;
  std::unique_ptr<State> state_ = std::make_unique<State>();
  std::unique_ptr<const detail::ForkCheck> fork_check_;  // engine/detail/lifetime.h
  std::thread thread_;
};

}  // namespace tagflow
