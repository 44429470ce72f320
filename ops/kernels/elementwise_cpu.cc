// The CPU elementwise kernels (Note [One kernel, three devices] in launch.h):
// loops over the shared bodies of elementwise_functors.h, on 16-bit
// elements through float (Note [Half precision arithmetic] in ops/half.h).

#include <algorithm>

#include "ops/kernels/cpu_parallel.h"
#include "ops/kernels/elementwise_kernels.h"

namespace tagflow::detail::cpu_kernels {

void unary(UnaryOp op, DType dtype, const void* in, void* out, std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    using C = ComputeType<T>;
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    with_unary_op(op, [&](auto o) {
      parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          y[i] = convert<T>(apply_unary<decltype(o)::value>(convert<C>(x[i])));
        }
      });
    });
  });
}

void binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    using C = ComputeType<T>;
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    T* z = static_cast<T*>(out);
    with_binary_op(op, [&](auto o) {
      parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) {
          z[i] = convert<T>(apply_binary<decltype(o)::value>(convert<C>(x[i]), convert<C>(y[i])));
        }
      });
    });
  });
}

void binary_scalar(BinaryOp op, DType dtype, const void* a, ScalarOperand scalar, void* out,
                   std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    using C = ComputeType<T>;
    const T* x = static_cast<const T*>(a);
    const C s = static_cast<C>(scalar.value);
    T* z = static_cast<T*>(out);
    with_binary_op(op, [&](auto o) {
      constexpr BinaryOp kOp = decltype(o)::value;
      parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
        if (scalar.on_left) {
          for (std::int64_t i = begin; i < end; ++i) {
            z[i] = convert<T>(apply_binary<kOp>(s, convert<C>(x[i])));
          }
        } else {
          for (std::int64_t i = begin; i < end; ++i) {
            z[i] = convert<T>(apply_binary<kOp>(convert<C>(x[i]), s));
          }
        }
      });
    });
  });
}

void binary_broadcast(BinaryOp op, DType dtype, const void* a, const void* b, void* out,
                      const BroadcastPlan& plan) {
  // Rows along the innermost (merged) axis; each row's operand offsets are
  // computed once, then the row runs with fixed strides.
  const std::int64_t inner = plan.dims[plan.ndim - 1];
  const std::int64_t a_step = plan.a_strides[plan.ndim - 1];
  const std::int64_t b_step = plan.b_strides[plan.ndim - 1];
  std::int64_t rows = 1;
  for (int axis = 0; axis + 1 < plan.ndim; ++axis) rows *= plan.dims[axis];
  const std::int64_t grain =
      std::max<std::int64_t>(1, kParallelGrain / std::max<std::int64_t>(inner, 1));
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    using C = ComputeType<T>;
    const T* x = static_cast<const T*>(a);
    const T* y = static_cast<const T*>(b);
    T* z = static_cast<T*>(out);
    with_binary_op(op, [&](auto o) {
      constexpr BinaryOp kOp = decltype(o)::value;
      parallel_for_range(rows, grain, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t row = begin; row < end; ++row) {
          std::int64_t oa = 0;
          std::int64_t ob = 0;
          plan.offsets(row * inner, oa, ob);
          T* zr = z + row * inner;
          for (std::int64_t j = 0; j < inner; ++j) {
            zr[j] = convert<T>(
                apply_binary<kOp>(convert<C>(x[oa + j * a_step]), convert<C>(y[ob + j * b_step])));
          }
        }
      });
    });
  });
}

void cast(DType from, DType to, const void* in, void* out, std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(from, From, {
    TAGFLOW_ANY_DTYPE_SWITCH(to, To, {
      const From* x = static_cast<const From*>(in);
      To* y = static_cast<To*>(out);
      parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) y[i] = convert<To>(x[i]);
      });
    });
  });
}

void fill(DType dtype, double value, void* out, std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    T* y = static_cast<T*>(out);
    const T v = convert<T>(value);
    parallel_for_range(
        n, [&](std::int64_t begin, std::int64_t end) { std::fill(y + begin, y + end, v); });
  });
}

void arange(DType dtype, double start, double step, void* out, std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    T* y = static_cast<T*>(out);
    parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i) {
        y[i] = convert<T>(start + static_cast<double>(i) * step);
      }
    });
  });
}

void clip(DType dtype, const void* in, double low, double high, void* out, std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    using C = ComputeType<T>;
    const T* x = static_cast<const T*>(in);
    T* y = static_cast<T*>(out);
    const C lo = static_cast<C>(low);
    const C hi = static_cast<C>(high);
    parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t i = begin; i < end; ++i)
        y[i] = convert<T>(clip_value(convert<C>(x[i]), lo, hi));
    });
  });
}

void where(DType cond_dtype, const void* cond, DType dtype, const void* x, const void* y, void* out,
           std::int64_t n) {
  TAGFLOW_ANY_DTYPE_SWITCH(cond_dtype, C, {
    TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
      const C* c = static_cast<const C*>(cond);
      const T* xs = static_cast<const T*>(x);
      const T* ys = static_cast<const T*>(y);
      T* z = static_cast<T*>(out);
      parallel_for_range(n, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t i = begin; i < end; ++i) z[i] = is_nonzero(c[i]) ? xs[i] : ys[i];
      });
    });
  });
}

}  // namespace tagflow::detail::cpu_kernels
