// The CUDA device backend: real GPUs through the CUDA runtime. Each Stream is
// a non-blocking cudaStream_t; a sequence number from record() is a CUDA
// event, and one poller thread per stream turns event completions into
// `finished()`, `synchronize()` and `when_finished()` callbacks. SimStream
// (sim_stream.cc) is the simulated twin with the same semantics.

#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "engine/detail/device_backend.h"
#include "engine/detail/profile_marks.h"
#include "engine/error.h"

#if defined(TAGFLOW_HAVE_CUDA)

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <map>
#include <mutex>
#include <string_view>
#include <thread>
#include <utility>

#include <cuda_runtime_api.h>

#include "engine/detail/cuda_check.h"
#include "engine/detail/cuda_device_guard.h"
#include "engine/detail/cuda_peer_access.h"
#include "engine/detail/stream_listeners.h"
#include "engine/detail/worker_pool.h"
#include "engine/small_vector.h"

/// Runs a CUDA runtime call and throws tagflow::Error with the call's text on
/// failure (Note [CUDA status messages] in cuda_check.h). Needs an int
/// `device` (the GPU index) in scope for the message.
#define TAGFLOW_CUDA_CHECK(device, call) \
  ::tagflow::detail::check_cuda_as<::tagflow::Error>((call), #call, ::tagflow::gpu(device))

namespace tagflow::detail {
namespace {

/// "13.0" for the 13000 that cudaDriverGetVersion/cudaRuntimeGetVersion report.
std::string format_cuda_version(int version) {
  return fmt::format("{}.{}", version / 1000, (version % 1000) / 10);
}

/// The error stored on a stream when `call` returned `status` on gpu(device):
/// tagflow::Error, worded as Note [CUDA status messages] says.
Error cuda_error(cudaError_t status, std::string_view call, int device) {
  return Error(cuda_failure(status, call, gpu(device)));
}

/// Events only order work and signal completion; blocking sync lets the poller
/// sleep in cudaEventSynchronize instead of spinning a core per stream.
constexpr unsigned int kEventFlags = cudaEventDisableTiming | cudaEventBlockingSync;

class CudaStream final : public Stream {
 public:
  CudaStream(Context ctx, QueueKind kind);
  ~CudaStream() override;

  void enqueue_host(HostFunction fn) override;
  void enqueue_timestamp(std::int64_t* out) override;
  std::uint64_t record() override;
  void wait(Stream& other, std::uint64_t seq) override;
  bool finished(std::uint64_t seq) override;
  void synchronize(std::uint64_t seq) override;
  void when_finished(std::uint64_t seq, HostFunction fn) override;
  void* native_handle() override { return static_cast<void*>(stream_); }
  void make_device_current() override {
    check_cuda(cudaSetDevice(device()), "cudaSetDevice", context());
  }

 private:
  /// A recorded mark the poller has not yet seen complete.
  struct PendingMark {
    std::uint64_t seq = 0;
    cudaEvent_t event = nullptr;
    /// Marks of other streams the work before this one waited on (see wait()).
    SmallVector<Fence, 2> waits;
  };
  /// What a cudaLaunchHostFunc call owns until the driver runs it.
  struct HostCall {
    CudaStream* stream = nullptr;
    HostFunction fn;
    /// The first mark recorded after it: the one its failure fails.
    std::uint64_t next_mark = 0;
  };

  int device() const { return context().index; }
  static void CUDART_CB run_host_call(void* user_data);
  cudaEvent_t take_free_event();
  cudaEvent_t create_event();
  /// A failure of this stream's work not tied to one mark: marks recorded
  /// from now on carry it.
  void fail_from_next_mark(std::exception_ptr error) noexcept;
  void poll();
  void mark_finished(std::uint64_t seq);

  cudaStream_t stream_ = nullptr;

  // Guards everything below up to `stopping_`. Never held by host functions,
  // and never held while waiting on the device.
  std::mutex mutex_;
  std::condition_variable marks_pending_;  ///< wakes the poller
  std::condition_variable progress_;       ///< wakes synchronize()
  /// Marks (finished_, recorded_], oldest first; each seq exactly once.
  std::deque<PendingMark> pending_;
  /// Completed events ready for reuse. Its capacity is kept >= num_events_,
  /// so recycling an event never allocates.
  std::vector<cudaEvent_t> free_events_;
  std::size_t num_events_ = 0;  ///< events owned: in pending_ or free_events_
  /// Fences wait() made this stream wait on since the last record().
  SmallVector<Fence, 2> waits_since_last_mark_;
  std::uint64_t recorded_ = 0;
  std::atomic<std::uint64_t> finished_{0};
  std::multimap<std::uint64_t, HostFunction> callbacks_;
  bool stopping_ = false;

  // Profiling (Note [Device times]): the last timing event whose profiler
  // time is known; later ones are measured from it. Made on first use.
  std::once_flag clock_once_;
  std::mutex clock_mutex_;
  cudaEvent_t last_timing_event_ = nullptr;
  std::int64_t last_timing_ns_ = 0;

  std::thread poller_;
};

CudaStream::CudaStream(Context ctx, QueueKind kind) : Stream(ctx, kind) {
  TAGFLOW_CHECK_AS(DeviceError, ctx.is_gpu(), "CudaStream: expected a GPU context, got {}",
                   ctx.str());
  const int dev = device();
  {
    CudaDeviceGuard on_device(dev);
    TAGFLOW_CUDA_CHECK(dev, cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  try {
    poller_ = std::thread([this] { poll(); });
  } catch (...) {
    static_cast<void>(cudaStreamDestroy(stream_));
    throw;
  }
}

CudaStream::~CudaStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  marks_pending_.notify_one();
  // The poller leaves only once every pending mark has been handled.
  if (poller_.joinable()) poller_.join();

  // Failures are ignored from here on: a destructor must not throw, and there
  // is nobody left to tell.
  int previous_device = -1;
  if (cudaGetDevice(&previous_device) != cudaSuccess) previous_device = -1;
  static_cast<void>(cudaSetDevice(device()));
  // Host functions enqueued after the last mark still point at this object;
  // let them run before it goes away.
  static_cast<void>(cudaStreamSynchronize(stream_));
  // Its cuBLAS and cuDNN handles go first (Note [Per-stream library handles]).
  notify_cuda_stream_destroyed(device(), static_cast<void*>(stream_));
  for (cudaEvent_t event : free_events_) static_cast<void>(cudaEventDestroy(event));
  if (last_timing_event_ != nullptr) static_cast<void>(cudaEventDestroy(last_timing_event_));
  static_cast<void>(cudaStreamDestroy(stream_));
  if (previous_device >= 0 && previous_device != device()) {
    static_cast<void>(cudaSetDevice(previous_device));
  }
  static_cast<void>(cudaGetLastError());
}

void CUDART_CB CudaStream::run_host_call(void* user_data) {
  // Runs on a CUDA driver thread, which must not call the CUDA API: nothing
  // below does. A wait from here would deadlock the stream, so label it.
  std::unique_ptr<HostCall> call(static_cast<HostCall*>(user_data));
  WorkerIdentity& identity = this_worker();
  const char* const previous_label = identity.running;
  identity.running = "CUDA host function";
  try {
    call->fn();
  } catch (...) {
    call->stream->set_error(std::current_exception(), call->next_mark);
  }
  identity.running = previous_label;
}

void CudaStream::enqueue_host(HostFunction fn) {
  auto call = std::make_unique<HostCall>(HostCall{this, std::move(fn)});
  // Under the lock record() holds across cudaEventRecord: the next mark is
  // then the first after this function in stream order, the one it fails.
  std::lock_guard lock(mutex_);
  call->next_mark = recorded_ + 1;
  TAGFLOW_CUDA_CHECK(device(), cudaLaunchHostFunc(stream_, &run_host_call, call.get()));
  static_cast<void>(call.release());  // owned by the driver now; run_host_call deletes it
}

// Note [Device times]
// cudaEventElapsedTime gives float milliseconds. Measured from one origin
// fixed at first use, its step grows with the process's age (about 8 us
// after 100 s, 0.25 ms after an hour) and kernel spans collapse. So each
// timing event is measured from the previous one resolved on the stream,
// whose profiler time is known: the intervals are short and keep float's
// precision, and the first event is anchored by one synchronisation with the
// host clock. Callbacks of different marks may run on different threads (on
// the recording thread when its mark has already finished), so the chain is
// guarded by a lock, and an interval may be negative (a later event resolved
// first), which cudaEventElapsedTime reports as such.
void CudaStream::enqueue_timestamp(std::int64_t* out) {
  const int dev = device();
  CudaDeviceGuard on_device(dev);
  std::call_once(clock_once_, [&] {
    cudaEvent_t origin = nullptr;
    TAGFLOW_CUDA_CHECK(dev, cudaEventCreate(&origin));  // with timing
    cudaError_t status = cudaEventRecord(origin, stream_);
    if (status == cudaSuccess) status = cudaEventSynchronize(origin);
    if (status != cudaSuccess) {
      static_cast<void>(cudaEventDestroy(origin));
      static_cast<void>(cudaGetLastError());
      throw cuda_error(status, "cudaEventRecord (profiler clock origin)", dev);
    }
    std::lock_guard lock(clock_mutex_);
    last_timing_ns_ = profiler_now();
    last_timing_event_ = origin;
  });
  cudaEvent_t event = nullptr;
  TAGFLOW_CUDA_CHECK(dev, cudaEventCreate(&event));  // with timing
  if (const cudaError_t status = cudaEventRecord(event, stream_); status != cudaSuccess) {
    static_cast<void>(cudaEventDestroy(event));
    static_cast<void>(cudaGetLastError());
    throw cuda_error(status, "cudaEventRecord (profiler timestamp)", dev);
  }
  // Resolved on the poller (callbacks may call CUDA; host functions may not).
  when_finished(record(), [this, event, out] {
    std::lock_guard lock(clock_mutex_);
    float ms = 0;
    if (cudaEventElapsedTime(&ms, last_timing_event_, event) != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      static_cast<void>(cudaEventDestroy(event));
      return;  // the span stays unknown
    }
    last_timing_ns_ += static_cast<std::int64_t>(static_cast<double>(ms) * 1e6);
    *out = last_timing_ns_;
    static_cast<void>(cudaEventDestroy(last_timing_event_));
    last_timing_event_ = event;
  });
}

cudaEvent_t CudaStream::take_free_event() {
  std::lock_guard lock(mutex_);
  if (free_events_.empty()) return nullptr;
  cudaEvent_t event = free_events_.back();
  free_events_.pop_back();
  return event;
}

cudaEvent_t CudaStream::create_event() {
  const int dev = device();
  // Events belong to the device current at creation; it must be this stream's.
  CudaDeviceGuard on_device(dev);
  cudaEvent_t event = nullptr;
  TAGFLOW_CUDA_CHECK(dev, cudaEventCreateWithFlags(&event, kEventFlags));
  return event;
}

std::uint64_t CudaStream::record() {
  cudaEvent_t event = take_free_event();
  const bool fresh = event == nullptr;
  if (fresh) event = create_event();
  std::uint64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    try {
      if (fresh) free_events_.reserve(num_events_ + 1);
      pending_.push_back({0, event, {}});
    } catch (...) {
      if (fresh) {
        static_cast<void>(cudaEventDestroy(event));
      } else {
        free_events_.push_back(event);  // within capacity: cannot throw
      }
      throw;
    }
    if (fresh) ++num_events_;
    // Recorded under the lock so that sequence numbers follow stream order even
    // when several threads record on this stream.
    const cudaError_t status = cudaEventRecord(event, stream_);
    if (status != cudaSuccess) {
      pending_.pop_back();
      free_events_.push_back(event);  // within capacity: cannot throw
    }
    check_cuda_as<Error>(status, "cudaEventRecord(event, stream_)", gpu(device()));
    seq = ++recorded_;
    pending_.back().seq = seq;
    pending_.back().waits = std::move(waits_since_last_mark_);
    waits_since_last_mark_.clear();
  }
  marks_pending_.notify_one();
  return seq;
}

void CudaStream::wait(Stream& other, std::uint64_t seq) {
  if (&other == this) return;
  auto* other_cuda = dynamic_cast<CudaStream*>(&other);
  TAGFLOW_CHECK(other_cuda != nullptr,
                "CudaStream::wait: expected a CUDA stream to wait on, got a stream of {}",
                other.context().str());
  bool finished_already = other.finished(seq);
  if (!finished_already) {
    // Holding other's lock keeps the event from being recycled and re-recorded
    // for a later mark before the wait has captured it.
    std::lock_guard lock(other_cuda->mutex_);
    // Completed (and its event recycled) meanwhile?
    finished_already = other_cuda->finished_.load(std::memory_order_acquire) >= seq;
    if (!finished_already) {
      TAGFLOW_CHECK(seq <= other_cuda->recorded_,
                    "CudaStream::wait: mark {} was never recorded on {} (last recorded: {})", seq,
                    other.context().str(), other_cuda->recorded_);
      // pending_ holds exactly the marks after finished_ up to recorded_, in order.
      const auto& pending = other_cuda->pending_;
      const PendingMark& mark = pending[static_cast<std::size_t>(seq - pending.front().seq)];
      TAGFLOW_CUDA_CHECK(device(), cudaStreamWaitEvent(stream_, mark.event, 0));
    }
  }
  if (finished_already) {
    // Nothing to wait for on the device, but a failure before that mark
    // taints what this stream runs next (Note [Errors of device work]).
    if (std::exception_ptr error = other.error_at(seq)) [[unlikely]]
      fail_from_next_mark(std::move(error));
    return;
  }
  // Remembered for the next mark, whose poller then also waits for `other` to
  // publish `seq` (and takes on its failure): as on SimStream, this stream
  // finishing a later mark implies `other.finished(seq)`. Taken after
  // releasing other's lock: never both.
  std::lock_guard lock(mutex_);
  for (Fence& fence : waits_since_last_mark_) {
    if (fence.stream == &other) {
      if (fence.seq < seq) fence.seq = seq;
      return;
    }
  }
  waits_since_last_mark_.push_back({&other, seq});
}

bool CudaStream::finished(std::uint64_t seq) {
  return finished_.load(std::memory_order_acquire) >= seq;
}

void CudaStream::synchronize(std::uint64_t seq) {
  if (finished(seq)) return;
  std::unique_lock lock(mutex_);
  TAGFLOW_CHECK(seq <= recorded_,
                "CudaStream::synchronize: mark {} was never recorded on {} (last recorded: {})",
                seq, context().str(), recorded_);
  progress_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) >= seq; });
}

void CudaStream::when_finished(std::uint64_t seq, HostFunction fn) {
  {
    std::lock_guard lock(mutex_);
    if (finished_.load(std::memory_order_acquire) < seq) {
      TAGFLOW_CHECK(seq <= recorded_,
                    "CudaStream::when_finished: mark {} was never recorded on {} (last "
                    "recorded: {})",
                    seq, context().str(), recorded_);
      callbacks_.emplace(seq, std::move(fn));
      return;
    }
  }
  fn();
}

void CudaStream::fail_from_next_mark(std::exception_ptr error) noexcept {
  std::lock_guard lock(mutex_);
  set_error(std::move(error), recorded_ + 1);
}

void CudaStream::mark_finished(std::uint64_t seq) {
  std::multimap<std::uint64_t, HostFunction> due;
  {
    std::lock_guard lock(mutex_);
    finished_.store(seq, std::memory_order_release);
    free_events_.push_back(pending_.front().event);  // within capacity: cannot throw
    pending_.pop_front();
    auto end = callbacks_.upper_bound(seq);
    for (auto it = callbacks_.begin(); it != end;) due.insert(callbacks_.extract(it++));
  }
  progress_.notify_all();
  for (auto& [_, fn] : due) {
    try {
      fn();
    } catch (...) {
      fail_from_next_mark(std::current_exception());
    }
  }
}

void CudaStream::poll() {
  // Callbacks run here; a wait issued from one would deadlock the poller.
  this_worker().running = "CUDA stream poller";
  const int dev = device();
  if (const cudaError_t status = cudaSetDevice(dev); status != cudaSuccess) {
    // Not fatal for polling: cudaEventSynchronize does not need a current device.
    static_cast<void>(cudaGetLastError());
    fail_from_next_mark(
        std::make_exception_ptr(cuda_error(status, "cudaSetDevice (stream poller)", dev)));
  }
  for (;;) {
    PendingMark oldest;
    {
      std::unique_lock lock(mutex_);
      marks_pending_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
      if (pending_.empty()) return;  // stopping, and every mark has been handled
      // It stays at the front (only this thread pops); wait() reads its event.
      oldest.seq = pending_.front().seq;
      oldest.event = pending_.front().event;
      oldest.waits = std::move(pending_.front().waits);
    }
    const cudaError_t status = cudaEventSynchronize(oldest.event);
    if (status != cudaSuccess) {
      static_cast<void>(cudaGetLastError());
      std::exception_ptr failure;
      try {
        failure = std::make_exception_ptr(
            cuda_error(status, fmt::format("cudaEventSynchronize (mark {})", oldest.seq), dev));
      } catch (...) {
        failure = std::current_exception();
      }
      set_error(std::move(failure), oldest.seq);
    }
    // The device has passed the marks this one waited on; let their streams'
    // pollers catch up too. Cannot deadlock: each fence was recorded before
    // this mark, and every poller handles its marks in recording order. A
    // failed one taints this mark: the work since may have read its data
    // (Note [Errors of device work]).
    for (const Fence& fence : oldest.waits) {
      try {
        fence.stream->synchronize(fence.seq);
        if (std::exception_ptr error = fence.stream->error_at(fence.seq)) {
          set_error(std::move(error), oldest.seq);
        }
      } catch (...) {
        set_error(std::current_exception(), oldest.seq);
      }
    }
    // Advances even on failure, so that nobody waits forever; the error is sticky.
    mark_finished(oldest.seq);
  }
}

class CudaBackend final : public DeviceBackend {
 public:
  CudaBackend(std::vector<GpuInfo> devices, std::string status)
      : devices_(std::move(devices)), status_(std::move(status)) {}

  const std::vector<GpuInfo>& devices() const override { return devices_; }

  std::unique_ptr<Stream> make_stream(Context ctx, QueueKind kind) override {
    TAGFLOW_CHECK_AS(
        DeviceError,
        ctx.is_gpu() && ctx.index >= 0 && static_cast<std::size_t>(ctx.index) < devices_.size(),
        "make_stream: expected one of the {} CUDA GPU(s), got {}", devices_.size(), ctx.str());
    return std::make_unique<CudaStream>(ctx, kind);
  }

  void set_device(int index) override {
    check_cuda(cudaSetDevice(index), "cudaSetDevice", gpu(index));
  }

  int current_device() const override {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    return device;
  }

  std::string status() const override { return status_; }

 private:
  std::vector<GpuInfo> devices_;
  std::string status_;
};

/// why_not for a failed cudaGetDeviceCount.
std::string describe_probe_failure(cudaError_t status) {
  if (status == cudaErrorInsufficientDriver || status == cudaErrorStubLibrary) {
    int driver = 0;
    const cudaError_t driver_status = cudaDriverGetVersion(&driver);
    if (status == cudaErrorInsufficientDriver && driver_status == cudaSuccess && driver > 0) {
      return fmt::format("no GPU: CUDA driver {} is older than the CUDA runtime {} ({})",
                         format_cuda_version(driver), format_cuda_version(CUDART_VERSION),
                         cudaGetErrorName(status));
    }
    return "no GPU: CUDA driver not found";
  }
  return "no GPU: " + cuda_failure(status, "cudaGetDeviceCount");
}

}  // namespace

std::unique_ptr<DeviceBackend> make_cuda_backend(std::string& why_not) {
  // Probing never throws: a failure means "no GPU", and why_not says why.
  auto fail = [&](std::string reason) -> std::unique_ptr<DeviceBackend> {
    static_cast<void>(cudaGetLastError());  // clear the thread's error state
    why_not = std::move(reason);
    return nullptr;
  };

  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    return fail(describe_probe_failure(status));
  }
  if (count <= 0) return fail("no GPU: no CUDA device present");

  std::vector<GpuInfo> devices;
  devices.reserve(static_cast<std::size_t>(count));
  for (int i = 0; i < count; ++i) {
    cudaDeviceProp prop{};
    if (const cudaError_t status = cudaGetDeviceProperties(&prop, i); status != cudaSuccess) {
      return fail("no GPU: " + cuda_failure(status, "cudaGetDeviceProperties", gpu(i)));
    }
    const std::string_view name(prop.name, sizeof(prop.name));  // NUL-terminated inside
    devices.push_back({.index = i,
                       .name = std::string(name.substr(0, name.find('\0'))),
                       .total_memory = static_cast<std::uint64_t>(prop.totalGlobalMem),
                       .compute_major = prop.major,
                       .compute_minor = prop.minor,
                       .simulated = false});
  }

  int driver = 0;
  if (const cudaError_t status = cudaDriverGetVersion(&driver); status != cudaSuccess) {
    return fail("no GPU: " + cuda_failure(status, "cudaDriverGetVersion"));
  }
  int runtime = 0;
  if (const cudaError_t status = cudaRuntimeGetVersion(&runtime); status != cudaSuccess) {
    return fail("no GPU: " + cuda_failure(status, "cudaRuntimeGetVersion"));
  }

  enable_peer_access(devices);  // Note [Peer access]

  std::string status = fmt::format("{} CUDA device(s), driver {}, runtime {}", count,
                                   format_cuda_version(driver), format_cuda_version(runtime));
  why_not.clear();
  return std::make_unique<CudaBackend>(std::move(devices), std::move(status));
}

}  // namespace tagflow::detail

#else  // !defined(TAGFLOW_HAVE_CUDA)

namespace tagflow::detail {

std::unique_ptr<DeviceBackend> make_cuda_backend(std::string& why_not) {
  why_not = "no GPU: tagflow was built without CUDA (TAGFLOW_CUDA=OFF)";
  return nullptr;
}

}  // namespace tagflow::detail

#endif  // defined(TAGFLOW_HAVE_CUDA)
