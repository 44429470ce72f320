#include "engine/detail/sim_stream.h"

#include <algorithm>
#include <exception>
#include <utility>

#include <fmt/format.h>

#include "engine/detail/device_backend.h"
#include "engine/detail/profile_marks.h"
#include "engine/detail/sim_runtime.h"
#include "engine/detail/worker_pool.h"
#include "engine/error.h"

namespace tagflow::detail {

SimStream::SimStream(Context ctx, QueueKind kind, sim::ModelClock* clock)
    : Stream(ctx, kind), clock_(clock), mark_times_(clock != nullptr ? kMarkTimes : 0) {
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
  push_item({.type = Item::Type::kHost, .fn = std::move(fn), .issued_ns = issue_time()});
}

void SimStream::enqueue_work(std::int64_t duration_ns, HostFunction fn) {
  const int device = context().index;
  check_not_in_host_work("kernel launch");
  if (std::exception_ptr fault = sim::device_fault(device)) [[unlikely]]
    std::rethrow_exception(fault);
  push_item({.type = Item::Type::kWork,
             .fn = std::move(fn),
             .issued_ns = issue_time(),
             .duration_ns = duration_ns});
}

void SimStream::enqueue_collective(std::shared_ptr<sim::Collective> collective) {
  const int device = context().index;
  check_not_in_host_work("collective launch");
  if (std::exception_ptr fault = sim::device_fault(device)) [[unlikely]]
    std::rethrow_exception(fault);
  push_item({.type = Item::Type::kCollective,
             .issued_ns = issue_time(),
             .collective = std::move(collective)});
}

void SimStream::enqueue_timestamp(std::int64_t* out) {
  // An event, not a kernel: any thread may record it.
  check_not_in_host_work("cudaEventRecord (profiler timestamp)");
  push_item({.type = Item::Type::kTimestamp, .out = out, .issued_ns = issue_time()});
}

std::int64_t SimStream::modelled_time(std::uint64_t seq) const {
  if (clock_ == nullptr || finished_.load(std::memory_order_acquire) < seq) return -1;
  if (seq == 0) return 0;
  return mark_times_[seq % kMarkTimes].load(std::memory_order_relaxed);
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
    items_.push_back({.type = Item::Type::kMark, .seq = seq, .issued_ns = issue_time()});
  }
  work_ready_.notify_one();
  return seq;
}

void SimStream::wait(Stream& other, std::uint64_t seq) {
  check_not_in_host_work("cudaStreamWaitEvent");
  if (&other == this) return;
  // Modelled: a mark finished on the host may still lie ahead in modelled
  // time, so the wait is always enqueued.
  if (clock_ == nullptr && other.finished(seq)) {
    // Nothing to wait for, but a failure before that mark still taints
    // what this stream runs next (Note [Errors of device work]).
    if (std::exception_ptr error = other.error_at(seq)) [[unlikely]] {
      std::lock_guard lock(mutex_);
      set_error(std::move(error), recorded_ + 1);
    }
    return;
  }
  push_item({.type = Item::Type::kWait, .seq = seq, .other = &other, .issued_ns = issue_time()});
}

bool SimStream::finished(std::uint64_t seq) {
  return finished_.load(std::memory_order_acquire) >= seq;
}

void SimStream::synchronize(std::uint64_t seq) {
  check_not_in_host_work("cudaEventSynchronize");
  if (!finished(seq)) {
    std::unique_lock lock(mutex_);
    progress_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) >= seq; });
  }
  if (clock_ != nullptr) clock_->host_reach(modelled_time(seq));
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
  const bool timing_only = clock_ != nullptr && clock_->timing_only();
  for (;;) {
    Item item;
    {
      std::unique_lock lock(mutex_);
      work_ready_.wait(lock, [&] { return stopping_ || !items_.empty(); });
      if (items_.empty()) return;  // stopping, and everything enqueued has run
      item = std::move(items_.front());
      items_.pop_front();
    }
    // Nothing starts before the host issued it (Note [Modelled time]).
    if (item.issued_ns > now_ns_) now_ns_ = item.issued_ns;
    switch (item.type) {
      case Item::Type::kWork:
        now_ns_ += item.duration_ns;
        if (timing_only) break;  // Note [Timing-only GPUs]
        [[fallthrough]];
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
      case Item::Type::kCollective:
        // Even a lost device meets its peers: they must not wait for ever.
        try {
          const sim::HostWorkScope host_work;
          now_ns_ = item.collective->meet(now_ns_, timing_only);
        } catch (...) {
          sim::set_device_fault(device, std::current_exception());
        }
        item.collective.reset();
        break;
      case Item::Type::kTimestamp:
        // A lost device times nothing, as a real one's events fail.
        if (sim::device_fault(device)) break;
        *item.out = clock_ != nullptr ? now_ns_ : profiler_now();
        break;
      case Item::Type::kMark:
        if (clock_ != nullptr) {
          mark_times_[item.seq % kMarkTimes].store(now_ns_, std::memory_order_relaxed);
          clock_->note_finished(now_ns_);
        }
        if (std::exception_ptr fault = sim::device_fault(device)) [[unlikely]] {
          set_error(std::move(fault), item.seq);
        } else if (tainted) [[unlikely]] {
          set_error(std::exchange(tainted, nullptr), item.seq);
        }
        mark_finished(item.seq);
        break;
      case Item::Type::kWait:
        item.other->synchronize(item.seq);
        if (clock_ != nullptr) now_ns_ = std::max(now_ns_, item.other->modelled_time(item.seq));
        if (!tainted) tainted = item.other->error_at(item.seq);
        break;
    }
  }
}

}  // namespace tagflow::detail
