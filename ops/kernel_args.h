#pragma once
// What a custom operator's kernel receives (ops/custom_op.h): where it runs
// and plain views of its arrays. This header needs nothing but the standard
// library and tagflow's small value types, so that a CUDA source (.cu)
// compiled by nvcc can include it alone:
//
//   // swish.cu
//   #include <tagflow/ops/kernel_args.h>
//   void swish_cuda(const tagflow::KernelArgs& k) {
//     auto stream = static_cast<cudaStream_t>(k.cuda_stream);
//     swish_kernel<<<blocks, 256, 0, stream>>>(k.inputs[0].data<float>(),
//                                               k.outputs[0].data<float>(), k.inputs[0].size());
//   }
//
// Threads: concurrent reads, exclusive writes. TensorView and KernelArgs are
// values (as a pointer); the memory a view names is the kernel's while it
// runs.

#include <cstdint>
#include <vector>

#include "engine/context.h"
#include "ops/dtype.h"
#include "ops/shape.h"

namespace tagflow {

namespace detail {
/// Throws tagflow::Error "TensorView::data<int32>: the array holds float32".
[[noreturn]] void throw_view_dtype_mismatch(DType wanted, DType held);
}  // namespace detail

/// One array as a kernel sees it: its memory on the device, its shape and
/// dtype. A plain view, valid while the kernel runs.
class TensorView {
 public:
  TensorView() = default;
  TensorView(void* data, Shape shape, DType dtype) : data_(data), shape_(shape), dtype_(dtype) {}

  const Shape& shape() const { return shape_; }
  DType dtype() const { return dtype_; }
  std::int64_t size() const { return shape_.size(); }
  void* raw_data() const { return data_; }
  /// The first element; throws tagflow::Error unless the view holds T.
  template <typename T>
  T* data() const {
    if (dtype_of<T> != dtype_) detail::throw_view_dtype_mismatch(dtype_of<T>, dtype_);
    return static_cast<T*>(data_);
  }

 private:
  void* data_ = nullptr;
  Shape shape_;
  DType dtype_ = DType::kFloat32;
};

/// What a custom kernel receives.
struct KernelArgs {
  /// The device the kernel runs for.
  Context ctx;
  /// The device's compute stream on a real GPU, a `cudaStream_t` as void*
  /// (`static_cast<cudaStream_t>(k.cuda_stream)`); null elsewhere.
  void* cuda_stream = nullptr;
  std::vector<TensorView> inputs;
  std::vector<TensorView> outputs;
};

}  // namespace tagflow
