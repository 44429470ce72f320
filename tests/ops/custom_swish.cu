// swish's CUDA function, as a user writes one: its own kernel, enqueued on
// the stream the engine hands over, every status checked.

#include <cstdint>
#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include "tests/ops/custom_swish.h"

namespace tagflow::testing {

namespace {

__global__ void swish_kernel(const float* x, float* y, std::int64_t n) {
  const std::int64_t stride = static_cast<std::int64_t>(blockDim.x) * gridDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    y[i] = x[i] / (1.f + expf(-x[i]));
  }
}

}  // namespace

void swish_cuda(const KernelArgs& k) {
  const std::int64_t n = k.inputs[0].size();
  if (n == 0) return;
  constexpr int kThreads = 256;
  const std::int64_t wanted = (n + kThreads - 1) / kThreads;
  const unsigned blocks = static_cast<unsigned>(wanted < 4096 ? wanted : 4096);
  swish_kernel<<<blocks, kThreads, 0, static_cast<cudaStream_t>(k.cuda_stream)>>>(
      k.inputs[0].data<float>(), k.outputs[0].data<float>(), n);
  const cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess) {
    throw std::runtime_error(std::string("swish: kernel launch failed on ") + k.ctx.str() + ": " +
                             cudaGetErrorString(status));
  }
}

}  // namespace tagflow::testing
