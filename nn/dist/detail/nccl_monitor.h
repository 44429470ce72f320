#pragma once
// NcclMonitor: the NCCL communicators of an NcclAggregator, the one place
// that issues collectives on them, and the thread that watches those
// collectives until they finish (Note [NCCL failures and timeouts] in
// nccl_aggregator.h). Internal to nn/, and built only when the build has
// NCCL: it names NCCL's and CUDA's types.
//
//   auto monitor = std::make_shared<dist::NcclMonitor>(comms, gpus, "process 1 of 2", 120.0);
//   // in an engine operation on gpus[0]'s compute stream:
//   monitor->issue(stream, {.kind = dist::NcclCollective::kAllreduce, .local = 0, ...});
//   monitor->close();   // once every operation issuing on it has run
//
// Note [Aborting without racing a call]
// NCCL calls on one communicator must not overlap (NCCL is re-entrant, not
// thread-safe), and ncclCommAbort frees the communicator. issue() marks its
// communicator busy (under the mutex) for the length of its NCCL call; the
// watching thread asks ncclCommGetAsyncError only of idle communicators, and
// a communicator is aborted only while idle: when the clique breaks, the
// idle ones at once, a busy one by issue() itself as it leaves. After a
// break, issue() throws instead of calling NCCL, and the engine operations
// keep the monitor alive (shared_ptr) however long they stay queued.

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "engine/context.h"

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

class NcclMonitor {
 public:
  using Clock = std::chrono::steady_clock;

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
  /// is the current device) and hands an event recorded after it to the
  /// watching thread. Throws CommunicationError, without calling NCCL, once
  /// the clique is broken or closed; DeviceError when NCCL or CUDA fails,
  /// which breaks the clique (the other ranks would wait for this one).
  void issue(cudaStream_t stream, const NcclCollective& collective);

  /// True once a failure or a timeout made the monitor abort the
  /// communicators.
  bool broken() const;
  /// Why it broke; empty while it has not.
  std::string reason() const;

  /// Stops and joins the watching thread, then frees the communicators with
  /// ncclCommDestroy, unless broken (aborted communicators are already
  /// freed). Call it once no operation can be inside issue(): on a healthy
  /// clique, after waiting for them. Later issue() calls throw.
  void close();

 private:
  /// A collective enqueued and not yet seen finished.
  struct InFlight {
    cudaEvent_t event = nullptr;
    Clock::time_point issued;
    NcclCollective collective;
  };
  /// A thread inside issue() with communicator i.
  struct Issuing {
    bool active = false;
    Clock::time_point since;
    NcclCollective collective;
  };

  void watch();
  /// One look at the collectives in flight and the communicators' errors.
  void poll_locked();
  /// Marks the clique broken, logs why and aborts the idle communicators.
  void break_locked(std::string reason);
  /// Aborts the communicators no thread is issuing on (Note [Aborting
  /// without racing a call]).
  void abort_idle_locked();
  /// "allreduce of key 7 (1024 elements) on gpu(1)".
  std::string describe(const NcclCollective& collective) const;

  std::vector<ncclComm_t> comms_;
  std::vector<Context> devices_;
  std::string where_;
  std::chrono::duration<double> timeout_;

  mutable std::mutex mutex_;
  std::condition_variable wake_;  ///< the watching thread: stop
  bool stopping_ = false;
  bool closed_ = false;
  bool broken_ = false;
  std::string reason_;
  /// comms_[i] was aborted or destroyed.
  std::vector<bool> freed_;
  std::vector<Issuing> issuing_;
  std::deque<InFlight> in_flight_;
  std::thread thread_;
};

}  // namespace tagflow::dist
