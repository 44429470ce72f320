#pragma once
// ReleaseGate: keeps memory from going back to a device while a collective
// is in flight (Note [No release during collectives]). Storage's GPU and
// pinned allocators release through it; nn/dist's NCCL aggregator counts
// its collectives on it. Internal to storage/ and the layers above it.
//
//   ReleaseGate& gate = ReleaseGate::process();
//   gate.collective_began();   // just before enqueueing an NCCL collective
//   ...                        // its kernel waits on the device for its peers
//   gate.collective_ended();   // its end was seen: releases put off meanwhile run now
//
// Note [No release during collectives]
// cudaFree synchronises its device, cudaFreeHost every device. An NCCL
// kernel waits on the device until its peers have issued their part: the
// other GPUs of this process, whose ranks come from other worker threads,
// and other processes. A thread that releases device memory while such a
// kernel is in flight waits for it; when the peer it waits for needs that
// very thread (a worker whose allocation retries after releasing the
// cache, before it issues its own rank), neither moves, for ever: the
// known hang of cudaFree called while NCCL kernels run. So:
//  - nn/dist counts every NCCL collective of the process, from just before
//    it is enqueued until its completion has been seen or its communicator
//    aborted (collective_began, collective_ended).
//  - Memory goes back to a gated device only while that count is 0, and a
//    collective about to be enqueued waits for a release that is running:
//    the release then waits for ordinary kernels only, which end.
//  - With collectives in flight, nothing waits for them (the thread asking
//    may be the one a collective waits for): the release is put off.
//    empty_cache() returns at once and the cache goes back when the last
//    collective in flight ends, on the thread that reports that end; an
//    allocation that needed the cache back fails with OutOfMemoryError,
//    which says so, and the cache goes back as for empty_cache().
//  - Gated: every GPU's allocator, simulated ones included (so that CI runs
//    this logic), and pinned memory's. cpu(i) memory goes back to the C
//    library, which waits for no device.
// Allocation (cudaMalloc) is not gated: the pool makes it rare after the
// first steps, and refusing it would fail steps that work.

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <vector>

namespace tagflow::detail {

class ReleaseGate {
 public:
  /// An allocator whose release was put off.
  class Client {
   public:
    /// Does the releases put off. The gate calls it once the last
    /// collective in flight has ended, holding new ones off meanwhile.
    virtual void release_deferred() noexcept = 0;

   protected:
    ~Client() = default;
  };

  /// The process's gate: every gated allocator of Storage, and the NCCL
  /// collectives of every aggregator.
  static ReleaseGate& process();

  ReleaseGate() = default;
  ReleaseGate(const ReleaseGate&) = delete;
  ReleaseGate& operator=(const ReleaseGate&) = delete;

  /// Counts a collective in flight; call it just before enqueueing the
  /// collective. Waits while a release runs (which ends: it waits for
  /// ordinary kernels only).
  void collective_began();
  /// The collective counted by collective_began() has finished on the
  /// device, or will never run. When it was the last one in flight, runs
  /// the releases put off meanwhile, on this thread, before returning.
  void collective_ended() noexcept;
  /// Collectives between collective_began() and collective_ended().
  std::size_t collectives_in_flight() const;

  /// Calls `release()` now when no collective is in flight, holding new
  /// ones off until it returns, and returns 0. Otherwise returns at once
  /// the number of collectives in flight, and remembers `client`, whose
  /// release_deferred() runs when the last of them ends. Throws
  /// std::bad_alloc when there is no memory to remember it.
  ///
  ///   if (gate.release_or_defer(*this, [&] { release_cache(); }) != 0) { /* later */ }
  template <typename Release>
  std::size_t release_or_defer(Client& client, Release&& release) {
    if (const std::size_t in_flight = begin_release(client); in_flight != 0) return in_flight;
    const EndRelease end{*this};
    release();
    return 0;
  }

  /// Forgets `client` (an allocator being destroyed), after waiting for a
  /// release that may be calling it.
  void forget(Client& client) noexcept;

 private:
  struct EndRelease {
    ReleaseGate& gate;
    ~EndRelease() { gate.end_release(); }
  };
  /// 0, counting a release, when no collective is in flight; else their
  /// number, having deferred `client`.
  std::size_t begin_release(Client& client);
  void end_release() noexcept;

  mutable std::mutex mutex_;
  /// collective_began() and forget(): a release has ended.
  std::condition_variable released_;
  std::size_t in_flight_ = 0;
  /// Releases running now.
  std::size_t releasing_ = 0;
  /// Clients whose release was put off, each once.
  std::vector<Client*> deferred_;
};

}  // namespace tagflow::detail
