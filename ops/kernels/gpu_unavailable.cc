// Built without CUDA: the GPU kernels exist so that operators link, and say
// so if ever called. No real GPU can exist in such a build (simulated GPUs
// run the CPU kernels), so reaching one of these is a bug.

#include "engine/error.h"
#include "ops/kernels/batch_norm_kernels.h"
#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/dropout_kernels.h"
#include "ops/kernels/elementwise_kernels.h"
#include "ops/kernels/gemm_kernels.h"
#include "ops/kernels/join_kernels.h"
#include "ops/kernels/optimizer_kernels.h"
#include "ops/kernels/pool_kernels.h"
#include "ops/kernels/random_kernels.h"
#include "ops/kernels/reduce_kernels.h"
#include "ops/kernels/softmax_cross_entropy_kernels.h"
#include "ops/kernels/transpose_kernels.h"

namespace tagflow::detail::gpu_kernels {

namespace {
[[noreturn]] void unavailable(const char* kernel) {
  throw_error<DeviceError>("{} kernel: tagflow was built without CUDA (TAGFLOW_CUDA=OFF)", kernel);
}
}  // namespace

void unary(UnaryOp, DType, const void*, void*, std::int64_t, void*) { unavailable("unary"); }
void binary(BinaryOp, DType, const void*, const void*, void*, std::int64_t, void*) {
  unavailable("binary");
}
void binary_scalar(BinaryOp, DType, const void*, ScalarOperand, void*, std::int64_t, void*) {
  unavailable("binary scalar");
}
void binary_broadcast(BinaryOp, DType, const void*, const void*, void*, const BroadcastPlan&,
                      void*) {
  unavailable("binary broadcast");
}
void cast(DType, DType, const void*, void*, std::int64_t, void*) { unavailable("cast"); }
void fill(DType, double, void*, std::int64_t, void*) { unavailable("fill"); }
void arange(DType, double, double, void*, std::int64_t, void*) { unavailable("arange"); }
void clip(DType, const void*, double, double, void*, std::int64_t, void*) { unavailable("clip"); }
void where(DType, const void*, DType, const void*, const void*, void*, std::int64_t, void*) {
  unavailable("where");
}

// random_kernels.h, join_kernels.h
void random_uniform(RandomDraw, const UniformParams&, float*, std::int64_t, void*) {
  unavailable("random uniform");
}
void random_normal(RandomDraw, const NormalParams&, float*, std::int64_t, void*) {
  unavailable("random normal");
}
void gemm(const GemmPlan&, DType, const void*, const void*, void*, int, void*) {
  unavailable("gemm");
}
void join(const JoinPlan&, void*, void*) { unavailable("join"); }
void one_hot(DType, const void*, DType, const OneHotParams&, void*, void*) {
  unavailable("one_hot");
}
void reduce(ReduceOp, DType, const void*, void*, const ReducePlan&, void*) {
  unavailable("reduce");
}
void softmax(bool, DType, const void*, void*, SoftmaxShape, void*) { unavailable("softmax"); }

// dropout_kernels.h, softmax_cross_entropy_kernels.h
void dropout(const DropoutParams&, DType, const void*, const float*, void*, std::int64_t, void*) {
  unavailable("dropout");
}
void softmax_cross_entropy_forward(const CrossEntropyArrays&, const CrossEntropyShape&, void*,
                                   float*, void*) {
  unavailable("softmax_cross_entropy");
}
void softmax_cross_entropy_backward(const CrossEntropyArrays&, const float*, const void*,
                                    const CrossEntropyShape&, void*, void*) {
  unavailable("softmax_cross_entropy_backward");
}

void sgd(const SgdStep&, float*, const float*, float*, std::int64_t, const float*, void*) {
  unavailable("sgd");
}
void adam(const AdamStep&, float*, const float*, float*, float*, std::int64_t, const float*,
          void*) {
  unavailable("adam");
}

void transpose(DType, const void*, void*, const TransposePlan&, void*) { unavailable("transpose"); }

// conv_kernels.h, pool_kernels.h
void conv2d_forward(const ConvGeometry&, DType, const void*, const void*, const void*, void*,
                    GpuScratch&, int, void*) {
  unavailable("conv2d");
}
void conv2d_backward_data(const ConvGeometry&, DType, const void*, const void*, void*, GpuScratch&,
                          int, void*) {
  unavailable("conv2d_backward_data");
}
void conv2d_backward_weight(const ConvGeometry&, DType, const void*, const void*, void*,
                            GpuScratch&, int, void*) {
  unavailable("conv2d_backward_weight");
}
void pool2d_forward(const PoolGeometry&, DType, const void*, void*, int, void*) {
  unavailable("pool2d");
}
void pool2d_backward(const PoolGeometry&, DType, const void*, const void*, const void*, void*, int,
                     void*) {
  unavailable("pool2d_backward");
}

// batch_norm_kernels.h
void batch_norm_forward_training(const BatchNormShape&, const BatchNormParams&, DType, const void*,
                                 const float*, const float*, void*, float*, float*, float*, float*,
                                 int, void*) {
  unavailable("batch_norm");
}
void batch_norm_forward_inference(const BatchNormShape&, const BatchNormParams&, DType, const void*,
                                  const float*, const float*, const float*, const float*, void*,
                                  float*, float*, int, void*) {
  unavailable("batch_norm");
}
void batch_norm_backward(const BatchNormShape&, const BatchNormParams&, bool, DType, const void*,
                         const void*, const float*, const float*, const float*, void*, float*,
                         float*, int, void*) {
  unavailable("batch_norm_backward");
}

}  // namespace tagflow::detail::gpu_kernels
