// The CUDA elementwise kernels: grid-stride loops over the bodies shared
// with the CPU kernels (elementwise_functors.h), launched on the operation's
// stream. Every launch is checked.

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "ops/kernels/cuda_check.h"
#include "ops/kernels/elementwise_kernels.h"
#include "ops/kernels/grid_stride.h"

namespace tagflow::detail::gpu_kernels {

namespace {

constexpr int kThreads = 256;

// Each kernel reads its elements into ComputeType<T> (float for float16 and
// bfloat16) and rounds once when it stores (Note [Half precision arithmetic]
// in ops/half.h).

template <UnaryOp op, typename T>
__global__ void unary_kernel(const T* in, T* out, std::int64_t n) {
  using C = ComputeType<T>;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = convert<T>(apply_unary<op>(convert<C>(in[i])));
  }
}

template <BinaryOp op, typename T>
__global__ void binary_kernel(const T* a, const T* b, T* out, std::int64_t n) {
  using C = ComputeType<T>;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = convert<T>(apply_binary<op>(convert<C>(a[i]), convert<C>(b[i])));
  }
}

template <BinaryOp op, typename T>
__global__ void binary_scalar_kernel(const T* a, ComputeType<T> s, bool on_left, T* out,
                                     std::int64_t n) {
  using C = ComputeType<T>;
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    const C x = convert<C>(a[i]);
    out[i] = convert<T>(on_left ? apply_binary<op>(s, x) : apply_binary<op>(x, s));
  }
}

// Note [Vectorised 16-bit loads]
// A float16 or bfloat16 element is two bytes: loaded one per thread, a warp
// asks for 64 bytes at a time and each thread's loop spends its
// instructions on addressing. Where it is natural (the contiguous unary,
// binary and scalar kernels, whose operands all start on a 16-byte
// boundary, which every allocation does), a thread moves eight elements
// with one 16-byte load per operand and one store, and computes them one by
// one as the per-element kernel does: the same bits. The last n mod 8
// elements, and operands at other offsets (views into an array), take the
// per-element kernels.

/// Eight 16-bit elements, moved as one 16-byte word.
template <typename T>
struct alignas(16) Pack8 {
  static_assert(sizeof(T) == 2, "eight 16-bit elements");
  T v[8];
};

template <typename T>
__device__ __forceinline__ Pack8<T> load_pack(const T* p, std::int64_t pack) {
  const uint4 raw = reinterpret_cast<const uint4*>(p)[pack];
  Pack8<T> out;
  memcpy(&out, &raw, sizeof(raw));
  return out;
}

template <typename T>
__device__ __forceinline__ void store_pack(T* p, std::int64_t pack, const Pack8<T>& value) {
  uint4 raw;
  memcpy(&raw, &value, sizeof(raw));
  reinterpret_cast<uint4*>(p)[pack] = raw;
}

/// True when every pointer given starts on a 16-byte boundary.
template <typename... P>
bool aligned_for_packs(const P*... p) {
  return ((reinterpret_cast<std::uintptr_t>(p) % 16 == 0) && ...);
}

template <UnaryOp op, typename T>
__global__ void unary_pack_kernel(const T* in, T* out, std::int64_t packs) {
  using C = ComputeType<T>;
  for (std::int64_t i = first_index(); i < packs; i += grid_stride()) {
    Pack8<T> x = load_pack(in, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) x.v[k] = convert<T>(apply_unary<op>(convert<C>(x.v[k])));
    store_pack(out, i, x);
  }
}

template <BinaryOp op, typename T>
__global__ void binary_pack_kernel(const T* a, const T* b, T* out, std::int64_t packs) {
  using C = ComputeType<T>;
  for (std::int64_t i = first_index(); i < packs; i += grid_stride()) {
    Pack8<T> x = load_pack(a, i);
    const Pack8<T> y = load_pack(b, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      x.v[k] = convert<T>(apply_binary<op>(convert<C>(x.v[k]), convert<C>(y.v[k])));
    }
    store_pack(out, i, x);
  }
}

template <BinaryOp op, typename T>
__global__ void binary_scalar_pack_kernel(const T* a, ComputeType<T> s, bool on_left, T* out,
                                          std::int64_t packs) {
  using C = ComputeType<T>;
  for (std::int64_t i = first_index(); i < packs; i += grid_stride()) {
    Pack8<T> x = load_pack(a, i);
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      const C e = convert<C>(x.v[k]);
      x.v[k] = convert<T>(on_left ? apply_binary<op>(s, e) : apply_binary<op>(e, s));
    }
    store_pack(out, i, x);
  }
}

template <BinaryOp op, typename T>
__global__ void binary_broadcast_kernel(const T* a, const T* b, T* out, BroadcastPlan plan,
                                        std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    std::int64_t oa = 0;
    std::int64_t ob = 0;
    plan.offsets(i, oa, ob);
    out[i] = convert<T>(
        apply_binary<op>(convert<ComputeType<T>>(a[oa]), convert<ComputeType<T>>(b[ob])));
  }
}

template <typename From, typename To>
__global__ void cast_kernel(const From* in, To* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = convert<To>(in[i]);
}

template <typename T>
__global__ void fill_kernel(T value, T* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) out[i] = value;
}

template <typename T>
__global__ void arange_kernel(double start, double step, T* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = convert<T>(start + static_cast<double>(i) * step);
  }
}

template <typename T>
__global__ void clip_kernel(const T* in, ComputeType<T> low, ComputeType<T> high, T* out,
                            std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = convert<T>(clip_value(convert<ComputeType<T>>(in[i]), low, high));
  }
}

template <typename C, typename T>
__global__ void where_kernel(const C* cond, const T* x, const T* y, T* out, std::int64_t n) {
  for (std::int64_t i = first_index(); i < n; i += grid_stride()) {
    out[i] = is_nonzero(cond[i]) ? x[i] : y[i];
  }
}

}  // namespace

void unary(UnaryOp op, DType dtype, const void* in, void* out, std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    const auto* x = static_cast<const T*>(in);
    auto* y = static_cast<T*>(out);
    std::int64_t done = 0;  // elements the packed kernel covers (Note [Vectorised 16-bit loads])
    with_unary_op(op, [&](auto o) {
      if constexpr (is_half_element<T>) {
        if (n >= 8 && aligned_for_packs(x, y)) {
          const std::int64_t packs = n / 8;
          unary_pack_kernel<decltype(o)::value, T>
              <<<blocks_for(packs, kThreads), kThreads, 0, as_stream(stream)>>>(x, y, packs);
          check_launch("unary kernel (packed)");
          done = packs * 8;
        }
      }
      if (done < n) {
        unary_kernel<decltype(o)::value, T>
            <<<blocks_for(n - done, kThreads), kThreads, 0, as_stream(stream)>>>(x + done, y + done,
                                                                                 n - done);
      }
    });
  });
  check_launch("unary kernel");
}

void binary(BinaryOp op, DType dtype, const void* a, const void* b, void* out, std::int64_t n,
            void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    const auto* x = static_cast<const T*>(a);
    const auto* y = static_cast<const T*>(b);
    auto* z = static_cast<T*>(out);
    std::int64_t done = 0;  // elements the packed kernel covers (Note [Vectorised 16-bit loads])
    with_binary_op(op, [&](auto o) {
      if constexpr (is_half_element<T>) {
        if (n >= 8 && aligned_for_packs(x, y, z)) {
          const std::int64_t packs = n / 8;
          binary_pack_kernel<decltype(o)::value, T>
              <<<blocks_for(packs, kThreads), kThreads, 0, as_stream(stream)>>>(x, y, z, packs);
          check_launch("binary kernel (packed)");
          done = packs * 8;
        }
      }
      if (done < n) {
        binary_kernel<decltype(o)::value, T>
            <<<blocks_for(n - done, kThreads), kThreads, 0, as_stream(stream)>>>(
                x + done, y + done, z + done, n - done);
      }
    });
  });
  check_launch("binary kernel");
}

void binary_scalar(BinaryOp op, DType dtype, const void* a, ScalarOperand scalar, void* out,
                   std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    const auto* x = static_cast<const T*>(a);
    const auto s = static_cast<ComputeType<T>>(scalar.value);
    auto* z = static_cast<T*>(out);
    std::int64_t done = 0;  // elements the packed kernel covers (Note [Vectorised 16-bit loads])
    with_binary_op(op, [&](auto o) {
      if constexpr (is_half_element<T>) {
        if (n >= 8 && aligned_for_packs(x, z)) {
          const std::int64_t packs = n / 8;
          binary_scalar_pack_kernel<decltype(o)::value, T>
              <<<blocks_for(packs, kThreads), kThreads, 0, as_stream(stream)>>>(
                  x, s, scalar.on_left, z, packs);
          check_launch("binary scalar kernel (packed)");
          done = packs * 8;
        }
      }
      if (done < n) {
        binary_scalar_kernel<decltype(o)::value, T>
            <<<blocks_for(n - done, kThreads), kThreads, 0, as_stream(stream)>>>(
                x + done, s, scalar.on_left, z + done, n - done);
      }
    });
  });
  check_launch("binary scalar kernel");
}

void binary_broadcast(BinaryOp op, DType dtype, const void* a, const void* b, void* out,
                      const BroadcastPlan& plan, void* stream) {
  std::int64_t n = 1;
  for (int axis = 0; axis < plan.ndim; ++axis) n *= plan.dims[axis];
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    with_binary_op(op, [&](auto o) {
      binary_broadcast_kernel<decltype(o)::value, T>
          <<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
              static_cast<const T*>(a), static_cast<const T*>(b), static_cast<T*>(out), plan, n);
    });
  });
  check_launch("binary broadcast kernel");
}

void cast(DType from, DType to, const void* in, void* out, std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(from, From, {
    TAGFLOW_ANY_DTYPE_SWITCH(to, To, {
      cast_kernel<From, To><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
          static_cast<const From*>(in), static_cast<To*>(out), n);
    });
  });
  check_launch("cast kernel");
}

void fill(DType dtype, double value, void* out, std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    fill_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
        convert<T>(value), static_cast<T*>(out), n);
  });
  check_launch("fill kernel");
}

void arange(DType dtype, double start, double step, void* out, std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    arange_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
        start, step, static_cast<T*>(out), n);
  });
  check_launch("arange kernel");
}

void clip(DType dtype, const void* in, double low, double high, void* out, std::int64_t n,
          void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
    using C = ComputeType<T>;
    clip_kernel<T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
        static_cast<const T*>(in), static_cast<C>(low), static_cast<C>(high), static_cast<T*>(out),
        n);
  });
  check_launch("clip kernel");
}

void where(DType cond_dtype, const void* cond, DType dtype, const void* x, const void* y, void* out,
           std::int64_t n, void* stream) {
  if (n == 0) return;
  TAGFLOW_ANY_DTYPE_SWITCH(cond_dtype, C, {
    TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, {
      where_kernel<C, T><<<blocks_for(n, kThreads), kThreads, 0, as_stream(stream)>>>(
          static_cast<const C*>(cond), static_cast<const T*>(x), static_cast<const T*>(y),
          static_cast<T*>(out), n);
    });
  });
  check_launch("where kernel");
}

}  // namespace tagflow::detail::gpu_kernels
