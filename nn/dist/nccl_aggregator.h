#pragma once
// NcclAggregator: gradient sums between real GPUs with NCCL's all-reduce, in
// place, on each GPU's compute stream; the GPUs of one process, or those of
// every process of an MPI job. make_local_aggregator() picks it for
// parameters that live on real GPUs only, when the build has NCCL.
//
//   dist::NcclAggregator nccl({gpu(0), gpu(1)});    // one communicator per GPU
//   nccl.allreduce(param->list_grad(), index);
//
//   // Across processes (`tagflow train --dist nccl`), in every process:
//   auto world = dist::MpiCommunicator::world();
//   auto nccl = std::make_shared<dist::NcclAggregator>(local_gpus, world);
//   nccl->broadcast(param->list_data(), index);   // process 0's weights everywhere
//   nccl->allreduce(param->list_grad(), index);   // sums over every GPU of every process
//
// Threads: one thread at a time. Every GPU must issue the collectives in the
// order allreduce() and broadcast() were called (Note [NCCL collectives as
// engine operations]); calls from two threads could reach two GPUs in
// different orders. devices() and broken() may be read from any thread.
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
//    order allreduce() was called, and every process calls in one order (the
//    same program).
//  - Each GPU's compute queue has its own worker thread, so the ranks' calls
//    come from different threads, the arrangement NCCL supports without
//    group calls. A call may block its thread until the other ranks have
//    made theirs (while NCCL sets up connections): this is safe as long as
//    no rank's gradient depends on work queued behind another rank's
//    collective, which holds for data-parallel training (each device's
//    gradients come from its own backward).
//  - broadcast() is the same arrangement with ncclBroadcast, in place, from
//    NCCL rank 0: the first GPU of process 0's list.
//
// Note [NCCL failures and timeouts]
// NCCL kernels wait on the device for their peers: a process that dies, or
// stops issuing, leaves the others' kernels (and whatever waits for them,
// such as the next loss) waiting for ever. So each collective is enqueued
// between two events recorded on its stream, which go to a thread the
// aggregator owns (nn/dist/detail/nccl_monitor.h); every 50 ms it looks at:
//  - the events: once the one before the collective has completed, the
//    stream has reached the collective and its clock starts (as seen at
//    that look, so up to 50 ms late); once the one after has completed, the
//    collective is forgotten. A collective still running `timeout_seconds`
//    after its stream reached it, or an NCCL call (issuing one, finalising
//    the communicators) that has not returned `timeout_seconds` after it
//    began, is a timeout. A healthy collective queued behind long compute
//    is not: its clock has not started. It still counts the wait for peers
//    whose streams reach their part later (other GPUs, other processes):
//    small in data-parallel training, where every rank runs the same step.
//    The timing itself is CollectiveWatch (nn/dist/detail/collective_watch.h),
//    tested on a fake clock;
//  - ncclCommGetAsyncError of every communicator (network failures, a peer
//    that reported an error).
// On a timeout or an error it aborts every communicator (ncclCommAbort,
// which ends the kernels, so the waits return), logs what failed, how long
// it had waited and this process's rank, and marks the aggregator broken:
// the operations not yet run fail with CommunicationError instead of calling
// NCCL, so do later allreduce() and broadcast() calls, at once, and the
// destructor no longer waits. The other processes time out or see the abort
// as an error in turn; the program should then end, and end the job
// (MpiCommunicator::abort). Setting the communicators up (ncclCommInitRank)
// is not watched: a process that fails before it leaves the others waiting
// there. Until its end is seen, each collective is counted on storage's
// ReleaseGate, so that no device memory is released meanwhile (Note [No
// release during collectives] in storage/detail/release_gate.h).
// This file was compiled against NCCL but has not run on a GPU: the machines
// that build tagflow have none. Simulated GPUs use DeviceAggregator.

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/dist/gradient_aggregator.h"

namespace tagflow::dist {

/// True when this build of tagflow has NCCL.
bool nccl_available();

class ProcessGroup;

class NcclAggregator final : public GradientAggregator {
 public:
  /// A clique over `gpus` (distinct real GPUs, at least one), in this
  /// process. A collective still running `timeout_seconds` (> 0) after its
  /// stream reached it aborts the clique (Note [NCCL failures and timeouts]).
  /// Throws DeviceError when the build has no NCCL, a device is not a real
  /// GPU, or NCCL cannot set the communicators up; tagflow::Error for a bad
  /// timeout.
  explicit NcclAggregator(const std::vector<Context>& gpus, double timeout_seconds = 120);
  /// A clique over the GPUs of every process of `processes`: this
  /// process's `local_gpus` (distinct real GPUs, at least one) are NCCL
  /// ranks first..first + n - 1, after those of the processes of lower rank.
  /// Collective: every process must call it, and each gets its own
  /// communicators (one per local GPU). The checks of the devices come before
  /// any communication, so processes that all fail them stay in step.
  /// Throws as the constructor above, and tagflow::Error for a null
  /// communicator, CommunicationError when the processes cannot exchange
  /// the GPU counts or NCCL's id.
  NcclAggregator(const std::vector<Context>& local_gpus, std::shared_ptr<ProcessGroup> processes,
                 double timeout_seconds = 120);
  /// Waits for the collectives in flight (bounded by the timeout), then
  /// finalises the communicators together and frees them (Note [Ending the
  /// communicators] in nn/dist/detail/nccl_monitor.h); on a broken
  /// aggregator waits for nothing (they were aborted). Joins the
  /// monitoring thread.
  ~NcclAggregator() override;
  NcclAggregator(const NcclAggregator&) = delete;
  NcclAggregator& operator=(const NcclAggregator&) = delete;

  /// As GradientAggregator::allreduce; the copies must be on exactly this
  /// process's GPUs of the clique (in any order), in float32, int32, int64 or
  /// uint8. Across processes the sum covers every GPU of every process.
  /// Throws CommunicationError once the aggregator is broken.
  void allreduce(std::span<const NDArray> copies, int key) override;
  /// As GradientAggregator::broadcast: every copy, in every process, ends
  /// holding the values of NCCL rank 0's copy (process 0's first GPU, the
  /// first of its list), in place. Same rules and errors as allreduce().
  ///
  ///   nccl.broadcast(param->list_data(), index);
  void broadcast(std::span<const NDArray> copies, int key) override;
  /// Every rank of the clique, in every process.
  std::size_t copies_summed(std::size_t local_copies) const override;
  std::string name() const override { return "nccl"; }
  /// This process's GPUs of the clique, in the order given.
  const std::vector<Context>& devices() const { return devices_; }
  /// True once a failure or a timeout aborted the communicators (Note [NCCL
  /// failures and timeouts]).
  bool broken() const;

 private:
  struct Communicators;
  enum class Collective : std::uint8_t { kAllreduce, kBroadcast };
  /// allreduce() and broadcast(): one operation per copy.
  void push(std::span<const NDArray> copies, int key, Collective collective, const char* who);

  std::vector<Context> devices_;
  /// The clique's ranks in all processes (devices_.size() within one).
  std::size_t ranks_ = 0;
  std::unique_ptr<Communicators> comms_;
};

}  // namespace tagflow::dist
