#pragma once
// The convolution in double precision, for the tests of conv2d and of its
// kernels: direct loops over every term, with the sums of the terms'
// magnitudes for the rounding bounds.

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "tagflow/tagflow.h"

namespace tagflow::testing {

using Values = std::vector<double>;

/// One convolution of a test: input and weight shapes, options, bias or not.
struct ConvCase {
  std::string name;
  Shape x, w;
  Conv2DOptions options;
  bool bias = true;
};

/// The output extents, as PyTorch computes them.
inline Shape output_shape(const Shape& x, const Shape& w, const Conv2DOptions& o) {
  const auto extent = [&](int axis) {
    const std::int64_t span = std::int64_t{o.dilation[axis]} * (w[2 + axis] - 1) + 1;
    return (x[2 + axis] + 2 * o.padding[axis] - span) / o.stride[axis] + 1;
  };
  return Shape{x[0], w[0], extent(0), extent(1)};
}

/// The convolution in double, seven loops deep; `magnitude` (when given)
/// receives sum |x w| + |b| per output, for the rounding bound.
inline Values reference_conv(const Values& x, const Shape& xs, const Values& w, const Shape& ws,
                             const Values* b, const Conv2DOptions& o, Values* magnitude = nullptr) {
  const Shape ys = output_shape(xs, ws, o);
  const std::int64_t group_in = ws[1];
  const std::int64_t group_out = ws[0] / o.groups;
  Values y(static_cast<std::size_t>(ys.size()));
  if (magnitude != nullptr) magnitude->assign(y.size(), 0);
  std::size_t k = 0;
  for (std::int64_t n = 0; n < ys[0]; ++n) {
    for (std::int64_t oc = 0; oc < ys[1]; ++oc) {
      for (std::int64_t oh = 0; oh < ys[2]; ++oh) {
        for (std::int64_t ow = 0; ow < ys[3]; ++ow, ++k) {
          double sum = b != nullptr ? (*b)[static_cast<std::size_t>(oc)] : 0;
          double mag = std::abs(sum);
          for (std::int64_t c = 0; c < group_in; ++c) {
            const std::int64_t ic = oc / group_out * group_in + c;
            for (std::int64_t i = 0; i < ws[2]; ++i) {
              for (std::int64_t j = 0; j < ws[3]; ++j) {
                const std::int64_t ih = oh * o.stride[0] - o.padding[0] + i * o.dilation[0];
                const std::int64_t iw = ow * o.stride[1] - o.padding[1] + j * o.dilation[1];
                if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
                const double t =
                    x[static_cast<std::size_t>(((n * xs[1] + ic) * xs[2] + ih) * xs[3] + iw)] *
                    w[static_cast<std::size_t>(((oc * ws[1] + c) * ws[2] + i) * ws[3] + j)];
                sum += t;
                mag += std::abs(t);
              }
            }
          }
          y[k] = sum;
          if (magnitude != nullptr) (*magnitude)[k] = mag;
        }
      }
    }
  }
  return y;
}

/// The gradients of sum(conv2d(x, w) * dy) in double: dx and dw, with the
/// sums of the absolute values of their terms (for the tolerance).
struct ReferenceGradients {
  Values dx, dx_magnitude, dw, dw_magnitude;
};
inline ReferenceGradients reference_conv_gradients(const Values& x, const Shape& xs,
                                                   const Values& w, const Shape& ws,
                                                   const Values& dy, const Conv2DOptions& o) {
  const Shape ys = output_shape(xs, ws, o);
  const std::int64_t group_in = ws[1];
  const std::int64_t group_out = ws[0] / o.groups;
  ReferenceGradients r;
  r.dx.assign(x.size(), 0);
  r.dx_magnitude.assign(x.size(), 0);
  r.dw.assign(w.size(), 0);
  r.dw_magnitude.assign(w.size(), 0);
  for (std::int64_t n = 0; n < ys[0]; ++n) {
    for (std::int64_t oc = 0; oc < ys[1]; ++oc) {
      for (std::int64_t oh = 0; oh < ys[2]; ++oh) {
        for (std::int64_t ow = 0; ow < ys[3]; ++ow) {
          const double g =
              dy[static_cast<std::size_t>(((n * ys[1] + oc) * ys[2] + oh) * ys[3] + ow)];
          for (std::int64_t c = 0; c < group_in; ++c) {
            const std::int64_t ic = oc / group_out * group_in + c;
            for (std::int64_t i = 0; i < ws[2]; ++i) {
              for (std::int64_t j = 0; j < ws[3]; ++j) {
                const std::int64_t ih = oh * o.stride[0] - o.padding[0] + i * o.dilation[0];
                const std::int64_t iw = ow * o.stride[1] - o.padding[1] + j * o.dilation[1];
                if (ih < 0 || ih >= xs[2] || iw < 0 || iw >= xs[3]) continue;
                const auto xi =
                    static_cast<std::size_t>(((n * xs[1] + ic) * xs[2] + ih) * xs[3] + iw);
                const auto wi =
                    static_cast<std::size_t>(((oc * ws[1] + c) * ws[2] + i) * ws[3] + j);
                r.dx[xi] += w[wi] * g;
                r.dx_magnitude[xi] += std::abs(w[wi] * g);
                r.dw[wi] += x[xi] * g;
                r.dw_magnitude[wi] += std::abs(x[xi] * g);
              }
            }
          }
        }
      }
    }
  }
  return r;
}

}  // namespace tagflow::testing
