#pragma once
// Grid-stride loops and launch shapes for the CUDA kernels: the indices a
// grid-stride kernel walks, the block counts that cap its grid, and the
// operation's stream as CUDA's type. Internal to ops/; included only by .cu
// files.
//
// Note [Grid-stride loops]
// A kernel over n elements walks them with 64-bit indices,
//   for (std::int64_t i = first_index(); i < n; i += grid_stride()) ...
// launched with blocks_for(n, threads) blocks: enough to give each thread
// one element, but never more than kMaxBlocks, so that a huge array reuses
// the blocks instead of overflowing the grid. A kernel with a block per unit
// of work (a row, an output, a channel) strides over the units by gridDim.x
// and is launched with block_count(units) blocks, capped the same way.

#if !defined(__CUDACC__)
#error "ops/kernels/grid_stride.h is for CUDA sources (.cu) only"
#endif

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

namespace tagflow::detail::gpu_kernels {

/// The most blocks a launch asks for (Note [Grid-stride loops]).
inline constexpr std::int64_t kMaxBlocks = 65535 * 8;

/// This thread's first element in a grid-stride loop.
__device__ __forceinline__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

/// How far a grid-stride loop steps: the threads of the whole grid.
__device__ __forceinline__ std::int64_t grid_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

/// Blocks for `units` units of work, a block each: at least 1, at most kMaxBlocks.
inline unsigned block_count(std::int64_t units) {
  return static_cast<unsigned>(std::clamp<std::int64_t>(units, 1, kMaxBlocks));
}

/// Blocks of `per_block` threads (or rows) covering `n` elements (or rows),
/// capped as block_count caps them.
inline unsigned blocks_for(std::int64_t n, std::int64_t per_block) {
  return block_count((n + per_block - 1) / per_block);
}

/// The operation's stream, which kernels receive as `void*`, as CUDA's type.
inline cudaStream_t as_stream(void* stream) { return static_cast<cudaStream_t>(stream); }

}  // namespace tagflow::detail::gpu_kernels
