#include "ops/pool.h"

#include <vector>

#include "ops/autograd.h"
#include "ops/detail/operator_checks.h"
#include "ops/kernels/float_staging.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/kernels/pool_kernels.h"

namespace tagflow {

namespace {

using detail::PoolGeometry;
using detail::PoolMode;
using detail::run_kernel;
namespace cpu_kernels = detail::cpu_kernels;
namespace gpu_kernels = detail::gpu_kernels;

PoolGeometry make_geometry(const char* name, const NDArray& x, PoolType type,
                           const Pool2DOptions& o) {
  detail::check_defined(name, x, 1);
  detail::check_floating(name, x, 1);
  TAGFLOW_CHECK(x.ndim() == 4,
                "{}: expected the input as a 4-D (batch, channels, height, width) array, got ({})",
                name, x.shape().str());
  TAGFLOW_CHECK(
      o.kernel[0] > 0 && o.kernel[1] > 0 && o.stride[0] > 0 && o.stride[1] > 0,
      "{}: expected a positive kernel and stride, got kernel ({}, {}) and stride ({}, {})", name,
      o.kernel[0], o.kernel[1], o.stride[0], o.stride[1]);
  TAGFLOW_CHECK(o.padding[0] >= 0 && o.padding[1] >= 0 && o.padding[0] <= o.kernel[0] / 2 &&
                    o.padding[1] <= o.kernel[1] / 2,
                "{}: expected padding between 0 and half the kernel, got padding ({}, {}) for "
                "kernel ({}, {})",
                name, o.padding[0], o.padding[1], o.kernel[0], o.kernel[1]);
  const Shape& s = x.shape();
  const std::int64_t padded_h = s[2] + 2 * std::int64_t{o.padding[0]};
  const std::int64_t padded_w = s[3] + 2 * std::int64_t{o.padding[1]};
  TAGFLOW_CHECK(s[2] > 0 && s[3] > 0 && padded_h >= o.kernel[0] && padded_w >= o.kernel[1],
                "{}: the kernel ({}x{}) is larger than the padded input ({}x{}: input ({}) with "
                "padding ({}, {}))",
                name, o.kernel[0], o.kernel[1], padded_h, padded_w, s.str(), o.padding[0],
                o.padding[1]);
  PoolGeometry g;
  g.batch = s[0];
  g.channels = s[1];
  g.in_h = s[2];
  g.in_w = s[3];
  g.kernel_h = o.kernel[0];
  g.kernel_w = o.kernel[1];
  g.stride_h = o.stride[0];
  g.stride_w = o.stride[1];
  g.pad_h = o.padding[0];
  g.pad_w = o.padding[1];
  g.out_h = (padded_h - g.kernel_h) / g.stride_h + 1;
  g.out_w = (padded_w - g.kernel_w) / g.stride_w + 1;
  g.mode = type == PoolType::kMax ? PoolMode::kMax
           : o.count_include_pad  ? PoolMode::kAverageIncludePad
                                  : PoolMode::kAverageExcludePad;
  return g;
}

/// dx from x, y and dy (Note [Gradient of max pooling]): an operation of its own.
NDArray backward(const PoolGeometry& g, const NDArray& x, const NDArray& y, const NDArray& dy) {
  const Context ctx = x.context();
  NDArray dx(x.shape(), x.dtype(), ctx);
  if (dx.size() == 0) return dx;
  const DType dtype = x.dtype();
  const void* px = x.raw_data();
  const void* py = y.raw_data();
  const void* pdy = dy.raw_data();
  void* pdx = dx.raw_data();
  const std::int64_t x_size = x.size();
  const std::int64_t y_size = y.size();
  const int device = ctx.index;
  detail::push_operation(
      "pool2d_backward", ctx, {x.var(), y.var(), dy.var()}, {dx.var()}, [=](const RunContext& rc) {
        run_kernel(
            rc, detail::pool_work(g, dtype, 2, 2),
            [=, ctx = rc.ctx] {
              detail::Float32Staging staging(ctx, dtype);
              cpu_kernels::pool2d_backward(g, staging.input(px, x_size), staging.input(py, y_size),
                                           staging.input(pdy, y_size), staging.output(pdx, x_size));
              staging.commit();
            },
            [=](void* stream) {
              gpu_kernels::pool2d_backward(g, dtype, px, py, pdy, pdx, device, stream);
            });
      });
  return dx;
}

}  // namespace

NDArray pool2d(const NDArray& x, PoolType type, const Pool2DOptions& options) {
  const char* name = type == PoolType::kMax ? "max_pool2d" : "avg_pool2d";
  const PoolGeometry g = make_geometry(name, x, type, options);
  NDArray y(Shape{g.batch, g.channels, g.out_h, g.out_w}, x.dtype(), x.context());
  if (y.size() != 0) {
    const DType dtype = x.dtype();
    const void* px = x.raw_data();
    void* py = y.raw_data();
    const std::int64_t x_size = x.size();
    const std::int64_t y_size = y.size();
    const int device = x.context().index;
    detail::push_operation(name, x.context(), {x.var()}, {y.var()}, [=](const RunContext& rc) {
      run_kernel(
          rc, detail::pool_work(g, dtype, 1, 1),
          [=, ctx = rc.ctx] {
            detail::Float32Staging staging(ctx, dtype);
            cpu_kernels::pool2d_forward(g, staging.input(px, x_size), staging.output(py, y_size));
            staging.commit();
          },
          [=](void* stream) { gpu_kernels::pool2d_forward(g, dtype, px, py, device, stream); });
    });
  }
  detail::record(name, y, {&x}, [&] {
    return [g, x = x.detach(), y = y.detach()](const NDArray& dy) {
      return std::vector<NDArray>{backward(g, x, y, dy)};
    };
  });
  return y;
}

NDArray max_pool2d(const NDArray& x, std::array<int, 2> kernel, std::array<int, 2> stride,
                   std::array<int, 2> padding) {
  return pool2d(x, PoolType::kMax, {.kernel = kernel, .stride = stride, .padding = padding});
}

NDArray avg_pool2d(const NDArray& x, std::array<int, 2> kernel, std::array<int, 2> stride,
                   std::array<int, 2> padding, bool count_include_pad) {
  return pool2d(x, PoolType::kAverage,
                {.kernel = kernel,
                 .stride = stride,
                 .padding = padding,
                 .count_include_pad = count_include_pad});
}

}  // namespace tagflow
