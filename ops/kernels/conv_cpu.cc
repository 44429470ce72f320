// The CPU convolution kernels (Note [Convolution on the CPU]).
//
// Note [Convolution on the CPU]
// Each (image, group) pair is lowered to a matrix, one row per (input
// channel, tap) and one column per output position (im2col), and multiplied
// by the group's weights with OpenBLAS's sgemm (Note [The CPU BLAS] in
// linalg.cc). A 1x1 convolution with stride 1 and no padding needs no
// lowering: the image already is that matrix. The backward pass for the
// input multiplies by the transposed weights and scatters the columns back
// (col2im). Pairs run in parallel; each writes its own slice of the output,
// so nothing is shared. The weight gradient sums over the batch: the batch is
// cut into a fixed number of chunks (a function of the batch size only),
// each chunk accumulates its images in order into its own partial sum, and
// the partial sums are added in chunk order. So every result has the same
// bits whatever the number of threads.

#include <algorithm>
#include <optional>

#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/gemm_kernels.h"
#include "storage/storage.h"

namespace tagflow::detail::cpu_kernels {

namespace {

/// Chunks of the batch whose weight gradients are summed separately.
constexpr std::int64_t kWeightChunks = 16;

/// Floats from the pooled allocator of the device a kernel runs for, given
/// back when the kernel is done with them: a lowered image can be far larger
/// than the arrays it comes from, and a request beyond the device's memory
/// or limit throws OutOfMemoryError instead of std::bad_alloc.
class Scratch {
 public:
  Scratch(Context ctx, std::int64_t floats)
      : allocator_(Storage::get().allocator(ctx)),
        block_(allocator_.allocate(static_cast<std::uint64_t>(floats) * sizeof(float))) {}
  ~Scratch() { allocator_.release(block_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* get() const { return static_cast<float*>(block_.data); }

 private:
  Allocator& allocator_;
  MemoryBlock block_;
};

/// True when an image's group already is its lowered matrix.
bool is_pointwise(const ConvGeometry& g) {
  return g.kernel_h == 1 && g.kernel_w == 1 && g.stride_h == 1 && g.stride_w == 1 && g.pad_h == 0 &&
         g.pad_w == 0;
}

/// A run of output positions [begin, end) along one axis.
struct Valid {
  std::int64_t begin, end;
};

/// The output positions whose tap, at `offset` from the output position
/// times the stride, lands inside an input axis of `extent`:
/// 0 <= o * stride + offset < extent, for o in [0, outputs).
Valid valid_outputs(std::int64_t offset, int stride, std::int64_t extent, std::int64_t outputs) {
  const auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  const std::int64_t begin = offset >= 0 ? 0 : ceil_div(-offset, stride);
  const std::int64_t end = extent - offset <= 0 ? 0 : ceil_div(extent - offset, stride);
  return {std::min(begin, outputs), std::max(std::min(end, outputs), std::min(begin, outputs))};
}

/// Calls `row_fn(at, input_row, offset, valid)` for every (channel, tap,
/// output row) of one group's planes at `x` (const or not): `at` is where
/// the lowered row's segment for that output row starts in the lowered
/// matrix (out_w values), `input_row` the input row the tap reads (null when
/// it lies in the padding), and output column `ow` in `valid` reads
/// `input_row[ow * stride_w + offset]`.
template <typename T, typename RowFn>
void for_each_tap_row(const ConvGeometry& g, T* x, const RowFn& row_fn) {
  const std::int64_t channels = g.group_in_channels();
  for (std::int64_t c = 0; c < channels; ++c) {
    T* plane = x + c * g.in_h * g.in_w;
    for (int i = 0; i < g.kernel_h; ++i) {
      for (int j = 0; j < g.kernel_w; ++j) {
        const std::int64_t row = ((c * g.kernel_h + i) * g.kernel_w + j) * g.col_cols();
        const std::int64_t offset = std::int64_t{j} * g.dilation_w - g.pad_w;
        const Valid valid = valid_outputs(offset, g.stride_w, g.in_w, g.out_w);
        for (std::int64_t oh = 0; oh < g.out_h; ++oh) {
          const std::int64_t ih = oh * g.stride_h - g.pad_h + std::int64_t{i} * g.dilation_h;
          T* input_row = ih >= 0 && ih < g.in_h ? plane + ih * g.in_w : nullptr;
          row_fn(row + oh * g.out_w, input_row, offset, valid);
        }
      }
    }
  }
}

/// Lowers one group's planes at `x` into `col` (col_rows x col_cols).
void im2col(const ConvGeometry& g, const float* x, float* col) {
  const std::int64_t stride = g.stride_w;
  for_each_tap_row(g, x, [&](std::int64_t at, const float* in, std::int64_t offset, Valid valid) {
    float* out = col + at;
    if (in == nullptr) {
      std::fill(out, out + g.out_w, 0.f);
      return;
    }
    std::fill(out, out + valid.begin, 0.f);
    if (stride == 1) {
      std::copy(in + (valid.begin + offset), in + (valid.end + offset), out + valid.begin);
    } else {
      for (std::int64_t ow = valid.begin; ow < valid.end; ++ow) out[ow] = in[ow * stride + offset];
    }
    std::fill(out + valid.end, out + g.out_w, 0.f);
  });
}

/// Adds the columns of `col` back to the input positions they were lowered
/// from; `x` (one group's planes) is overwritten.
void col2im(const ConvGeometry& g, const float* col, float* x) {
  std::fill(x, x + g.group_in_channels() * g.in_h * g.in_w, 0.f);
  const std::int64_t stride = g.stride_w;
  for_each_tap_row(g, x, [&](std::int64_t at, float* out, std::int64_t offset, Valid valid) {
    if (out == nullptr) return;
    const float* from = col + at;
    if (stride == 1) {
      float* to = out + (valid.begin + offset);  // in the row, by the choice of valid
      for (std::int64_t k = 0; k < valid.end - valid.begin; ++k) to[k] += from[valid.begin + k];
    } else {
      for (std::int64_t ow = valid.begin; ow < valid.end; ++ow)
        out[ow * stride + offset] += from[ow];
    }
  });
}

/// Calls `body(image, group, col)` for every pair, in parallel, with a
/// lowered-image buffer per block of pairs (unused for pointwise ones).
template <typename Body>
void for_each_image_group(const ConvGeometry& g, Context ctx, const Body& body) {
  const std::int64_t pairs = g.batch * g.groups;
  const std::int64_t work =
      std::max<std::int64_t>(1, g.group_out_channels() * g.col_rows() * g.col_cols());
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / work);
  const bool lowered = !is_pointwise(g);
  parallel_for_range(pairs, grain, [&](std::int64_t begin, std::int64_t end) {
    std::optional<Scratch> col;
    if (lowered) col.emplace(ctx, g.col_rows() * g.col_cols());
    for (std::int64_t pair = begin; pair < end; ++pair) {
      body(pair / g.groups, static_cast<int>(pair % g.groups), col ? col->get() : nullptr);
    }
  });
}

}  // namespace

void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, Context ctx) {
  const std::int64_t og = g.group_out_channels();
  const std::int64_t group_in = g.group_in_channels() * g.in_h * g.in_w;
  const std::int64_t group_out = og * g.col_cols();
  for_each_image_group(g, ctx, [&](std::int64_t n, int group, float* col) {
    const float* xg = x + n * g.in_image() + group * group_in;
    float* yg = y + n * g.out_image() + group * group_out;
    if (col != nullptr) im2col(g, xg, col);
    sgemm(false, false, og, g.col_cols(), g.col_rows(), w + group * og * g.col_rows(),
          col != nullptr ? col : xg, 0.f, yg);
    if (bias == nullptr) return;
    for (std::int64_t o = 0; o < og; ++o) {
      const float b = bias[group * og + o];
      float* row = yg + o * g.col_cols();
      for (std::int64_t p = 0; p < g.col_cols(); ++p) row[p] += b;
    }
  });
}

void conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          Context ctx) {
  const std::int64_t og = g.group_out_channels();
  const std::int64_t group_in = g.group_in_channels() * g.in_h * g.in_w;
  const std::int64_t group_out = og * g.col_cols();
  for_each_image_group(g, ctx, [&](std::int64_t n, int group, float* col) {
    float* dxg = dx + n * g.in_image() + group * group_in;
    const float* dyg = dy + n * g.out_image() + group * group_out;
    sgemm(true, false, g.col_rows(), g.col_cols(), og, w + group * og * g.col_rows(), dyg, 0.f,
          col != nullptr ? col : dxg);
    if (col != nullptr) col2im(g, col, dxg);
  });
}

void conv2d_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                            Context ctx) {
  const std::int64_t og = g.group_out_channels();
  const std::int64_t group_in = g.group_in_channels() * g.in_h * g.in_w;
  const std::int64_t group_out = og * g.col_cols();
  const std::int64_t weights = g.weight_size();
  if (g.batch == 0) {
    std::fill(dw, dw + weights, 0.f);
    return;
  }
  const std::int64_t chunks = std::min(g.batch, kWeightChunks);
  // Chunk 0 sums straight into dw; the others into partial sums added after.
  std::optional<Scratch> partial;
  if (chunks > 1) partial.emplace(ctx, (chunks - 1) * weights);
  const bool lowered = !is_pointwise(g);
  parallel_for_range(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    std::optional<Scratch> col;
    if (lowered) col.emplace(ctx, g.col_rows() * g.col_cols());
    for (std::int64_t chunk = begin; chunk < end; ++chunk) {
      float* sum = chunk == 0 ? dw : partial->get() + (chunk - 1) * weights;
      const std::int64_t first = chunk * g.batch / chunks;
      const std::int64_t last = (chunk + 1) * g.batch / chunks;
      for (std::int64_t n = first; n < last; ++n) {
        for (int group = 0; group < g.groups; ++group) {
          const float* xg = x + n * g.in_image() + group * group_in;
          if (lowered) im2col(g, xg, col->get());
          sgemm(false, true, og, g.col_rows(), g.col_cols(),
                dy + n * g.out_image() + group * group_out, lowered ? col->get() : xg,
                n == first ? 0.f : 1.f, sum + group * og * g.col_rows());
        }
      }
    }
  });
  if (chunks == 1) return;
  parallel_for_range(weights, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t chunk = 1; chunk < chunks; ++chunk) {
      const float* from = partial->get() + (chunk - 1) * weights;
      for (std::int64_t i = begin; i < end; ++i) dw[i] += from[i];
    }
  });
}

}  // namespace tagflow::detail::cpu_kernels
