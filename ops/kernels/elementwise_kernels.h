#pragma once
// Entry points of the elementwise kernels: the CPU ones (elementwise_cpu.cc,
// also run by simulated GPUs) and the CUDA ones (elementwise.cu, taking the
// cudaStream_t as void*). Pointers are to the first element; operands have
// the output's dtype. Internal to ops/.

#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/broadcast.h"
#include "ops/kernels/elementwise_functors.h"

namespace tagflow::detail {

/// A scalar operand: `value` converted to the array's dtype; `on_left` for
/// `scalar - array`.
struct ScalarOperand {
  double value = 0;
  bool on_left = false;
};

namespace cpu_kernels {
void unary(UnaryOp op, DType dtype, const void* in, void* out, std::int64_t n);
void binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, std::int64_t n);
void binary_scalar(BinaryOp op, DType dtype, const void* a, ScalarOperand scalar, void* out,
                   std::int64_t n);
void binary_broadcast(BinaryOp op, DType dtype, const void* a, const void* b, void* out,
                      const BroadcastPlan& plan);
void cast(DType from, DType to, const void* in, void* out, std::int64_t n);
void fill(DType dtype, double value, void* out, std::int64_t n);
/// out[i] = start + i * step.
void arange(DType dtype, double start, double step, void* out, std::int64_t n);
void clip(DType dtype, const void* in, double low, double high, void* out, std::int64_t n);
/// out[i] = cond[i] != 0 ? x[i] : y[i]; `cond` has `cond_dtype`, x/y/out `dtype`.
void where(DType cond_dtype, const void* cond, DType dtype, const void* x, const void* y, void* out,
           std::int64_t n);
}  // namespace cpu_kernels

namespace gpu_kernels {
void unary(UnaryOp op, DType dtype, const void* in, void* out, std::int64_t n, void* stream);
void binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, std::int64_t n,
            void* stream);
void binary_scalar(BinaryOp op, DType dtype, const void* a, ScalarOperand scalar, void* out,
                   std::int64_t n, void* stream);
void binary_broadcast(BinaryOp op, DType dtype, const void* a, const void* b, void* out,
                      const BroadcastPlan& plan, void* stream);
void cast(DType from, DType to, const void* in, void* out, std::int64_t n, void* stream);
void fill(DType dtype, double value, void* out, std::int64_t n, void* stream);
void arange(DType dtype, double start, double step, void* out, std::int64_t n, void* stream);
void clip(DType dtype, const void* in, double low, double high, void* out, std::int64_t n,
          void* stream);
void where(DType cond_dtype, const void* cond, DType dtype, const void* x, const void* y, void* out,
           std::int64_t n, void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
