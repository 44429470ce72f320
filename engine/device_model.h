#pragma once
// DeviceModel: how a simulated GPU keeps time. A card's peak arithmetic per
// precision, its memory's bandwidth and size, its kernel launch latency, and
// the links to the host and to the other GPUs of the system. Built-in
// profiles name real cards; a JSON file describes your own.
//
//   TAGFLOW_SIM_GPUS=8:h100-sxm tagflow train ...          // the environment, or:
//   EngineConfig config = EngineConfig::from_env();
//   config.sim_gpus = 8;
//   config.sim_model = DeviceModel::builtin("h100-sxm");   // or from_file("my-card.json")
//   auto engine = make_engine(config);
//
// Threads: concurrent reads, exclusive writes. DeviceModel and the structs
// here are values (as a std::string); builtin(), from_file() and the other
// static functions keep no state and may be called from any thread.
//
// Note [Modelled time]
// A simulated GPU with a model keeps a virtual clock per stream, in
// nanoseconds from the engine's start, and runs its work in stream order as
// a real GPU would time it:
// - A kernel lasts max(flops / peak(precision), bytes / memory bandwidth)
//   plus the launch latency (KernelWork, which each operator reports from
//   its shapes and dtypes).
// - A copy lasts bytes / bandwidth plus latency of the link it crosses: the
//   host link (pinned or pageable host memory), the peer link between two
//   GPUs (the system's topology), or the device's own memory (read and
//   written) within one GPU.
// - Work starts when its stream is free and not before the host issued it;
//   a wait on another stream's mark starts nothing before that mark's time,
//   as an event wait does on a GPU.
// - The host takes no modelled time of its own: a thread's clock moves only
//   when it waits for device work (synchronize, wait_to_read, wait_for_all)
//   and an operation issues its device work at the time of whatever it
//   depends on (its pusher's clock, the marks and host results it follows).
// What the model leaves out is written in the README ("How far to trust a
// prediction"): caches, contention between kernels or copies sharing a
// GPU's memory, kernels of one stream overlapping, PCIe switches shared by
// several GPUs, and host-side costs (data loading, Python, launch
// throughput).

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tagflow {

/// The arithmetic a kernel's floating-point work runs in (the engine's view
/// of a dtype: which of the card's peak throughputs applies).
enum class MathPrecision : std::uint8_t {
  kFloat32 = 0,        ///< float32 on CUDA cores (FMA)
  kTensorFloat32 = 1,  ///< float32 inputs on tensor cores (TF32)
  kFloat16 = 2,        ///< float16 inputs, float32 accumulation
  kBFloat16 = 3,       ///< bfloat16 inputs, float32 accumulation
};
inline constexpr int kNumMathPrecisions = 4;
/// "float32", "tf32", "float16", "bfloat16".
const char* to_string(MathPrecision precision);

/// What one kernel does, as the device model times it.
struct KernelWork {
  /// Floating-point operations (a multiply-add counts two).
  double flops = 0;
  /// Bytes of device memory read and written.
  double bytes = 0;
  MathPrecision precision = MathPrecision::kFloat32;
};

/// One direction of a link.
struct LinkModel {
  /// "NVLink 4 (18 links)", "PCIe 4.0 x16", ...
  std::string kind;
  /// Bytes per second in one direction.
  double bandwidth = 0;
  /// Seconds from issue to the first byte.
  double latency = 0;
  /// Seconds to move `bytes` over it.
  double seconds(double bytes) const { return latency + bytes / bandwidth; }
};

/// One card, and the links of a system built of N of them.
struct DeviceModel {
  /// The profile's name: "h100-sxm", or the file's "name".
  std::string name;
  /// What it models, e.g. "NVIDIA H100 SXM5 80GB (HBM3), 8 per node over NVSwitch".
  std::string description;
  /// Dense peak floating-point operations per second, by MathPrecision.
  std::array<double, kNumMathPrecisions> peak_flops{};
  /// Bytes per second between the GPU and its memory.
  double memory_bandwidth = 0;
  /// Seconds a kernel costs beyond its work (launch and ramp).
  double launch_latency = 0;
  /// Bytes of device memory: allocations beyond it fail with OutOfMemoryError.
  std::uint64_t memory_bytes = 0;
  /// Host memory to and from the GPU: pinned (DMA) and pageable (staged).
  LinkModel host_pinned;
  LinkModel host_pageable;
  /// Between any two GPUs of the system, unless `links` says otherwise.
  LinkModel peer;
  /// Pairs whose link differs from `peer` (one direction each: from -> to).
  struct PeerLink {
    int from = 0;
    int to = 0;
    LinkModel link;
  };
  std::vector<PeerLink> links;

  /// Seconds a kernel of `work` lasts: max(flops / peak, bytes / bandwidth)
  /// plus the launch latency.
  double kernel_seconds(const KernelWork& work) const;
  /// The link from gpu(from) to gpu(to).
  const LinkModel& peer_link(int from, int to) const;
  /// Seconds of an all-reduce of `bytes` over `gpus` as NCCL's ring runs
  /// it: 2(n-1) steps, each sending bytes/n to the next GPU of the ring at
  /// once, as fast as the ring's slowest link allows, plus one launch:
  ///   launch + 2(n-1) · (latency + bytes / (n · bandwidth)).
  /// Its bus bandwidth (NCCL's busbw, algbw · 2(n-1)/n) tends to the
  /// slowest link's bandwidth for large messages.
  double allreduce_seconds(std::span<const int> gpus, double bytes) const;
  /// Seconds of a broadcast of `bytes` from the first of `gpus` along the
  /// ring, pipelined: launch + (n-1) · latency + bytes / bandwidth.
  double broadcast_seconds(std::span<const int> gpus, double bytes) const;

  /// A built-in profile by name; throws tagflow::Error listing the names for
  /// an unknown one.
  static DeviceModel builtin(std::string_view name);
  /// The built-in profiles' names: "h100-sxm", "a100-sxm", "l4".
  static std::vector<std::string> builtin_names();
  /// A profile from a JSON file (the README's "Modelled GPUs" gives the
  /// keys); throws tagflow::Error naming the file and the key for a missing,
  /// malformed or out-of-range value.
  static DeviceModel from_file(const std::filesystem::path& path);
  /// The same, from the JSON text itself (`where` names it in errors).
  static DeviceModel from_json(std::string_view text, std::string_view where = "device model");
  /// builtin(name_or_path) for a built-in name, else from_file(name_or_path).
  static DeviceModel resolve(std::string_view name_or_path);
  /// This profile as the JSON that from_json reads back.
  std::string to_json() const;
};

}  // namespace tagflow
