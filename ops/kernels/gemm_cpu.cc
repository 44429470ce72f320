// The CPU matrix product: OpenBLAS's sgemm per batch member (Note [The CPU
// BLAS] in linalg.cc explains the choice). Small batched products run their
// members in parallel, each single-threaded inside the BLAS; large ones run
// one after the other, each using the BLAS's own threads.

#include <cblas.h>

#include <algorithm>

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/gemm_kernels.h"

namespace tagflow::detail::cpu_kernels {

namespace {

void gemm_one(const GemmPlan& p, const float* a, const float* b, float* c) {
  if (p.k == 0) {  // an empty sum: zeros, whatever the BLAS does with k = 0
    std::fill(c, c + p.c_matrix(), 0.f);
    return;
  }
  sgemm(p.transpose_a, p.transpose_b, p.m, p.n, p.k, a, b, 0.f, c);
}

}  // namespace

void sgemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
           const float* a, const float* b, float beta, float* c) {
#ifdef TAGFLOW_TSAN
  // OpenBLAS's threads are invisible to ThreadSanitizer too (Note [oneTBB
  // under ThreadSanitizer]): under TSan the products run in the caller.
  static const bool single_threaded = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded;
#endif
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.f, a,
              static_cast<blasint>(transpose_a ? m : k), b,
              static_cast<blasint>(transpose_b ? k : n), beta, c, static_cast<blasint>(n));
}

void gemm(const GemmPlan& plan, const float* a, const float* b, float* c) {
  auto member = [&](std::int64_t i) {
    std::int64_t a_index = 0;
    std::int64_t b_index = 0;
    plan.batch.offsets(i, a_index, b_index);
    gemm_one(plan, a + a_index * plan.a_matrix(), b + b_index * plan.b_matrix(),
             c + i * plan.c_matrix());
  };
  // Below this many multiply-adds a product is not worth splitting over threads.
  constexpr std::int64_t kSmallProduct = 64 * 64 * 64;
  if (plan.batch_count > 1 && plan.m * plan.n * plan.k <= kSmallProduct) {
    parallel_for_range(plan.batch_count, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) member(i);
    });
  } else {
    for (std::int64_t i = 0; i < plan.batch_count; ++i) member(i);
  }
}

}  // namespace tagflow::detail::cpu_kernels
