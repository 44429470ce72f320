#pragma once
// GpuInfo: what `tagflow info` and num_gpus() report about one GPU, real or
// simulated (Engine::gpus()).
//
//   for (const GpuInfo& gpu : Engine::get().gpus())
//     std::cout << gpu.index << ": " << gpu.name << (gpu.simulated ? " (simulated)" : "") << "\n";
//
// Threads: concurrent reads, exclusive writes (a value, as a std::string).

#include <cstdint>
#include <string>
#include <vector>

namespace tagflow {

struct GpuInfo {
  /// i in gpu(i).
  int index = 0;
  /// The device's name, e.g. "NVIDIA H100 80GB HBM3" or "simulated GPU".
  std::string name;
  /// Bytes of device memory.
  std::uint64_t total_memory = 0;
  /// Compute capability, e.g. 9.0 (0.0 when simulated).
  int compute_major = 0;
  int compute_minor = 0;
  /// True for a GPU simulated in host memory (TAGFLOW_SIM_GPUS).
  bool simulated = false;
  /// A simulated GPU keeping modelled time: its device model's name
  /// ("h100-sxm"); empty otherwise (Note [Modelled time] in engine/device_model.h).
  std::string model;
  /// A simulated GPU that times its kernels without running them (Note
  /// [Timing-only GPUs] in engine/detail/sim_stream.h).
  bool timing_only = false;
  /// The indices of the GPUs whose memory this one reaches directly: peer
  /// access is enabled, so copies between them skip host memory. Empty for
  /// a simulated GPU (Note [Peer access] in engine/detail/cuda_peer_access.h).
  std::vector<int> peers;
};

}  // namespace tagflow
