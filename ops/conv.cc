#include "ops/conv.h"

#include <cstdint>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include "engine/stream.h"
#include "ops/autograd.h"
#include "ops/creation.h"
#include "ops/detail/operator_checks.h"
#include "ops/device.h"
#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/float_staging.h"
#include "ops/kernels/gemm_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/reduce.h"
#include "storage/storage.h"

namespace tagflow {

namespace detail {

GpuScratch::GpuScratch(Stream& stream) : stream_(stream) {}

void* GpuScratch::get(std::uint64_t bytes) {
  if (bytes == 0) return nullptr;
  blocks_.push_back(Storage::get().allocator(stream_.context()).allocate(bytes));
  return blocks_.back().data;
}

GpuScratch::~GpuScratch() {
  if (blocks_.empty()) return;
  // As copy_gpu.cc hands back its staging memory: only once the stream has
  // passed the kernels that use the blocks may another stream get them.
  try {
    const Context ctx = stream_.context();
    for (const MemoryBlock& block : blocks_) {
      stream_.when_finished(stream_.record(),
                            [ctx, block] { Storage::get().allocator(ctx).release(block); });
    }
  } catch (...) {  // NOLINT(bugprone-empty-catch)
    // The stream failed: its kernels may still read the blocks, so they are
    // left allocated rather than handed out again.
  }
}

}  // namespace detail

namespace {

constexpr const char* kName = "conv2d";

using detail::ConvGeometry;
using detail::run_kernel;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

ConvGeometry make_geometry(const NDArray& x, const NDArray& weight, const NDArray& bias,
                           const Conv2DOptions& o) {
  if (bias.defined()) {
    detail::check_same_context(kName, {&x, &weight, &bias});
  } else {
    detail::check_same_context(kName, {&x, &weight});
  }
  detail::check_floating(kName, x, 1);
  detail::check_floating(kName, weight, 2);
  if (bias.defined()) {
    detail::check_floating(kName, bias, 3);
    detail::check_same_dtype(kName, {&x, &weight, &bias});
  } else {
    detail::check_same_dtype(kName, {&x, &weight});
  }
  TAGFLOW_CHECK(x.ndim() == 4,
                "conv2d: expected the input as a 4-D (batch, channels, height, width) array, got "
                "({})",
                x.shape().str());
  TAGFLOW_CHECK(weight.ndim() == 4,
                "conv2d: expected the weight as a 4-D (out_channels, in_channels / groups, "
                "kernel_h, kernel_w) array, got ({})",
                weight.shape().str());
  TAGFLOW_CHECK(o.stride[0] > 0 && o.stride[1] > 0 && o.dilation[0] > 0 && o.dilation[1] > 0,
                "conv2d: expected positive strides and dilations, got stride ({}, {}) and "
                "dilation ({}, {})",
                o.stride[0], o.stride[1], o.dilation[0], o.dilation[1]);
  TAGFLOW_CHECK(o.padding[0] >= 0 && o.padding[1] >= 0,
                "conv2d: expected non-negative padding, got ({}, {})", o.padding[0], o.padding[1]);
  TAGFLOW_CHECK(o.groups > 0, "conv2d: expected a positive number of groups, got {}", o.groups);
  const Shape& xs = x.shape();
  const Shape& ws = weight.shape();
  TAGFLOW_CHECK(xs[1] > 0 && xs[2] > 0 && xs[3] > 0 && weight.size() > 0,
                "conv2d: expected non-empty channel and spatial extents, got input ({}) and "
                "weight ({})",
                xs.str(), ws.str());
  TAGFLOW_CHECK(xs[1] % o.groups == 0 && ws[0] % o.groups == 0,
                "conv2d: the input channels ({}) and output channels ({}) must both be divisible "
                "by groups ({})",
                xs[1], ws[0], o.groups);
  TAGFLOW_CHECK(ws[1] == xs[1] / o.groups,
                "conv2d: the weight ({}) expects {} input channels per group, but the input ({}) "
                "has {} channels in {} group(s), {} per group",
                ws.str(), ws[1], xs.str(), xs[1], o.groups, xs[1] / o.groups);
  if (bias.defined()) {
    TAGFLOW_CHECK(bias.ndim() == 1 && bias.shape()[0] == ws[0],
                  "conv2d: expected a bias of shape ({}), one per output channel, got ({})", ws[0],
                  bias.shape().str());
  }
  TAGFLOW_CHECK(ws[2] <= 0x7fffffff && ws[3] <= 0x7fffffff,
                "conv2d: kernel extents ({}) exceed the 32-bit range", ws.str());
  ConvGeometry g;
  g.batch = xs[0];
  g.in_channels = xs[1];
  g.in_h = xs[2];
  g.in_w = xs[3];
  g.out_channels = ws[0];
  g.kernel_h = static_cast<int>(ws[2]);
  g.kernel_w = static_cast<int>(ws[3]);
  g.stride_h = o.stride[0];
  g.stride_w = o.stride[1];
  g.pad_h = o.padding[0];
  g.pad_w = o.padding[1];
  g.dilation_h = o.dilation[0];
  g.dilation_w = o.dilation[1];
  g.groups = o.groups;
  const std::int64_t span_h = std::int64_t{g.dilation_h} * (g.kernel_h - 1) + 1;
  const std::int64_t span_w = std::int64_t{g.dilation_w} * (g.kernel_w - 1) + 1;
  TAGFLOW_CHECK(
      g.in_h + 2 * std::int64_t{g.pad_h} >= span_h && g.in_w + 2 * std::int64_t{g.pad_w} >= span_w,
      "conv2d: the kernel ({}x{} spanning {}x{} with dilation ({}, {})) is larger than "
      "the padded input ({}x{} with padding ({}, {}))",
      g.kernel_h, g.kernel_w, span_h, span_w, g.dilation_h, g.dilation_w,
      g.in_h + 2 * std::int64_t{g.pad_h}, g.in_w + 2 * std::int64_t{g.pad_w}, g.pad_h, g.pad_w);
  g.out_h = (g.in_h + 2 * std::int64_t{g.pad_h} - span_h) / g.stride_h + 1;
  g.out_w = (g.in_w + 2 * std::int64_t{g.pad_w} - span_w) / g.stride_w + 1;
  // Each image is lowered to a matrix the BLAS and cuDNN index with 32 bits.
  constexpr std::int64_t kBlasMax = std::numeric_limits<std::int32_t>::max();
  TAGFLOW_CHECK(g.out_h <= kBlasMax / g.out_w && g.col_rows() <= kBlasMax &&
                    g.group_out_channels() <= kBlasMax,
                "conv2d: the input ({}) and the weight ({}) give {}x{} output positions, {} "
                "values per position and {} output channels in each of {} group(s): expected at "
                "most 2^31 - 1 of each, the 32-bit range of the BLAS",
                xs.str(), ws.str(), g.out_h, g.out_w, g.col_rows(), g.group_out_channels(),
                g.groups);
  return g;
}

/// dx from the weights and dy: an operation of its own.
NDArray backward_data(const ConvGeometry& g, const NDArray& weight, const NDArray& dy,
                      Context ctx) {
  const DType dtype = dy.dtype();
  NDArray dx(Shape{g.batch, g.in_channels, g.in_h, g.in_w}, dtype, ctx);
  if (dx.size() == 0) return dx;
  const void* pw = weight.raw_data();
  const void* pdy = dy.raw_data();
  void* pdx = dx.raw_data();
  const std::int64_t dy_size = dy.size();
  const std::int64_t dx_size = dx.size();
  const int device = ctx.index;
  detail::push_operation(
      "conv2d_backward_data", ctx, {weight.var(), dy.var()}, {dx.var()}, [=](const RunContext& rc) {
        run_kernel(
            rc, detail::conv_work(g, dtype),
            [=] {
              detail::Float32Staging staging(ctx, dtype);
              cpu_kernels::conv2d_backward_data(g, staging.input(pw, g.weight_size()),
                                                staging.input(pdy, dy_size),
                                                staging.output(pdx, dx_size), ctx);
              staging.commit();
            },
            [=, &rc](void* stream) {
              detail::GpuScratch scratch(*rc.stream);
              gpu_kernels::conv2d_backward_data(g, dtype, pw, pdy, pdx, scratch, device, stream);
            });
      });
  return dx;
}

/// dw from the input and dy, summed over the batch, and db (dy summed per
/// output channel) when `with_bias`: one operation. On real GPUs db is a
/// reduction of its own instead (cuDNN 9 deprecates its bias gradient).
std::pair<NDArray, NDArray> backward_weight(const ConvGeometry& g, const NDArray& x,
                                            const NDArray& dy, Context ctx, bool with_bias) {
  const Shape shape{g.out_channels, g.group_in_channels(), g.kernel_h, g.kernel_w};
  const Shape bias_shape{g.out_channels};
  const DType dtype = x.dtype();
  if (g.batch == 0) {
    return {zeros(shape, dtype, ctx), with_bias ? zeros(bias_shape, dtype, ctx) : NDArray()};
  }
  if (with_bias && is_real_gpu(ctx)) {
    return {backward_weight(g, x, dy, ctx, false).first, sum(dy, {0, 2, 3})};
  }
  NDArray dw(shape, dtype, ctx);
  NDArray db = with_bias ? NDArray(bias_shape, dtype, ctx) : NDArray();
  const void* px = x.raw_data();
  const void* pdy = dy.raw_data();
  void* pdw = dw.raw_data();
  void* pdb = with_bias ? db.raw_data() : nullptr;
  const std::int64_t x_size = x.size();
  const std::int64_t dy_size = dy.size();
  VarList writes = {dw.var()};
  if (with_bias) writes.push_back(db.var());
  const int device = ctx.index;
  detail::push_operation(
      "conv2d_backward_weight", ctx, {x.var(), dy.var()}, writes, [=](const RunContext& rc) {
        run_kernel(
            rc, detail::conv_work(g, dtype),
            [=] {
              detail::Float32Staging staging(ctx, dtype);
              cpu_kernels::conv2d_backward_weight(
                  g, staging.input(px, x_size), staging.input(pdy, dy_size),
                  staging.output(pdw, g.weight_size()),
                  pdb != nullptr ? staging.output(pdb, g.out_channels) : nullptr, ctx);
              staging.commit();
            },
            [=, &rc](void* stream) {
              detail::GpuScratch scratch(*rc.stream);
              gpu_kernels::conv2d_backward_weight(g, dtype, px, pdy, pdw, scratch, device, stream);
            });
      });
  return {dw, db};
}

void record_conv(const ConvGeometry& g, const NDArray& x, const NDArray& weight,
                 const NDArray& bias, NDArray& y) {
  detail::record(kName, y, {&x, &weight, &bias}, [&] {
    // Only the gradients some input needs are computed.
    const bool need_x = x.grad_node() != nullptr;
    const bool need_w = weight.grad_node() != nullptr;
    const bool need_b = bias.defined() && bias.grad_node() != nullptr;
    return [g, need_x, need_w, need_b, x = x.detach(), w = weight.detach()](const NDArray& dy) {
      const Context ctx = dy.context();
      std::vector<NDArray> grads(3);
      if (need_x) grads[0] = backward_data(g, w, dy, ctx);
      if (need_w) {
        std::tie(grads[1], grads[2]) = backward_weight(g, x, dy, ctx, need_b);
      } else if (need_b) {
        grads[2] =
            g.batch == 0 ? zeros(Shape{g.out_channels}, dy.dtype(), ctx) : sum(dy, {0, 2, 3});
      }
      return grads;
    };
  });
}

}  // namespace

NDArray conv2d(const NDArray& x, const NDArray& weight, const NDArray& bias,
               const Conv2DOptions& options) {
  const ConvGeometry g = make_geometry(x, weight, bias, options);
  const DType dtype = x.dtype();
  NDArray y(Shape{g.batch, g.out_channels, g.out_h, g.out_w}, dtype, x.context());
  if (y.size() != 0) {
    const void* px = x.raw_data();
    const void* pw = weight.raw_data();
    const void* pb = bias.defined() ? bias.raw_data() : nullptr;
    void* py = y.raw_data();
    const std::int64_t x_size = x.size();
    const std::int64_t y_size = y.size();
    const Context ctx = x.context();
    const int device = ctx.index;
    VarList reads = {x.var(), weight.var()};
    if (bias.defined()) reads.push_back(bias.var());
    if (!is_real_gpu(ctx)) cpu_kernels::prepare_products();
    detail::push_operation(kName, ctx, reads, {y.var()}, [=](const RunContext& rc) {
      run_kernel(
          rc, detail::conv_work(g, dtype),
          [=] {
            detail::Float32Staging staging(ctx, dtype);
            cpu_kernels::conv2d_forward(g, staging.input(px, x_size),
                                        staging.input(pw, g.weight_size()),
                                        pb != nullptr ? staging.input(pb, g.out_channels) : nullptr,
                                        staging.output(py, y_size), ctx);
            staging.commit();
          },
          [=, &rc](void* stream) {
            detail::GpuScratch scratch(*rc.stream);
            gpu_kernels::conv2d_forward(g, dtype, px, pw, pb, py, scratch, device, stream);
          });
    });
  }
  record_conv(g, x, weight, bias, y);
  return y;
}

}  // namespace tagflow
