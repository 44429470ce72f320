#pragma once
// RingAggregator: gradient sums between simulated GPUs arranged as NCCL
// arranges them between real ones (Note [NCCL collectives as engine
// operations] in nn/dist/nccl_aggregator.h), so that a run on simulated GPUs
// schedules its communication as it would on real GPUs with NCCL.
// make_local_aggregator() picks it for parameters on simulated GPUs that
// keep modelled time (TAGFLOW_SIM_GPUS=N:MODEL).
//
//   dist::RingAggregator ring;                   // on each GPU's copy stream
//   ring.allreduce(param->list_grad(), index);   // returns at once
//   dist::RingAggregator inline_ring(QueueKind::kCompute);  // as NcclAggregator runs
//
// Threads: one thread at a time. Every GPU must issue the collectives in the
// order allreduce() and broadcast() were called, and the order variables are
// made on first use.
//
// Note [Collectives on simulated GPUs]
// allreduce() pushes one operation per GPU, on its copy queue (a stream of
// its own, as frameworks run NCCL, so that sums overlap backward; or on the
// compute queue, in stream order with the kernels, as NcclAggregator does
// on real GPUs), writing
// the gradient there and the GPU's order variable (so every GPU issues its
// collectives in the order allreduce() was called), with
// kCommunicationPriority. Each operation enqueues its part of one
// sim::Collective on its stream and returns. When every part's stream has
// reached it, the gradients are summed once in the order of the list and
// the sum is written to every copy (bit-identical copies), and each stream
// goes on at the latest arrival plus the time the device model gives NCCL's
// ring all-reduce of those bytes over those GPUs (DeviceModel::
// allreduce_seconds). A stream waits on the host for its peers, as an NCCL
// kernel waits on the device, so the NCCL rules hold here too.

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/operation.h"
#include "nn/dist/gradient_aggregator.h"

namespace tagflow::dist {

class RingAggregator final : public GradientAggregator {
 public:
  /// Collectives on each GPU's `queue`: the copy stream (default) overlaps
  /// them with compute; the compute stream orders them with the kernels.
  explicit RingAggregator(QueueKind queue = QueueKind::kCopy) : queue_(queue) {}
  ~RingAggregator() override;
  RingAggregator(const RingAggregator&) = delete;
  RingAggregator& operator=(const RingAggregator&) = delete;

  /// As GradientAggregator::allreduce, for copies all on simulated GPUs;
  /// throws tagflow::Error naming a copy that is not.
  void allreduce(std::span<const NDArray> copies, int key) override;
  /// Makes every copy equal to the first, as NCCL's broadcast from rank 0
  /// does, timed as a pipelined ring broadcast (DeviceModel::broadcast_seconds).
  void broadcast(std::span<const NDArray> copies, int key) override;
  std::string name() const override { return "ring (NCCL's, on simulated GPUs)"; }

 private:
  enum class Kind { kAllreduce, kBroadcast };
  /// One collective over the copies' GPUs: a sum into every copy, or the
  /// first copy into the others, lasting what the device model gives it.
  void push(std::span<const NDArray> copies, Kind kind);
  /// Per GPU, the order its collectives are issued in.
  std::map<int, VarHandle> order_;
  QueueKind queue_;
};

}  // namespace tagflow::dist
