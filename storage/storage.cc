#include "storage/storage.h"

#include <fmt/format.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "storage/detail/device_memory.h"
#include "storage/detail/pooled_allocator.h"
#include "storage/detail/release_gate.h"

namespace tagflow {

void check_device(Context ctx) {
  if (ctx.is_gpu()) {
    Engine& engine = Engine::get();
    const int n = engine.num_gpus();
    if (ctx.index >= 0 && ctx.index < n) return;
    if (n == 0) {
      detail::throw_error<DeviceError>(
          "{} does not exist: there is no GPU ({}; TAGFLOW_SIM_GPUS=N simulates N)", ctx.str(),
          engine.device_status());
    }
    detail::throw_error<DeviceError>("{} does not exist: {} GPU{} (gpu(0)..gpu({}){})", ctx.str(),
                                     n, n == 1 ? "" : "s", n - 1,
                                     engine.gpus()[0].simulated ? ", simulated" : "");
  }
  TAGFLOW_CHECK_AS(DeviceError, ctx.index >= 0 && ctx.index < detail::Storage::kMaxDevices,
                   "{} does not exist: CPU devices are cpu(0)..cpu({})", ctx.str(),
                   detail::Storage::kMaxDevices - 1);
}

MemoryStats memory_stats(Context ctx) { return detail::Storage::get().allocator(ctx).stats(); }

void empty_cache(Context ctx) { detail::Storage::get().allocator(ctx).empty_cache(); }

void set_memory_limit(Context ctx, std::uint64_t bytes) {
  detail::Storage::get().allocator(ctx).set_limit(bytes);
}

void reset_peak_memory(Context ctx) { detail::Storage::get().allocator(ctx).reset_peak(); }

namespace detail {

Storage& Storage::get() {
  // Never destroyed: arrays in static storage may release blocks during exit.
  static Storage* storage = new Storage;
  return *storage;
}

Storage::Storage() {
  Engine& engine = Engine::get();
  default_limit_ = engine.config().memory_limit;
  real_gpus_ = engine.num_gpus() > 0 && !engine.gpus()[0].simulated;
}

Allocator& Storage::allocator(Context ctx) {
  const auto type = static_cast<std::size_t>(ctx.type);
  if (type < allocators_.size() && ctx.index >= 0 && ctx.index < kMaxDevices) {
    Allocator* a =
        allocators_[type][static_cast<std::size_t>(ctx.index)].load(std::memory_order_acquire);
    if (a != nullptr) [[likely]]
      return *a;
  }
  check_device(ctx);
  std::lock_guard lock(make_mutex_);
  auto& slot = allocators_[type][static_cast<std::size_t>(ctx.index)];
  if (Allocator* a = slot.load(std::memory_order_relaxed)) return *a;
  owned_.push_back(make_allocator(ctx));
  slot.store(owned_.back().get(), std::memory_order_release);
  return *owned_.back();
}

std::unique_ptr<Allocator> Storage::make_allocator(Context ctx) {
  switch (ctx.type) {
    case DeviceType::kCPU:
      return std::make_unique<PooledAllocator>(ctx, make_host_memory(), default_limit_,
                                               kMaxCachedHostBlock);
    // Gated: their memory goes back to a device that collectives may be
    // waiting on (Note [No release during collectives] in release_gate.h).
    case DeviceType::kCPUPinned:
      return std::make_unique<PooledAllocator>(
          ctx, real_gpus_ ? make_cuda_pinned_memory() : make_host_memory(), default_limit_,
          /*max_cached_block=*/0, &ReleaseGate::process());
    case DeviceType::kGPU: {
      const GpuInfo& info = Engine::get().gpus()[static_cast<std::size_t>(ctx.index)];
      return std::make_unique<PooledAllocator>(
          ctx,
          !info.simulated    ? make_cuda_memory(ctx.index)
          : info.timing_only ? make_untouched_memory(info.total_memory)
                             : make_host_memory(info.total_memory),
          default_limit_, /*max_cached_block=*/0, &ReleaseGate::process());
    }
  }
  throw_error<DeviceError>("{}: unknown device type", ctx.str());
}

}  // namespace detail
}  // namespace tagflow
