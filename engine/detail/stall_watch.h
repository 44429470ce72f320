#pragma once
// StallWatch: tells a paused client when the count it waits on has stopped
// moving. Internal to engine/.

#include <chrono>
#include <cstdint>

namespace tagflow::detail {

/// A throttled client's escape (Note [Bounded run-ahead] in threaded_engine.h):
/// the backlog may wait on the client itself, so a pause ends once nothing
/// has completed for a while.
class StallWatch {
 public:
  static constexpr std::chrono::milliseconds kStall{20};

  explicit StallWatch(std::uint64_t completed)
      : seen_(completed), last_progress_(std::chrono::steady_clock::now()) {}

  /// True when `completed` has not moved for kStall.
  bool stalled(std::uint64_t completed) {
    const auto now = std::chrono::steady_clock::now();
    if (completed != seen_) {
      seen_ = completed;
      last_progress_ = now;
      return false;
    }
    return now - last_progress_ > kStall;
  }

 private:
  std::uint64_t seen_;
  std::chrono::steady_clock::time_point last_progress_;
};

}  // namespace tagflow::detail
