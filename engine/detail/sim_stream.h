#pragma once
// SimStream: a simulated GPU stream. An in-order queue run by one host
// thread; a counter plays the CUDA event. It enforces CUDA's rules (Note
// [Simulated CUDA rules] in sim_runtime.h) and, with a device model, keeps
// modelled time (Note [Modelled time] in engine/device_model.h). Internal to
// engine/.
//
// Note [Timing-only GPUs]
// With TAGFLOW_SIM_GPUS=N:model:timing the streams time their modelled work
// (kernels and copies, enqueue_work) without running it, so that a job of
// many GPUs and a large network schedules on one host: memory is allocated
// (and counted against the model's capacity) but never touched. Host
// functions (enqueue_host) still run: they are the host's. What the devices
// "computed" is undefined, so a copy of it to the host fails the copy with
// NotComputedError, which the engine stores on the destination: reading it,
// printing it or computing with it on a CPU device rethrows the error,
// while the GPUs' own work goes on unaffected.

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "engine/detail/model_clock.h"
#include "engine/detail/sim_collective.h"
#include "engine/stream.h"

namespace tagflow::detail {

class SimStream final : public Stream {
 public:
  /// `clock` (may be null: not modelled) must outlive the stream.
  SimStream(Context ctx, QueueKind kind, sim::ModelClock* clock = nullptr);
  ~SimStream() override;

  void enqueue_host(HostFunction fn) override;
  void enqueue_timestamp(std::int64_t* out) override;
  std::uint64_t record() override;
  void wait(Stream& other, std::uint64_t seq) override;
  bool finished(std::uint64_t seq) override;
  void synchronize(std::uint64_t seq) override;
  void when_finished(std::uint64_t seq, HostFunction fn) override;
  void make_device_current() override;
  std::int64_t modelled_time(std::uint64_t seq) const override;

  /// Enqueues modelled device work (a kernel, a copy) that lasts
  /// `duration_ns` of modelled time; `fn` is skipped on a timing-only GPU.
  /// Checked as enqueue_host is.
  void enqueue_work(std::int64_t duration_ns, HostFunction fn);
  /// Enqueues this stream's part of `collective` (sim_collective.h),
  /// checked as enqueue_host is.
  void enqueue_collective(std::shared_ptr<sim::Collective> collective);
  /// The device model's clock, or null.
  sim::ModelClock* model_clock() const { return clock_; }

 private:
  struct Item {
    enum class Type { kHost, kWork, kMark, kWait, kTimestamp, kCollective } type;
    HostFunction fn;              // kHost, kWork
    std::uint64_t seq = 0;        // kMark: this stream's mark; kWait: other's
    Stream* other = nullptr;      // kWait
    std::int64_t* out = nullptr;  // kTimestamp
    /// Modelled: the issuing thread's clock, and how long kWork lasts.
    std::int64_t issued_ns = 0;
    std::int64_t duration_ns = 0;
    std::shared_ptr<sim::Collective> collective;  // kCollective
  };
  /// Marks whose modelled times are kept exactly; an older mark reads the
  /// time of a later one (an upper bound: times only grow).
  static constexpr std::size_t kMarkTimes = 1 << 12;
  void push_item(Item item);
  /// Throws DeviceError (cudaErrorNotPermitted) when called from host work.
  void check_not_in_host_work(const char* call) const;
  void run();
  void mark_finished(std::uint64_t seq);
  /// The calling thread's modelled clock (0 when not modelled).
  std::int64_t issue_time() const { return clock_ != nullptr ? clock_->host_now() : 0; }

  sim::ModelClock* clock_;
  /// The stream's modelled clock, advanced by its thread only.
  std::int64_t now_ns_ = 0;
  std::vector<std::atomic<std::int64_t>> mark_times_;
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable progress_;
  std::deque<Item> items_;
  std::uint64_t recorded_ = 0;
  std::atomic<std::uint64_t> finished_{0};
  std::multimap<std::uint64_t, HostFunction> callbacks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace tagflow::detail
