#include "tests/ops/custom_swish.h"

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "tagflow/tagflow.h"

namespace tagflow::testing {

const CustomOp& swish() {
  static const CustomOp op({
      .name = "swish",
      .cpu =
          [](const KernelArgs& k) {
            const float* x = k.inputs[0].data<float>();
            float* y = k.outputs[0].data<float>();
            for (std::int64_t i = 0; i < k.inputs[0].size(); ++i) {
              y[i] = x[i] / (1.f + std::exp(-x[i]));
            }
          },
      .cuda = swish_cuda,
      .backward =
          [](const GradientArgs& g) {
            const NDArray s = sigmoid(g.inputs[0]);
            return std::vector<NDArray>{g.output_grads[0] * (s + g.outputs[0] * (1.f - s))};
          },
  });
  return op;
}

#ifndef TAGFLOW_TEST_CUDA
void swish_cuda(const KernelArgs& k) {
  throw std::runtime_error("swish: built without CUDA, so it has no kernel for " + k.ctx.str());
}
#endif

}  // namespace tagflow::testing
