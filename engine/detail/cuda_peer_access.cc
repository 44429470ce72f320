#include "engine/detail/cuda_peer_access.h"

#include <cstddef>
#include <exception>
#include <string>

#include <cuda_runtime_api.h>
#include <spdlog/spdlog.h>

#include "engine/context.h"
#include "engine/detail/cuda_check.h"
#include "engine/detail/cuda_device_guard.h"

namespace tagflow::detail {

namespace {

/// Whether gpu(device) may access gpu(peer)'s memory once enabled; false
/// (logged) when CUDA cannot say.
bool can_access(int device, int peer) {
  int can = 0;
  const cudaError_t status = cudaDeviceCanAccessPeer(&can, device, peer);
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    spdlog::warn("peer access from gpu({}) to gpu({}) left off: {}", device, peer,
                 cuda_failure(status, "cudaDeviceCanAccessPeer", gpu(device)));
    return false;
  }
  return can != 0;
}

/// Enables access from gpu(device) to gpu(peer); true when it is enabled,
/// now or before (Note [Peer access]). Throws DeviceError only when the
/// device cannot be made current.
bool enable(int device, int peer) {
  const CudaDeviceGuard on_device(device);                   // the call acts for the current device
  cudaError_t status = cudaDeviceEnablePeerAccess(peer, 0);  // flags: reserved, must be 0
  if (status == cudaErrorPeerAccessAlreadyEnabled) {
    static_cast<void>(cudaGetLastError());  // enabled before: not an error
    status = cudaSuccess;
  }
  if (status != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    spdlog::warn(
        "peer access from gpu({}) to gpu({}) left off, copies between them stage "
        "through host memory: {}",
        device, peer, cuda_failure(status, "cudaDeviceEnablePeerAccess", gpu(device)));
    return false;
  }
  return true;
}

/// For each GPU, the peers it reaches, after enabling every pair it can.
std::vector<std::vector<int>> enable_all(int count) {
  std::vector<std::vector<int>> peers(static_cast<std::size_t>(count));
  for (int device = 0; device < count; ++device) {
    for (int peer = 0; peer < count; ++peer) {
      if (peer == device || !can_access(device, peer)) continue;
      try {
        if (enable(device, peer)) peers[static_cast<std::size_t>(device)].push_back(peer);
      } catch (const std::exception& e) {  // the device could not be made current
        spdlog::warn("peer access from gpu({}) to gpu({}) left off: {}", device, peer, e.what());
      }
    }
    if (!peers[static_cast<std::size_t>(device)].empty()) {
      spdlog::debug("gpu({}) reaches {} peer GPU(s) directly", device,
                    peers[static_cast<std::size_t>(device)].size());
    }
  }
  return peers;
}

}  // namespace

void enable_peer_access(std::vector<GpuInfo>& devices) noexcept {
  try {
    // Once per process: access stays enabled in the primary contexts, which
    // outlive every engine.
    static const std::vector<std::vector<int>> peers = enable_all(static_cast<int>(devices.size()));
    for (std::size_t i = 0; i < devices.size() && i < peers.size(); ++i) {
      devices[i].peers = peers[i];
    }
  } catch (const std::exception& e) {  // out of memory for the lists
    spdlog::warn("peer access left off: {}", e.what());
  }
}

}  // namespace tagflow::detail
