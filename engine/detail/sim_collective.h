#pragma once
// sim::Collective: a collective (an all-reduce, a broadcast) across the
// streams of several simulated GPUs, arranged as NCCL arranges one: each
// GPU's part is enqueued on its own stream, and the parts meet there. The
// stream that reaches its part waits until every part's stream has; the
// last to arrive combines the data once (skipped on timing-only GPUs), and
// every stream goes on from the latest arrival plus the collective's
// modelled duration (Note [Modelled time] in engine/device_model.h).
// Internal to engine/ (nn/dist's RingAggregator uses it).
//
// As with NCCL, every GPU must enqueue the collectives of a group in one
// order, and no part may wait for work queued behind another part: a
// stream waiting for peers that never come waits for ever. Push the parts
// with Engine::push_group, which keeps both rules on every engine (Note
// [Launch groups] in engine/engine.h).

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>

#include "engine/stream.h"

namespace tagflow::detail::sim {

class Collective {
 public:
  /// `parts` streams take part; `combine` runs once, when all have arrived.
  Collective(int parts, std::int64_t duration_ns, std::function<void()> combine);
  Collective(const Collective&) = delete;
  Collective& operator=(const Collective&) = delete;

  /// A part's stream has reached the collective at modelled time
  /// `arrived_ns`: waits for the others, runs `combine` if this is the last
  /// (unless `skip_combine`), and returns when the collective ends in
  /// modelled time. Rethrows, in every part, what `combine` threw.
  std::int64_t meet(std::int64_t arrived_ns, bool skip_combine);

 private:
  std::mutex mutex_;
  std::condition_variable all_arrived_;
  int parts_;
  int arrived_ = 0;
  bool done_ = false;
  std::int64_t latest_ns_ = 0;
  std::int64_t duration_ns_;
  std::function<void()> combine_;
  std::exception_ptr error_;
};

/// Enqueues one part of `collective` on `stream` (a simulated GPU's),
/// checked as a kernel launch is (Note [Simulated CUDA rules]).
void enqueue_collective(Stream& stream, std::shared_ptr<Collective> collective);

}  // namespace tagflow::detail::sim
