#pragma once
// NcclAggregator: gradient sums between real GPUs with NCCL's all-reduce, in
// place, on each GPU's compute stream. make_local_aggregator() picks it for
// parameters that live on real GPUs only, when the build has NCCL.
//
//   nn::NcclAggregator nccl({gpu(0), gpu(1)});    // one communicator per GPU
//   nccl.allreduce(param->list_grad(), index);
//
// Note [NCCL collectives as engine operations]
// allreduce() pushes one operation per GPU, on that GPU's compute queue,
// writing the gradient there and the GPU's order variable, with
// kCommunicationPriority. The operation calls ncclAllReduce for its rank on
// the compute stream and returns: the kernel is stream-ordered after the
// backward kernels that wrote the gradient, and the update kernels that
// follow wait for it the same way, so no host thread waits for the sum.
//  - NCCL needs every rank to issue the collectives of a clique in one order.
//    Each GPU's operations write that GPU's order variable, and the engine
//    runs the writers of a variable in push order: every rank issues in the
//    order allreduce() was called.
//  - Each GPU's compute queue has its own worker thread, so the ranks' calls
//    come from different threads, the arrangement NCCL supports without
//    group calls. A call may block its thread until the other ranks have
//    made theirs (while NCCL sets up connections): this is safe as long as
//    no rank's gradient depends on work queued behind another rank's
//    collective, which holds for data-parallel training (each device's
//    gradients come from its own backward).
// This file was compiled against NCCL but has not run on a GPU: the machines
// that build tagflow have none. Simulated GPUs use DeviceAggregator.

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "tagflow/nn/gradient_aggregator.h"

namespace tagflow::nn {

/// True when this build of tagflow has NCCL.
bool nccl_available();

class NcclAggregator final : public GradientAggregator {
 public:
  /// A clique over `gpus` (distinct real GPUs, at least one). Throws
  /// DeviceError when the build has no NCCL, a device is not a real GPU, or
  /// NCCL cannot set the communicators up.
  explicit NcclAggregator(const std::vector<Context>& gpus);
  /// Waits for the collectives in flight, then frees the communicators.
  ~NcclAggregator() override;
  NcclAggregator(const NcclAggregator&) = delete;
  NcclAggregator& operator=(const NcclAggregator&) = delete;

  /// As GradientAggregator::allreduce; the copies must be on exactly the
  /// clique's GPUs (in any order), in float32, int32, int64 or uint8.
  void allreduce(std::span<const NDArray> copies, int key) override;
  std::string name() const override { return "nccl"; }
  const std::vector<Context>& devices() const { return devices_; }

 private:
  struct Communicators;
  std::vector<Context> devices_;
  std::unique_ptr<Communicators> comms_;
};

}  // namespace tagflow::nn
