// The CPU batch normalization kernels (Note [Batch normalization on the CPU]).
//
// Note [Batch normalization on the CPU]
// The channels are cut into blocks of about kParallelGrain values and the
// blocks run in parallel; one thread reduces a whole channel, in an order
// that depends only on the shape, so every result has the same bits
// whatever the number of threads. Within a block the input is walked row by
// row (a row: the `spatial` contiguous values of one image and channel), so
// an (N, C) input is read contiguously too. Sums are kept in double: a row
// is summed in kLanes interleaved partial sums (independent additions the
// compiler can vectorize), which are then added to the channel's total.
// The batch variance is computed in one pass from the sums of d and d^2,
// d = x - (the channel's first value): shifting by a value of the channel
// keeps E[d^2] - E[d]^2 free of the cancellation that ruins the textbook
// formula when the mean is large next to the spread.

#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/kernels/batch_norm_kernels.h"
#include "ops/kernels/cpu_parallel.h"

namespace tagflow::detail::cpu_kernels {

namespace {

constexpr int kLanes = 8;

/// Two running sums of one channel.
struct Sums {
  double a = 0, b = 0;
};

/// Calls `body(first, last)` for blocks of channels, in parallel.
template <typename Body>
void for_channel_blocks(const BatchNormShape& s, const Body& body) {
  const std::int64_t per_channel = std::max<std::int64_t>(1, s.per_channel());
  parallel_for_range(s.channels, std::max<std::int64_t>(1, kParallelGrain / per_channel), body);
}

/// Calls `row_fn(c, base)` for every row of the channels in [first, last):
/// the row's values are at [base, base + spatial). Images outer, channels
/// inner: the order of memory.
template <typename RowFn>
void for_each_row(const BatchNormShape& s, std::int64_t first, std::int64_t last,
                  const RowFn& row_fn) {
  for (std::int64_t n = 0; n < s.batch; ++n) {
    for (std::int64_t c = first; c < last; ++c) row_fn(c, (n * s.channels + c) * s.spatial);
  }
}

/// sums[c - first] += the sums of `term(c, i)` (a Sums) over the values i
/// (flat indices) of each channel c in [first, last).
template <typename Term>
void accumulate(const BatchNormShape& s, std::int64_t first, std::int64_t last, Sums* sums,
                const Term& term) {
  for_each_row(s, first, last, [&](std::int64_t c, std::int64_t base) {
    Sums& total = sums[c - first];
    if (s.spatial == 1) {
      const Sums t = term(c, base);
      total.a += t.a;
      total.b += t.b;
      return;
    }
    double lane_a[kLanes] = {};
    double lane_b[kLanes] = {};
    std::int64_t i = 0;
    for (; i + kLanes <= s.spatial; i += kLanes) {
      for (int l = 0; l < kLanes; ++l) {
        const Sums t = term(c, base + i + l);
        lane_a[l] += t.a;
        lane_b[l] += t.b;
      }
    }
    for (int l = 0; i < s.spatial; ++i, ++l) {
      const Sums t = term(c, base + i);
      lane_a[l] += t.a;
      lane_b[l] += t.b;
    }
    for (int l = 0; l < kLanes; ++l) {
      total.a += lane_a[l];
      total.b += lane_b[l];
    }
  });
}

/// y = (x - mean) scale + shift per channel, for the channels in [first, last);
/// the coefficients of channel c are at [c - first].
void normalize(const BatchNormShape& s, std::int64_t first, std::int64_t last, const float* x,
               const float* mean, const float* scale, const float* shift, float* y) {
  for_each_row(s, first, last, [&](std::int64_t c, std::int64_t base) {
    const float mu = mean[c - first];
    const float a = scale[c - first];
    const float b = shift[c - first];
    const float* in = x + base;
    float* out = y + base;
    for (std::int64_t i = 0; i < s.spatial; ++i) out[i] = (in[i] - mu) * a + b;
  });
}

}  // namespace

void batch_norm_forward_training(const BatchNormShape& s, const BatchNormParams& p, const float* x,
                                 const float* gamma, const float* beta, float* y, float* save_mean,
                                 float* save_inv_std, float* running_mean, float* running_var) {
  const auto m = static_cast<double>(s.per_channel());
  const double correction = p.unbiased_running_var ? m / (m - 1) : 1.0;
  for_channel_blocks(s, [&](std::int64_t first, std::int64_t last) {
    const auto k = static_cast<std::size_t>(last - first);
    std::vector<double> shift(k);
    for (std::int64_t c = first; c < last; ++c) {
      shift[static_cast<std::size_t>(c - first)] = x[c * s.spatial];
    }
    std::vector<Sums> sums(k);
    accumulate(s, first, last, sums.data(), [&](std::int64_t c, std::int64_t i) {
      const double d = static_cast<double>(x[i]) - shift[static_cast<std::size_t>(c - first)];
      return Sums{d, d * d};
    });
    std::vector<float> mean(k), scale(k), offset(k);
    for (std::int64_t c = first; c < last; ++c) {
      const auto j = static_cast<std::size_t>(c - first);
      const double shifted_mean = sums[j].a / m;
      const double var = std::max(0.0, sums[j].b / m - shifted_mean * shifted_mean);
      const double batch_mean = shift[j] + shifted_mean;
      const double inv_std = 1.0 / std::sqrt(var + p.eps);
      save_mean[c] = static_cast<float>(batch_mean);
      save_inv_std[c] = static_cast<float>(inv_std);
      running_mean[c] =
          static_cast<float>(p.momentum * running_mean[c] + (1 - p.momentum) * batch_mean);
      running_var[c] =
          static_cast<float>(p.momentum * running_var[c] + (1 - p.momentum) * var * correction);
      mean[j] = save_mean[c];
      scale[j] = static_cast<float>(gamma[c] * inv_std);
      offset[j] = beta[c];
    }
    normalize(s, first, last, x, mean.data(), scale.data(), offset.data(), y);
  });
}

void batch_norm_forward_inference(const BatchNormShape& s, const BatchNormParams& p, const float* x,
                                  const float* gamma, const float* beta, const float* running_mean,
                                  const float* running_var, float* y, float* save_mean,
                                  float* save_inv_std) {
  for_channel_blocks(s, [&](std::int64_t first, std::int64_t last) {
    const auto k = static_cast<std::size_t>(last - first);
    std::vector<float> mean(k), scale(k), offset(k);
    for (std::int64_t c = first; c < last; ++c) {
      const auto j = static_cast<std::size_t>(c - first);
      const double inv_std = 1.0 / std::sqrt(static_cast<double>(running_var[c]) + p.eps);
      if (save_mean != nullptr) {
        save_mean[c] = running_mean[c];
        save_inv_std[c] = static_cast<float>(inv_std);
      }
      mean[j] = running_mean[c];
      scale[j] = static_cast<float>(gamma[c] * inv_std);
      offset[j] = beta[c];
    }
    normalize(s, first, last, x, mean.data(), scale.data(), offset.data(), y);
  });
}

void batch_norm_backward(const BatchNormShape& s, const BatchNormParams& /*p*/,
                         bool batch_statistics, const float* x, const float* dy, const float* gamma,
                         const float* save_mean, const float* save_inv_std, float* dx,
                         float* dgamma, float* dbeta) {
  const auto m = static_cast<double>(s.per_channel());
  for_channel_blocks(s, [&](std::int64_t first, std::int64_t last) {
    const auto k = static_cast<std::size_t>(last - first);
    // Sums of dy and of dy (x - mean), per channel.
    std::vector<Sums> sums(k);
    accumulate(s, first, last, sums.data(), [&](std::int64_t c, std::int64_t i) {
      const double g = dy[i];
      return Sums{g, g * (static_cast<double>(x[i]) - save_mean[c])};
    });
    // dx = a (dy - b - (x - mean) k): Note [Gradient of batch normalization].
    std::vector<float> a(k), b(k), slope(k);
    for (std::int64_t c = first; c < last; ++c) {
      const auto j = static_cast<std::size_t>(c - first);
      const double inv_std = save_inv_std[c];
      const double sum_dy = sums[j].a;
      const double sum_dy_xhat = sums[j].b * inv_std;
      dbeta[c] = static_cast<float>(sum_dy);
      dgamma[c] = static_cast<float>(sum_dy_xhat);
      a[j] = static_cast<float>(gamma[c] * inv_std);
      b[j] = batch_statistics ? static_cast<float>(sum_dy / m) : 0.f;
      slope[j] = batch_statistics ? static_cast<float>(sum_dy_xhat * inv_std / m) : 0.f;
    }
    for_each_row(s, first, last, [&](std::int64_t c, std::int64_t base) {
      const auto j = static_cast<std::size_t>(c - first);
      const float mu = save_mean[c];
      const float aj = a[j];
      const float bj = b[j];
      const float kj = slope[j];
      const float* xin = x + base;
      const float* g = dy + base;
      float* out = dx + base;
      if (!batch_statistics) {
        for (std::int64_t i = 0; i < s.spatial; ++i) out[i] = aj * g[i];
      } else {
        for (std::int64_t i = 0; i < s.spatial; ++i) {
          out[i] = aj * (g[i] - bj - (xin[i] - mu) * kj);
        }
      }
    });
  });
}

}  // namespace tagflow::detail::cpu_kernels
