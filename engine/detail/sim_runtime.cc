#include "engine/detail/sim_runtime.h"

#include <array>
#include <atomic>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include "engine/detail/model_clock.h"
#include "engine/detail/sim_stream.h"
#include "engine/error.h"

namespace tagflow::detail::sim {

namespace {

/// More than TAGFLOW_SIM_GPUS allows (64).
constexpr int kMaxDevices = 256;

struct ThreadState {
  int current_device = 0;
  Status last_error = Status::kSuccess;
  bool in_host_work = false;
};

ThreadState& this_thread() {
  thread_local ThreadState state;
  return state;
}

struct Device {
  std::atomic<bool> faulted{false};  ///< fast check before taking the lock
  std::mutex mutex;
  std::exception_ptr fault;
};

struct Devices {
  std::atomic<int> count{0};
  std::array<Device, kMaxDevices> devices;
};

Devices& devices() {
  // Never destroyed: streams of the process-wide engine run host work while
  // statics are destroyed at exit (Note [Engine lifetime]).
  static auto* all = new Devices;
  return *all;
}

Device* find(int device) {
  if (device < 0 || device >= devices().count.load(std::memory_order_acquire)) return nullptr;
  return &devices().devices[static_cast<std::size_t>(device)];
}

}  // namespace

std::string describe(Status status) {
  switch (status) {
    case Status::kSuccess:
      return "no error (cudaSuccess)";
    case Status::kInvalidDevice:
      return "invalid device ordinal (cudaErrorInvalidDevice)";
    case Status::kInvalidResourceHandle:
      return "invalid resource handle (cudaErrorInvalidResourceHandle)";
    case Status::kNotPermitted:
      return "operation not permitted (cudaErrorNotPermitted)";
    case Status::kDeviceFault:
      return "unspecified launch failure (cudaErrorLaunchFailure)";
  }
  return "unknown status";
}

void register_devices(int count) {
  TAGFLOW_CHECK_AS(DeviceError, count >= 0 && count <= kMaxDevices,
                   "simulated GPUs: expected 0..{} devices, got {}", kMaxDevices, count);
  std::atomic<int>& n = devices().count;
  int now = n.load(std::memory_order_relaxed);
  while (now < count && !n.compare_exchange_weak(now, count, std::memory_order_release)) {
  }
}

int device_count() { return devices().count.load(std::memory_order_acquire); }

int current_device() { return this_thread().current_device; }

Status set_device(int device) {
  ThreadState& me = this_thread();
  Status status = Status::kSuccess;
  if (me.in_host_work) {
    status = Status::kNotPermitted;
  } else if (find(device) == nullptr) {
    status = Status::kInvalidDevice;
  } else {
    me.current_device = device;
  }
  if (status != Status::kSuccess) me.last_error = status;
  return status;
}

Status get_last_error() { return std::exchange(this_thread().last_error, Status::kSuccess); }

Status peek_last_error() { return this_thread().last_error; }

void set_last_error(Status status) { this_thread().last_error = status; }

void launch_kernel(Stream& stream, Stream::HostFunction kernel) {
  if (current_device() != stream.context().index) [[unlikely]] {
    set_last_error(Status::kInvalidResourceHandle);
    return;
  }
  stream.enqueue_host(std::move(kernel));
}

void launch_kernel(Stream& stream, const KernelWork& work, Stream::HostFunction kernel) {
  auto& sim_stream = static_cast<SimStream&>(stream);  // a simulated GPU's: no native handle
  ModelClock* clock = sim_stream.model_clock();
  if (clock == nullptr) {
    launch_kernel(stream, std::move(kernel));
    return;
  }
  if (current_device() != stream.context().index) [[unlikely]] {
    set_last_error(Status::kInvalidResourceHandle);
    return;
  }
  sim_stream.enqueue_work(ModelClock::to_ns(clock->model().kernel_seconds(work)),
                          std::move(kernel));
}

double copy_seconds(const DeviceModel& model, Context from, Context to, double bytes) {
  if (from.is_gpu() && to.is_gpu()) {
    if (from.index == to.index) return model.launch_latency + 2 * bytes / model.memory_bandwidth;
    return model.peer_link(from.index, to.index).seconds(bytes);
  }
  const Context host = from.is_gpu() ? to : from;
  return (host.is_cpu_pinned() ? model.host_pinned : model.host_pageable).seconds(bytes);
}

void enqueue_copy(Stream& stream, Context from, Context to, std::uint64_t bytes,
                  Stream::HostFunction copy) {
  auto& sim_stream = static_cast<SimStream&>(stream);
  ModelClock* clock = sim_stream.model_clock();
  if (clock == nullptr) {
    stream.enqueue_host(std::move(copy));
    return;
  }
  sim_stream.enqueue_work(
      ModelClock::to_ns(copy_seconds(clock->model(), from, to, static_cast<double>(bytes))),
      std::move(copy));
  if (clock->timing_only() && !to.is_gpu()) [[unlikely]] {
    throw NotComputedError(fmt::format(
        "copy from {} to {}: {} is a timing-only simulated GPU ({}), whose kernels are timed, "
        "not run, so the values copied were never computed; read values on a GPU that "
        "computes (TAGFLOW_SIM_GPUS=N:{} without :timing)",
        from.str(), to.str(), from.str(), clock->model().name, clock->model().name));
  }
}

bool in_host_work() { return this_thread().in_host_work; }

HostWorkScope::HostWorkScope() : outer_(std::exchange(this_thread().in_host_work, true)) {}

HostWorkScope::~HostWorkScope() { this_thread().in_host_work = outer_; }

std::exception_ptr device_fault(int device) {
  Device* d = find(device);
  if (d == nullptr || !d->faulted.load(std::memory_order_acquire)) return nullptr;
  std::lock_guard lock(d->mutex);
  return d->fault;
}

void set_device_fault(int device, std::exception_ptr fault) {
  Device* d = find(device);
  if (d == nullptr || !fault) return;
  std::lock_guard lock(d->mutex);
  if (d->fault) return;  // the first fault stays
  d->fault = std::move(fault);
  d->faulted.store(true, std::memory_order_release);
}

void reset_device(int device) {
  Device* d = find(device);
  if (d == nullptr) return;
  std::lock_guard lock(d->mutex);
  d->fault = nullptr;
  d->faulted.store(false, std::memory_order_release);
}

void throw_status(Status status, std::string_view call, Context where) {
  this_thread().last_error = Status::kSuccess;
  throw DeviceError(fmt::format("{} failed on {}: {}", call, where.str(), describe(status)));
}

ScopedDevice::ScopedDevice(int device) : previous_(current_device()) {
  if (device != previous_) check_status(set_device(device), "cudaSetDevice", gpu(device));
}

ScopedDevice::~ScopedDevice() {
  if (current_device() != previous_) static_cast<void>(set_device(previous_));
}

}  // namespace tagflow::detail::sim
