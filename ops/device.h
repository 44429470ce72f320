#pragma once
// Devices as the tutorials name them: how many GPUs there are, and the GPU
// to use if there is one.
//
//   Context ctx = try_gpu();           // gpu(0), or cpu(0) without a GPU
//   for (Context c : try_all_gpus()) { ... }
//
// Threads: safe to call concurrently. They only read the engine's devices.

#include <string>
#include <utility>
#include <vector>

#include "engine/context.h"

namespace tagflow {

/// gpu(i) if it exists, else cpu(0).
Context try_gpu(int i = 0);
/// Every GPU, or {cpu(0)} when there is none.
std::vector<Context> try_all_gpus();
/// True for a GPU that exists and is a CUDA device, not a simulated one
/// (whose kernels run on the host).
bool is_real_gpu(Context ctx);

/// The libraries the CPU kernels (of cpu(i) and simulated GPUs) call, each
/// with its version and the processor's kernels it runs: OpenBLAS, oneDNN
/// (or why the build has none), then which of them multiplies matrices
/// ("matrix products", TAGFLOW_CPU_GEMM). For `tagflow info`.
std::vector<std::pair<std::string, std::string>> cpu_kernel_libraries();

}  // namespace tagflow
