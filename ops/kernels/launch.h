#pragma once
// run_kernel: how an operator's closure runs its kernel where the operation
// runs. Internal to ops/.
//
// Note [One kernel, three devices]
// A CPU device runs the CPU kernel in the worker that runs the operation. A
// simulated GPU runs the same CPU kernel as host work in its stream's order
// (so its fences and cross-stream waits are exercised exactly as on a GPU).
// A simulated GPU with a device model times the kernel by the work it is
// given (Note [Operator work] in kernel_work.h), and a timing-only one skips
// it. A real GPU launches the CUDA kernel on the operation's stream and returns;
// the engine records the stream's event afterwards (Note [Completion on
// device queues] in DESIGN.md). Elementwise bodies are written once, as
// functors callable on host and device (host_device.h). A simulated launch
// is checked as a real one (check_launch reads the thread's last error), so
// the rules of Note [Simulated CUDA rules] hold for both.

#include <utility>

#include "engine/detail/sim_runtime.h"
#include "engine/device_model.h"
#include "engine/operation.h"
#include "engine/stream.h"

namespace tagflow::detail {

/// `cpu()` runs on a CPU device or a simulated GPU; `gpu(native_stream)`
/// on a real GPU, with the cudaStream_t as `void*`. `work` is what the
/// kernel computes and moves, for simulated GPUs that keep modelled time.
template <typename CpuKernel, typename GpuKernel>
void run_kernel(const RunContext& rc, const KernelWork& work, CpuKernel&& cpu, GpuKernel&& gpu) {
  if (rc.stream == nullptr) {
    cpu();
  } else if (void* native = rc.stream->native_handle()) {
    gpu(native);
  } else {
    sim::launch_kernel(*rc.stream, work, std::forward<CpuKernel>(cpu));
    sim::check_status(sim::get_last_error(), "kernel launch", rc.ctx);
  }
}

}  // namespace tagflow::detail
