#pragma once
// The fused optimiser updates, written once for the CPU and the CUDA
// kernels. Internal to ops/.

#include <cmath>
#include <cstdint>

#include "ops/kernels/host_device.h"

namespace tagflow::detail {

struct SgdStep {
  float learning_rate, momentum, weight_decay, rescale, clip;  // clip <= 0: none
  bool has_momentum;
  bool nesterov;  ///< with momentum: the step looks ahead along the new velocity

  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE void operator()(float& w, float g, float* m) const {
    g *= rescale;
    if (clip > 0) g = g > clip ? clip : (g < -clip ? -clip : g);
    g += weight_decay * w;
    if (has_momentum) {
      *m = momentum * *m - learning_rate * g;
      w += nesterov ? momentum * *m - learning_rate * g : *m;
    } else {
      w -= learning_rate * g;
    }
  }
};

struct AdamStep {
  float learning_rate, beta1, beta2, epsilon, weight_decay, rescale, clip;
  float step_size;  ///< learning_rate * sqrt(1 - beta2^t) / (1 - beta1^t)

  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE void operator()(float& w, float g, float& m, float& v) const {
    g *= rescale;
    if (clip > 0) g = g > clip ? clip : (g < -clip ? -clip : g);
    g += weight_decay * w;
    m = beta1 * m + (1 - beta1) * g;
    v = beta2 * v + (1 - beta2) * g * g;
    w -= step_size * m / (::sqrtf(v) + epsilon);
  }
};

// `skip`, when not null, points to one float read when the kernel runs:
// nonzero leaves the weights and states as they are (a mixed-precision
// step whose gradients overflowed), decided on the device.
namespace cpu_kernels {
void sgd(const SgdStep& step, float* w, const float* g, float* m, std::int64_t n,
         const float* skip);
void adam(const AdamStep& step, float* w, const float* g, float* m, float* v, std::int64_t n,
          const float* skip);
}  // namespace cpu_kernels
namespace gpu_kernels {
void sgd(const SgdStep& step, float* w, const float* g, float* m, std::int64_t n, const float* skip,
         void* stream);
void adam(const AdamStep& step, float* w, const float* g, float* m, float* v, std::int64_t n,
          const float* skip, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
