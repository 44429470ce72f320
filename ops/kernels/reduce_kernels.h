#pragma once
// The reduction and softmax kernels: the plan that maps each output of a
// reduction to the input elements it reduces, the accumulation bodies
// shared by the CPU kernels (reduce_cpu.cc, also run by simulated GPUs) and
// the CUDA kernels (reduce.cu, taking the cudaStream_t as void*), and their
// entry points. Internal to ops/.
//
// Note [Deterministic reductions]
// Every output accumulates its inputs in one fixed order that depends only
// on the shapes: ascending reduced index, in blocks of kReduceBlock whose
// partial results are combined in block order. The CPU kernel splits work
// over outputs (and over those fixed blocks), never over thread-dependent
// ranges, so cpu(i) and simulated GPUs give the same bits whatever the
// thread count. Float sums accumulate in double. A real GPU combines
// partial results in a tree: deterministic too, but not the CPU's bits.
// float16 and bfloat16 elements are read as floats and the result rounded
// once (Note [Half precision arithmetic] in ops/half.h): a half sum is the
// double sum of the exact values, rounded to the 16-bit type.

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "ops/dtype.h"
#include "ops/kernels/host_device.h"
#include "ops/shape.h"

namespace tagflow::detail {

/// Reduced elements per block of Note [Deterministic reductions].
inline constexpr std::int64_t kReduceBlock = 32 * 1024;

enum class ReduceOp : std::uint8_t { kSum, kMean, kMax, kMin, kNorm, kArgmax };

/// The input elements of every output: output `o` reduces the elements at
/// `output_offset(o) + reduced_offset(r)` for r in [0, reduced). Adjacent
/// axes of one kind (kept or reduced) are merged and extent-1 axes dropped,
/// so a reduction over the last axis is (outputs, reduced) rows and one over
/// a middle axis (outer, reduced, inner).
struct ReducePlan {
  std::int64_t outputs = 1;  ///< product of the kept extents
  std::int64_t reduced = 1;  ///< product of the reduced extents
  int kept_ndim = 0;
  std::int64_t kept_dims[Shape::kMaxDims] = {};
  std::int64_t kept_strides[Shape::kMaxDims] = {};  ///< input strides, in elements
  int reduced_ndim = 0;
  std::int64_t reduced_dims[Shape::kMaxDims] = {};
  std::int64_t reduced_strides[Shape::kMaxDims] = {};

  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE std::int64_t output_offset(std::int64_t o) const {
    std::int64_t offset = 0;
    for (int axis = kept_ndim - 1; axis >= 0; --axis) {
      offset += (o % kept_dims[axis]) * kept_strides[axis];
      o /= kept_dims[axis];
    }
    return offset;
  }
  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE std::int64_t reduced_offset(std::int64_t r) const {
    if (reduced_ndim == 1) return r * reduced_strides[0];
    std::int64_t offset = 0;
    for (int axis = reduced_ndim - 1; axis >= 0; --axis) {
      offset += (r % reduced_dims[axis]) * reduced_strides[axis];
      r /= reduced_dims[axis];
    }
    return offset;
  }
  /// True when the input's innermost axis is kept: consecutive outputs then
  /// read consecutive inputs (a reduction over an outer or middle axis).
  TAGFLOW_HOST_DEVICE TAGFLOW_INLINE bool innermost_kept() const {
    return kept_ndim > 0 && kept_strides[kept_ndim - 1] == 1;
  }
};

/// The plan for reducing a contiguous array of `shape` over the axes
/// flagged in `reduced_axes` (indexed by axis).
ReducePlan make_reduce_plan(const Shape& shape, const bool* reduced_axes);

// --- accumulation bodies -------------------------------------------------------------
// Each reducer over elements of type T has an accumulator type `Acc`, an
// output type `Out`, and init / step (one more input, with its reduced
// index) / combine (two partial results; commutative, so a GPU tree may
// combine in any order) / finish (the output, given the number of reduced
// elements). A 16-bit element is stepped in as its float (ComputeType).

template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE bool is_nan(T x) {
  if constexpr (std::is_floating_point_v<T>) {
    return x != x;
  } else {
    return false;
  }
}

/// Float sums accumulate in double; integer sums in 64 bits, wrapping
/// modulo 2^64, which the final conversion wraps into T's range: the sum
/// wraps exactly as a chain of elementwise integer additions would.
template <typename T>
using SumAccumulator =
    std::conditional_t<std::is_floating_point_v<ComputeType<T>>, double, std::uint64_t>;

/// The value of element `x` as a double.
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE double as_double(T x) {
  return static_cast<double>(static_cast<ComputeType<T>>(x));
}

template <typename T>
struct SumReducer {
  using Acc = SumAccumulator<T>;
  using Out = T;
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc init() { return Acc(0); }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc step(Acc a, T x, std::int64_t) {
    return a + static_cast<Acc>(static_cast<ComputeType<T>>(x));
  }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc combine(Acc a, Acc b) { return a + b; }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Out finish(Acc a, std::int64_t) {
    return convert_element<Out>(a);
  }
};

/// The mean and the norm give float32 for float32 and integer arrays, and
/// the array's own type for float16 and bfloat16 (as NumPy does).
template <typename T>
using MeanType = std::conditional_t<is_half_element<T>, T, float>;

template <typename T>
struct MeanReducer {
  using Acc = double;
  using Out = MeanType<T>;
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc init() { return 0.0; }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc step(Acc a, T x, std::int64_t) {
    return a + as_double(x);
  }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc combine(Acc a, Acc b) { return a + b; }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Out finish(Acc a, std::int64_t count) {
    return convert_element<Out>(a / static_cast<double>(count));
  }
};

template <typename T>
struct NormReducer {
  using Acc = double;
  using Out = MeanType<T>;
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc init() { return 0.0; }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc step(Acc a, T x, std::int64_t) {
    const double v = as_double(x);
    return a + v * v;
  }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc combine(Acc a, Acc b) { return a + b; }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Out finish(Acc a, std::int64_t) {
    return convert_element<Out>(::sqrt(a));
  }
};

/// `x` orders strictly before `y` for max (`kMax`) or min: NaN is the most
/// extreme value (so it propagates, as in NumPy), equal values do not order.
template <bool kMax, typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE bool beats(T x, T y) {
  if (is_nan(y)) return false;
  if (is_nan(x)) return true;
  return kMax ? y < x : x < y;
}

/// The start value of max (kMax) or min: -inf / +inf, or the integer limits.
template <bool kMax, typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T extreme_start() {
  if constexpr (std::is_floating_point_v<T>) {
    return kMax ? -INFINITY : INFINITY;
  } else if constexpr (std::is_signed_v<T>) {
    // Two's complement limits without <limits> (not usable in device code).
    constexpr T kHighest = static_cast<T>(~std::make_unsigned_t<T>(0) >> 1);
    return kMax ? static_cast<T>(-kHighest - 1) : kHighest;
  } else {
    return kMax ? T(0) : static_cast<T>(~T(0));
  }
}

template <typename T, bool kMax>
struct ExtremeReducer {
  using Acc = ComputeType<T>;
  using Out = T;
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc init() { return extreme_start<kMax, Acc>(); }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc step(Acc a, T x, std::int64_t) {
    const Acc v = static_cast<Acc>(x);
    return beats<kMax>(v, a) ? v : a;
  }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc combine(Acc a, Acc b) {
    return beats<kMax>(b, a) ? b : a;
  }
  /// Exact: the extreme is one of the elements (or +-inf for none).
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Out finish(Acc a, std::int64_t) {
    return convert_element<Out>(a);
  }
};
template <typename T>
using MaxReducer = ExtremeReducer<T, true>;
template <typename T>
using MinReducer = ExtremeReducer<T, false>;

/// A candidate maximum and its index along the axis (-1: none yet).
/// Trivial, so that CUDA kernels can keep it in shared memory.
template <typename T>
struct IndexedValue {
  T value;
  std::int64_t index;
};

/// The index of the first maximum; a NaN counts as the maximum.
template <typename T>
struct ArgmaxReducer {
  using Acc = IndexedValue<ComputeType<T>>;
  using Out = std::int64_t;
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc init() { return {ComputeType<T>(0), -1}; }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc combine(Acc a, Acc b) {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    if (beats<true>(b.value, a.value)) return b;
    if (beats<true>(a.value, b.value)) return a;
    return b.index < a.index ? b : a;  // a tie: the first one
  }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Acc step(Acc a, T x, std::int64_t index) {
    return combine(a, Acc{static_cast<ComputeType<T>>(x), index});
  }
  static TAGFLOW_HOST_DEVICE TAGFLOW_INLINE Out finish(Acc a, std::int64_t) { return a.index; }
};

/// Calls `f(Reducer{})` with the reducer of `op` over element type `T`.
template <typename T, typename F>
void with_reducer(ReduceOp op, F&& f) {
  switch (op) {
    case ReduceOp::kSum:
      f(SumReducer<T>{});
      break;
    case ReduceOp::kMean:
      f(MeanReducer<T>{});
      break;
    case ReduceOp::kMax:
      f(MaxReducer<T>{});
      break;
    case ReduceOp::kMin:
      f(MinReducer<T>{});
      break;
    case ReduceOp::kNorm:
      f(NormReducer<T>{});
      break;
    case ReduceOp::kArgmax:
      f(ArgmaxReducer<T>{});
      break;
  }
}

/// A softmax over the middle axis of a contiguous (outer, extent, inner)
/// view of the input: rows of `extent` elements, `inner` apart.
struct SoftmaxShape {
  std::int64_t outer = 1;
  std::int64_t extent = 1;
  std::int64_t inner = 1;
};

// --- entry points --------------------------------------------------------------------
// `in` has `dtype`; `out` has the reducer's output type (`dtype` for sum,
// max and min; MeanType for mean and norm; int64 for argmax).

namespace cpu_kernels {
void reduce(ReduceOp op, DType dtype, const void* in, void* out, const ReducePlan& plan);
/// softmax (or log_softmax when `log_output`) of `in` into `out`, both of
/// floating-point `dtype`.
void softmax(bool log_output, DType dtype, const void* in, void* out, SoftmaxShape shape);
}  // namespace cpu_kernels

namespace gpu_kernels {
void reduce(ReduceOp op, DType dtype, const void* in, void* out, const ReducePlan& plan,
            void* stream);
void softmax(bool log_output, DType dtype, const void* in, void* out, SoftmaxShape shape,
             void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
