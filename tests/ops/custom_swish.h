#pragma once
// The custom operator the tests and the README use as the example: swish,
// y = x * sigmoid(x), written as a user writes one, through the public API
// only. Its host function serves CPU devices and simulated GPUs; its CUDA
// function (custom_swish.cu) real GPUs.

#include "ops/kernel_args.h"  // alone, so that the .cu includes only it

namespace tagflow {
class CustomOp;
}  // namespace tagflow

namespace tagflow::testing {

/// The swish operator, with its gradient dy/dx = s + y (1 - s), s = sigmoid(x).
const CustomOp& swish();

/// The CUDA function: enqueues the swish kernel on `k.cuda_stream`. Built
/// without CUDA it throws (no real GPU can call it then).
void swish_cuda(const KernelArgs& k);

}  // namespace tagflow::testing
