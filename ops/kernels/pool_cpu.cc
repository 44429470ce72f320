// The CPU pooling kernels: direct loops, one (image, channel) plane per
// task, so each output (and, backward, each input-gradient) element is
// written by exactly one task in a fixed order: the same bits whatever the
// number of threads.

#include <algorithm>
#include <cmath>
#include <limits>

#include "tagflow/ops/kernels/cpu_parallel.h"
#include "tagflow/ops/kernels/pool_kernels.h"

namespace tagflow::detail::cpu_kernels {

namespace {

/// The part of a window that lies in the input: [begin, end) along one axis.
struct Span {
  std::int64_t begin, end;
};

inline Span clip_window(std::int64_t start, int kernel, std::int64_t extent) {
  return {std::max<std::int64_t>(start, 0), std::min<std::int64_t>(start + kernel, extent)};
}

/// A window's first maximum and its offset in the plane.
struct Maximum {
  float value;
  std::int64_t offset;
};

/// The window's first maximum; a NaN counts as the maximum (the first NaN).
/// Written so that the compiler emits selects, not branches: window values
/// come in no predictable order, and mispredicted branches would dominate.
inline Maximum first_max(const float* plane, std::int64_t in_w, Span rows, Span cols) {
  Maximum best{-std::numeric_limits<float>::infinity(), rows.begin * in_w + cols.begin};
  bool nan = false;
  for (std::int64_t h = rows.begin; h < rows.end; ++h) {
    const float* row = plane + h * in_w;
    for (std::int64_t w = cols.begin; w < cols.end; ++w) {
      const float v = row[w];
      const bool take = v > best.value;
      best.value = take ? v : best.value;
      best.offset = take ? h * in_w + w : best.offset;
      nan |= std::isnan(v);
    }
  }
  if (nan) [[unlikely]] {
    for (std::int64_t h = rows.begin; h < rows.end; ++h) {
      for (std::int64_t w = cols.begin; w < cols.end; ++w) {
        if (std::isnan(plane[h * in_w + w])) return {plane[h * in_w + w], h * in_w + w};
      }
    }
  }
  return best;
}

/// The divisor of a window's average (Note in pool_kernels.h: windows end
/// inside the padded input, so counting the padding means the full window).
inline float divisor(const PoolGeometry& g, Span rows, Span cols) {
  return g.mode == PoolMode::kAverageExcludePad
             ? static_cast<float>((rows.end - rows.begin) * (cols.end - cols.begin))
             : static_cast<float>(g.kernel_h * g.kernel_w);
}

/// Runs `body(plane_index, rows, cols, output_offset)` for every window of
/// every plane, a block of planes per task.
template <typename Body>
void for_each_window(const PoolGeometry& g, const Body& body) {
  const std::int64_t per_plane = std::max<std::int64_t>(1, g.in_h * g.in_w + g.out_h * g.out_w);
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / per_plane);
  parallel_for_range(g.planes(), grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
        const Span rows = clip_window(oh * g.stride_h - g.pad_h, g.kernel_h, g.in_h);
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          const Span cols = clip_window(ow * g.stride_w - g.pad_w, g.kernel_w, g.in_w);
          body(p, rows, cols, oh * g.out_w + ow);
        }
      }
    }
  });
}

}  // namespace

void pool2d_forward(const PoolGeometry& g, const float* x, float* y) {
  const std::int64_t in_plane = g.in_h * g.in_w;
  const std::int64_t out_plane = g.out_h * g.out_w;
  for_each_window(g, [&](std::int64_t p, Span rows, Span cols, std::int64_t o) {
    const float* plane = x + p * in_plane;
    if (g.mode == PoolMode::kMax) {
      y[p * out_plane + o] = first_max(plane, g.in_w, rows, cols).value;
      return;
    }
    float sum = 0.f;
    for (std::int64_t h = rows.begin; h < rows.end; ++h) {
      for (std::int64_t w = cols.begin; w < cols.end; ++w) sum += plane[h * g.in_w + w];
    }
    y[p * out_plane + o] = sum / divisor(g, rows, cols);
  });
}

void pool2d_backward(const PoolGeometry& g, const float* x, const float* /*y*/, const float* dy,
                     float* dx) {
  const std::int64_t in_plane = g.in_h * g.in_w;
  const std::int64_t out_plane = g.out_h * g.out_w;
  for_each_window(g, [&](std::int64_t p, Span rows, Span cols, std::int64_t o) {
    float* grad = dx + p * in_plane;
    if (o == 0) std::fill(grad, grad + in_plane, 0.f);  // the plane's first window
    const float d = dy[p * out_plane + o];
    if (g.mode == PoolMode::kMax) {
      grad[first_max(x + p * in_plane, g.in_w, rows, cols).offset] += d;
      return;
    }
    const float share = d / divisor(g, rows, cols);
    for (std::int64_t h = rows.begin; h < rows.end; ++h) {
      for (std::int64_t w = cols.begin; w < cols.end; ++w) grad[h * g.in_w + w] += share;
    }
  });
}

}  // namespace tagflow::detail::cpu_kernels
