#pragma once
// The CPU convolutions through oneDNN (Note [Convolution on the CPU] in
// conv_cpu.cc). Each returns false, having done nothing, when oneDNN has no
// kernel for the geometry on this processor; the caller then lowers to
// matrix products. `winograd` lets them use Winograd's algorithm where it
// is faster (less accurate than the direct one: see conv_cpu.cc). Internal
// to ops/.

#include <cstdint>

#include "engine/context.h"
#include "ops/kernels/conv_kernels.h"

namespace tagflow::detail::onednn {

/// As cpu_kernels::conv2d_forward.
bool conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, Context ctx, bool winograd);
/// As cpu_kernels::conv2d_backward_data.
bool conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          Context ctx, bool winograd);
/// How the weight gradient cuts its work: 0 to cut the batch into chunks
/// whose partial sums are added in order, else the output channels per
/// call (64 for kernels larger than 1x1, half of them for 1x1), each call
/// over the whole batch. Layers of small outputs (64 positions or fewer:
/// 8x8) and many channels (128 or more) are cut by channel: their weights
/// outweigh their outputs, and the chunks' partial sums would cost more
/// memory traffic than the kernels (Note [Convolution on the CPU]). A
/// function of the geometry only, so a result never depends on the threads.
std::int64_t weight_gradient_channels_per_call(const ConvGeometry& g);
/// As cpu_kernels::conv2d_backward_weight.
bool conv2d_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, Context ctx, bool winograd);

}  // namespace tagflow::detail::onednn
