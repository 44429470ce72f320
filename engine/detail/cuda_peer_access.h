#pragma once
// Peer access between the GPUs of the CUDA backend: enabled once, where CUDA
// allows it, when the backend is made (Note [Peer access]). Internal to
// engine/; defined only in builds with CUDA.
//
// Note [Peer access]
// A copy between two GPUs (cudaMemcpyPeerAsync, ops/kernels/copy_gpu.cc) goes
// straight over NVLink or PCIe only once the destination's context may access
// the source's memory, or the other way round; otherwise CUDA stages it
// through host memory. Access is enabled per ordered pair (i, j), from i's
// context (cudaDeviceEnablePeerAccess acts for the current device), wherever
// cudaDeviceCanAccessPeer(i, j) says it can be: every pair, both directions,
// so that whichever stream a copy runs on has it. Consequences:
//  - every GPU's primary context is made when the backend is, not on first
//    use, even for a program that only uses gpu(0) (a context holds device
//    memory of its own);
//  - a device allocation is mapped into every peer that has access, so
//    cudaMalloc costs more (the pooled allocator makes it rare).
// The thread's current device is set for each call and put back. An access
// already enabled (by an earlier engine of this process, or by the program)
// counts as enabled, and its error is cleared. Any other failure (say, a
// device already at its limit of peers) is not fatal: it is logged, the pair
// is left out, and copies between those two GPUs stage through the host.
// GpuInfo::peers lists, for each GPU, the GPUs whose memory it reaches
// directly; `tagflow info` shows it. Simulated GPUs list none: their memory
// is host memory, and no peer access exists to enable.

#include <vector>

#include "engine/gpu_info.h"

namespace tagflow::detail {

/// Enables peer access between every pair of `devices` (the CUDA backend's
/// GPUs, in index order) that CUDA allows, once per process, and fills each
/// GpuInfo's `peers` with the GPUs it reaches directly (Note [Peer access]).
/// Leaves the calling thread's current device as it found it. Never throws:
/// failures are logged and the pairs left out.
void enable_peer_access(std::vector<GpuInfo>& devices) noexcept;

}  // namespace tagflow::detail
