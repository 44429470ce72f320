#pragma once
// The dropout kernel, written once for the host and CUDA devices: the
// forward pass (in = x) and the backward pass (in = the output's gradient)
// are the same map, since the gradient of x * mask / (1 - p) is
// out_grad * mask / (1 - p). CPU entry point in dropout_cpu.cc (also run by
// simulated GPUs), CUDA one in dropout.cu. Internal to ops/.

#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/host_device.h"

namespace tagflow::detail {

/// Drop probability p in (0, 1) and the scale of the kept elements.
struct DropoutParams {
  double p = 0;
  double scale = 1;  ///< 1 / (1 - p)
};

/// One element of type T (float, Half or BFloat16): kept when its float32
/// uniform draw `u` (in [0, 1)) is at least p, then scaled in double and
/// rounded once to T (so a kept value is x / (1 - p) correctly rounded, up
/// to a double rounding of the scale); a dropped element is exactly 0, even
/// when `in` is infinite or NaN.
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T dropout_value(T in, float u, const DropoutParams& params) {
  return static_cast<double>(u) >= params.p
             ? convert_element<T>(static_cast<double>(static_cast<float>(in)) * params.scale)
             : convert_element<T>(0.0f);
}

namespace cpu_kernels {
/// out[i] = dropout_value(in[i], uniform[i]) for i in [0, n); `in` and
/// `out` of floating-point `dtype`, `uniform` float32.
void dropout(const DropoutParams& params, DType dtype, const void* in, const float* uniform,
             void* out, std::int64_t n);
}  // namespace cpu_kernels

namespace gpu_kernels {
void dropout(const DropoutParams& params, DType dtype, const void* in, const float* uniform,
             void* out, std::int64_t n, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
