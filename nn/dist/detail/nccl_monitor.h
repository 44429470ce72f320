#pragma once
// NcclMonitor: the NCCL communicators of an NcclAggregator, the one place
// that issues collectives on them, the thread that watches those
// collectives until they finish (Note [NCCL failures and timeouts] in
// nccl_aggregator.h), and their end. Internal to nn/, and built only when
// the build has NCCL: it names NCCL's and CUDA's types.
//
//   auto monitor = std::make_shared<dist::NcclMonitor>(comms, gpus, "process 1 of 2", 120.0);
//   // in an engine operation on gpus[0]'s compute stream:
//   monitor->issue(stream, {.kind = dist::NcclCollective::kAllreduce, .local = 0, ...});
//   monitor->close();   // once every operation issuing on it has run
//
// Note [Aborting without racing a call]
// NCCL calls on one communicator must not overlap (NCCL is re-entrant, not
// thread-safe), and ncclCommAbort frees the communicator. issue() marks its
// communicator busy (under the mutex) for the length of its NCCL call, and
// close() marks them all busy while it finalises them; the watching thread
// asks ncclCommGetAsyncError only of idle communicators, and a communicator
// is aborted only while idle: when the clique breaks, the idle ones at
// once, a busy one by its caller as it leaves. A communicator is marked
// freed under the mutex and aborted after the mutex is let go: an abort
// waits for the kernels to end (and may free device memory), and the
// threads waiting for the mutex (issue() on the other GPUs, a collective
// completing, close()) must not wait behind it. The communicators broken
// together are aborted in one NCCL group (NCCL 2.22 and later): aborted one
// after the other, an abort can wait for a kernel of the next communicator,
// which waits for the rank just aborted (NVIDIA/nccl#1013). After a break,
// issue() throws instead of calling NCCL, and the engine operations keep
// the monitor alive (shared_ptr) however long they stay queued.
//
// Note [Ending the communicators]
// A healthy clique ends as NCCL's documentation asks of several
// communicators in one thread: ncclCommFinalize on all of them inside one
// group (finalised one at a time, the first would wait for the ranks the
// others hold), then, once ncclCommGetAsyncError reports each done
// (ncclSuccess, not ncclInProgress), ncclCommDestroy on each, which then
// frees local resources only. The finalisation synchronises with the other
// ranks, so it runs outside the mutex, timed by the watching thread as an
// NCCL call: past the timeout the clique is marked broken and logged, and
// once the call returns the communicators are aborted instead of
// destroyed. A blocking communicator cannot be aborted inside a call, so a
// peer that dies during the finalisation still leaves this process waiting
// there, with the log saying where. A broken clique was aborted: nothing
// is finalised.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/context.h"
#include "nn/dist/detail/collective_watch.h"

namespace tagflow::dist {

/// One collective on one communicator: in place on `buffer`, `count`
/// elements of `type`.
struct NcclCollective {
  enum Kind : std::uint8_t { kAllreduce, kBroadcast };
  Kind kind = kAllreduce;
  /// Index of the communicator (and GPU) in the monitor's lists.
  int local = 0;
  /// The parameter's key, for messages.
  int key = 0;
  ncclDataType_t type = ncclFloat32;
  void* buffer = nullptr;
  std::size_t count = 0;
};

/// One rank's part of a collective and the stream it goes on.
struct NcclLaunch {
  cudaStream_t stream = nullptr;
  NcclCollective collective;
};

/// Aborts `comms` (null entries are skipped) in one NCCL group where NCCL
/// allows it (2.22 and later), else one after the other (Note [Aborting
/// without racing a call]); logs a failure naming `where`. May wait for
/// the communicators' kernels to end: call it holding no lock.
void abort_nccl_communicators(std::span<const ncclComm_t> comms, const std::string& where) noexcept;

class NcclMonitor {
 public:
  using Clock = CollectiveWatch::Clock;

  /// Takes `comms` (initialised; comms[i] is the communicator of
  /// devices[i]) and starts the watching thread. `where` names this process
  /// in the log, e.g. "process 1 of 4". `timeout_seconds` > 0.
  NcclMonitor(std::vector<ncclComm_t> comms, std::vector<Context> devices, std::string where,
              double timeout_seconds);
  /// close(), if not done.
  ~NcclMonitor();
  NcclMonitor(const NcclMonitor&) = delete;
  NcclMonitor& operator=(const NcclMonitor&) = delete;

  /// Enqueues `collective` on `stream` (the compute stream of its GPU, which
  /// is the current device) between two events, and hands them to the
  /// watching thread; counts it on the process's ReleaseGate until its end
  /// is seen (Note [No release during collectives] in
  /// storage/detail/release_gate.h). Throws CommunicationError, without
  /// calling NCCL, once the clique is broken or closed, or when it broke
  /// during the call; DeviceError when NCCL or CUDA fails, which breaks the
  /// clique (the other ranks would wait for this one).
  void issue(cudaStream_t stream, const NcclCollective& collective);
  /// Same for the parts of one collective on several of this monitor's
  /// GPUs, from one thread: the NCCL calls go between ncclGroupStart and
  /// ncclGroupEnd, as NCCL requires when one thread drives several devices,
  /// each part's events on its own GPU. The calling thread's current device
  /// comes back after. A failure breaks the clique, as in issue().
  void issue_together(std::span<const NcclLaunch> parts);

  /// True once a failure or a timeout made the monitor abort the
  /// communicators.
  bool broken() const;
  /// Why it broke; empty while it has not.
  std::string reason() const;

  /// Ends the communicators: on a healthy clique finalises them together,
  /// then destroys them (Note [Ending the communicators]); on a broken one
  /// they were aborted. Then stops and joins the watching thread. Call it
  /// once no operation can be inside issue(): on a healthy clique, after
  /// waiting for them (one still inside breaks the clique). Later issue()
  /// calls throw.
  void close();

 private:
  /// A collective enqueued and not yet seen finished.
  struct InFlight {
    cudaEvent_t reached = nullptr;  ///< recorded before the collective
    cudaEvent_t done = nullptr;     ///< recorded after it
    std::uint64_t id = 0;           ///< its id in `watch_`
    NcclCollective collective;
  };
  /// A thread inside an NCCL call on communicator i (Note [Aborting
  /// without racing a call]).
  struct Busy {
    bool active = false;
    bool finalizing = false;  ///< close() is finalising it, else issue() runs `collective`
    NcclCollective collective;
  };
  /// What a thread does once it has let go of the mutex: the calls that may
  /// block on the device or on other processes.
  struct Aftermath {
    std::vector<ncclComm_t> to_abort;
    /// Collectives counted on the ReleaseGate that have ended, or will once
    /// `to_abort` is aborted.
    std::size_t ended = 0;
  };

  void watch();
  /// One look at the collectives in flight and the communicators' errors.
  void poll_locked(Aftermath& after);
  /// Marks the clique broken, logs why, forgets the collectives in flight
  /// and hands the idle communicators to `after` for aborting.
  void break_locked(std::string reason, Aftermath& after);
  /// Marks the communicators no thread is inside as freed, into `after`.
  void take_idle_locked(Aftermath& after);
  /// Aborts `after.to_abort`, then reports `after.ended` to the ReleaseGate.
  /// Holding no lock.
  void carry_out(const Aftermath& after) noexcept;
  /// close() on a healthy clique (Note [Ending the communicators]).
  void finalize_and_destroy();
  /// "allreduce of key 7 (1024 elements) on gpu(1)".
  std::string describe(const NcclCollective& collective) const;
  /// What has waited too long, for the log.
  std::string describe_locked(const CollectiveWatch::Wait& wait, Clock::time_point now) const;

  std::vector<ncclComm_t> comms_;
  std::vector<Context> devices_;
  std::string where_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;  ///< the watching thread: stop
  bool stopping_ = false;
  bool closed_ = false;
  bool broken_ = false;
  std::string reason_;
  /// comms_[i] was aborted or destroyed, or is being.
  std::vector<bool> freed_;
  std::vector<Busy> busy_;
  std::deque<InFlight> in_flight_;
  /// When each collective and call started (Note [NCCL failures and timeouts]).
  CollectiveWatch watch_;
  std::thread thread_;
};

}  // namespace tagflow::dist
