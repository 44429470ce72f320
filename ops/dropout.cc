#include "ops/dropout.h"

#include <vector>

#include "ops/detail/operator_checks.h"
#include "ops/kernels/dropout_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/random.h"

namespace tagflow {

// Note [The dropout mask]
// The mask is an array of uniform draws in [0, 1), made by random::uniform on
// x's device (its own engine operation): element i is kept when its draw is
// at least p, i.e. with probability 1 - ceil(p 2^24) / 2^24 (the draws have
// 24 bits). Using random::uniform, rather than Philox words of dropout's
// own, puts dropout in the one seeded sequence of ops/random.h and inherits
// its guarantees (Note [Counter-based random numbers]): the same bits on
// every device and under any scheduling.
//
// The backward pass reuses that array, held by the recorded graph until
// backward runs (4 bytes per element), instead of regenerating the mask from
// the Philox key and counter. Regenerating would save the memory, but it
// needs the call's (seed, call number), which only random.cc's global
// generator hands out; the saved array is also what MXNet keeps. Forward and
// backward then run the same kernel (dropout_kernels.h). When nothing is
// recorded, the array is freed as soon as the forward operation has run.

namespace {

constexpr const char* kName = "dropout";

using detail::DropoutParams;

void check_dropout(const NDArray& x, double p) {
  detail::check_defined(kName, x, 1);
  detail::check_floating(kName, x, 1);
  TAGFLOW_CHECK(p >= 0 && p < 1,  // false for NaN
                "dropout: expected a drop probability p in [0, 1), got {}", p);
}

/// out = in * mask / (1 - p), the mask read from `uniform`: one operation.
NDArray apply_mask(const char* name, const NDArray& in, const NDArray& uniform,
                   const DropoutParams& params) {
  NDArray out(in.shape(), in.dtype(), in.context());
  const std::int64_t n = out.size();
  if (n == 0) return out;
  const DType dtype = in.dtype();
  const void* pin = in.raw_data();
  const float* pu = uniform.data<float>();
  void* po = out.raw_data();
  detail::push_operation(
      name, in.context(), {in.var(), uniform.var()}, {out.var()}, [=](const RunContext& rc) {
        detail::run_kernel(
            rc,
            detail::kernel_work(
                static_cast<double>(n),
                2 * detail::bytes_of(n, dtype) + detail::bytes_of(n, DType::kFloat32), dtype),
            [=] { detail::cpu_kernels::dropout(params, dtype, pin, pu, po, n); },
            [=](void* stream) {
              detail::gpu_kernels::dropout(params, dtype, pin, pu, po, n, stream);
            });
      });
  return out;
}

/// Dropout of checked `x` with the mask drawn in `uniform` (x's shape and device).
NDArray dropout_with(const NDArray& x, double p, const NDArray& uniform) {
  const DropoutParams params{.p = p, .scale = 1.0 / (1.0 - p)};
  NDArray y = apply_mask(kName, x, uniform, params);
  detail::record(kName, y, {&x}, [&] {
    return [params, uniform](const NDArray& dy) {
      return std::vector<NDArray>{apply_mask("dropout_backward", dy, uniform, params)};
    };
  });
  return y;
}

}  // namespace

NDArray dropout(const NDArray& x, double p, bool training) {
  check_dropout(x, p);
  if (!training || p == 0) return x;
  return dropout_with(x, p, random::uniform(0, 1, x.shape(), x.context()));
}

NDArray dropout(const NDArray& x, double p, bool training, std::uint64_t seed_value) {
  check_dropout(x, p);
  if (!training || p == 0) return x;
  return dropout_with(x, p, random::uniform(0, 1, x.shape(), seed_value, x.context()));
}

}  // namespace tagflow
