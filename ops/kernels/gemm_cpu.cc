// The CPU matrix product (Note [The CPU BLAS]).

#include <cblas.h>

#ifdef TAGFLOW_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

#include "ops/kernels/onednn_threads.h"
#endif

#include <algorithm>
#include <array>
#include <atomic>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/config.h"
#include "engine/detail/exit_hook.h"
#include "engine/engine.h"
#include "engine/error.h"
#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/gemm_kernels.h"

// Note [The CPU BLAS]
// Products on CPU devices and simulated GPUs call one library's sgemm,
// TAGFLOW_CPU_GEMM's: oneDNN's by default, OpenBLAS's in builds without
// oneDNN. OpenBLAS chooses its kernels from a table of the processor models
// it knows, and Debian's 0.3.21 takes newer ones for a Prescott (SSE3): on a
// Xeon of family 6, model 207 (AVX-512 with bfloat16, 2 cores), a 2048x2048
// float32 product called directly ran at 35-50 GFLOP/s, against 231 with
// OPENBLAS_CORETYPE=SkylakeX and 245-275 for oneDNN's, which reads the
// instructions the processor has instead of its model (and PyTorch 2.15's
// `a @ b`, 2 threads: 193-262). On an AVX2 EPYC, OpenBLAS's Zen kernels gave
// 136 and oneDNN 140. `tagflow info` names the library and its kernels.
//
// Every call into either library runs on the calling thread alone. A product
// of more than kSmallProduct multiply-adds is cut into tiles of its output,
// at most kTile x kTile, and the tiles are spread over oneTBB's threads like
// every other CPU kernel's blocks (cpu_parallel.h), so that:
//  - devices multiplying at once share the cores. Letting each library
//    thread itself oversubscribes them: OpenMP, on which Debian builds
//    oneDNN, starts a team of all the cores for every calling thread, and
//    OpenBLAS's threaded calls queue behind one another;
//  - the tiles depend on the product's extents alone, never on the number
//    of threads or on what else runs, so a product gives the same bits on
//    one device and on several, with one thread and with many (OpenBLAS's
//    own threads split its sums differently with their count: one LeNet
//    epoch's loss moved by 3e-4 between 1 and 2 threads);
//  - no library keeps threads of its own that wait on the cores: OpenBLAS is
//    set to one thread when first used (which also holds for the calls a
//    program makes to it directly), and oneDNN runs in the caller.
// oneDNN generates its kernels on first use, one set per transposition and
// for small, matrix-vector and large products, into function statics. A
// product whose kernels were generated on a worker while the process exited
// crashed it (its statics were registered with std::atexit after the
// engine's exit hook, so destroyed before the hook had waited). The first
// product or convolution pushed for a host device has every set generated on
// the pushing side instead, then registers the engine's exit hook again
// (prepare_products), so that at exit the pending work ends before they go.
// On the Xeon above, with tiles of at most 512x512 and at least 8 where the
// work allows: 2048x2048 float32 at 217-238 GFLOP/s through `dot`, 0.87-0.99
// of oneDNN's own two OpenMP threads called directly on the same data; tiles
// of 256 gave 0.83-0.86, and tiles of fewer than 256 rows ran 25% slower on
// 512x512x512 than tall ones.
//
// bfloat16 and float16 products are widened into float32 and multiplied so
// (Float32Staging, float_staging.h): 205-240 GFLOP/s at 2048. oneDNN 2.6's
// bfloat16 matmul (its AVX512-BF16 kernels, brg:avx512_core_bf16) ran at 73
// GFLOP/s on one core against 124 for its float32 one, and PyTorch 2.15's
// bfloat16 `a @ b` at 102-144 on two, so widening is the faster path on this
// processor; AMX, which this one does not expose, is not measured.
//
// ThreadSanitizer sees the tiles run one after the other (Note [oneTBB under
// ThreadSanitizer]); the libraries' calls are the same.

namespace tagflow::detail::cpu_kernels {

namespace {

/// Products up to this many multiply-adds run as one call.
constexpr std::int64_t kSmallProduct = std::int64_t{1} << 21;
/// The largest tile extent, and the smallest one tiles are cut down to.
constexpr std::int64_t kTile = 512;
constexpr std::int64_t kMinTile = 32;
/// Tiles are made smaller, down to kMinTile, while there are fewer than
/// kWantedTiles and each would keep at least kMinTileWork multiply-adds.
constexpr std::int64_t kWantedTiles = 8;
constexpr std::int64_t kMinTileWork = std::int64_t{1} << 20;

std::atomic<int> cpu_gemm_override{-1};  // -1: none

/// The library TAGFLOW_CPU_GEMM (or the override) names, resolved.
CpuGemm library() {
  const int kind = cpu_gemm_override.load(std::memory_order_relaxed);
  const CpuGemm gemm = kind < 0 ? Engine::get().config().cpu_gemm : static_cast<CpuGemm>(kind);
#ifdef TAGFLOW_HAVE_ONEDNN
  return gemm == CpuGemm::kOpenBlas ? CpuGemm::kOpenBlas : CpuGemm::kOneDnn;
#else
  return CpuGemm::kOpenBlas;
#endif
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

/// m * n * k <= kSmallProduct, without overflow (each extent < 2^31).
bool small_product(std::int64_t m, std::int64_t n, std::int64_t k) {
  return static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k) <=
         static_cast<double>(kSmallProduct);
}

/// One product of row-major operands with leading dimensions, in this thread.
void call_library(CpuGemm with, bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                  std::int64_t k, const float* a, std::int64_t lda, const float* b,
                  std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
#ifdef TAGFLOW_HAVE_ONEDNN
  if (with == CpuGemm::kOneDnn) {
    onednn::use_this_thread_only();
    const dnnl_status_t status = dnnl_sgemm(transpose_a ? 'T' : 'N', transpose_b ? 'T' : 'N', m, n,
                                            k, 1.f, a, lda, b, ldb, beta, c, ldc);
    if (status != dnnl_success) {
      throw_error(
          "dot: oneDNN's sgemm failed with status {} on a {}x{} by {}x{} product (lda {}, ldb "
          "{}, ldc {}); TAGFLOW_CPU_GEMM=openblas uses OpenBLAS instead",
          static_cast<int>(status), m, k, k, n, lda, ldb, ldc);
    }
    return;
  }
#endif
  (void)with;
  static const bool one_thread = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)one_thread;
  cblas_sgemm(CblasRowMajor, transpose_a ? CblasTrans : CblasNoTrans,
              transpose_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
              static_cast<blasint>(n), static_cast<blasint>(k), 1.f, a, static_cast<blasint>(lda),
              b, static_cast<blasint>(ldb), beta, c, static_cast<blasint>(ldc));
}

void gemm_one(const GemmPlan& p, const float* a, const float* b, float* c) {
  sgemm(p.transpose_a, p.transpose_b, p.m, p.n, p.k, a, b, 0.f, c);
}

}  // namespace

GemmTiles gemm_tiles(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (small_product(m, n, k)) return {m, n};
  GemmTiles t{std::min(m, kTile), std::min(n, kTile)};
  while (t.count(m, n) < kWantedTiles) {
    // Halve the longer side (the columns of square tiles: oneDNN's kernels
    // did better on tall ones), to a multiple of 16, while the tiles keep
    // enough work.
    std::int64_t& side = t.rows > t.columns ? t.rows : t.columns;
    const std::int64_t halved = ceil_div(ceil_div(side, 2), 16) * 16;
    if (side <= kMinTile || halved >= side) break;
    const std::int64_t other = &side == &t.rows ? t.columns : t.rows;
    if (halved * other * k < kMinTileWork) break;
    side = halved;
  }
  return t;
}

void prepare_products() {
#ifdef TAGFLOW_HAVE_ONEDNN
  static std::once_flag once;
  std::call_once(once, [] {
    // On the calling thread, which lives on (oneDNN keeps pointers into the
    // thread that generated its kernels: made on a thread that then ended,
    // they crashed later calls), and alone. oneDNN generates kernels per
    // transposition and for small, matrix-vector and large products: one of
    // each (about 35 ms once).
    const onednn::ThisThreadOnly alone;
    std::vector<float> a(64 * 64, 1.f), b(64 * 64, 1.f), c(64 * 64);
    for (const char ta : {'N', 'T'}) {
      for (const char tb : {'N', 'T'}) {
        for (const auto& [m, n, k] :
             {std::array<int, 3>{2, 2, 3}, std::array<int, 3>{64, 64, 64},
              std::array<int, 3>{1, 64, 64}, std::array<int, 3>{64, 1, 64}}) {
          (void)dnnl_sgemm(ta, tb, m, n, k, 1.f, a.data(), ta == 'N' ? k : m, b.data(),
                           tb == 'N' ? n : k, 0.f, c.data(), n);
        }
      }
    }
    register_exit_hook_again();
  });
#endif
}

CpuGemm cpu_gemm() { return library(); }

void override_cpu_gemm(std::optional<CpuGemm> kind) {
  cpu_gemm_override.store(kind ? static_cast<int>(*kind) : -1, std::memory_order_relaxed);
}

void sgemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
           const float* a, const float* b, float beta, float* c) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // an empty sum: beta C, whatever a library does with k = 0
    for (std::int64_t i = 0; i < m * n; ++i) c[i] = beta == 0.f ? 0.f : beta * c[i];
    return;
  }
  const CpuGemm with = library();
  // Stored A is m x k (lda k), or k x m (lda m) when transposed; B likewise.
  const std::int64_t lda = transpose_a ? m : k;
  const std::int64_t ldb = transpose_b ? k : n;
  const GemmTiles t = gemm_tiles(m, n, k);
  const std::int64_t column_tiles = ceil_div(n, t.columns);
  const std::int64_t tiles = ceil_div(m, t.rows) * column_tiles;
  parallel_for_range(tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t tile = begin; tile < end; ++tile) {
      const std::int64_t row = tile / column_tiles * t.rows;
      const std::int64_t column = tile % column_tiles * t.columns;
      // Rows of op(A) and columns of op(B): a row offset in stored A, or a
      // column one when transposed; B the other way round.
      const float* a_tile = a + (transpose_a ? row : row * lda);
      const float* b_tile = b + (transpose_b ? column * ldb : column);
      call_library(with, transpose_a, transpose_b, std::min(t.rows, m - row),
                   std::min(t.columns, n - column), k, a_tile, lda, b_tile, ldb, beta,
                   c + row * n + column, n);
    }
  });
}

void gemm(const GemmPlan& plan, const float* a, const float* b, float* c) {
  auto member = [&](std::int64_t i) {
    std::int64_t a_index = 0;
    std::int64_t b_index = 0;
    plan.batch.offsets(i, a_index, b_index);
    gemm_one(plan, a + a_index * plan.a_matrix(), b + b_index * plan.b_matrix(),
             c + i * plan.c_matrix());
  };
  // Small members run in parallel, each one call; large ones one after the
  // other, each in parallel tiles.
  if (plan.batch_count > 1 && small_product(plan.m, plan.n, plan.k)) {
    parallel_for_range(plan.batch_count, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) member(i);
    });
  } else {
    for (std::int64_t i = 0; i < plan.batch_count; ++i) member(i);
  }
}

std::string cpu_gemm_kernels() {
#ifdef TAGFLOW_HAVE_ONEDNN
  if (library() == CpuGemm::kOneDnn) {
    const dnnl_version_t* v = dnnl_version();
    return fmt::format("oneDNN {}.{}.{} sgemm, {} kernels (TAGFLOW_CPU_GEMM)", v->major, v->minor,
                       v->patch, onednn::isa_name(dnnl_get_effective_cpu_isa()));
  }
#endif
  return fmt::format("OpenBLAS sgemm, {} kernels (TAGFLOW_CPU_GEMM)", openblas_get_corename());
}

}  // namespace tagflow::detail::cpu_kernels
