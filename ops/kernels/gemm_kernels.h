#pragma once
// The matrix-product kernels: a batch of row-major products
// C[i] = op(A[i]) · op(B[i]), with each batch member's operands found through
// a broadcast plan over the batch axes. Internal to ops/.

#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/broadcast.h"

namespace tagflow::detail {

struct GemmPlan {
  std::int64_t m = 0, n = 0, k = 0;
  bool transpose_a = false, transpose_b = false;
  /// Batch members: the output's batch index maps to A's and B's matrix
  /// indices through `batch` (strides in matrices; 0 where one broadcasts).
  std::int64_t batch_count = 1;
  BroadcastPlan batch;

  std::int64_t a_matrix() const { return m * k; }
  std::int64_t b_matrix() const { return k * n; }
  std::int64_t c_matrix() const { return m * n; }
  /// True when every member steps through A and B by a fixed stride (or 0):
  /// one strided-batched call serves the whole batch.
  bool uniform_strides() const { return batch.ndim == 1; }
};

namespace cpu_kernels {
void gemm(const GemmPlan& plan, const float* a, const float* b, float* c);
/// One row-major product with OpenBLAS: C (m x n) = op(A) op(B) + beta C, with
/// op(A) m x k and op(B) k x n. The one place the CPU kernels call the BLAS
/// (under ThreadSanitizer, single-threaded; see gemm_cpu.cc).
void sgemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
           const float* a, const float* b, float beta, float* c);
}  // namespace cpu_kernels
namespace gpu_kernels {
/// A, B and C of one floating-point `dtype`, by cublasGemmEx accumulating in
/// float32 (C rounded once).
/// `device` is the GPU whose compute stream `stream` is (for its cuBLAS
/// handle).
void gemm(const GemmPlan& plan, DType dtype, const void* a, const void* b, void* c, int device,
          void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
