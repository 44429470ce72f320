#include "engine/detail/sim_stream.h"

#include <fmt/format.h>

#include "engine/detail/device_backend.h"
#include "engine/detail/profile_marks.h"
#include "engine/detail/worker_pool.h"

namespace tagflow::detail {

SimStream::SimStream(Context ctx, QueueKind kind) : Stream(ctx, kind) {
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

void SimStream::enqueue_host(HostFunction fn) {
  push_item({Item::Type::kHost, std::move(fn), 0, nullptr});
}

void SimStream::enqueue_timestamp(std::int64_t* out) {
  enqueue_host([out] { *out = profiler_now(); });
}

std::uint64_t SimStream::record() {
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
  if (&other == this || other.finished(seq)) return;
  push_item({Item::Type::kWait, nullptr, seq, &other});
}

bool SimStream::finished(std::uint64_t seq) {
  return finished_.load(std::memory_order_acquire) >= seq;
}

void SimStream::synchronize(std::uint64_t seq) {
  if (finished(seq)) return;
  std::unique_lock lock(mutex_);
  progress_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) >= seq; });
}

void SimStream::when_finished(std::uint64_t seq, HostFunction fn) {
  {
    std::lock_guard lock(mutex_);
    if (finished_.load(std::memory_order_acquire) < seq) {
      callbacks_.emplace(seq, std::move(fn));
      return;
    }
  }
  fn();
}

std::exception_ptr SimStream::error() {
  std::lock_guard lock(mutex_);
  return error_;
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
        try {
          item.fn();
        } catch (...) {
          std::lock_guard lock(mutex_);
          if (!error_) error_ = std::current_exception();
        }
        break;
      case Item::Type::kMark:
        mark_finished(item.seq);
        break;
      case Item::Type::kWait:
        item.other->synchronize(item.seq);
        break;
    }
  }
}

namespace {

class SimBackend final : public DeviceBackend {
 public:
  explicit SimBackend(int n) {
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
