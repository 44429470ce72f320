#pragma once
// The matrix-product kernels: a batch of row-major products
// C[i] = op(A[i]) · op(B[i]), with each batch member's operands found through
// a broadcast plan over the batch axes. Internal to ops/.

#include <cstdint>
#include <optional>
#include <string>

#include "ops/dtype.h"
#include "ops/kernels/broadcast.h"

namespace tagflow {
enum class CpuGemm;  // engine/config.h
}  // namespace tagflow

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

/// The output tiles a CPU product of m x n outputs summing over k is cut
/// into, `rows` x `columns` each (those of the last row and column of tiles
/// smaller): a function of the extents alone (Note [The CPU BLAS] in
/// gemm_cpu.cc).
struct GemmTiles {
  std::int64_t rows = 0, columns = 0;
  std::int64_t count(std::int64_t m, std::int64_t n) const {
    return ((m + rows - 1) / rows) * ((n + columns - 1) / columns);
  }
};

namespace cpu_kernels {
void gemm(const GemmPlan& plan, const float* a, const float* b, float* c);
/// One row-major product: C (m x n) = op(A) op(B) + beta C, with op(A)
/// m x k and op(B) k x n, in tiles over oneTBB's threads. The one place the
/// CPU kernels multiply matrices (Note [The CPU BLAS] in gemm_cpu.cc).
void sgemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
           const float* a, const float* b, float beta, float* c);
GemmTiles gemm_tiles(std::int64_t m, std::int64_t n, std::int64_t k);
/// Called when a product or a convolution for a host device (cpu(i), a
/// simulated GPU) is pushed, before it can run: once per process, makes the
/// libraries' kernels ready and the engine's exit outlive them (Note [The
/// CPU BLAS] in gemm_cpu.cc). Safe from several threads.
void prepare_products();
/// The library the products call: the process-wide engine's
/// TAGFLOW_CPU_GEMM, unless overridden, resolved (never kAuto; kOpenBlas in
/// a build without oneDNN).
CpuGemm cpu_gemm();
/// Overrides TAGFLOW_CPU_GEMM for the whole process from the next product
/// on (nothing: back to the variable), so that tests run both libraries.
void override_cpu_gemm(std::optional<CpuGemm> kind);
/// "oneDNN 2.6.3 sgemm, AVX-512 kernels (TAGFLOW_CPU_GEMM)": what the
/// products run, for `tagflow info`.
std::string cpu_gemm_kernels();
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
