#pragma once
// The window rules of 2-D pooling, written once and compiled for the CPU
// kernels (pool_cpu.cc) and the CUDA kernels (pool.cu): which part of a
// window lies in the input, which element of a window is its maximum (Note
// [Gradient of max pooling] in ops/pool.h), and the CUDA kernels' bodies
// for one element of max pooling, forward and backward. Internal to ops/.

#include <cstdint>

#include "ops/kernels/host_device.h"
#include "ops/kernels/pool_kernels.h"

namespace tagflow::detail {

/// The part of a window that lies in the input: [begin, end) along one axis.
struct Span {
  std::int64_t begin, end;
};

/// The window starting at `start` (negative in the padding) of `kernel`
/// elements, clipped to an axis of `extent` elements.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Span clip_window(std::int64_t start, int kernel,
                                                    std::int64_t extent) {
  const std::int64_t end = start + kernel;
  return {start > 0 ? start : 0, end < extent ? end : extent};
}

/// The rows of output row `oh`'s windows, clipped to the input.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Span window_rows(const PoolGeometry& g, std::int64_t oh) {
  return clip_window(oh * g.stride_h - g.pad_h, g.kernel_h, g.in_h);
}

/// The columns of output column `ow`'s windows, clipped to the input.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Span window_cols(const PoolGeometry& g, std::int64_t ow) {
  return clip_window(ow * g.stride_w - g.pad_w, g.kernel_w, g.in_w);
}

/// A window's maximum and its offset in the plane.
struct WindowMaximum {
  float value;
  std::int64_t offset;
};

/// The maximum of the window `rows` x `cols` (not empty) of a plane `in_w`
/// wide, by the one rule of max pooling (Note [Gradient of max pooling]):
/// the window's first NaN if it holds one, else its first maximum in
/// row-major order; ties (-0.0 and +0.0 among them) keep the earlier
/// element.
///
/// Two passes so that the common one is comparisons and selects only: a
/// CPU compiler emits no branches for it (window values come in no
/// predictable order, and mispredicted branches would dominate), and GPU
/// threads do not diverge on it. The second pass runs for NaN windows only.
///
/// `T` is float, Half or BFloat16: a 16-bit element is compared as its
/// (exact) float.
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE WindowMaximum window_maximum(const T* plane, std::int64_t in_w,
                                                                Span rows, Span cols) {
  const std::int64_t first = rows.begin * in_w + cols.begin;
  WindowMaximum best{static_cast<float>(plane[first]), first};
  bool nan = false;
  for (std::int64_t h = rows.begin; h < rows.end; ++h) {
    for (std::int64_t w = cols.begin; w < cols.end; ++w) {
      const auto v = static_cast<float>(plane[h * in_w + w]);
      const bool take = v > best.value;  // false for a NaN, and for a tie
      best.value = take ? v : best.value;
      best.offset = take ? h * in_w + w : best.offset;
      nan |= v != v;
    }
  }
  if (nan) [[unlikely]] {
    for (std::int64_t h = rows.begin; h < rows.end; ++h) {
      for (std::int64_t w = cols.begin; w < cols.end; ++w) {
        const auto v = static_cast<float>(plane[h * in_w + w]);
        if (v != v) return {v, h * in_w + w};
      }
    }
  }
  return best;
}

/// The outputs [begin, end) along one axis whose windows hold input index
/// `i`: output o's window starts at o * stride - pad and holds `kernel`
/// indices, so o * stride lies in [i + pad - kernel + 1, i + pad].
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Span windows_holding(std::int64_t i, int kernel, int stride,
                                                        int pad, std::int64_t outputs) {
  const std::int64_t high = i + pad;
  const std::int64_t low = high - kernel + 1;
  const std::int64_t begin = low <= 0 ? 0 : (low + stride - 1) / stride;
  const std::int64_t end = high / stride + 1;
  return {begin, end < outputs ? end : outputs};
}

/// Max pooling's output element `i` (a flat index of y): the maximum of its
/// window. One GPU thread's work.
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float max_pool_output(const PoolGeometry& g, const T* x,
                                                         std::int64_t i) {
  const std::int64_t ow = i % g.out_w;
  const std::int64_t oh = (i / g.out_w) % g.out_h;
  const std::int64_t plane = i / (g.out_w * g.out_h);
  return window_maximum(x + plane * g.in_h * g.in_w, g.in_w, window_rows(g, oh), window_cols(g, ow))
      .value;
}

/// Max pooling's input-gradient element `i` (a flat index of x): the sum of
/// dy over the windows whose maximum is element i. One GPU thread's work.
///
/// Note [Max pooling's gradient, gathered]
/// The CPU kernels scatter: each window adds its dy to its maximum, windows
/// in order (oh, then ow), onto a zeroed plane. A GPU scattering in
/// parallel would need atomics, whose order of additions varies from run to
/// run. Each GPU thread gathers instead: it finds the windows that hold its
/// element (windows_holding), asks each for its maximum (window_maximum)
/// and adds the dy of those that chose it, in the same (oh, ow) order from
/// +0.0. Same windows, same choices, same additions in the same order: the
/// same bits as the CPU, at the price of evaluating a window for each
/// element it holds instead of once (the same count for 2x2 windows at
/// stride 2, where each element lies in one window).
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float max_pool_input_gradient(const PoolGeometry& g, const T* x,
                                                                 const T* dy, std::int64_t i) {
  const std::int64_t w = i % g.in_w;
  const std::int64_t h = (i / g.in_w) % g.in_h;
  const std::int64_t plane = i / (g.in_w * g.in_h);
  const T* px = x + plane * g.in_h * g.in_w;
  const T* pdy = dy + plane * g.out_h * g.out_w;
  const Span ohs = windows_holding(h, g.kernel_h, g.stride_h, g.pad_h, g.out_h);
  const Span ows = windows_holding(w, g.kernel_w, g.stride_w, g.pad_w, g.out_w);
  float sum = 0.f;
  for (std::int64_t oh = ohs.begin; oh < ohs.end; ++oh) {
    const Span rows = window_rows(g, oh);
    for (std::int64_t ow = ows.begin; ow < ows.end; ++ow) {
      if (window_maximum(px, g.in_w, rows, window_cols(g, ow)).offset == h * g.in_w + w) {
        sum += static_cast<float>(pdy[oh * g.out_w + ow]);
      }
    }
  }
  return sum;
}

}  // namespace tagflow::detail
