#pragma once
// ModelClock: the shared state of modelled time on simulated GPUs (Note
// [Modelled time] in engine/device_model.h): the device model, the mode,
// each host thread's clock, and the latest time any modelled work finished.
// One per simulated backend; the engines and streams of that backend share
// it. Internal to engine/.
//
// Note [Modelled traces]
// While a ModelClock exists (the last one made, if several), the profiler
// stamps times on it instead of the steady clock: a thread's modelled time
// where the host stamps (pushes, waits, allocations, an operation's start
// on its worker, which is when it became ready, the host taking no time),
// the stream's clock on the devices. A trace of a modelled run is then one
// timeline of predicted times, which `tagflow profile` reads as any other.

#include <atomic>
#include <cstdint>

#include "engine/device_model.h"

namespace tagflow::detail::sim {

class ModelClock {
 public:
  ModelClock(DeviceModel model, int num_gpus, bool timing_only);
  ModelClock(const ModelClock&) = delete;
  ModelClock& operator=(const ModelClock&) = delete;

  const DeviceModel& model() const { return model_; }
  int num_gpus() const { return num_gpus_; }
  /// Kernels are skipped and only timed (Note [Timing-only GPUs] in sim_stream.h).
  bool timing_only() const { return timing_only_; }

  /// The calling thread's clock on this model, in ns (0 until it has waited
  /// for modelled work or was set).
  std::int64_t host_now() const;
  /// Sets the calling thread's clock (an engine worker, before it runs an
  /// operation issued at `ns`).
  void set_host_now(std::int64_t ns) const;
  /// Moves the calling thread's clock to `ns` unless it is already later
  /// (after a wait for work that finished at `ns`).
  void host_reach(std::int64_t ns) const;

  /// The latest time at which modelled work has finished on any stream.
  std::int64_t latest() const { return latest_.load(std::memory_order_acquire); }
  /// A stream finished work at `ns`.
  void note_finished(std::int64_t ns);

  /// The clock the profiler stamps with (Note [Modelled traces]), or null.
  static const ModelClock* active();
  ~ModelClock();

  /// Nanoseconds, rounded, of `seconds` of modelled time (at least 1).
  static std::int64_t to_ns(double seconds);

 private:
  DeviceModel model_;
  int num_gpus_;
  bool timing_only_;
  /// Tells this clock's thread clocks from those of earlier clocks.
  std::uint64_t id_;
  std::atomic<std::int64_t> latest_{0};
};

}  // namespace tagflow::detail::sim
