#pragma once
// MpiCommunicator: the processes of an MPI job (started by Open MPI's
// `mpirun`), for training across processes and machines.
//
//   auto world = dist::MpiCommunicator::world();   // initialises MPI on first use
//   NDArray g = ...;                             // host memory: cpu(i) or cpu_pinned(i)
//   world->allreduce(g);                         // returns at once
//   g.wait_to_read();                            // g holds its sum over every process
//   if (world->rank() == 0) fmt::print("{} processes\n", world->size());
//
// Threads: one thread at a time. The collectives (allreduce, broadcast, sum,
// gather, broadcast_bytes, barrier) take their tickets in the order they are
// called, which must be the same in every process (Note [Issue order]).
// world(), rank(), size(), local_size(), host(), options() and broken() may
// be called from any thread, and abort() too where MPI gives
// MPI_THREAD_MULTIPLE (see abort()).
// Threads: concurrent reads, exclusive writes. MpiOptions is a value.
//
// Note [Collectives as engine operations]
// allreduce() and broadcast() push one asynchronous engine operation, with
// kCommunicationPriority, on the arrays' host device. When the arrays are
// ready a worker packs them into one message (a bucket: small arrays share
// the latency of one collective), hands it to the communication thread and
// returns; that thread, the only one calling MPI after start-up (but for
// abort()), issues the non-blocking collective, polls it (MPI_Test drives
// the progress of non-blocking collectives), unpacks the result into the
// arrays and completes the operation. No engine worker ever waits for another process,
// and the work that does not depend on the sum runs meanwhile.
//
// Note [Issue order]
// MPI needs every process to issue the collectives of a communicator in one
// order, but the engine runs the operations of different processes in
// different orders (whichever inputs are ready first). So each collective
// takes a ticket when it is called (the calls are made in the same order in
// every process: the program is the same) and the communication thread
// issues tickets strictly in ticket order, holding back one whose
// predecessors have not been handed over yet. The blocking helpers (sum,
// gather, broadcast_bytes, barrier) take tickets too, so they interleave with
// the pushed collectives identically everywhere. Calls must come from one
// thread at a time.
//
// Note [Failures and timeouts]
// Every failure becomes a CommunicationError on the arrays of the collective
// (and so on whatever depends on them: the updated weights, the next loss),
// in every process, instead of a hang:
//  - an input array carrying an error (its producer failed): the operation is
//    skipped by the engine, yet the process still takes part, with zeros and
//    a flag saying its input is missing. Each message carries such a flag
//    (an extra element, 1 from each process whose inputs were sound), so
//    every process learns from the sum that some input was missing and fails
//    the collective rather than use a partial sum;
//  - MPI reporting an error (the communicator uses MPI_ERRORS_RETURN);
//  - a collective still in flight after `timeout_seconds` (a process that is
//    gone, stopped, or stuck elsewhere).
// After an MPI error or a timeout the communicator is broken: collectives in
// flight and every later one fail at once. (A collective cannot be cancelled
// in MPI: the messages of abandoned ones stay allocated and are still polled,
// so that a peer arriving late does not write into freed memory.) A program
// should then end, and end the job: abort() calls MPI_Abort, which makes
// `mpirun` stop every process. A process that dies makes `mpirun` stop the
// others by itself; the timeout covers the cases it cannot see (a process
// alive but stuck, a launcher that does not watch its processes).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "nn/dist/communication_error.h"
#include "nn/dist/process_group.h"
#include "ops/ndarray.h"

namespace tagflow::dist {

struct MpiOptions {
  /// A collective in flight longer than this fails, and breaks the
  /// communicator (Note [Failures and timeouts]). Seconds, > 0.
  double timeout_seconds = 120;
};

/// True when this build of tagflow has MPI.
bool mpi_available();
/// The MPI library's own description (MPI_Get_library_version, first line),
/// or why there is none.
std::string mpi_library_version();

class MpiCommunicator final : public ProcessGroup {
 public:
  /// The processes of the job (a duplicate of MPI_COMM_WORLD). The first
  /// call initialises MPI (MPI_Init_thread, unless the program already did)
  /// and starts the communication thread; while a reference is held, later
  /// calls return the same communicator and ignore `options`. MPI is
  /// finalised when the last reference goes, and can be initialised only
  /// once per process: a call after that throws CommunicationError. Without
  /// `mpirun` the job is this one process. While it lives, the CPU kernels
  /// of each of the job's processes on one machine use their share of its
  /// cores (cores / local_size()). Collective: every process of the
  /// job must call it. Throws CommunicationError when the build has no MPI or
  /// MPI cannot start, tagflow::Error for bad options.
  static std::shared_ptr<MpiCommunicator> world(MpiOptions options = {});

  /// Waits for the collectives called so far (each finishes or times out
  /// once its engine operation has run or been skipped: destroying the
  /// communicator while an operation it pushed cannot run blocks), then
  /// stops the communication thread.
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  /// This process's index in the job, 0 .. size() - 1.
  int rank() const override;
  /// Processes in the job.
  int size() const override;
  /// Processes of the job on this machine (sharing its cores), this one included.
  int local_size() const;
  /// This machine's name as MPI knows it.
  const std::string& host() const;
  /// The options it was made with.
  const MpiOptions& options() const;

  /// Pushes an operation that makes every array hold its element-wise sum
  /// over all processes, in place; returns at once. The arrays live in host
  /// memory (cpu(i) or cpu_pinned(i)), share one dtype (float32, int32 or
  /// int64) and travel in one message. Every
  /// process must call the same collectives in the same order with arrays of
  /// the same dtype and sizes (Note [Issue order]). Throws tagflow::Error for
  /// arrays that break these rules, before pushing anything.
  void allreduce(std::span<const NDArray> arrays);
  void allreduce(const NDArray& array) { allreduce(std::span(&array, 1)); }
  /// Pushes an operation that copies the arrays of process `root` into the
  /// arrays of every other process; returns at once. Same rules as
  /// allreduce (any dtype).
  void broadcast(std::span<const NDArray> arrays, int root);
  void broadcast(const NDArray& array, int root) { broadcast(std::span(&array, 1), root); }

  /// The element-wise sum of `values` over all processes, in double. Blocks
  /// (after the collectives called before it); for figures on the host, such
  /// as an epoch's loss. Throws CommunicationError on failure,
  /// WaitInsideOperationError from inside an engine operation.
  std::vector<double> sum(std::span<const double> values);
  /// Every process's `value`, in rank order. Blocks, as sum().
  std::vector<std::int64_t> gather(std::int64_t value) override;
  /// Copies the bytes of process `root` into `bytes` in every other process
  /// (each passes a buffer of the same size). Blocks, as sum().
  void broadcast_bytes(std::span<std::byte> bytes, int root) override;
  /// Returns once every process has called it. Blocks, as sum().
  void barrier();

  /// Ends every process of the job with `code` (MPI_Abort, called from this
  /// thread, while the communication thread may be inside MPI: MPI allows it
  /// with MPI_THREAD_MULTIPLE, which Open MPI gives): for a failure the other
  /// processes could not learn otherwise. Does not return.
  [[noreturn]] void abort(int code);

  /// True once a collective failed by an MPI error or a timeout: every later
  /// one fails at once (Note [Failures and timeouts]).
  bool broken() const;

  struct State;

 private:
  explicit MpiCommunicator(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace tagflow::dist
