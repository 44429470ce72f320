#pragma once
// How oneDNN's kernels are kept to the thread that calls them, and the
// instructions they use. Internal to ops/; only in builds with oneDNN.

#include <oneapi/dnnl/dnnl_types.h>

namespace tagflow::detail::onednn {

/// Makes oneDNN's kernels called from this thread run on it alone. Debian
/// builds oneDNN on OpenMP, whose thread count is a setting of each calling
/// thread; tagflow's CPU kernels spread their work over oneTBB's threads
/// themselves, and an OpenMP team per calling thread would compete with them
/// for the cores. Cheap enough to call before every kernel.
void use_this_thread_only();

/// While it lives, oneDNN's kernels called from this thread run on it
/// alone; then the thread's OpenMP setting is what it was (for a program's
/// own thread, which tagflow borrows).
class ThisThreadOnly {
 public:
  ThisThreadOnly();
  ~ThisThreadOnly();
  ThisThreadOnly(const ThisThreadOnly&) = delete;
  ThisThreadOnly& operator=(const ThisThreadOnly&) = delete;

 private:
  int threads_ = 0;  ///< the setting before; 0 when there is no OpenMP
};

/// "AVX-512 with bfloat16": the instructions oneDNN's kernels use, as
/// dnnl_get_effective_cpu_isa() names them.
const char* isa_name(dnnl_cpu_isa_t isa);

}  // namespace tagflow::detail::onednn
