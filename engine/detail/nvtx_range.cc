#include "engine/detail/nvtx_range.h"

#ifdef TAGFLOW_HAVE_CUDA
#include <nvtx3/nvToolsExt.h>
#endif

namespace tagflow::detail {

#ifdef TAGFLOW_HAVE_CUDA
void NvtxRange::push(const char* name) { nvtxRangePushA(name); }
void NvtxRange::pop() { nvtxRangePop(); }
#else
void NvtxRange::push(const char*) {}
void NvtxRange::pop() {}
#endif

}  // namespace tagflow::detail
