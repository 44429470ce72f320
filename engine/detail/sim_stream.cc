#include "engine/detail/sim_stream.h"

#include <exception>
#include <utility>

#include <fmt/format.h>

#include "engine/detail/device_backend.h"
#include "engine/detail/profile_marks.h"
#include "engine/detail/sim_runtime.h"
#include "engine/detail/worker_pool.h"
#include "engine/error.h"

namespace tagflow::detail {

SimStream::SimStream(Context ctx, QueueKind kind) : Stream(ctx, kind) {
  TAGFLOW_CHECK_AS(DeviceError, ctx.is_gpu(), "SimStream: expected a GPU context, got {}",
                   ctx.str());
  sim::register_devices(ctx.index + 1);  // a stream on gpu(i) means gpu(i) exists
  thread_ = std::thread([this] { run(); });
}

SimStream::~SimStream() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_one();
  thread_.join();
}

void SimStream::push_item(Item item) {
  {
    std::lock_guard lock(mutex_);
    items_.push_back(std::move(item));
  }
  work_ready_.notify_one();
}

void SimStream::check_not_in_host_work(const char* call) const {
  if (sim::in_host_work()) [[unlikely]] {
    sim::set_last_error(sim::Status::kNotPermitted);
    sim::throw_status(sim::Status::kNotPermitted, call, context());
  }
}

void SimStream::enqueue_host(HostFunction fn) {
  const int device = context().index;
  check_not_in_host_work("kernel launch");
  // A lost device refuses new work with its fault, as CUDA answers every
  // call after a sticky error.
  if (std::exception_ptr fault = sim::device_fault(device)) [[unlikely]]
    std::rethrow_exception(fault);
  push_item({Item::Type::kHost, std::move(fn), 0, nullptr});
}

void SimStream::enqueue_timestamp(std::int64_t* out) {
  // An event, not a kernel: any thread may record it.
  check_not_in_host_work("cudaEventRecord (profiler timestamp)");
  push_item({Item::Type::kHost, [out] { *out = profiler_now(); }, 0, nullptr});
}

void SimStream::make_device_current() {
  sim::check_status(sim::set_device(context().index), "cudaSetDevice", context());
}

std::uint64_t SimStream::record() {
  check_not_in_host_work("cudaEventRecord");
  std::uint64_t seq;
  {
    std::lock_guard lock(mutex_);
    seq = ++recorded_;
    items_.push_back({Item::Type::kMark, nullptr, seq, nullptr});
  }
  work_ready_.notify_one();
  return seq;
}

void SimStream::wait(Stream& other, std::uint64_t seq) {
  check_not_in_host_work("cudaStreamWaitEvent");
  if (&other == this) return;
  if (other.finished(seq)) {
    // Nothing to wait for, but a failure before that mark still taints
    // what this stream runs next (Note [Errors of device work]).
    if (std::exception_ptr error = other.error_at(seq)) [[unlikely]] {
      std::lock_guard lock(mutex_);
      set_error(std::move(error), recorded_ + 1);
    }
    return;
  }
  push_item({Item::Type::kWait, nullptr, seq, &other});
}

bool SimStream::finished(std::uint64_t seq) {
  return finished_.load(std::memory_order_acquire) >= seq;
}

void SimStream::synchronize(std::uint64_t seq) {
  check_not_in_host_work("cudaEventSynchronize");
  if (finished(seq)) return;
  std::unique_lock lock(mutex_);
  progress_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) >= seq; });
}

void SimStream::when_finished(std::uint64_t seq, HostFunction fn) {
  check_not_in_host_work("cudaLaunchHostFunc (completion callback)");
  {
    std::lock_guard lock(mutex_);
    if (finished_.load(std::memory_order_acquire) < seq) {
      callbacks_.emplace(seq, std::move(fn));
      return;
    }
  }
  fn();
}

void SimStream::mark_finished(std::uint64_t seq) {
  std::multimap<std::uint64_t, HostFunction> due;
  {
    std::lock_guard lock(mutex_);
    finished_.store(seq, std::memory_order_release);
    auto end = callbacks_.upper_bound(seq);
    for (auto it = callbacks_.begin(); it != end;) {
      auto node = callbacks_.extract(it++);
      due.insert(std::move(node));
    }
  }
  progress_.notify_all();
  for (auto& [_, fn] : due) fn();
}

void SimStream::run() {
  // Kernels run here; a wait issued from one would deadlock like on a worker.
  this_worker().running = "simulated stream";
  const int device = context().index;
  // A failed mark of another stream this one waited on: the marks from the
  // next one on carry it (Note [Errors of device work]).
  std::exception_ptr tainted;
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !items_.empty(); });
      if (items_.empty()) return;  // stopping, and everything enqueued has run
      item = std::move(items_.front());
      items_.pop_front();
    }
    switch (item.type) {
      case Item::Type::kHost:
        // Nothing runs on a lost device (Note [Simulated CUDA rules]).
        if (sim::device_fault(device)) break;
        try {
          const sim::HostWorkScope host_work;
          item.fn();
        } catch (...) {
          sim::set_device_fault(device, std::current_exception());
        }
        break;
      case Item::Type::kMark:
        if (std::exception_ptr fault = sim::device_fault(device)) [[unlikely]] {
          set_error(std::move(fault), item.seq);
        } else if (tainted) [[unlikely]] {
          set_error(std::exchange(tainted, nullptr), item.seq);
        }
        mark_finished(item.seq);
        break;
      case Item::Type::kWait:
        item.other->synchronize(item.seq);
        if (!tainted) tainted = item.other->error_at(item.seq);
        break;
    }
  }
}

namespace {

class SimBackend final : public DeviceBackend {
 public:
  explicit SimBackend(int n) {
    sim::register_devices(n);
    for (int i = 0; i < n; ++i) {
      devices_.push_back({.index = i,
                          .name = "simulated GPU",
                          .total_memory = 0,
                          .compute_major = 0,
                          .compute_minor = 0,
                          .simulated = true});
    }
  }
  const std::vector<GpuInfo>& devices() const override { return devices_; }
  std::unique_ptr<Stream> make_stream(Context ctx, QueueKind kind) override {
    return std::make_unique<SimStream>(ctx, kind);
  }
  void set_device(int index) override {
    sim::check_status(sim::set_device(index), "cudaSetDevice", gpu(index));
  }
  int current_device() const override { return sim::current_device(); }
  std::string status() const override {
    return fmt::format("{} simulated GPU(s) (TAGFLOW_SIM_GPUS)", devices_.size());
  }

 private:
  std::vector<GpuInfo> devices_;
};

class NoGpuBackend final : public DeviceBackend {
 public:
  explicit NoGpuBackend(std::string why) : why_(std::move(why)) {}
  const std::vector<GpuInfo>& devices() const override { return devices_; }
  std::unique_ptr<Stream> make_stream(Context, QueueKind) override { return nullptr; }
  void set_device(int index) override {
    throw_error<DeviceError>("gpu({}) does not exist: {}", index, why_);
  }
  int current_device() const override { return 0; }
  std::string status() const override { return why_; }

 private:
  std::vector<GpuInfo> devices_;
  std::string why_;
};

}  // namespace

std::unique_ptr<DeviceBackend> make_sim_backend(int num_gpus) {
  return std::make_unique<SimBackend>(num_gpus);
}

std::unique_ptr<DeviceBackend> make_device_backend(const EngineConfig& config) {
  if (config.sim_gpus > 0) return make_sim_backend(config.sim_gpus);
  std::string why_not;
  if (auto cuda = make_cuda_backend(why_not)) return cuda;
  return std::make_unique<NoGpuBackend>(std::move(why_not));
}

}  // namespace tagflow::detail
