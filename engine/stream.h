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

#include <cstdint>
#include <exception>
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

namespace detail {

/// A point in a stream: finished once the stream has passed `seq`.
struct Fence {
  Stream* stream = nullptr;
  std::uint64_t seq = 0;
  explicit operator bool() const { return stream != nullptr; }
};

}  // namespace detail

}  // namespace tagflow
