#pragma once
// What the cuDNN kernels (convolution, pooling, batch normalization) share:
// the handle of each stream, descriptors that are destroyed even when
// setting them up throws, and NCHW tensor descriptors of each floating dtype. Internal to
// ops/; included only by .cu files.

#include <cudnn.h>

#include <cstdint>

#include "ops/dtype.h"
#include "ops/kernels/cuda_check.h"

namespace tagflow::detail::gpu_kernels {

/// The cuDNN handle bound to `stream` of gpu(device), made on first use with
/// that device current (which is then put back), and destroyed when the
/// engine destroys the stream (Note [Per-stream library handles] in
/// engine/detail/stream_listeners.h). Kernels call cuDNN with it while their
/// worker thread has `device` current.
cudnnHandle_t cudnn_handle(void* stream, int device);

/// Owns one cuDNN descriptor; a base class, so that a descriptor whose
/// setting-up (in the derived constructor) throws is still destroyed.
template <typename Desc, cudnnStatus_t (*create)(Desc*), cudnnStatus_t (*destroy)(Desc)>
struct CudnnDescriptor {
  Desc desc = nullptr;
  CudnnDescriptor() { check_cudnn(create(&desc), "cuDNN: creating a descriptor"); }
  ~CudnnDescriptor() { destroy(desc); }
  CudnnDescriptor(const CudnnDescriptor&) = delete;
  CudnnDescriptor& operator=(const CudnnDescriptor&) = delete;
};

/// cuDNN's name of a floating-point dtype. With float16 and bfloat16
/// tensors cuDNN takes float scaling factors (alpha, beta) and float
/// per-channel tensors, as with float32 ones.
inline cudnnDataType_t cudnn_data_type(DType dtype) {
  switch (dtype) {
    case DType::kFloat16:
      return CUDNN_DATA_HALF;
    case DType::kBFloat16:
      return CUDNN_DATA_BFLOAT16;
    case DType::kFloat32:
      return CUDNN_DATA_FLOAT;
    case DType::kInt32:
    case DType::kInt64:
    case DType::kUInt8:
      break;
  }
  throw_dtype_unsupported("cuDNN", dtype);
}

/// An NCHW tensor of extents (n, c, h, w) and `dtype` (float32 unless said).
struct TensorDescriptor : CudnnDescriptor<cudnnTensorDescriptor_t, cudnnCreateTensorDescriptor,
                                          cudnnDestroyTensorDescriptor> {
  TensorDescriptor(std::int64_t n, std::int64_t c, std::int64_t h, std::int64_t w,
                   DType dtype = DType::kFloat32) {
    check_cudnn(cudnnSetTensor4dDescriptor(desc, CUDNN_TENSOR_NCHW, cudnn_data_type(dtype),
                                           as_int(n, "batch"), as_int(c, "channels"),
                                           as_int(h, "height"), as_int(w, "width")),
                "cuDNN: cudnnSetTensor4dDescriptor");
  }
};

}  // namespace tagflow::detail::gpu_kernels
