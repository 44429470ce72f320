#pragma once
// The bodies of the elementwise operators, written once and compiled for the
// CPU kernels (elementwise_cpu.cc) and the CUDA kernels (elementwise.cu).
// Internal to ops/.

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/half.h"
#include "ops/kernels/host_device.h"

namespace tagflow::detail {

enum class UnaryOp : std::uint8_t {
  kExp,
  kLog,
  kSqrt,
  kSquare,
  kAbs,
  kNegative,
  kRelu,
  kSigmoid,
  kTanh,
};

enum class BinaryOp : std::uint8_t {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMaximum,
  kMinimum,
  kEqual,
  kNotEqual,
  kLess,
  kLessEqual,
  kGreater,
  kGreaterEqual,
  kReluGrad,  ///< b where a > 0, else 0: ReLU's gradient from its input a and dy b
};

/// Transcendental functions are defined on the floating-point dtypes only.
constexpr bool float_only(UnaryOp op) {
  return op == UnaryOp::kExp || op == UnaryOp::kLog || op == UnaryOp::kSqrt ||
         op == UnaryOp::kSigmoid || op == UnaryOp::kTanh;
}

namespace math {
// float overloads that resolve to the CUDA intrinsics on the device and to
// the C library on the host.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float exp(float x) { return ::expf(x); }
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float log(float x) { return ::logf(x); }
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float sqrt(float x) { return ::sqrtf(x); }
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float tanh(float x) { return ::tanhf(x); }
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float pow(float x, float y) { return ::powf(x, y); }
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float fabs(float x) { return ::fabsf(x); }
}  // namespace math

// Integer arithmetic wraps around (two's complement) instead of overflowing,
// which C++ leaves undefined for signed types: computed in the unsigned type.
template <typename T, bool = std::is_floating_point_v<T>>
struct WrapTypeOf {
  using type = T;
};
template <typename T>
struct WrapTypeOf<T, false> {
  using type = std::make_unsigned_t<T>;
};
template <typename T>
using WrapType = typename WrapTypeOf<T>::type;
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T wrap_add(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
}
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T wrap_sub(T a, T b) {
  return static_cast<T>(static_cast<WrapType<T>>(a) - static_cast<WrapType<T>>(b));
}
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T wrap_mul(T a, T b) {
  if constexpr (std::is_floating_point_v<T> || sizeof(T) >= sizeof(unsigned)) {
    return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
  } else {
    return static_cast<T>(static_cast<unsigned>(a) * static_cast<unsigned>(b));  // no int promotion
  }
}

template <UnaryOp op, typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T apply_unary(T x) {
  if constexpr (op == UnaryOp::kSquare) {
    return wrap_mul(x, x);
  } else if constexpr (op == UnaryOp::kAbs) {
    if constexpr (std::is_floating_point_v<T>) {
      return math::fabs(x);
    } else if constexpr (std::is_signed_v<T>) {
      return x < T(0) ? wrap_sub(T(0), x) : x;
    } else {
      return x;
    }
  } else if constexpr (op == UnaryOp::kNegative) {
    return wrap_sub(T(0), x);
  } else if constexpr (op == UnaryOp::kRelu) {
    return x > T(0) ? x : T(0);
  } else if constexpr (std::is_floating_point_v<T>) {
    if constexpr (op == UnaryOp::kExp) return math::exp(x);
    if constexpr (op == UnaryOp::kLog) return math::log(x);
    if constexpr (op == UnaryOp::kSqrt) return math::sqrt(x);
    if constexpr (op == UnaryOp::kSigmoid) return T(1) / (T(1) + math::exp(-x));
    if constexpr (op == UnaryOp::kTanh) return math::tanh(x);
  } else {
    return x;  // never dispatched: float_only operators reject integers first
  }
}

/// Integer power by squaring; a negative exponent gives 0 unless |base| is 1.
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T integer_power(T base, T exponent) {
  if constexpr (std::is_signed_v<T>) {
    if (exponent < T(0)) {
      if (base == T(1)) return T(1);
      if (base == T(-1)) return (exponent % 2 == 0) ? T(1) : T(-1);
      return T(0);
    }
  }
  T result = T(1);
  while (exponent > T(0)) {
    if (exponent % 2 == 1) result = wrap_mul(result, base);
    base = wrap_mul(base, base);
    exponent = static_cast<T>(exponent / 2);
  }
  return result;
}

template <BinaryOp op, typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T apply_binary(T a, T b) {
  if constexpr (op == BinaryOp::kAdd) return wrap_add(a, b);
  if constexpr (op == BinaryOp::kSub) return wrap_sub(a, b);
  if constexpr (op == BinaryOp::kMul) return wrap_mul(a, b);
  if constexpr (op == BinaryOp::kDiv) {
    if constexpr (std::is_floating_point_v<T>) {
      return a / b;
    } else {
      // Integer division by zero gives 0 (as NumPy does) instead of a trap,
      // and MIN / -1 wraps instead of trapping.
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed_v<T>) {
        if (b == T(-1)) return wrap_sub(T(0), a);
      }
      return static_cast<T>(a / b);
    }
  }
  if constexpr (op == BinaryOp::kPow) {
    if constexpr (std::is_floating_point_v<T>) {
      return math::pow(a, b);
    } else {
      return integer_power(a, b);
    }
  }
  if constexpr (op == BinaryOp::kMaximum) return a > b ? a : b;
  if constexpr (op == BinaryOp::kMinimum) return a < b ? a : b;
  if constexpr (op == BinaryOp::kEqual) return a == b ? T(1) : T(0);
  if constexpr (op == BinaryOp::kNotEqual) return a != b ? T(1) : T(0);
  if constexpr (op == BinaryOp::kLess) return a < b ? T(1) : T(0);
  if constexpr (op == BinaryOp::kLessEqual) return a <= b ? T(1) : T(0);
  if constexpr (op == BinaryOp::kGreater) return a > b ? T(1) : T(0);
  if constexpr (op == BinaryOp::kGreaterEqual) return a >= b ? T(1) : T(0);
  if constexpr (op == BinaryOp::kReluGrad) return a > T(0) ? b : T(0);
}

/// `x` limited to [low, high]; NaN stays NaN.
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE T clip_value(T x, T low, T high) {
  return x < low ? low : (x > high ? high : x);
}

/// True unless `x` is zero (NaN counts as nonzero, -0 as zero).
template <typename T>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE bool is_nonzero(T x) {
  using C = ComputeType<T>;
  return static_cast<C>(x) != C(0);
}

// Note [Conversions between dtypes]
// astype converts each element by one rule, the same on every device (the
// CPU kernels and the CUDA kernels both call convert):
// - float to integer: truncation toward zero, as C++ and CUDA convert in
//   range; a value beyond the integer type's range saturates to its minimum
//   or maximum (+-inf included, so -0.5 and -1 give 0 as uint8, 256 gives
//   255); NaN gives 0. C++ leaves the conversion of a value out of range
//   undefined (UBSan's float-cast-overflow flags it; x86 gives INT_MIN), so
//   convert never lets one reach static_cast: the value is first compared
//   against the range, whose ends are exact in the float type (the minimum
//   is 0 or -2^k, the maximum plus one is 2^k).
// - integer to a narrower integer: wraps around (the value modulo 2^bits,
//   two's complement), as NumPy's astype and C++20 do: int64 2^32 + 5 gives
//   int32 5, int32 -1 gives uint8 255.
// - integer to float: the nearest float (ties to even), as x86 and CUDA's
//   default rounding give.
// - to float16 or bfloat16: the value made a float first (exact from
//   float32; the nearest float from an integer, as PyTorch converts; to odd
//   from a double scalar), then rounded to nearest even (Note [Rounding to
//   16 bits] in ops/half.h).
// - from float16 or bfloat16: the exact float, then as from float32.

/// The lowest and highest values of an arithmetic type, as constants that
/// device code may read (namespace-scope constexpr scalars).
template <typename T>
inline constexpr T kLowest = std::numeric_limits<T>::lowest();
template <typename T>
inline constexpr T kHighest = std::numeric_limits<T>::max();

/// `x` as a `To`, by Note [Conversions between dtypes].
template <typename To, typename From>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE To convert(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;  // the same bits, NaN payloads included
  } else if constexpr (is_half_element<From>) {
    return convert<To>(static_cast<float>(x));
  } else if constexpr (is_half_element<To>) {
    if constexpr (std::is_same_v<From, double>) {
      return To(round_to_odd(x));  // rounded once (Note [Rounding to 16 bits])
    } else {
      return To(static_cast<float>(x));
    }
  } else if constexpr (std::is_floating_point_v<From> && std::is_integral_v<To>) {
    constexpr From low = static_cast<From>(kLowest<To>);                       // 0 or -2^k
    constexpr From above = static_cast<From>(kHighest<To> / 2 + 1) * From(2);  // 2^k
    // Only a value strictly inside (low, above) truncates into To's range
    // and reaches the cast; anything else (NaN too) is cast as 0, then
    // replaced unless it is NaN. Selects, not branches: a CPU loop of them
    // vectorizes.
    const From inside = ((x > low) & (x < above)) ? x : From(0);
    const To truncated = static_cast<To>(inside);
    return x >= above ? kHighest<To> : (x <= low ? kLowest<To> : truncated);
  } else {
    return static_cast<To>(x);
  }
}

/// Calls `f(std::integral_constant<UnaryOp, op>{})`: turns the run-time
/// operator into a compile-time one, outside the element loop.
template <typename F>
void with_unary_op(UnaryOp op, F&& f) {
  using O = UnaryOp;
  switch (op) {
    case O::kExp:
      f(std::integral_constant<O, O::kExp>{});
      break;
    case O::kLog:
      f(std::integral_constant<O, O::kLog>{});
      break;
    case O::kSqrt:
      f(std::integral_constant<O, O::kSqrt>{});
      break;
    case O::kSquare:
      f(std::integral_constant<O, O::kSquare>{});
      break;
    case O::kAbs:
      f(std::integral_constant<O, O::kAbs>{});
      break;
    case O::kNegative:
      f(std::integral_constant<O, O::kNegative>{});
      break;
    case O::kRelu:
      f(std::integral_constant<O, O::kRelu>{});
      break;
    case O::kSigmoid:
      f(std::integral_constant<O, O::kSigmoid>{});
      break;
    case O::kTanh:
      f(std::integral_constant<O, O::kTanh>{});
      break;
  }
}

template <typename F>
void with_binary_op(BinaryOp op, F&& f) {
  using O = BinaryOp;
  switch (op) {
    case O::kAdd:
      f(std::integral_constant<O, O::kAdd>{});
      break;
    case O::kSub:
      f(std::integral_constant<O, O::kSub>{});
      break;
    case O::kMul:
      f(std::integral_constant<O, O::kMul>{});
      break;
    case O::kDiv:
      f(std::integral_constant<O, O::kDiv>{});
      break;
    case O::kPow:
      f(std::integral_constant<O, O::kPow>{});
      break;
    case O::kMaximum:
      f(std::integral_constant<O, O::kMaximum>{});
      break;
    case O::kMinimum:
      f(std::integral_constant<O, O::kMinimum>{});
      break;
    case O::kEqual:
      f(std::integral_constant<O, O::kEqual>{});
      break;
    case O::kNotEqual:
      f(std::integral_constant<O, O::kNotEqual>{});
      break;
    case O::kLess:
      f(std::integral_constant<O, O::kLess>{});
      break;
    case O::kLessEqual:
      f(std::integral_constant<O, O::kLessEqual>{});
      break;
    case O::kGreater:
      f(std::integral_constant<O, O::kGreater>{});
      break;
    case O::kGreaterEqual:
      f(std::integral_constant<O, O::kGreaterEqual>{});
      break;
    case O::kReluGrad:
      f(std::integral_constant<O, O::kReluGrad>{});
      break;
  }
}

}  // namespace tagflow::detail
