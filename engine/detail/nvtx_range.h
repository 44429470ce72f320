#pragma once
// NvtxRange: an NVTX range named after an operation, on the host thread
// that launches it on a real GPU, so that Nsight Systems shows tagflow's
// operation names next to the kernels they launch. Costs nothing measurable
// without a tool attached (NVTX checks one pointer), and is empty in builds
// without CUDA. Internal to engine/.

namespace tagflow::detail {

class NvtxRange {
 public:
  NvtxRange(const char* name, bool active) : active_(active) {
    if (active_) push(name);
  }
  ~NvtxRange() {
    if (active_) pop();
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
  static void push(const char* name);
  static void pop();
  bool active_;
};

}  // namespace tagflow::detail
