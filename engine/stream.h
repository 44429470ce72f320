#pragma once
// Stream: an in-order queue of device work, as an operation on a GPU sees it
// in RunContext::stream. Its work goes into the stream and the operation
// returns; the engine tracks when it finishes:
//
//   engine.push({.name = "fill", .ctx = gpu(0), .writes = {x},
//                .fn = [=](const RunContext& rc) {
//                  if (void* cuda = rc.stream->native_handle()) {
//                    my_kernel<<<blocks, threads, 0, static_cast<cudaStream_t>(cuda)>>>(...);
//                  } else {                           // a simulated GPU
//                    rc.stream->enqueue_host([=] { fill_on_host(...); });
//                  }
//                }});
//
// The rest is the thin device-backend interface the engine drives: a
// sequence number returned by `record()` marks a point in the stream (a CUDA
// event on real GPUs, a counter on simulated ones). See Note [Completion on
// device queues] in engine/detail/threaded_engine.h.
//
// Threads: safe to call concurrently. Every call takes the stream's lock;
// work enqueued from several threads runs in the order the calls reached the
// stream.
//
// Note [Errors of device work]
// A GPU operation completes when its work is in the stream; the work can
// still fail afterwards (a fault on a real GPU, a simulated kernel that
// throws). That failure must reach whoever uses what the operation wrote, as
// an operation's own exception does (DESIGN.md, "Rules that hold
// everywhere"), not only the next wait_for_all. So each mark knows whether
// the work before it failed: error_at(seq). A device failure is sticky, as
// CUDA's are (the context is lost): every mark from the first one after the
// failing work on carries the stream's first error, and a stream that waits
// on a failed mark of another stream fails from its next mark on, since what
// it runs next may consume the bad data. The engines then treat a variable
// whose write fence failed as a variable carrying that error: an operation
// reading it is skipped and inherits it, wait_to_read rethrows it (so does
// printing or copying to the host), and wait_for_all reports it once per
// stream. Marks that finished before the failure stay clean.

#include <atomic>
#include <cstdint>
#include <exception>
#include <limits>
#include <mutex>
#include <string>

#include "engine/context.h"
#include "engine/gpu_info.h"
#include "engine/inline_function.h"
#include "engine/operation.h"

namespace tagflow {

class Stream {
 public:
  using HostFunction = detail::InlineFunction<void(), 48>;

  Stream(Context ctx, QueueKind kind) : ctx_(ctx), kind_(kind) {}
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Context context() const { return ctx_; }
  QueueKind kind() const { return kind_; }

  /// Enqueues host code to run in stream order (a host function on a real
  /// GPU; what runs a simulated GPU's kernels). An exception it throws
  /// becomes the stream's sticky error (Note [Errors of device work]). Host
  /// work must not call the device API, this stream's included (simulated
  /// GPUs enforce it, Note [Simulated CUDA rules] in engine/detail/sim_runtime.h).
  virtual void enqueue_host(HostFunction fn) = 0;
  /// Marks everything enqueued so far; returns the mark's sequence number
  /// (strictly increasing per stream).
  virtual std::uint64_t record() = 0;
  /// Makes work enqueued later on this stream wait, on the device, until
  /// `other` has finished `seq`. The host does not block.
  virtual void wait(Stream& other, std::uint64_t seq) = 0;
  /// True once the work up to `seq` has finished.
  virtual bool finished(std::uint64_t seq) = 0;
  /// Blocks the calling host thread until `seq` has finished.
  virtual void synchronize(std::uint64_t seq) = 0;
  /// Calls `fn` once `seq` has finished: at once if it has, else later from
  /// a backend thread. Never blocks the caller.
  virtual void when_finished(std::uint64_t seq, HostFunction fn) = 0;
  /// Profiling (Note [Profiler times] in profiler.h): once the stream has
  /// reached this point, writes the time it did (nanoseconds on the
  /// profiler's clock) to `*out`, before the callbacks of any later mark
  /// run. A host function on a simulated GPU, a timing event on a real one.
  virtual void enqueue_timestamp(std::int64_t* out) = 0;
  /// Once `finished(seq)` on a simulated GPU with a device model: the
  /// modelled time (ns) at which the stream reached mark `seq` (Note
  /// [Modelled time] in engine/device_model.h); -1 otherwise.
  virtual std::int64_t modelled_time(std::uint64_t /*seq*/) const { return -1; }
  /// cudaStream_t on real GPUs, null on simulated ones.
  virtual void* native_handle() { return nullptr; }
  /// Makes this stream's GPU the calling thread's current device
  /// (cudaSetDevice on a real GPU), which a thread must have to launch
  /// kernels onto the stream. The engine's workers have it already; a thread
  /// of your own (completing an operation later, say) calls this first.
  /// Throws DeviceError when the device cannot be selected.
  virtual void make_device_current() = 0;

  /// First error raised by work on the stream, or null.
  std::exception_ptr error() const {
    std::lock_guard lock(error_mutex_);
    return error_;
  }
  /// Once `finished(seq)`: null when the work up to mark `seq` succeeded,
  /// else the stream's first error (Note [Errors of device work]).
  std::exception_ptr error_at(std::uint64_t seq) const {
    if (seq < failed_from_.load(std::memory_order_acquire)) [[likely]]
      return nullptr;
    return error();
  }

 protected:
  /// Records a failure of the work before mark `from` (the first error
  /// stays; marks from the earliest such `from` on carry it).
  void set_error(std::exception_ptr error, std::uint64_t from) noexcept {
    std::lock_guard lock(error_mutex_);
    if (!error_) error_ = std::move(error);
    if (from < failed_from_.load(std::memory_order_relaxed)) {
      failed_from_.store(from, std::memory_order_release);
    }
  }

 private:
  Context ctx_;
  QueueKind kind_;
  mutable std::mutex error_mutex_;
  std::exception_ptr error_;
  /// The first failed mark; none while it is the maximum.
  std::atomic<std::uint64_t> failed_from_{std::numeric_limits<std::uint64_t>::max()};
};

namespace detail {

/// A point in a stream: finished once the stream has passed `seq`.
struct Fence {
  Stream* stream = nullptr;
  std::uint64_t seq = 0;
  explicit operator bool() const { return stream != nullptr; }
};

}  // namespace detail

}  // namespace tagflow
