#pragma once
// The double-precision references of `tagflow selftest` (selftest_cases.cc):
// plain loops over row-major values, written apart from tagflow's kernels so
// that a wrong kernel cannot also be wrong here.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "ops/shape.h"

namespace tagflow::tools {

using Values = std::vector<double>;

/// out[i] = f(a[...], b[...]) under NumPy broadcasting.
Values broadcast2(const Values& a, const Shape& as, const Values& b, const Shape& bs,
                  const std::function<double(double, double)>& f);
/// f of every element.
Values map1(const Values& x, const std::function<double(double)>& f);
/// Folds axis `axis` of `x` (shape `s`): out[o, i] = finish(fold(x[o, k, i] over k), n).
Values reduce_axis(const Values& x, const Shape& s, int axis, double init,
                   const std::function<double(double, double)>& fold,
                   const std::function<double(double, std::int64_t)>& finish);
/// The same over every element: one value.
Values all_of(const Values& x, double init, const std::function<double(double, double)>& fold,
              const std::function<double(double, std::int64_t)>& finish);
/// (m, k) x (k, n), the operands starting at the offsets given.
Values matmul(const Values& a, const Values& b, std::int64_t m, std::int64_t k, std::int64_t n,
              std::size_t a_offset = 0, std::size_t b_offset = 0);
/// x permuted: out axis d is x's axis perm[d].
Values permute(const Values& x, const Shape& s, const std::vector<int>& perm);
/// Softmax (or its log) along the last axis of a (rows, columns) matrix.
Values softmax_rows(const Values& x, const Shape& s, bool log_of);
/// Two inputs one after the other: concat along axis 0, and stack.
Values both_in_order(const std::vector<Values>& x, const std::vector<Shape>& shapes);
/// conv2d of x (N, C, H, W) with w (O, C, kh, kw) and bias b (O).
Values conv_reference(const Values& x, const Shape& xs, const Values& w, const Shape& ws,
                      const Values& b, int stride, int pad);
/// Max or average (padding counted as zeros) pooling of (N, C, H, W).
Values pool_reference(const Values& x, const Shape& s, bool max_pool, int k, int stride, int pad);
/// Batch normalization with the batch's statistics (eps 1e-5), per channel.
Values batch_norm_reference(const Values& x, const Shape& s, const Values& gamma,
                            const Values& beta);

}  // namespace tagflow::tools
