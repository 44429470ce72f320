#pragma once
// Stream: the thin device-backend interface the engine drives. A stream is an
// in-order queue of device work; a sequence number returned by `record()`
// marks a point in it (a CUDA event on real GPUs, a counter on simulated
// ones). See Note [Completion on device queues] in threaded_engine.h.

#include <cstdint>
#include <exception>
#include <string>

#include "tagflow/engine/context.h"
#include "tagflow/engine/inline_function.h"
#include "tagflow/engine/operation.h"

namespace tagflow::detail {

class Stream {
 public:
  using HostFunction = InlineFunction<void(), 48>;

  Stream(Context ctx, QueueKind kind) : ctx_(ctx), kind_(kind) {}
  virtual ~Stream() = default;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  Context context() const { return ctx_; }
  QueueKind kind() const { return kind_; }

  /// Enqueues host code to run in stream order (the kernel of a simulated
  /// GPU; a host function on a real one). An exception it throws becomes the
  /// stream's sticky error.
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
  /// First error raised by work on the stream, or null.
  virtual std::exception_ptr error() = 0;
  /// cudaStream_t on real GPUs, null on simulated ones.
  virtual void* native_handle() { return nullptr; }

 private:
  Context ctx_;
  QueueKind kind_;
};

/// A point in a stream: finished once the stream has passed `seq`.
struct Fence {
  Stream* stream = nullptr;
  std::uint64_t seq = 0;
  explicit operator bool() const { return stream != nullptr; }
};

/// What `tagflow info` and `num_gpus()` report about one GPU.
struct GpuInfo {
  int index = 0;
  std::string name;
  std::uint64_t total_memory = 0;
  int compute_major = 0;
  int compute_minor = 0;
  bool simulated = false;
};

}  // namespace tagflow::detail
