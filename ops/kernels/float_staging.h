#pragma once
// Float32Staging: how a CPU kernel that computes in float32 only (the
// libraries' sgemm, oneDNN's convolutions, the pooling and batch-norm loops) serves
// float16 and bfloat16 arrays by Note [Half precision arithmetic] in
// ops/half.h: its inputs are widened exactly into float32 working memory,
// it computes there, and each output is rounded once into its array. The
// CUDA kernels compute the same way inside cuBLAS, cuDNN and their own
// loops. Internal to ops/.
//
//   Float32Staging staging(ctx, dtype);
//   cpu_kernels::gemm(plan, staging.input(a, a_size), staging.input(b, b_size),
//                     staging.output(c, c_size));
//   staging.commit();

#include <cstdint>
#include <memory>
#include <vector>

#include "engine/context.h"
#include "ops/dtype.h"
#include "ops/kernels/cpu_scratch.h"

namespace tagflow::detail {

class Float32Staging {
 public:
  /// Arrays of `dtype` on `ctx` (whose allocator gives the working memory,
  /// counted against the device as a kernel's scratch is).
  Float32Staging(Context ctx, DType dtype);
  Float32Staging(const Float32Staging&) = delete;
  Float32Staging& operator=(const Float32Staging&) = delete;

  /// The `n` elements at `data` as float32: `data` itself for a float32
  /// array, else a widened copy.
  const float* input(const void* data, std::int64_t n);
  /// Where the kernel writes the `n` elements of the array at `data`:
  /// `data` itself for float32, else float32 memory that commit() rounds
  /// into it. With `keep` the array's current values are widened in first
  /// (for a kernel that adds into its output or leaves parts of it alone).
  float* output(void* data, std::int64_t n, bool keep = false);
  /// Rounds every staged output into its array, once.
  void commit();

 private:
  float* scratch(std::int64_t n);

  struct Staged {
    const float* from;
    void* to;
    std::int64_t n;
  };
  Context ctx_;
  DType dtype_;
  std::vector<std::unique_ptr<CpuScratch>> buffers_;
  std::vector<Staged> outputs_;
};

}  // namespace tagflow::detail
