// The GPU convolution kernels: cuDNN (the legacy convolution API of cuDNN 9)
// on the operation's stream, one cuDNN handle per stream. Each pass's
// algorithm is chosen once per geometry and GPU by the rule of Note [Choosing
// cuDNN's algorithms] (conv_algorithm.h); its workspace comes from the
// device's pooled allocator through GpuScratch, which hands it back once the
// stream has passed the kernel. float16 and bfloat16 convolutions use
// tensors of their type with a float32 compute type (cuDNN's pseudo-half
// configurations: products summed in float32, results rounded once), and
// any math cuDNN offers: tensor cores take 16-bit inputs exactly, so the
// FMA-only rule, which keeps float32 inputs from being rounded to TF32,
// has nothing to protect for them. Every status is checked.

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <span>
#include <utility>

#include "ops/kernels/conv_algorithm.h"
#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/cuda_check.h"
#include "ops/kernels/cudnn_util.h"

namespace tagflow::detail::gpu_kernels {

namespace {

/// The workspace limit of Note [Choosing cuDNN's algorithms].
constexpr std::size_t kMaxWorkspace = std::size_t{1} << 30;

struct FilterDescriptor : CudnnDescriptor<cudnnFilterDescriptor_t, cudnnCreateFilterDescriptor,
                                          cudnnDestroyFilterDescriptor> {
  FilterDescriptor(const ConvGeometry& g, DType dtype) {
    check_cudnn(cudnnSetFilter4dDescriptor(desc, cudnn_data_type(dtype), CUDNN_TENSOR_NCHW,
                                           as_int(g.out_channels, "out_channels"),
                                           as_int(g.group_in_channels(), "in_channels"), g.kernel_h,
                                           g.kernel_w),
                "conv2d: cudnnSetFilter4dDescriptor");
  }
};

struct ConvolutionDescriptor
    : CudnnDescriptor<cudnnConvolutionDescriptor_t, cudnnCreateConvolutionDescriptor,
                      cudnnDestroyConvolutionDescriptor> {
  explicit ConvolutionDescriptor(const ConvGeometry& g) {
    check_cudnn(cudnnSetConvolution2dDescriptor(desc, g.pad_h, g.pad_w, g.stride_h, g.stride_w,
                                                g.dilation_h, g.dilation_w, CUDNN_CROSS_CORRELATION,
                                                CUDNN_DATA_FLOAT),
                "conv2d: cudnnSetConvolution2dDescriptor");
    check_cudnn(cudnnSetConvolutionGroupCount(desc, g.groups),
                "conv2d: cudnnSetConvolutionGroupCount");
    set_math(CUDNN_FMA_MATH);
  }
  void set_math(cudnnMathType_t math) {
    check_cudnn(cudnnSetConvolutionMathType(desc, math), "conv2d: cudnnSetConvolutionMathType");
  }
};

/// The descriptors of one convolution: input, output, filter, and the
/// convolution itself.
struct ConvDescriptors {
  TensorDescriptor x;
  TensorDescriptor y;
  FilterDescriptor w;
  ConvolutionDescriptor conv;
  ConvDescriptors(const ConvGeometry& g, DType dtype)
      : x(g.batch, g.in_channels, g.in_h, g.in_w, dtype),
        y(g.batch, g.out_channels, g.out_h, g.out_w, dtype),
        w(g, dtype),
        conv(g) {}
};

/// An algorithm of one pass (as an int: the three passes have their own
/// enums), the math it runs with and the workspace it needs.
struct AlgoChoice {
  int algo = 0;
  cudnnMathType_t math = CUDNN_FMA_MATH;
  std::size_t workspace = 0;
};

std::mutex& cache_mutex() {
  static std::mutex mutex;
  return mutex;
}
/// A pass of one geometry on one GPU, and the dtype it runs in.
using AlgoKey = std::pair<ConvKey, DType>;

/// Never destroyed: kernels may still run during exit.
std::map<AlgoKey, AlgoChoice>& algo_cache() {
  static auto* cache = new std::map<AlgoKey, AlgoChoice>;
  return *cache;
}

/// Note [Choosing cuDNN's algorithms]: the candidate to run `pass` of `g`
/// with among cuDNN's `count` `perfs`.
/// For a 16-bit `dtype` every math keeps the inputs' precision (see the
/// file's comment) and counts as FMA math.
template <typename Perf, std::size_t N>
AlgoChoice pick(const std::array<Perf, N>& perfs, int count, ConvPass pass, int device,
                const ConvGeometry& g, DType dtype) {
  std::array<ConvAlgorithm, N> candidates{};
  const auto n = std::min(static_cast<std::size_t>(std::max(count, 0)), N);
  for (std::size_t i = 0; i < n; ++i) {
    const Perf& p = perfs[i];
    candidates[i] = {.algo = static_cast<int>(p.algo),
                     .fma_math = p.mathType == CUDNN_FMA_MATH || is_half(dtype),
                     .supported = p.status == CUDNN_STATUS_SUCCESS,
                     .deterministic = p.determinism == CUDNN_DETERMINISTIC,
                     .workspace = static_cast<std::uint64_t>(p.memory)};
  }
  const std::size_t i = choose_conv_algorithm(std::span<const ConvAlgorithm>(candidates.data(), n),
                                              pass, device, g, kMaxWorkspace, conv_tf32_policy());
  return {static_cast<int>(perfs[i].algo), perfs[i].mathType, perfs[i].memory};
}

/// The cached choice of `pass`, or the one `find` makes (then cached). The
/// returned choice's workspace is what cuDNN asks for its algorithm.
template <typename Find>
AlgoChoice choose(ConvPass pass, int device, const ConvGeometry& g, DType dtype, Find&& find) {
  const AlgoKey key{conv_key(pass, device, g), dtype};
  {
    std::lock_guard lock(cache_mutex());
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) return it->second;
  }
  const AlgoChoice choice = find();  // outside the lock: cuDNN may take a while
  std::lock_guard lock(cache_mutex());
  return algo_cache().emplace(key, choice).first->second;
}

}  // namespace

void conv2d_forward(const ConvGeometry& g, DType dtype, const void* x, const void* w,
                    const void* bias, void* y, GpuScratch& scratch, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  ConvDescriptors d(g, dtype);
  const AlgoChoice c = choose(ConvPass::kForward, device, g, dtype, [&] {
    std::array<cudnnConvolutionFwdAlgoPerf_t, CUDNN_CONVOLUTION_FWD_ALGO_COUNT> perfs{};
    int count = 0;
    check_cudnn(cudnnGetConvolutionForwardAlgorithm_v7(h, d.x.desc, d.w.desc, d.conv.desc, d.y.desc,
                                                       static_cast<int>(perfs.size()), &count,
                                                       perfs.data()),
                "conv2d: cudnnGetConvolutionForwardAlgorithm_v7");
    AlgoChoice choice = pick(perfs, count, ConvPass::kForward, device, g, dtype);
    d.conv.set_math(choice.math);
    check_cudnn(cudnnGetConvolutionForwardWorkspaceSize(
                    h, d.x.desc, d.w.desc, d.conv.desc, d.y.desc,
                    static_cast<cudnnConvolutionFwdAlgo_t>(choice.algo), &choice.workspace),
                "conv2d: cudnnGetConvolutionForwardWorkspaceSize");
    return choice;
  });
  d.conv.set_math(c.math);
  void* workspace = scratch.get(c.workspace);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnConvolutionForward(h, &one, d.x.desc, x, d.w.desc, w, d.conv.desc,
                                      static_cast<cudnnConvolutionFwdAlgo_t>(c.algo), workspace,
                                      c.workspace, &zero, d.y.desc, y),
              "conv2d: cudnnConvolutionForward");
  if (bias == nullptr) return;
  TensorDescriptor b(1, g.out_channels, 1, 1, dtype);
  check_cudnn(cudnnAddTensor(h, &one, b.desc, bias, &one, d.y.desc, y), "conv2d: cudnnAddTensor");
}

void conv2d_backward_data(const ConvGeometry& g, DType dtype, const void* w, const void* dy,
                          void* dx, GpuScratch& scratch, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  ConvDescriptors d(g, dtype);
  const AlgoChoice c = choose(ConvPass::kBackwardData, device, g, dtype, [&] {
    std::array<cudnnConvolutionBwdDataAlgoPerf_t, CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT> perfs{};
    int count = 0;
    check_cudnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(
                    h, d.w.desc, d.y.desc, d.conv.desc, d.x.desc, static_cast<int>(perfs.size()),
                    &count, perfs.data()),
                "conv2d_backward_data: cudnnGetConvolutionBackwardDataAlgorithm_v7");
    AlgoChoice choice = pick(perfs, count, ConvPass::kBackwardData, device, g, dtype);
    d.conv.set_math(choice.math);
    check_cudnn(cudnnGetConvolutionBackwardDataWorkspaceSize(
                    h, d.w.desc, d.y.desc, d.conv.desc, d.x.desc,
                    static_cast<cudnnConvolutionBwdDataAlgo_t>(choice.algo), &choice.workspace),
                "conv2d_backward_data: cudnnGetConvolutionBackwardDataWorkspaceSize");
    return choice;
  });
  d.conv.set_math(c.math);
  void* workspace = scratch.get(c.workspace);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnConvolutionBackwardData(h, &one, d.w.desc, w, d.y.desc, dy, d.conv.desc,
                                           static_cast<cudnnConvolutionBwdDataAlgo_t>(c.algo),
                                           workspace, c.workspace, &zero, d.x.desc, dx),
              "conv2d_backward_data: cudnnConvolutionBackwardData");
}

void conv2d_backward_weight(const ConvGeometry& g, DType dtype, const void* x, const void* dy,
                            void* dw, GpuScratch& scratch, int device, void* stream) {
  cudnnHandle_t h = cudnn_handle(stream, device);
  ConvDescriptors d(g, dtype);
  const AlgoChoice c = choose(ConvPass::kBackwardFilter, device, g, dtype, [&] {
    std::array<cudnnConvolutionBwdFilterAlgoPerf_t, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT>
        perfs{};
    int count = 0;
    check_cudnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                    h, d.x.desc, d.y.desc, d.conv.desc, d.w.desc, static_cast<int>(perfs.size()),
                    &count, perfs.data()),
                "conv2d_backward_weight: cudnnGetConvolutionBackwardFilterAlgorithm_v7");
    AlgoChoice choice = pick(perfs, count, ConvPass::kBackwardFilter, device, g, dtype);
    d.conv.set_math(choice.math);
    check_cudnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(
                    h, d.x.desc, d.y.desc, d.conv.desc, d.w.desc,
                    static_cast<cudnnConvolutionBwdFilterAlgo_t>(choice.algo), &choice.workspace),
                "conv2d_backward_weight: cudnnGetConvolutionBackwardFilterWorkspaceSize");
    return choice;
  });
  d.conv.set_math(c.math);
  void* workspace = scratch.get(c.workspace);
  const float one = 1.f;
  const float zero = 0.f;
  check_cudnn(cudnnConvolutionBackwardFilter(h, &one, d.x.desc, x, d.y.desc, dy, d.conv.desc,
                                             static_cast<cudnnConvolutionBwdFilterAlgo_t>(c.algo),
                                             workspace, c.workspace, &zero, d.w.desc, dw),
              "conv2d_backward_weight: cudnnConvolutionBackwardFilter");
}

}  // namespace tagflow::detail::gpu_kernels
