#pragma once
// Matrix products of float32, float16 or bfloat16 operands (both of one
// dtype, the result of it too); the operands on one device; each product is
// one engine operation running the BLAS on CPU devices and simulated GPUs
// and cuBLAS on the GPU's compute stream. Half operands are multiplied and
// summed in float32 and the result rounded once (cuBLAS's GemmEx with a
// float32 compute type; on CPUs the operands widened for the BLAS).
//
//   NDArray c = dot(a, b);                     // (m,k)·(k,n) -> (m,n)
//   NDArray g = dot(x, dy, /*transpose_a=*/true);  // xᵀ·dy without a transpose copy
//   NDArray h = batch_dot(q, k, false, true);  // (B,m,d)·(B,n,d)ᵀ -> (B,m,n)
//   NDArray y = matmul(x, w);                  // NumPy rules: (B,T,k)·(k,n) -> (B,T,n)
//
// Threads: safe to call concurrently. Like every operator (ops/elementwise.h).

#include "ops/ndarray.h"

namespace tagflow {

/// Product of two 2-D arrays, either one transposed first; a 1-D operand is
/// a vector as in NumPy's dot ((k)·(k) gives shape (1), (m,k)·(k) gives (m)).
NDArray dot(const NDArray& a, const NDArray& b, bool transpose_a = false, bool transpose_b = false);

/// Products of matching matrices of two 3-D arrays: (B,m,k)·(B,k,n) -> (B,m,n),
/// either side transposed per matrix.
NDArray batch_dot(const NDArray& a, const NDArray& b, bool transpose_a = false,
                  bool transpose_b = false);

/// NumPy's matmul: the last two axes are matrices, the leading ones are a
/// batch that broadcasts ((2,1,m,k)·(3,k,n) -> (2,3,m,n)); a 1-D operand is
/// a vector whose axis is removed from the result.
NDArray matmul(const NDArray& a, const NDArray& b);

}  // namespace tagflow
