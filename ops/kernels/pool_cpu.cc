// The CPU pooling kernels: direct loops, one (image, channel) plane per
// task, so each output (and, backward, each input-gradient) element is
// written by exactly one task in a fixed order: the same bits whatever the
// number of threads. The window rules are pool_functors.h's, shared with
// the CUDA kernels.

#include <algorithm>

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/pool_functors.h"
#include "ops/kernels/pool_kernels.h"

namespace tagflow::detail::cpu_kernels {

namespace {

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
        const Span rows = window_rows(g, oh);
        for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
          body(p, rows, window_cols(g, ow), oh * g.out_w + ow);
        }
      }
    }
  });
}

/// The tutorials' pooling: 2x2 maximum windows, stride 2, no padding. The
/// windows tile the plane, so each is read once from two rows, with no
/// clipping; results are those of window_maximum, bit for bit. Without a
/// NaN its rule is a fold with `>` that keeps the earlier element on a tie;
/// the forward's pairwise maxima, where a tie keeps the left element of a
/// pair and then the top pair, pick that same element, and argmax_2x2 is the
/// fold itself. A row (forward) or window (backward) holding a NaN goes to
/// window_maximum.
bool is_max_2x2(const PoolGeometry& g) {
  return g.mode == PoolMode::kMax && g.kernel_h == 2 && g.kernel_w == 2 && g.stride_h == 2 &&
         g.stride_w == 2 && g.pad_h == 0 && g.pad_w == 0;
}

/// Offset in `row0` (row1 = row0 + in_w) of the first maximum of the window
/// at column `c`, in window_maximum's order: row 0 left, right, row 1 left,
/// right. NaN-free windows only.
inline std::int64_t argmax_2x2(const float* row0, std::int64_t in_w, std::int64_t c) {
  const float* row1 = row0 + in_w;
  float best = row0[c];
  std::int64_t at = c;
  const bool b = row0[c + 1] > best;
  best = b ? row0[c + 1] : best;
  at = b ? c + 1 : at;
  const bool d = row1[c] > best;
  best = d ? row1[c] : best;
  at = d ? in_w + c : at;
  return row1[c + 1] > best ? in_w + c + 1 : at;
}

/// Runs `body(p, oh)` for every output row of every plane, a block of
/// planes per task.
template <typename Body>
void for_each_output_row(const PoolGeometry& g, const Body& body) {
  const std::int64_t per_plane = std::max<std::int64_t>(1, g.in_h * g.in_w);
  const std::int64_t grain = std::max<std::int64_t>(1, kParallelGrain / per_plane);
  parallel_for_range(g.planes(), grain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      for (std::int64_t oh = 0; oh < g.out_h; ++oh) body(p, oh);
    }
  });
}

void max_pool_2x2_forward(const PoolGeometry& g, const float* x, float* y) {
  for_each_output_row(g, [&](std::int64_t p, std::int64_t oh) {
    const float* row0 = x + p * g.in_h * g.in_w + 2 * oh * g.in_w;
    const float* row1 = row0 + g.in_w;
    float* out = y + (p * g.out_h + oh) * g.out_w;
    bool nan = false;
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      const float a = row0[2 * ow], b = row0[2 * ow + 1], c = row1[2 * ow], d = row1[2 * ow + 1];
      const float top = b > a ? b : a;
      const float bottom = d > c ? d : c;
      out[ow] = bottom > top ? bottom : top;
      nan |= (a != a) | (b != b) | (c != c) | (d != d);
    }
    if (nan) [[unlikely]] {  // the rule's first NaN of the window
      for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
        out[ow] = window_maximum(row0, g.in_w, {0, 2}, {2 * ow, 2 * ow + 2}).value;
      }
    }
  });
}

void max_pool_2x2_backward(const PoolGeometry& g, const float* x, const float* dy, float* dx) {
  for_each_output_row(g, [&](std::int64_t p, std::int64_t oh) {
    const std::int64_t plane = p * g.in_h * g.in_w;
    const float* row0 = x + plane + 2 * oh * g.in_w;
    float* grad = dx + plane + 2 * oh * g.in_w;
    const float* d = dy + (p * g.out_h + oh) * g.out_w;
    std::fill(grad, grad + 2 * g.in_w, 0.f);
    for (std::int64_t ow = 0; ow < g.out_w; ++ow) {
      const float* r1 = row0 + g.in_w;
      const std::int64_t c = 2 * ow;
      const bool nan = (row0[c] != row0[c]) | (row0[c + 1] != row0[c + 1]) | (r1[c] != r1[c]) |
                       (r1[c + 1] != r1[c + 1]);
      const std::int64_t at = nan ? window_maximum(row0, g.in_w, {0, 2}, {c, c + 2}).offset
                                  : argmax_2x2(row0, g.in_w, c);
      grad[at] += d[ow];  // 0 + dy, as in the general path (-0.0 becomes +0.0)
    }
    // An odd last row is in no window: its gradient is 0.
    if (oh == g.out_h - 1 && g.in_h > 2 * g.out_h) {
      std::fill(grad + 2 * g.in_w, dx + plane + g.in_h * g.in_w, 0.f);
    }
  });
}

}  // namespace

void pool2d_forward(const PoolGeometry& g, const float* x, float* y) {
  if (is_max_2x2(g)) return max_pool_2x2_forward(g, x, y);
  const std::int64_t in_plane = g.in_h * g.in_w;
  const std::int64_t out_plane = g.out_h * g.out_w;
  for_each_window(g, [&](std::int64_t p, Span rows, Span cols, std::int64_t o) {
    const float* plane = x + p * in_plane;
    if (g.mode == PoolMode::kMax) {
      y[p * out_plane + o] = window_maximum(plane, g.in_w, rows, cols).value;
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
  if (is_max_2x2(g)) return max_pool_2x2_backward(g, x, dy, dx);
  const std::int64_t in_plane = g.in_h * g.in_w;
  const std::int64_t out_plane = g.out_h * g.out_w;
  for_each_window(g, [&](std::int64_t p, Span rows, Span cols, std::int64_t o) {
    float* grad = dx + p * in_plane;
    if (o == 0) std::fill(grad, grad + in_plane, 0.f);  // the plane's first window
    const float d = dy[p * out_plane + o];
    if (g.mode == PoolMode::kMax) {
      grad[window_maximum(x + p * in_plane, g.in_w, rows, cols).offset] += d;
      return;
    }
    const float share = d / divisor(g, rows, cols);
    for (std::int64_t h = rows.begin; h < rows.end; ++h) {
      for (std::int64_t w = cols.begin; w < cols.end; ++w) grad[h * g.in_w + w] += share;
    }
  });
}

}  // namespace tagflow::detail::cpu_kernels
