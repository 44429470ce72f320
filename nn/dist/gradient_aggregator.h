#pragma once
// GradientAggregator: sums one parameter's gradients over the devices that
// hold a copy of it, so that every copy receives the same update.
//
//   auto aggregator = dist::make_local_aggregator();
//   aggregator->allreduce(param->list_grad(), /*key=*/index);   // returns at once
//   // every gradient of the list now holds their sum (once the work has run)
//
// Trainer::step calls it for every parameter; it is the one interface a
// multi-process aggregator (MpiAggregator, NcclAggregator across processes)
// implements as well.
//
// Threads: one thread at a time. One thread (the Trainer's) calls an
// aggregator: those over several GPUs or processes need every device to
// issue the collectives in the same order, and most keep state between
// calls (the local one makes its NCCL cliques on first use).
// Threads: safe to call concurrently. DeviceAggregator keeps no state: its
// allreduce only pushes copies and additions, which run in push order.
//
// Note [Aggregating as gradients become ready]
// backward() pushes its operations and returns; step() then pushes the
// aggregation of each parameter, last layer first, with priority
// kCommunicationPriority, before any update. The engine runs each
// aggregation as soon as the gradients it reads are written, and ahead of
// the ordinary operations ready on the same device, so the sums of the last
// layers travel while the first layers' gradients are still being computed.
// Pushing earlier (from a hook inside backward) would change nothing: with a
// backward call per device, a parameter's gradients are only all known to
// the host after the last device's backward has been pushed, which is
// microseconds before step() runs.
//
// Note [Sum on a root device]
// DeviceAggregator copies the other devices' gradients to one root device,
// adds them there in a fixed order (root, root+1, ... modulo n), and copies
// the sum back: 2(n-1) transfers and n-1 additions per parameter, all engine
// operations (copies on the copy queues, so transfers overlap compute on
// GPUs; peer copies between GPUs). The root rotates with the key, spreading
// the additions over the devices. Every copy ends with the root's bytes, so
// the copies stay bit-identical. Sums of more devices in a tree or a ring
// would cut the root's traffic for large n; with the handful of devices one
// machine holds the transfers dominate and this is simplest.

#include <memory>
#include <span>
#include <string>

#include "ops/ndarray.h"

namespace tagflow::dist {

/// Throws tagflow::Error unless `copies` can be aggregated (the rules of
/// GradientAggregator::allreduce); `who` starts the message.
void check_aggregation_input(std::span<const NDArray> copies, int key, const char* who);

class GradientAggregator {
 public:
  virtual ~GradientAggregator() = default;

  /// Pushes operations that make each of `copies` (the same parameter's
  /// gradient on each of its devices: defined, equal shapes and dtypes,
  /// distinct devices) hold the sum of them all; returns at once. `key`
  /// (>= 0) names the parameter, the same in every process. A list of one
  /// array is left as it is. Throws tagflow::Error for a list that breaks
  /// these rules, before pushing anything.
  virtual void allreduce(std::span<const NDArray> copies, int key) = 0;

  /// Makes the copies of one parameter's values (`copies`, as for
  /// allreduce) in every process equal to those of process 0, so that
  /// processes start from the same weights; returns at once. Trainer calls
  /// it for every parameter before the first update
  /// (Trainer::broadcast_parameters). Default: nothing, as within one
  /// process initialize() and load() already give every device the same
  /// values.
  virtual void broadcast(std::span<const NDArray> copies, int key) {
    check_aggregation_input(copies, key, "GradientAggregator::broadcast");
  }

  /// Pushes what allreduce() and broadcast() hold back to send together
  /// (an aggregator across processes packs small gradients into one
  /// message). Trainer calls it after the last call of a step. Default:
  /// nothing is held back.
  virtual void flush() {}

  /// How many copies an allreduce() of `local_copies` copies in this
  /// process sums over, in all processes: `local_copies` for an aggregator
  /// within one process. Trainer divides sums of running state by it (Note
  /// [Running state across devices] in nn/trainer.h).
  virtual std::size_t copies_summed(std::size_t local_copies) const { return local_copies; }

  /// Shown in logs, e.g. "device".
  virtual std::string name() const = 0;
};

/// Engine copies and additions through a root device (Note [Sum on a root
/// device]); any mix of CPU devices and GPUs, real or simulated.
class DeviceAggregator final : public GradientAggregator {
 public:
  void allreduce(std::span<const NDArray> copies, int key) override;
  std::string name() const override { return "device"; }
};

/// The aggregator for the devices of this process: NcclAggregator for a
/// parameter whose copies are all on real GPUs (when the build has NCCL),
/// DeviceAggregator otherwise. Used from one thread at a time.
std::unique_ptr<GradientAggregator> make_local_aggregator();

}  // namespace tagflow::dist
