#pragma once
// ProcessGroup: the processes of one job, as far as setting up a
// communicator needs them: who is who, and two blocking collectives. MPI is
// one (dist::MpiCommunicator, in the opt-in <tagflow/dist.h>); NCCL uses
// any of them to start its cliques across processes:
//
//   std::shared_ptr<dist::ProcessGroup> world = dist::MpiCommunicator::world();
//   dist::NcclAggregator nccl(local_gpus, world);
//
// Every call is collective unless it says otherwise: each process of the
// group makes it, in the same order. All of them throw CommunicationError
// when the processes cannot communicate.
//
// Threads: one thread at a time. The collectives must be made in one order
// in every process, so one thread makes them; rank() and size() never change
// and may be read from any thread.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace tagflow::dist {

class ProcessGroup {
 public:
  virtual ~ProcessGroup() = default;

  /// This process's index in the group, 0 <= rank() < size(). Local.
  virtual int rank() const = 0;
  /// The number of processes. Local.
  virtual int size() const = 0;
  /// Every process's `value`, indexed by rank, in every process.
  virtual std::vector<std::int64_t> gather(std::int64_t value) = 0;
  /// Copies process `root`'s `bytes` over every other process's (the same
  /// length everywhere).
  virtual void broadcast_bytes(std::span<std::byte> bytes, int root) = 0;
};

}  // namespace tagflow::dist
