#include "tools/selftest_references.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace tagflow::tools {

/// out[i] = f(a[...], b[...]) under NumPy broadcasting.
Values broadcast2(const Values& a, const Shape& as, const Values& b, const Shape& bs,
                  const std::function<double(double, double)>& f) {
  const Shape out = broadcast_shapes(as, bs, "selftest reference");
  Values y(static_cast<std::size_t>(out.size()));
  for (std::int64_t flat = 0; flat < out.size(); ++flat) {
    std::int64_t rest = flat;
    std::int64_t ia = 0, ib = 0, ma = 1, mb = 1;
    for (int d = out.ndim() - 1; d >= 0; --d) {
      const std::int64_t index = rest % out[d];
      rest /= out[d];
      const int da = d - (out.ndim() - as.ndim());
      const int db = d - (out.ndim() - bs.ndim());
      if (da >= 0) {
        ia += (as[da] == 1 ? 0 : index) * ma;
        ma *= as[da];
      }
      if (db >= 0) {
        ib += (bs[db] == 1 ? 0 : index) * mb;
        mb *= bs[db];
      }
    }
    y[static_cast<std::size_t>(flat)] =
        f(a[static_cast<std::size_t>(ia)], b[static_cast<std::size_t>(ib)]);
  }
  return y;
}

Values map1(const Values& x, const std::function<double(double)>& f) {
  Values y(x.size());
  std::transform(x.begin(), x.end(), y.begin(), f);
  return y;
}

/// Folds axis `axis` of `x` (shape `s`): out[o, i] = finish(fold(x[o, k, i] over k), n).
Values reduce_axis(const Values& x, const Shape& s, int axis, double init,
                   const std::function<double(double, double)>& fold,
                   const std::function<double(double, std::int64_t)>& finish) {
  std::int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.ndim(); ++d) inner *= s[d];
  const std::int64_t n = s[axis];
  Values y(static_cast<std::size_t>(outer * inner));
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t i = 0; i < inner; ++i) {
      double acc = init;
      for (std::int64_t k = 0; k < n; ++k)
        acc = fold(acc, x[static_cast<std::size_t>((o * n + k) * inner + i)]);
      y[static_cast<std::size_t>(o * inner + i)] = finish(acc, n);
    }
  }
  return y;
}

Values all_of(const Values& x, double init, const std::function<double(double, double)>& fold,
              const std::function<double(double, std::int64_t)>& finish) {
  double acc = init;
  for (double v : x) acc = fold(acc, v);
  return {finish(acc, static_cast<std::int64_t>(x.size()))};
}

Values matmul(const Values& a, const Values& b, std::int64_t m, std::int64_t k, std::int64_t n,
              std::size_t a_offset, std::size_t b_offset) {
  Values c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double total = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        total += a[a_offset + static_cast<std::size_t>(i * k + p)] *
                 b[b_offset + static_cast<std::size_t>(p * n + j)];
      }
      c[static_cast<std::size_t>(i * n + j)] = total;
    }
  }
  return c;
}

/// x permuted: out axis d is x's axis perm[d].
Values permute(const Values& x, const Shape& s, const std::vector<int>& perm) {
  Shape out;
  for (int p : perm) out.push_back(s[p]);
  std::vector<std::int64_t> in_strides(static_cast<std::size_t>(s.ndim()), 1);
  for (int d = s.ndim() - 2; d >= 0; --d) {
    in_strides[static_cast<std::size_t>(d)] =
        in_strides[static_cast<std::size_t>(d + 1)] * s[d + 1];
  }
  Values y(static_cast<std::size_t>(out.size()));
  for (std::int64_t flat = 0; flat < out.size(); ++flat) {
    std::int64_t rest = flat, source = 0;
    for (int d = out.ndim() - 1; d >= 0; --d) {
      source +=
          (rest % out[d]) * in_strides[static_cast<std::size_t>(perm[static_cast<std::size_t>(d)])];
      rest /= out[d];
    }
    y[static_cast<std::size_t>(flat)] = x[static_cast<std::size_t>(source)];
  }
  return y;
}

/// Softmax (or its log) along the last axis of a (rows, columns) matrix.
Values softmax_rows(const Values& x, const Shape& s, bool log_of) {
  const std::int64_t cols = s[s.ndim() - 1];
  const std::int64_t rows = cols == 0 ? 0 : s.size() / cols;
  Values y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    const auto row = static_cast<std::size_t>(r * cols);
    double largest = -std::numeric_limits<double>::infinity();
    for (std::int64_t c = 0; c < cols; ++c)
      largest = std::max(largest, x[row + static_cast<std::size_t>(c)]);
    double total = 0;
    for (std::int64_t c = 0; c < cols; ++c)
      total += std::exp(x[row + static_cast<std::size_t>(c)] - largest);
    for (std::int64_t c = 0; c < cols; ++c) {
      const double shifted = x[row + static_cast<std::size_t>(c)] - largest;
      y[row + static_cast<std::size_t>(c)] =
          log_of ? shifted - std::log(total) : std::exp(shifted) / total;
    }
  }
  return y;
}

/// Two inputs one after the other: concat along axis 0, and stack.
Values both_in_order(const std::vector<Values>& x, const std::vector<Shape>& /*shapes*/) {
  Values y = x[0];
  y.insert(y.end(), x[1].begin(), x[1].end());
  return y;
}

Values conv_reference(const Values& x, const Shape& xs, const Values& w, const Shape& ws,
                      const Values& b, int stride, int pad) {
  const std::int64_t n = xs[0], c = xs[1], h = xs[2], wd = xs[3];
  const std::int64_t o = ws[0], kh = ws[2], kw = ws[3];
  const std::int64_t oh = (h + 2 * pad - kh) / stride + 1;
  const std::int64_t ow = (wd + 2 * pad - kw) / stride + 1;
  Values y(static_cast<std::size_t>(n * o * oh * ow));
  for (std::int64_t in = 0; in < n; ++in)
    for (std::int64_t oc = 0; oc < o; ++oc)
      for (std::int64_t i = 0; i < oh; ++i)
        for (std::int64_t j = 0; j < ow; ++j) {
          double total = b[static_cast<std::size_t>(oc)];
          for (std::int64_t ic = 0; ic < c; ++ic)
            for (std::int64_t p = 0; p < kh; ++p)
              for (std::int64_t q = 0; q < kw; ++q) {
                const std::int64_t r = i * stride - pad + p, t = j * stride - pad + q;
                if (r < 0 || r >= h || t < 0 || t >= wd) continue;
                total += x[static_cast<std::size_t>(((in * c + ic) * h + r) * wd + t)] *
                         w[static_cast<std::size_t>(((oc * c + ic) * kh + p) * kw + q)];
              }
          y[static_cast<std::size_t>(((in * o + oc) * oh + i) * ow + j)] = total;
        }
  return y;
}

Values pool_reference(const Values& x, const Shape& s, bool max_pool, int k, int stride, int pad) {
  const std::int64_t n = s[0] * s[1], h = s[2], w = s[3];
  const std::int64_t oh = (h + 2 * pad - k) / stride + 1, ow = (w + 2 * pad - k) / stride + 1;
  Values y(static_cast<std::size_t>(n * oh * ow));
  for (std::int64_t plane = 0; plane < n; ++plane)
    for (std::int64_t i = 0; i < oh; ++i)
      for (std::int64_t j = 0; j < ow; ++j) {
        double acc = max_pool ? -std::numeric_limits<double>::infinity() : 0;
        for (std::int64_t p = 0; p < k; ++p)
          for (std::int64_t q = 0; q < k; ++q) {
            const std::int64_t r = i * stride - pad + p, t = j * stride - pad + q;
            if (r < 0 || r >= h || t < 0 || t >= w) continue;  // padding: 0 in averages
            const double v = x[static_cast<std::size_t>((plane * h + r) * w + t)];
            acc = max_pool ? std::max(acc, v) : acc + v;
          }
        y[static_cast<std::size_t>((plane * oh + i) * ow + j)] = max_pool ? acc : acc / (k * k);
      }
  return y;
}

Values batch_norm_reference(const Values& x, const Shape& s, const Values& gamma,
                            const Values& beta) {
  const std::int64_t n = s[0], c = s[1], inner = s.size() / (n * c);
  Values y(x.size());
  for (std::int64_t ch = 0; ch < c; ++ch) {
    double total = 0, squares = 0;
    const auto at = [&](std::int64_t b, std::int64_t i) {
      return static_cast<std::size_t>((b * c + ch) * inner + i);
    };
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < inner; ++i) total += x[at(b, i)];
    const double count = static_cast<double>(n * inner);
    const double mean = total / count;
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < inner; ++i)
        squares += (x[at(b, i)] - mean) * (x[at(b, i)] - mean);
    const double scale = gamma[static_cast<std::size_t>(ch)] / std::sqrt(squares / count + 1e-5);
    for (std::int64_t b = 0; b < n; ++b)
      for (std::int64_t i = 0; i < inner; ++i) {
        y[at(b, i)] = (x[at(b, i)] - mean) * scale + beta[static_cast<std::size_t>(ch)];
      }
  }
  return y;
}

}  // namespace tagflow::tools
