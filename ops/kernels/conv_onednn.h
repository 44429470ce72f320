#pragma once
// The CPU convolutions through oneDNN (Note [Convolution on the CPU] in
// conv_cpu.cc). Each returns false, having done nothing, when oneDNN has no
// kernel for the geometry on this processor; the caller then lowers to
// matrix products. `winograd` lets them use Winograd's algorithm where it
// is faster (less accurate than the direct one: see conv_cpu.cc). Internal
// to ops/.

#include "engine/context.h"
#include "ops/kernels/conv_kernels.h"

namespace tagflow::detail::onednn {

/// As cpu_kernels::conv2d_forward.
bool conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, Context ctx, bool winograd);
/// As cpu_kernels::conv2d_backward_data.
bool conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          Context ctx, bool winograd);
/// As cpu_kernels::conv2d_backward_weight.
bool conv2d_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, Context ctx, bool winograd);

}  // namespace tagflow::detail::onednn
