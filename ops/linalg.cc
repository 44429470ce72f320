#include "ops/linalg.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "ops/autograd.h"
#include "ops/detail/operator_checks.h"
#include "ops/device.h"
#include "ops/kernels/float_staging.h"
#include "ops/kernels/gemm_kernels.h"
#include "ops/kernels/kernel_work.h"
#include "ops/kernels/launch.h"
#include "ops/transpose.h"

// The CPU kernels: Note [The CPU BLAS] in ops/kernels/gemm_cpu.cc.

namespace tagflow {

namespace {

/// Shape of the leading (batch) axes of a matrix operand.
Shape batch_shape(const Shape& s) {
  Shape batch;
  for (int i = 0; i + 2 < s.ndim(); ++i) batch.push_back(s[i]);
  return batch;
}

/// Pushes the product of `a` viewed as (batch..., rows_a, cols_a) and `b`
/// likewise, into a new array of `out_shape`.
NDArray product(const char* name, const NDArray& a, const Shape& a3, const NDArray& b,
                const Shape& b3, bool transpose_a, bool transpose_b, const Shape& out_shape) {
  const std::int64_t m = transpose_a ? a3[a3.ndim() - 1] : a3[a3.ndim() - 2];
  const std::int64_t k = transpose_a ? a3[a3.ndim() - 2] : a3[a3.ndim() - 1];
  const std::int64_t kb = transpose_b ? b3[b3.ndim() - 1] : b3[b3.ndim() - 2];
  const std::int64_t n = transpose_b ? b3[b3.ndim() - 2] : b3[b3.ndim() - 1];
  TAGFLOW_CHECK(k == kb,
                "{}: inner dimensions differ: the first operand ({}{}) has {} columns, the second "
                "({}{}) has {} rows",
                name, a.shape().str(), transpose_a ? ", transposed" : "", k, b.shape().str(),
                transpose_b ? ", transposed" : "", kb);
  const Shape a_batch = batch_shape(a3);
  const Shape b_batch = batch_shape(b3);
  const Shape out_batch = broadcast_shapes(a_batch, b_batch, name);
  // The BLAS and cuBLAS take 32-bit extents.
  constexpr std::int64_t kBlasMax = std::numeric_limits<std::int32_t>::max();
  TAGFLOW_CHECK(m <= kBlasMax && n <= kBlasMax && k <= kBlasMax,
                "{}: the product of ({}) and ({}) multiplies {}x{} by {}x{} matrices: expected "
                "extents of at most 2^31 - 1, the 32-bit range of the BLAS",
                name, a.shape().str(), b.shape().str(), m, k, k, n);
  detail::GemmPlan plan;
  plan.m = m;
  plan.n = n;
  plan.k = k;
  plan.transpose_a = transpose_a;
  plan.transpose_b = transpose_b;
  plan.batch_count = out_batch.size();
  plan.batch = detail::make_broadcast_plan(a_batch, b_batch, out_batch);

  NDArray c(out_shape, a.dtype(), a.context());
  if (c.size() == 0) return c;
  const DType dtype = a.dtype();
  const void* pa = a.raw_data();
  const void* pb = b.raw_data();
  void* pc = c.raw_data();
  const std::int64_t a_size = a.size();
  const std::int64_t b_size = b.size();
  const std::int64_t c_size = c.size();
  const int device = a.context().index;
  if (!is_real_gpu(a.context())) detail::cpu_kernels::prepare_products();
  detail::push_operation(
      name, a.context(), {a.var(), b.var()}, {c.var()}, [=](const RunContext& rc) {
        detail::run_kernel(
            rc, detail::gemm_work(plan, dtype),
            [=, ctx = rc.ctx] {
              detail::Float32Staging staging(ctx, dtype);
              detail::cpu_kernels::gemm(plan, staging.input(pa, a_size), staging.input(pb, b_size),
                                        staging.output(pc, c_size));
              staging.commit();
            },
            [=](void* stream) {
              detail::gpu_kernels::gemm(plan, dtype, pa, pb, pc, device, stream);
            });
      });
  return c;
}

void check_operands(const char* name, const NDArray& a, const NDArray& b) {
  detail::check_same_context(name, {&a, &b});
  detail::check_floating(name, a, 1);
  detail::check_floating(name, b, 2);
  detail::check_same_dtype(name, {&a, &b});
}

/// d op(A)·op(B) for 2-D (or batched 3-D) operands: the gradients of A
/// and B, by the same product with the operands and flags rearranged.
template <typename Product>
std::vector<NDArray> product_grads(Product product, const NDArray& a, const NDArray& b,
                                   const NDArray& dc, bool ta, bool tb) {
  if (!ta && !tb) return {product(dc, b, false, true), product(a, dc, true, false)};
  if (!ta && tb) return {product(dc, b, false, false), product(dc, a, true, false)};
  if (ta && !tb) return {product(b, dc, false, true), product(a, dc, false, false)};
  return {product(b, dc, true, true), product(dc, a, true, true)};
}

/// Records a product whose operands, viewed as `a2` and `b2` (vectors as
/// rows or columns), gave `out` viewed as (m, n) (or batches of them).
void record_product(const char* name, const NDArray& a, const NDArray& b, const Shape& a2,
                    const Shape& b2, const Shape& out2, bool ta, bool tb, bool batched,
                    NDArray& out) {
  detail::record(name, out, {&a, &b}, [&] {
    return [a = a.detach(), b = b.detach(), a2, b2, out2, ta, tb, batched](const NDArray& dy) {
      std::vector<NDArray> grads =
          batched
              ? product_grads(&batch_dot, a.reshape(a2), b.reshape(b2), dy.reshape(out2), ta, tb)
              : product_grads(&dot, a.reshape(a2), b.reshape(b2), dy.reshape(out2), ta, tb);
      return std::vector<NDArray>{grads[0].reshape(a.shape()), grads[1].reshape(b.shape())};
    };
  });
}

/// `x` with its last two axes swapped (a copy).
NDArray swap_last_axes(const NDArray& x) {
  std::vector<int> axes(static_cast<std::size_t>(x.ndim()));
  for (int i = 0; i < x.ndim(); ++i) axes[static_cast<std::size_t>(i)] = i;
  std::swap(axes[axes.size() - 1], axes[axes.size() - 2]);
  return transpose(x, axes);
}

}  // namespace

NDArray dot(const NDArray& a, const NDArray& b, bool transpose_a, bool transpose_b) {
  constexpr const char* kName = "dot";
  check_operands(kName, a, b);
  TAGFLOW_CHECK(a.ndim() >= 1 && a.ndim() <= 2 && b.ndim() >= 1 && b.ndim() <= 2,
                "dot: expected 1-D or 2-D operands, got ({}) and ({}); batch_dot and matmul take "
                "batches",
                a.shape().str(), b.shape().str());
  // Vectors become a row (on the left) or a column (on the right), and
  // their axis is dropped from the result, as NumPy's dot does.
  const Shape a2 = a.ndim() == 2 ? a.shape() : Shape{1, a.shape()[0]};
  const Shape b2 = b.ndim() == 2 ? b.shape() : Shape{b.shape()[0], 1};
  const bool ta = a.ndim() == 2 && transpose_a;
  const bool tb = b.ndim() == 2 && transpose_b;
  Shape out;
  if (a.ndim() == 2) out.push_back(ta ? a2[1] : a2[0]);
  if (b.ndim() == 2) out.push_back(tb ? b2[0] : b2[1]);
  if (out.ndim() == 0) out.push_back(1);
  NDArray c = product(kName, a, a2, b, b2, ta, tb, out);
  const Shape c2{ta ? a2[1] : a2[0], tb ? b2[0] : b2[1]};
  record_product(kName, a, b, a2, b2, c2, ta, tb, false, c);
  return c;
}

NDArray batch_dot(const NDArray& a, const NDArray& b, bool transpose_a, bool transpose_b) {
  constexpr const char* kName = "batch_dot";
  check_operands(kName, a, b);
  TAGFLOW_CHECK(a.ndim() == 3 && b.ndim() == 3 && a.shape()[0] == b.shape()[0],
                "batch_dot: expected two 3-D operands with the same batch size, got ({}) and ({})",
                a.shape().str(), b.shape().str());
  const std::int64_t m = transpose_a ? a.shape()[2] : a.shape()[1];
  const std::int64_t n = transpose_b ? b.shape()[1] : b.shape()[2];
  NDArray c = product(kName, a, a.shape(), b, b.shape(), transpose_a, transpose_b,
                      Shape{a.shape()[0], m, n});
  record_product(kName, a, b, a.shape(), b.shape(), c.shape(), transpose_a, transpose_b, true, c);
  return c;
}

NDArray matmul(const NDArray& a, const NDArray& b) {
  constexpr const char* kName = "matmul";
  check_operands(kName, a, b);
  TAGFLOW_CHECK(a.ndim() >= 1 && b.ndim() >= 1,
                "matmul: expected operands with at least one axis, got ({}) and ({})",
                a.shape().str(), b.shape().str());
  Shape a3 = a.shape();
  Shape b3 = b.shape();
  if (a.ndim() == 1) a3 = Shape{1, a.shape()[0]};
  if (b.ndim() == 1) b3 = Shape{b.shape()[0], 1};
  Shape out = broadcast_shapes(batch_shape(a3), batch_shape(b3), kName);
  if (a.ndim() > 1) out.push_back(a3[a3.ndim() - 2]);
  if (b.ndim() > 1) out.push_back(b3[b3.ndim() - 1]);
  if (out.ndim() == 0) out.push_back(1);
  NDArray c = product(kName, a, a3, b, b3, false, false, out);
  detail::record(kName, c, {&a, &b}, [&] {
    // Shapes as matrices (vectors as a row or a column) and the output with
    // both matrix axes; the gradients are summed over broadcast batches.
    Shape c3 = broadcast_shapes(batch_shape(a3), batch_shape(b3), kName);
    c3.push_back(a3[a3.ndim() - 2]);
    c3.push_back(b3[b3.ndim() - 1]);
    return [a = a.detach(), b = b.detach(), a3, b3, c3](const NDArray& dy) {
      const NDArray dc = dy.reshape(c3);
      const NDArray da = matmul(dc, swap_last_axes(b.reshape(b3)));
      const NDArray db = matmul(swap_last_axes(a.reshape(a3)), dc);
      return std::vector<NDArray>{detail::sum_to(da, a3).reshape(a.shape()),
                                  detail::sum_to(db, b3).reshape(b.shape())};
    };
  });
  return c;
}

}  // namespace tagflow
