#pragma once
// Scheduler: the picks of a controlled schedule (Note [Controlled
// schedules] in engine/schedule.h): which of the ready operations runs
// next, by a seeded policy or from a recorded run, and the record of the
// picks. Used by the naive engine under its lock. Internal to engine/.

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/schedule.h"
#include "engine/splitmix.h"

namespace tagflow::detail {

class Scheduler {
 public:
  /// Reads the schedule to replay; throws tagflow::Error naming the file
  /// when it cannot be read or is malformed.
  explicit Scheduler(ScheduleOptions options);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  const ScheduleOptions& options() const { return options_; }
  /// Operation (or deletion) `id` was pushed: ids count pushes from 0.
  void on_push(std::uint64_t id);
  /// The next to run among `ready` (ids in push order, not empty). Throws
  /// tagflow::Error when a replayed run diverges.
  std::uint64_t pick(std::span<const std::uint64_t> ready);
  /// Picks so far.
  std::int64_t steps() const { return step_; }
  /// Writes the picks so far to options().record (when set); throws
  /// tagflow::Error when it cannot.
  void write_record() const;

 private:
  ScheduleOptions options_;
  SplitMix64 random_;
  std::int64_t step_ = 0;
  /// PCT: priorities by id (highest runs), and the steps at which the one
  /// that would run is lowered, in order.
  std::unordered_map<std::uint64_t, std::uint64_t> priority_;
  std::vector<std::int64_t> change_points_;
  std::size_t next_change_ = 0;
  /// Replay: the recorded picks; record: the picks made.
  std::vector<std::uint64_t> replay_;
  std::vector<std::uint64_t> picks_;
  /// A replay that diverged: reported once, then push order.
  bool diverged_ = false;
};

}  // namespace tagflow::detail
