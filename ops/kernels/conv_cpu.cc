// The CPU convolution kernels (Note [Convolution on the CPU]).
//
// Note [Convolution on the CPU]
// Three ways, chosen per call (TAGFLOW_CPU_CONV): oneDNN's direct kernels
// wherever oneDNN has one better than its reference loops for the geometry
// on this processor (conv_onednn.cc); among those, oneDNN's Winograd
// F(4x4, 3x3) kernels for 3x3 stride-1 layers of at least 14x14 outputs and
// 16 channels (not with TAGFLOW_CPU_CONV=direct); and lowering to matrix
// products for the rest (always, with TAGFLOW_CPU_CONV=im2col). Measured on
// the reference machine (2 cores with AVX-512, float32, ResNet-18's layers
// at batch 128, both cores): the lowering gives 70-145 GFLOP/s forward and
// 35-65 in the two backward passes together; oneDNN's direct kernels
// 260-380 forward and 300 or more backward; Winograd's twice the direct
// kernels' speed on 28x28 outputs of 64 channels and 1.2-1.35 times on
// 14x14 of 128 (slower below). A direct sum stays within float32's bound for
// a sum in any order, (K + 2) 2^-24 of the terms' magnitudes; Winograd's
// transforms round more (within 2e-5 of the magnitudes: see conv_test.cc).
//
// oneDNN: the arrays stay NCHW; each call reorders its inputs into the
// blocked layouts the kernel wants and its output back (the weights once
// per operation). The batch is cut into about 16 calls of at least 2^24
// floating-point operations each, each run by oneDNN on one thread
// (OpenMP's team of one), the calls spread over oneTBB's threads like every
// other kernel's work: so OpenMP's threads never compete with oneTBB's and
// each device's workers for the cores. The weight gradient sums over the
// batch in chunks (at most 16, and at most 64 MiB of partial sums), each
// chunk's sum computed by one call, the partial sums then added in chunk
// order; except on layers of small outputs (8x8 or less) and 128 channels or
// more, whose weights outweigh their outputs: there each call takes a slice
// of the output channels (64 for 3x3 kernels, half of them for 1x1) over
// the whole batch, and writes its slice of the gradient directly. Measured
// as above: ResNet-18's 512-channel 4x4 layer 180 -> 355 GFLOP/s (54 -> 27
// ms), the 256-to-512 stride-2 layer 150 -> 310, the 256-channel 7x7 layer
// 255 -> 350, its 1x1 shortcut 127 -> 160; on 14x14 and larger, slices lose
// to chunks.
//
// Lowering: each (image, group) pair is lowered to a matrix, one row per
// (input channel, tap) and one column per output position (im2col), and
// multiplied by the group's weights with OpenBLAS's sgemm (Note [The CPU
// BLAS] in linalg.cc). A 1x1 convolution with stride 1 and no padding needs
// no lowering: the image already is that matrix. The backward pass for the
// input multiplies by the transposed weights and scatters the columns back
// (col2im). Pairs run in parallel; each writes its own slice of the output,
// so nothing is shared. The weight gradient sums over the batch in a fixed
// number of chunks (a function of the batch size only), each accumulating
// its images in order into its own partial sum, added in chunk order.
//
// Every way cuts the work by the geometry alone, so every result has the
// same bits whatever the number of threads; the ways round differently from
// each other.

#include <algorithm>
#include <atomic>
#include <optional>

#include "engine/engine.h"
#include "ops/kernels/conv_kernels.h"
#ifdef TAGFLOW_HAVE_ONEDNN
#include "ops/kernels/conv_onednn.h"
#endif
#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/cpu_scratch.h"
#include "ops/kernels/gemm_kernels.h"

namespace tagflow::detail::cpu_kernels {

namespace {

/// Chunks of the batch whose weight gradients are summed separately.
constexpr std::int64_t kWeightChunks = 16;

/// Bytes of `n` floats.
std::uint64_t float_bytes(std::int64_t n) { return static_cast<std::uint64_t>(n) * sizeof(float); }

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
    std::optional<CpuScratch> col;
    if (lowered) col.emplace(ctx, float_bytes(g.col_rows() * g.col_cols()));
    for (std::int64_t pair = begin; pair < end; ++pair) {
      body(pair / g.groups, static_cast<int>(pair % g.groups), col ? col->floats() : nullptr);
    }
  });
}

void lowered_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
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

void lowered_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
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

void lowered_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                             float* db, Context ctx) {
  const std::int64_t og = g.group_out_channels();
  const std::int64_t group_in = g.group_in_channels() * g.in_h * g.in_w;
  const std::int64_t group_out = og * g.col_cols();
  const std::int64_t weights = g.weight_size();
  // Each chunk's sums: the weights', then the bias's.
  const std::int64_t sums = weights + (db != nullptr ? g.out_channels : 0);
  if (g.batch == 0) {
    std::fill(dw, dw + weights, 0.f);
    if (db != nullptr) std::fill(db, db + g.out_channels, 0.f);
    return;
  }
  const std::int64_t chunks = std::min(g.batch, kWeightChunks);
  // Chunk 0 sums straight into dw and db; the others into partial sums added after.
  std::optional<CpuScratch> partial;
  if (chunks > 1) partial.emplace(ctx, float_bytes((chunks - 1) * sums));
  const bool lowered = !is_pointwise(g);
  parallel_for_range(chunks, 1, [&](std::int64_t begin, std::int64_t end) {
    std::optional<CpuScratch> col;
    if (lowered) col.emplace(ctx, float_bytes(g.col_rows() * g.col_cols()));
    for (std::int64_t chunk = begin; chunk < end; ++chunk) {
      float* sum = chunk == 0 ? dw : partial->floats() + (chunk - 1) * sums;
      float* bias_sum = db == nullptr ? nullptr : chunk == 0 ? db : sum + weights;
      const std::int64_t first = chunk * g.batch / chunks;
      const std::int64_t last = (chunk + 1) * g.batch / chunks;
      if (bias_sum != nullptr) std::fill(bias_sum, bias_sum + g.out_channels, 0.f);
      for (std::int64_t n = first; n < last; ++n) {
        const float* dyn = dy + n * g.out_image();
        for (int group = 0; group < g.groups; ++group) {
          const float* xg = x + n * g.in_image() + group * group_in;
          if (lowered) im2col(g, xg, col->floats());
          sgemm(false, true, og, g.col_rows(), g.col_cols(), dyn + group * group_out,
                lowered ? col->floats() : xg, n == first ? 0.f : 1.f,
                sum + group * og * g.col_rows());
        }
        if (bias_sum == nullptr) continue;
        for (std::int64_t o = 0; o < g.out_channels; ++o) {
          const float* row = dyn + o * g.col_cols();
          float s = 0;
          for (std::int64_t p = 0; p < g.col_cols(); ++p) s += row[p];
          bias_sum[o] += s;
        }
      }
    }
  });
  if (chunks == 1) return;
  // Element i of the partial sums is dw[i], or db[i - weights] beyond the weights.
  parallel_for_range(sums, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t chunk = 1; chunk < chunks; ++chunk) {
      const float* from = partial->floats() + (chunk - 1) * sums;
      for (std::int64_t i = begin; i < end; ++i) (i < weights ? dw[i] : db[i - weights]) += from[i];
    }
  });
}

std::atomic<int> cpu_conv_override{-1};  // -1: none

#ifdef TAGFLOW_HAVE_ONEDNN
/// True when the oneDNN kernels are to be tried.
bool try_onednn() { return cpu_conv() != CpuConv::kIm2col; }

/// True when they may use Winograd's algorithm.
bool winograd() { return cpu_conv() == CpuConv::kAuto; }
#endif

}  // namespace

CpuConv cpu_conv() {
  const int kind = cpu_conv_override.load(std::memory_order_relaxed);
  return kind < 0 ? Engine::get().config().cpu_conv : static_cast<CpuConv>(kind);
}

void override_cpu_conv(std::optional<CpuConv> kind) {
  cpu_conv_override.store(kind ? static_cast<int>(*kind) : -1, std::memory_order_relaxed);
}

void conv2d_forward(const ConvGeometry& g, const float* x, const float* w, const float* bias,
                    float* y, Context ctx) {
#ifdef TAGFLOW_HAVE_ONEDNN
  if (try_onednn() && onednn::conv2d_forward(g, x, w, bias, y, ctx, winograd())) return;
#endif
  lowered_forward(g, x, w, bias, y, ctx);
}

void conv2d_backward_data(const ConvGeometry& g, const float* w, const float* dy, float* dx,
                          Context ctx) {
#ifdef TAGFLOW_HAVE_ONEDNN
  if (try_onednn() && onednn::conv2d_backward_data(g, w, dy, dx, ctx, winograd())) return;
#endif
  lowered_backward_data(g, w, dy, dx, ctx);
}

void conv2d_backward_weight(const ConvGeometry& g, const float* x, const float* dy, float* dw,
                            float* db, Context ctx) {
#ifdef TAGFLOW_HAVE_ONEDNN
  if (try_onednn() && onednn::conv2d_backward_weight(g, x, dy, dw, db, ctx, winograd())) return;
#endif
  lowered_backward_weight(g, x, dy, dw, db, ctx);
}

}  // namespace tagflow::detail::cpu_kernels
