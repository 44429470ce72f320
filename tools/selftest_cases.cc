#include "tools/selftest_cases.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>

namespace tagflow::tools {

namespace {

using Rng = std::mt19937_64;

std::int64_t draw(Rng& rng, std::int64_t low, std::int64_t high) {
  return std::uniform_int_distribution<std::int64_t>(low, high)(rng);
}

/// An extent: mostly small and odd, sometimes 1, rarely 0 (when allowed).
std::int64_t extent(Rng& rng, bool allow_empty) {
  static constexpr std::array<std::int64_t, 7> kExtents = {1, 2, 3, 5, 7, 13, 17};
  if (allow_empty && draw(rng, 0, 9) == 0) return 0;
  return kExtents[static_cast<std::size_t>(draw(rng, 0, kExtents.size() - 1))];
}

Shape random_shape(Rng& rng, int min_ndim, int max_ndim, bool allow_empty) {
  Shape s;
  const auto ndim = static_cast<int>(draw(rng, min_ndim, max_ndim));
  for (int d = 0; d < ndim; ++d) s.push_back(extent(rng, allow_empty));
  return s;
}

/// Two shapes that broadcast: `a`, and `a` with some extents 1 and maybe
/// fewer leading axes; in either order.
std::vector<Shape> broadcast_pair(Rng& rng) {
  const Shape a = random_shape(rng, 1, 3, true);
  Shape b;
  const auto dropped = static_cast<int>(draw(rng, 0, a.ndim() - 1));
  for (int d = dropped; d < a.ndim(); ++d) b.push_back(draw(rng, 0, 2) == 0 ? 1 : a[d]);
  if (draw(rng, 0, 1) == 0) return {a, b};
  return {b, a};
}

double add(double a, double b) { return a + b; }
double square_add(double a, double b) { return a + b * b; }
double larger(double a, double b) { return std::max(a, b); }
double smaller(double a, double b) { return std::min(a, b); }
double as_is(double v, std::int64_t) { return v; }
double mean_of(double v, std::int64_t n) { return v / static_cast<double>(n); }
double root(double v, std::int64_t) { return std::sqrt(v); }

/// The axis a reduction case reduces: drawn from the shape itself, so that
/// the operator and the reference agree on it and every axis comes up.
int axis_of(const Shape& s) {
  std::int64_t mix = 0;
  for (int d = 0; d < s.ndim(); ++d) mix += s[d] * (d + 1);
  return static_cast<int>(mix % s.ndim());
}

/// A reduction over one axis: the first input, then Shape{axis}.
OperatorCase reduction(const std::string& name, NDArray (*op)(const NDArray&, int, bool),
                       double init, double (*fold)(double, double),
                       double (*finish)(double, std::int64_t), bool allow_empty) {
  return {
      .name = name + " over an axis",
      .shapes = [allow_empty](
                    Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, allow_empty)}; },
      .run =
          [op](const std::vector<NDArray>& in) { return op(in[0], axis_of(in[0].shape()), false); },
      .reference =
          [init, fold, finish](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return reduce_axis(x[0], s[0], axis_of(s[0]), init, fold, finish);
          },
  };
}

/// Class labels i % classes, the same in run and reference.
NDArray labels_for(std::int64_t batch, std::int64_t classes, Context ctx) {
  std::vector<std::int32_t> labels(static_cast<std::size_t>(batch));
  for (std::int64_t i = 0; i < batch; ++i)
    labels[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(i % classes);
  return array(labels, Shape{batch}, ctx);
}

/// The mask of `where`: element i is true when i % 3 == 0.
NDArray mask_for(const Shape& shape, Context ctx) {
  std::vector<float> mask(static_cast<std::size_t>(shape.size()));
  for (std::size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 0 ? 1.f : 0.f;
  return array(mask, shape, ctx);
}

/// (N, C, H, W) with small odd sizes.
Shape image_shape(Rng& rng, std::int64_t min_side) {
  return Shape{draw(rng, 1, 2), draw(rng, 1, 3), draw(rng, min_side, 7), draw(rng, min_side, 7)};
}

/// Conv2D of (N, C, H, W) with (O, C, k, k) and a bias (O).
OperatorCase convolution(int kernel, int stride, int pad) {
  return {
      .name = fmt::format("conv2d {}x{} stride {} padding {}", kernel, kernel, stride, pad),
      .shapes =
          [kernel](Rng& rng) {
            const Shape x = image_shape(rng, kernel);
            const std::int64_t out = draw(rng, 1, 3);
            return std::vector<Shape>{x, Shape{out, x[1], kernel, kernel}, Shape{out}};
          },
      .run =
          [stride, pad](const std::vector<NDArray>& in) {
            return conv2d(in[0], in[1], in[2], {.stride = {stride, stride}, .padding = {pad, pad}});
          },
      .reference =
          [stride, pad](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return conv_reference(x[0], s[0], x[1], s[1], x[2], stride, pad);
          },
      .tolerance = 5e-5,
  };
}

OperatorCase unary(const std::string& name, NDArray (*op)(const NDArray&), double (*f)(double),
                   double low = -2, double high = 2) {
  return {
      .name = name,
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 0, 3, true)}; },
      .run = [op](const std::vector<NDArray>& in) { return op(in[0]); },
      .reference = [f](const std::vector<Values>& x,
                       const std::vector<Shape>&) { return map1(x[0], f); },
      .low = low,
      .high = high,
  };
}

OperatorCase binary(const std::string& name, NDArray (*op)(const NDArray&, const NDArray&),
                    double (*f)(double, double), double low = -2, double high = 2) {
  return {
      .name = name + " (broadcast)",
      .shapes = broadcast_pair,
      .run = [op](const std::vector<NDArray>& in) { return op(in[0], in[1]); },
      .reference =
          [f](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return broadcast2(x[0], s[0], x[1], s[1], f);
          },
      .low = low,
      .high = high,
  };
}

/// The cases of `cases` named in `names`, again in float16 and in
/// bfloat16 (forward only), appended: every input converted before the
/// operator runs, except batch norm's float32 per-channel values. Each
/// result is rounded once from a float32 computation on the same inputs
/// (Note [Half precision arithmetic] in ops/half.h), so two units of the
/// 16-bit type's rounding cover it.
void add_half_precision_cases(std::vector<OperatorCase>& cases) {
  static const char* const kNames[] = {"exp",
                                       "tanh",
                                       "add (broadcast)",
                                       "multiply (broadcast)",
                                       "divide (broadcast)",
                                       "sum of all",
                                       "mean over an axis",
                                       "softmax (last axis)",
                                       "softmax_cross_entropy",
                                       "dot (m, k) x (k, n)",
                                       "conv2d 3x3 stride 1 padding 1",
                                       "max_pool2d 2x2 stride 2",
                                       "avg_pool2d 3x3 stride 1 padding 1",
                                       "batch_norm (training statistics)"};
  std::vector<OperatorCase> half;
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const char* name : kNames) {
      const auto it = std::find_if(cases.begin(), cases.end(),
                                   [&](const OperatorCase& c) { return c.name == name; });
      TAGFLOW_CHECK(it != cases.end(),
                    "selftest: expected an operator case named \"{}\" to check in 16 bits, "
                    "found none (renamed?)",
                    name);
      OperatorCase c = *it;
      const bool first_only = c.name.starts_with("batch_norm");
      c.name += fmt::format(" in {}", dtype_name(dtype));
      c.run = [run = it->run, dtype, first_only](const std::vector<NDArray>& in) {
        std::vector<NDArray> converted = in;
        for (std::size_t i = 0; i < converted.size() && (i == 0 || !first_only); ++i) {
          converted[i] = in[i].astype(dtype);
        }
        return run(converted);
      };
      c.dtype = dtype;
      c.gradient = false;
      c.tolerance = 2 * (dtype == DType::kFloat16 ? 0x1p-11 : 0x1p-8);
      half.push_back(std::move(c));
    }
  }
  cases.insert(cases.end(), half.begin(), half.end());
}

NDArray plus(const NDArray& a, const NDArray& b) { return a + b; }
NDArray minus(const NDArray& a, const NDArray& b) { return a - b; }
NDArray times(const NDArray& a, const NDArray& b) { return a * b; }
NDArray over(const NDArray& a, const NDArray& b) { return a / b; }

}  // namespace

std::vector<OperatorCase> operator_cases() {
  std::vector<OperatorCase> cases;
  cases.push_back(unary("exp", exp, [](double x) { return std::exp(x); }));
  cases.push_back(unary(
      "log", log, [](double x) { return std::log(x); }, 0.2, 3));
  cases.push_back(unary(
      "sqrt", sqrt, [](double x) { return std::sqrt(x); }, 0.2, 3));
  cases.push_back(unary("square", square, [](double x) { return x * x; }));
  cases.push_back(unary("abs", abs, [](double x) { return std::abs(x); }));
  cases.push_back(unary("negative", negative, [](double x) { return -x; }));
  cases.push_back(unary("relu", relu, [](double x) { return std::max(0.0, x); }));
  cases.push_back(unary("sigmoid", sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }));
  cases.push_back(unary("tanh", tanh, [](double x) { return std::tanh(x); }));
  cases.push_back(binary("add", plus, [](double a, double b) { return a + b; }));
  cases.push_back(binary("subtract", minus, [](double a, double b) { return a - b; }));
  cases.push_back(binary("multiply", times, [](double a, double b) { return a * b; }));
  cases.push_back(binary(
      "divide", over, [](double a, double b) { return a / b; }, 0.5, 2));
  cases.push_back(binary(
      "power", power, [](double a, double b) { return std::pow(a, b); }, 0.5, 2));
  cases.push_back(binary("maximum", maximum, [](double a, double b) { return std::max(a, b); }));
  cases.push_back(binary("minimum", minimum, [](double a, double b) { return std::min(a, b); }));
  cases.push_back({
      .name = "scalar operands (2.5 * a - 1.5, 2 / a, a ** 3)",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, true)}; },
      .run =
          [](const std::vector<NDArray>& in) {
            return (2.5 * in[0] - 1.5) + 2.0 / in[0] + power(in[0], 3.0);
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            return map1(x[0], [](double a) { return (2.5 * a - 1.5) + 2 / a + a * a * a; });
          },
      .low = 0.5,
      .high = 2,
  });
  cases.push_back({
      .name = "sum of all",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, true)}; },
      .run = [](const std::vector<NDArray>& in) { return sum(in[0]); },
      .reference = [](const std::vector<Values>& x,
                      const std::vector<Shape>&) { return all_of(x[0], 0, add, as_is); },
  });
  cases.push_back(reduction("sum", sum, 0, add, as_is, true));
  cases.push_back(reduction("mean", mean, 0, add, mean_of, false));
  cases.push_back(
      reduction("max", max, -std::numeric_limits<double>::infinity(), larger, as_is, false));
  cases.push_back(
      reduction("min", min, std::numeric_limits<double>::infinity(), smaller, as_is, false));
  cases.push_back(reduction("norm", norm, 0, square_add, root, false));
  cases.push_back({
      .name = "argmax over an axis",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, false)}; },
      .run = [](const std::vector<NDArray>& in) { return argmax(in[0], axis_of(in[0].shape())); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            const Shape& shape = s[0];
            const int axis = axis_of(shape);
            std::int64_t outer = 1, inner = 1;
            for (int d = 0; d < axis; ++d) outer *= shape[d];
            for (int d = axis + 1; d < shape.ndim(); ++d) inner *= shape[d];
            Values y(static_cast<std::size_t>(outer * inner));
            for (std::int64_t o = 0; o < outer; ++o)
              for (std::int64_t i = 0; i < inner; ++i) {
                std::int64_t best = 0;
                for (std::int64_t k = 1; k < shape[axis]; ++k) {
                  if (x[0][static_cast<std::size_t>((o * shape[axis] + k) * inner + i)] >
                      x[0][static_cast<std::size_t>((o * shape[axis] + best) * inner + i)]) {
                    best = k;
                  }
                }
                y[static_cast<std::size_t>(o * inner + i)] = static_cast<double>(best);
              }
            return y;
          },
      .gradient = false,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "dot (m, k) x (k, n)",
      .shapes =
          [](Rng& rng) {
            const std::int64_t m = extent(rng, true), k = extent(rng, true), n = extent(rng, true);
            return std::vector<Shape>{Shape{m, k}, Shape{k, n}};
          },
      .run = [](const std::vector<NDArray>& in) { return dot(in[0], in[1]); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return matmul(x[0], x[1], s[0][0], s[0][1], s[1][1]);
          },
      .tolerance = 5e-5,
  });
  cases.push_back({
      .name = "batch_dot (b, m, k) x (b, k, n)",
      .shapes =
          [](Rng& rng) {
            const std::int64_t b = draw(rng, 1, 3), m = extent(rng, false), k = extent(rng, false),
                               n = extent(rng, false);
            return std::vector<Shape>{Shape{b, m, k}, Shape{b, k, n}};
          },
      .run = [](const std::vector<NDArray>& in) { return batch_dot(in[0], in[1]); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            const std::int64_t b = s[0][0], m = s[0][1], k = s[0][2], n = s[1][2];
            Values y;
            for (std::int64_t i = 0; i < b; ++i) {
              const Values part = matmul(x[0], x[1], m, k, n, static_cast<std::size_t>(i * m * k),
                                         static_cast<std::size_t>(i * k * n));
              y.insert(y.end(), part.begin(), part.end());
            }
            return y;
          },
      .tolerance = 5e-5,
  });
  cases.push_back({
      .name = "transpose (axes reversed)",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 4, true)}; },
      .run = [](const std::vector<NDArray>& in) { return transpose(in[0]); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            std::vector<int> perm(static_cast<std::size_t>(s[0].ndim()));
            std::iota(perm.rbegin(), perm.rend(), 0);
            return permute(x[0], s[0], perm);
          },
      .tolerance = 0,
  });
  cases.push_back({
      .name = "softmax (last axis)",
      .shapes =
          [](Rng& rng) {
            return std::vector<Shape>{Shape{extent(rng, true), extent(rng, false)}};
          },
      .run = [](const std::vector<NDArray>& in) { return softmax(in[0]); },
      .reference = [](const std::vector<Values>& x,
                      const std::vector<Shape>& s) { return softmax_rows(x[0], s[0], false); },
  });
  cases.push_back({
      .name = "log_softmax (last axis)",
      .shapes =
          [](Rng& rng) {
            return std::vector<Shape>{Shape{extent(rng, true), extent(rng, false)}};
          },
      .run = [](const std::vector<NDArray>& in) { return log_softmax(in[0]); },
      .reference = [](const std::vector<Values>& x,
                      const std::vector<Shape>& s) { return softmax_rows(x[0], s[0], true); },
  });
  cases.push_back({
      .name = "softmax_cross_entropy",
      .shapes =
          [](Rng& rng) {
            return std::vector<Shape>{Shape{extent(rng, false), extent(rng, false)}};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            const Shape& s = in[0].shape();
            return softmax_cross_entropy(in[0], labels_for(s[0], s[1], in[0].context()));
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            const Values logp = softmax_rows(x[0], s[0], true);
            Values y(static_cast<std::size_t>(s[0][0]));
            for (std::int64_t r = 0; r < s[0][0]; ++r) {
              y[static_cast<std::size_t>(r)] =
                  -logp[static_cast<std::size_t>(r * s[0][1] + r % s[0][1])];
            }
            return y;
          },
  });
  cases.push_back({
      .name = "concat (axis 0)",
      .shapes =
          [](Rng& rng) {
            Shape a = random_shape(rng, 1, 3, true);
            Shape b = a;
            b[0] = extent(rng, true);
            return std::vector<Shape>{a, b};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            return concat({in[0], in[1]}, 0);
          },
      .reference = both_in_order,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "stack (axis 0)",
      .shapes =
          [](Rng& rng) {
            const Shape a = random_shape(rng, 0, 3, true);
            return std::vector<Shape>{a, a};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            return stack({in[0], in[1]}, 0);
          },
      .reference = both_in_order,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "clip to [-0.5, 0.8]",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, true)}; },
      .run = [](const std::vector<NDArray>& in) { return clip(in[0], -0.5, 0.8); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            return map1(x[0], [](double v) { return std::clamp(v, -0.5, 0.8); });
          },
  });
  cases.push_back({
      .name = "where",
      .shapes =
          [](Rng& rng) {
            const Shape s = random_shape(rng, 1, 3, true);
            return std::vector<Shape>{s, s};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            return where(mask_for(in[0].shape(), in[0].context()), in[0], in[1]);
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            Values y(x[0].size());
            for (std::size_t i = 0; i < y.size(); ++i) y[i] = i % 3 == 0 ? x[0][i] : x[1][i];
            return y;
          },
  });
  cases.push_back(convolution(3, 1, 1));
  cases.push_back(convolution(2, 2, 0));
  cases.push_back({
      .name = "max_pool2d 2x2 stride 2",
      .shapes = [](Rng& rng) { return std::vector<Shape>{image_shape(rng, 2)}; },
      .run =
          [](const std::vector<NDArray>& in) {
            return max_pool2d(in[0], {2, 2}, {2, 2});
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return pool_reference(x[0], s[0], true, 2, 2, 0);
          },
  });
  cases.push_back({
      .name = "avg_pool2d 3x3 stride 1 padding 1",
      .shapes = [](Rng& rng) { return std::vector<Shape>{image_shape(rng, 1)}; },
      .run =
          [](const std::vector<NDArray>& in) {
            return avg_pool2d(in[0], {3, 3}, {1, 1}, {1, 1});
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return pool_reference(x[0], s[0], false, 3, 1, 1);
          },
  });
  cases.push_back({
      .name = "batch_norm (training statistics)",
      .shapes =
          [](Rng& rng) {
            const Shape x{draw(rng, 2, 4), draw(rng, 1, 3), draw(rng, 1, 3), draw(rng, 1, 3)};
            return std::vector<Shape>{x, Shape{x[1]}, Shape{x[1]}};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            const Context ctx = in[0].context();
            const Shape channels{in[0].shape()[1]};
            return batch_norm(in[0], in[1], in[2], zeros(channels, ctx), ones(channels, ctx),
                              {.eps = 1e-5, .training = true});
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return batch_norm_reference(x[0], s[0], x[1], x[2]);
          },
      .tolerance = 1e-4,
  });
  cases.push_back({
      .name = "comparisons (broadcast; all six)",
      .shapes = broadcast_pair,
      .run =
          [](const std::vector<NDArray>& in) {
            const NDArray& a = in[0];
            const NDArray& b = in[1];
            return equal(a, b) + 2.0 * not_equal(a, b) + 4.0 * lesser(a, b) +
                   8.0 * lesser_equal(a, b) + 16.0 * greater(a, b) + 32.0 * greater_equal(a, b) +
                   64.0 * equal(a, a);
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            return broadcast2(x[0], s[0], x[1], s[1], [](double a, double b) {
              return (a == b) + 2.0 * (a != b) + 4.0 * (a < b) + 8.0 * (a <= b) + 16.0 * (a > b) +
                     32.0 * (a >= b) + 64.0;
            });
          },
      .gradient = false,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "matmul (b, m, k) x (k, n), batch broadcast",
      .shapes =
          [](Rng& rng) {
            const std::int64_t b = draw(rng, 1, 3), m = extent(rng, false), k = extent(rng, false),
                               n = extent(rng, false);
            return std::vector<Shape>{Shape{b, m, k}, Shape{k, n}};
          },
      .run = [](const std::vector<NDArray>& in) { return matmul(in[0], in[1]); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            const std::int64_t b = s[0][0], m = s[0][1], k = s[0][2], n = s[1][1];
            Values y;
            for (std::int64_t i = 0; i < b; ++i) {
              const Values part = matmul(x[0], x[1], m, k, n, static_cast<std::size_t>(i * m * k));
              y.insert(y.end(), part.begin(), part.end());
            }
            return y;
          },
      .tolerance = 5e-5,
  });
  cases.push_back({
      .name = "one_hot (depth 6, indices truncated)",
      .shapes = [](Rng& rng) { return std::vector<Shape>{Shape{extent(rng, true)}}; },
      .run = [](const std::vector<NDArray>& in) { return one_hot(in[0], 6); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            Values y(x[0].size() * 6, 0.0);
            for (std::size_t i = 0; i < x[0].size(); ++i) {
              const auto index = static_cast<std::int64_t>(std::trunc(x[0][i]));
              if (index >= 0 && index < 6) y[i * 6 + static_cast<std::size_t>(index)] = 1;
            }
            return y;
          },
      .low = -1,
      .high = 7,
      .gradient = false,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "astype float32 to uint8 (truncated, saturated)",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, true)}; },
      .run = [](const std::vector<NDArray>& in) { return in[0].astype(DType::kUInt8); },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            return map1(x[0], [](double v) { return std::clamp(std::trunc(v), 0.0, 255.0); });
          },
      .low = -20,
      .high = 300,
      .gradient = false,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "astype float32 to int32 and back",
      .shapes = [](Rng& rng) { return std::vector<Shape>{random_shape(rng, 1, 3, true)}; },
      .run =
          [](const std::vector<NDArray>& in) {
            return in[0].astype(DType::kInt32).astype(DType::kFloat32);
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            return map1(x[0], [](double v) { return std::trunc(v); });
          },
      .low = -1000,
      .high = 1000,
      .gradient = false,
      .tolerance = 0,
  });
  cases.push_back({
      .name = "views: slice, reshape, expand_dims, squeeze",
      .shapes =
          [](Rng& rng) {
            return std::vector<Shape>{Shape{draw(rng, 2, 7), extent(rng, false)}};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            const std::int64_t rows = in[0].shape()[0];
            return in[0].slice(1, rows).reshape({-1}).expand_dims(0).squeeze(0) * 3.0;
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>& s) {
            Values y(x[0].begin() + s[0][1], x[0].end());
            for (double& v : y) v *= 3;
            return y;
          },
  });
  cases.push_back({
      .name = "sgd_update x3 (momentum, decay, clipping)",
      .shapes =
          [](Rng& rng) {
            const Shape s = random_shape(rng, 1, 2, true);
            return std::vector<Shape>{s, s};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            NDArray weight = in[0].copyto(in[0].context());
            NDArray momentum = zeros_like(weight);
            for (int step = 0; step < 3; ++step) {
              sgd_update(weight, in[1], momentum,
                         {.learning_rate = 0.1,
                          .momentum = 0.9,
                          .weight_decay = 0.01,
                          .rescale_grad = 0.5,
                          .clip_gradient = 0.8});
            }
            return weight;
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            Values w = x[0], m(w.size(), 0.0);
            for (int step = 0; step < 3; ++step) {
              for (std::size_t i = 0; i < w.size(); ++i) {
                const double g = std::clamp(0.5 * x[1][i], -0.8, 0.8) + 0.01 * w[i];
                m[i] = 0.9 * m[i] - 0.1 * g;
                w[i] += m[i];
              }
            }
            return w;
          },
      .gradient = false,
  });
  cases.push_back({
      .name = "adam_update x3 (bias correction, decay)",
      .shapes =
          [](Rng& rng) {
            const Shape s = random_shape(rng, 1, 2, true);
            return std::vector<Shape>{s, s};
          },
      .run =
          [](const std::vector<NDArray>& in) {
            NDArray weight = in[0].copyto(in[0].context());
            NDArray mean = zeros_like(weight);
            NDArray variance = zeros_like(weight);
            for (int step = 1; step <= 3; ++step) {
              adam_update(weight, in[1], mean, variance,
                          {.learning_rate = 0.01, .weight_decay = 0.01}, step);
            }
            return weight;
          },
      .reference =
          [](const std::vector<Values>& x, const std::vector<Shape>&) {
            Values w = x[0], m(w.size(), 0.0), v(w.size(), 0.0);
            for (int t = 1; t <= 3; ++t) {
              const double correction = std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t));
              for (std::size_t i = 0; i < w.size(); ++i) {
                const double g = x[1][i] + 0.01 * w[i];
                m[i] = 0.9 * m[i] + 0.1 * g;
                v[i] = 0.999 * v[i] + 0.001 * g * g;
                w[i] -= 0.01 * correction * m[i] / (std::sqrt(v[i]) + 1e-8);
              }
            }
            return w;
          },
      .gradient = false,
      .tolerance = 1e-4,
  });
  add_half_precision_cases(cases);
  return cases;
}

}  // namespace tagflow::tools
