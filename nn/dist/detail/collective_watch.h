#pragma once
// CollectiveWatch: the clock of NcclMonitor (Note [NCCL failures and
// timeouts] in nn/dist/nccl_aggregator.h), apart from CUDA and NCCL so that
// it is tested with a fake clock. The monitor tells it what it sees, each
// with the time it saw it: a collective enqueued, its stream reaching it (the
// event recorded before it has completed), its end (the event after it); an
// NCCL call that may block on the host beginning and ending. It answers
// which of them has waited past the timeout. Internal to nn/dist.
//
//   CollectiveWatch watch(std::chrono::seconds(120));
//   const std::uint64_t id = watch.enqueued(now);   // ncclAllReduce returned
//   watch.started(id, now);                         // its stream reached it
//   if (auto late = watch.late(now)) { /* abort: late->waited */ }
//   watch.finished(id);                             // the kernel has finished

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>

namespace tagflow::dist {

class CollectiveWatch {
 public:
  using Clock = std::chrono::steady_clock;
  using Seconds = std::chrono::duration<double>;

  /// A collective or a host call, and how long it has waited.
  struct Wait {
    enum Kind : std::uint8_t { kCollective, kCall };
    Kind kind = kCollective;
    /// The collective's id (from enqueued()), or the call's slot.
    std::uint64_t id = 0;
    /// Since its stream reached it (a collective), since it began (a call).
    Seconds waited{};
  };

  /// `timeout` > 0.
  explicit CollectiveWatch(Seconds timeout);

  /// A collective was enqueued at `now`, behind whatever its stream has
  /// still to run: it is not timed until started(). Returns its id.
  std::uint64_t enqueued(Clock::time_point now);
  /// The stream has reached collective `id`, as seen at `now`: its timeout
  /// counts from here. Later calls keep the first time; unknown ids are
  /// ignored.
  void started(std::uint64_t id, Clock::time_point now);
  /// Collective `id` has finished, or will not be watched any more.
  void finished(std::uint64_t id);
  /// True once started(id) was seen; false for an unknown id.
  bool has_started(std::uint64_t id) const;
  /// Seconds since collective `id` was enqueued (zero for an unknown id).
  Seconds since_enqueued(std::uint64_t id, Clock::time_point now) const;

  /// An NCCL call that may block on the host (until the other ranks make
  /// theirs) began at `now` in `slot` (one per communicator): timed from
  /// its start.
  void call_began(std::uint64_t slot, Clock::time_point now);
  /// The call in `slot` has returned.
  void call_ended(std::uint64_t slot);

  /// The started collective or the call that has waited longest, when that
  /// is longer than the timeout; nothing otherwise. Queued collectives never
  /// are: a healthy one may wait behind long compute.
  std::optional<Wait> late(Clock::time_point now) const;
  /// The started collective or the call that has waited longest, late or
  /// not (for messages); nothing when none is.
  std::optional<Wait> longest(Clock::time_point now) const;

  /// Collectives enqueued and not finished, started or not.
  std::size_t collectives() const { return collectives_.size(); }
  /// Forgets every collective (an abort ended them); calls stay.
  void clear_collectives() { collectives_.clear(); }
  Seconds timeout() const { return timeout_; }

 private:
  struct Collective {
    Clock::time_point enqueued;
    std::optional<Clock::time_point> started;
  };

  Seconds timeout_;
  std::uint64_t next_id_ = 0;
  std::map<std::uint64_t, Collective> collectives_;
  std::map<std::uint64_t, Clock::time_point> calls_;
};

}  // namespace tagflow::dist
