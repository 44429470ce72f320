// The GPU matrix product: cuBLAS on the operation's stream, one handle per
// stream (made on first use, on the stream's device, and destroyed with the
// stream: Note [Per-stream library handles] in engine/detail/stream_listeners.h).
// Row-major products are computed as their column-major transposes: C = A·B
// is Cᵀ = Bᵀ·Aᵀ, so A and B swap places and keep their transpose flags.
// Every dtype goes through cublasGemmEx with float32 accumulation (Note
// [Half precision arithmetic] in ops/half.h). Every status is checked.

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <exception>

#include "engine/detail/cuda_device_guard.h"
#include "engine/detail/lifetime.h"
#include "engine/detail/stream_listeners.h"
#include "ops/kernels/cuda_check.h"
#include "ops/kernels/gemm_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {

/// Destroys the handle of a stream of `device` as the stream goes away.
void destroy_handle(int device, cublasHandle_t handle) {
  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  try {
    const CudaDeviceGuard on_device(device);  // the device the handle was made on
    status = cublasDestroy(handle);
  } catch (const std::exception& e) {  // the device could not be made current
    log_error("cublasDestroy skipped: ", e.what());
    return;
  }
  if (status != CUBLAS_STATUS_SUCCESS) {
    static_cast<void>(cudaGetLastError());
    log_error("cublasDestroy failed: ", cublasGetStatusName(status));
  }
}

/// The cuBLAS handle bound to `stream` of gpu(device), made on first use with
/// that device current, which is then put back.
cublasHandle_t handle_for(cudaStream_t stream, int device) {
  static auto* handles = new PerStreamHandles<cublasHandle_t>(&destroy_handle);
  return handles->get(device, stream, [&] {
    const CudaDeviceGuard on_device(device);  // cuBLAS binds a handle to the current device
    cublasHandle_t handle = nullptr;
    check_cublas(cublasCreate(&handle), "gemm: cublasCreate");
    const cublasStatus_t bound = cublasSetStream(handle, stream);
    if (bound != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle);
      check_cublas(bound, "gemm: cublasSetStream");
    }
    // Default math (float32 stays float32: no TF32), and no reduction in
    // 16 bits: a split-K product of half operands sums its parts in float32
    // too (Note [Half precision arithmetic] in ops/half.h).
    const cublasStatus_t math = cublasSetMathMode(
        handle, static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                          CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (math != CUBLAS_STATUS_SUCCESS) {
      cublasDestroy(handle);
      check_cublas(math, "gemm: cublasSetMathMode");
    }
    return handle;
  });
}

}  // namespace

void gemm(const GemmPlan& plan, DType dtype, const void* a, const void* b, void* c, int device,
          void* stream) {
  auto* native = static_cast<cudaStream_t>(stream);
  if (plan.k == 0) {  // an empty sum: zeros (all-zero bits in every floating dtype)
    check_cuda(
        cudaMemsetAsync(c, 0, dtype_size(dtype) * plan.c_matrix() * plan.batch_count, native),
        "gemm: cudaMemsetAsync", gpu(device));
    return;
  }
  cublasHandle_t handle = handle_for(native, device);
  const int m = as_int(plan.m, "m");
  const int n = as_int(plan.n, "n");
  const int k = as_int(plan.k, "k");
  const cublasOperation_t op_a = plan.transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = plan.transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int lda = plan.transpose_a ? m : k;
  const int ldb = plan.transpose_b ? k : n;
  const float one = 1.f;
  const float zero = 0.f;
  // One call for every dtype: operands of `dtype`, products summed in
  // float32 (CUBLAS_COMPUTE_32F, float alpha and beta), C rounded once. For
  // float32 that is cublasSgemm's arithmetic (no TF32: the handle keeps
  // default math); for float16 and bfloat16 the default algorithm uses
  // tensor cores where the card has them.
  const cudaDataType type = dtype == DType::kFloat32   ? CUDA_R_32F
                            : dtype == DType::kFloat16 ? CUDA_R_16F
                                                       : CUDA_R_16BF;
  if (plan.uniform_strides()) {
    const long long stride_a = plan.batch.a_strides[0] * plan.a_matrix();
    const long long stride_b = plan.batch.b_strides[0] * plan.b_matrix();
    check_cublas(cublasGemmStridedBatchedEx(handle, op_b, op_a, n, m, k, &one, b, type, ldb,
                                            stride_b, a, type, lda, stride_a, &zero, c, type, n,
                                            plan.c_matrix(), as_int(plan.batch_count, "batch"),
                                            CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "gemm: cublasGemmStridedBatchedEx");
    return;
  }
  const auto element = static_cast<std::int64_t>(dtype_size(dtype));
  const auto* bytes_a = static_cast<const unsigned char*>(a);
  const auto* bytes_b = static_cast<const unsigned char*>(b);
  auto* bytes_c = static_cast<unsigned char*>(c);
  for (std::int64_t i = 0; i < plan.batch_count; ++i) {
    std::int64_t a_index = 0;
    std::int64_t b_index = 0;
    plan.batch.offsets(i, a_index, b_index);
    check_cublas(cublasGemmEx(handle, op_b, op_a, n, m, k, &one,
                              bytes_b + b_index * plan.b_matrix() * element, type, ldb,
                              bytes_a + a_index * plan.a_matrix() * element, type, lda, &zero,
                              bytes_c + i * plan.c_matrix() * element, type, n, CUBLAS_COMPUTE_32F,
                              CUBLAS_GEMM_DEFAULT),
                 "gemm: cublasGemmEx");
  }
}

}  // namespace tagflow::detail::gpu_kernels
