#pragma once
// The two 16-bit floating-point element types: Half (IEEE 754 binary16,
// NumPy's and CUDA's float16) and BFloat16 (the upper half of a float32,
// as TPUs, PyTorch and CUDA's __nv_bfloat16 define it). Each is stored as
// its bits and converts to and from float:
//
//   Half h(0.1f);                  // 0.0999755859375, the nearest float16
//   float f = static_cast<float>(h);
//   BFloat16 b(3.14159f);          // 3.140625
//
// Threads: concurrent reads, exclusive writes. Half and BFloat16 are values
// (as a std::uint16_t); the conversions are pure functions.
//
// Note [Rounding to 16 bits]
// float -> 16 bits rounds to nearest, ties to even, as IEEE 754's default,
// NumPy's astype, PyTorch's .half()/.bfloat16() and CUDA's __float2half_rn
// and __float2bfloat16_rn do. Infinities stay infinities; a NaN stays a
// NaN: float16 keeps its sign and the top ten bits of its payload, as
// NumPy does (a payload whose top bits are all zero becomes 0x200, the
// quiet bit, where NumPy sets the lowest); bfloat16 gives the quiet NaN
// 0x7fc0 with the NaN's sign (PyTorch's scalar c10::BFloat16 gives 0x7fc0
// whatever the sign, its vectorised kernels 0xffff). float16 overflows to infinity from 65520 up
// (the halfway point past its largest finite value, 65504); below 2^-14 it has subnormals down to
// 2^-24, and a value at or under 2^-25 becomes zero. bfloat16 has float32's exponent range,
// subnormals included. 16 bits -> float is exact. A double (a scalar: full's value, arange's steps)
// is first rounded to a float *to odd* (toward zero, the last bit set when anything was cut), which
// float's 13 or more spare bits make a correct first step: the 16-bit result is the double's
// nearest, rounded once. The functions are constexpr and need nothing from the library, so CUDA
// kernels use the same ones (TAGFLOW_HOST_DEVICE) and give the same bits as the CPU (hence
// __builtin_bit_cast, which nvcc's device code takes, where std::bit_cast is host-only).

#include <cstdint>
#include <type_traits>

#ifndef TAGFLOW_HOST_DEVICE  // as ops/kernels/host_device.h defines it
#if defined(__CUDACC__)
#define TAGFLOW_HOST_DEVICE __host__ __device__
#else
#define TAGFLOW_HOST_DEVICE
#endif
#endif

namespace tagflow {

/// `value` as a float rounded to odd (Note [Rounding to 16 bits]): exact
/// when it is; else toward zero with the last mantissa bit set.
TAGFLOW_HOST_DEVICE constexpr float round_to_odd(double value) {
  const float nearest = static_cast<float>(value);
  if (value != value || static_cast<double>(nearest) == value) return nearest;  // NaN, or exact
  std::uint32_t bits = __builtin_bit_cast(std::uint32_t, nearest);
  const double magnitude = value < 0 ? -value : value;
  const double rounded = nearest < 0 ? -static_cast<double>(nearest) : static_cast<double>(nearest);
  if (rounded > magnitude) --bits;  // one step toward zero (an infinity to the largest float)
  return __builtin_bit_cast(float, bits | 1u);
}

namespace half_bits {

/// `a` if `c`, else `b`, by masks: no branch, so that loops vectorize
/// (GCC keeps a conditional expression of these as a branch).
TAGFLOW_HOST_DEVICE constexpr std::uint32_t pick(bool c, std::uint32_t a, std::uint32_t b) {
  const std::uint32_t mask = 0u - static_cast<std::uint32_t>(c);
  return (a & mask) | (b & ~mask);
}

/// The float16 nearest to `value` (Note [Rounding to 16 bits]), as bits.
///
/// Every case is computed and the right one selected, without branches, so
/// that a loop of conversions vectorizes. A normal result: the exponent
/// rebiased (127 -> 15) and the mantissa cut to 10 bits, rounded to nearest
/// even by adding 0xfff plus the kept part's lowest bit (a carry moves to
/// the next exponent, and from 65520 up to infinity). A subnormal one
/// (below 2^-14): the value plus 0.5f, whose float's unit is 2^-24, float16's
/// smallest step, so the float addition itself rounds to nearest even; its
/// low bits are then the result (2^-14 itself when it rounds up).
TAGFLOW_HOST_DEVICE constexpr std::uint16_t from_float(float value) {
  const std::uint32_t x = __builtin_bit_cast(std::uint32_t, value);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  const std::uint32_t magnitude = x & 0x7fffffffu;
  const std::uint32_t normal = (magnitude - 0x38000000u + 0xfffu + ((magnitude >> 13) & 1u)) >> 13;
  const std::uint32_t subnormal =
      __builtin_bit_cast(std::uint32_t, __builtin_bit_cast(float, magnitude) + 0.5f) - 0x3f000000u;
  const std::uint32_t payload = (magnitude >> 13) & 0x3ffu;
  const std::uint32_t nan = 0x7c00u | pick(payload != 0, payload, 0x200u);
  std::uint32_t result = pick(magnitude < 0x38800000u, subnormal, normal);
  result = pick(magnitude >= 0x477ff000u, 0x7c00u, result);  // 65520 and up, infinity: infinity
  result = pick(magnitude > 0x7f800000u, nan, result);
  return static_cast<std::uint16_t>(sign | result);
}

/// The float `bits` (a float16) stands for, exactly; without branches, as
/// from_float.
TAGFLOW_HOST_DEVICE constexpr float to_float(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1fu;
  const std::uint32_t mantissa = bits & 0x3ffu;
  const std::uint32_t normal = ((exponent + 112) << 23) | (mantissa << 13);
  const std::uint32_t special = 0x7f800000u | (mantissa << 13);  // infinity or NaN
  // Zero or subnormal: mantissa * 2^-24, exact in a float.
  const std::uint32_t subnormal =
      __builtin_bit_cast(std::uint32_t, static_cast<float>(mantissa) * 0x1p-24f);
  const std::uint32_t magnitude =
      pick(exponent == 0, subnormal, pick(exponent == 0x1fu, special, normal));
  return __builtin_bit_cast(float, sign | magnitude);
}

}  // namespace half_bits

namespace bfloat16_bits {

/// The bfloat16 nearest to `value` (Note [Rounding to 16 bits]), as bits.
TAGFLOW_HOST_DEVICE constexpr std::uint16_t from_float(float value) {
  const std::uint32_t x = __builtin_bit_cast(std::uint32_t, value);
  const std::uint32_t nan = ((x >> 16) & 0x8000u) | 0x7fc0u;
  // Adding 0x7fff, plus one when the kept part is odd, rounds to nearest
  // even; a carry out of the mantissa moves to the next exponent (to
  // infinity past the largest finite value).
  const std::uint32_t rounded = (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
  return static_cast<std::uint16_t>(half_bits::pick((x & 0x7fffffffu) > 0x7f800000u, nan, rounded));
}

/// The float `bits` (a bfloat16) stands for, exactly.
TAGFLOW_HOST_DEVICE constexpr float to_float(std::uint16_t bits) {
  return __builtin_bit_cast(float, static_cast<std::uint32_t>(bits) << 16);
}

}  // namespace bfloat16_bits

/// An IEEE 754 binary16 element (DType::kFloat16).
struct Half {
  std::uint16_t bits = 0;

  Half() = default;
  /// The nearest float16 (Note [Rounding to 16 bits]).
  TAGFLOW_HOST_DEVICE constexpr explicit Half(float value) : bits(half_bits::from_float(value)) {}
  TAGFLOW_HOST_DEVICE constexpr explicit operator float() const {
    return half_bits::to_float(bits);
  }
  /// The element whose bits are `bits`.
  TAGFLOW_HOST_DEVICE static constexpr Half from_bits(std::uint16_t bits) {
    Half h;
    h.bits = bits;
    return h;
  }
};

/// A bfloat16 element (DType::kBFloat16).
struct BFloat16 {
  std::uint16_t bits = 0;

  BFloat16() = default;
  /// The nearest bfloat16 (Note [Rounding to 16 bits]).
  TAGFLOW_HOST_DEVICE constexpr explicit BFloat16(float value)
      : bits(bfloat16_bits::from_float(value)) {}
  TAGFLOW_HOST_DEVICE constexpr explicit operator float() const {
    return bfloat16_bits::to_float(bits);
  }
  /// The element whose bits are `bits`.
  TAGFLOW_HOST_DEVICE static constexpr BFloat16 from_bits(std::uint16_t bits) {
    BFloat16 b;
    b.bits = bits;
    return b;
  }
};

static_assert(sizeof(Half) == 2 && sizeof(BFloat16) == 2, "16-bit elements");

/// True for the 16-bit element types, Half and BFloat16.
template <typename T>
inline constexpr bool is_half_element = std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>;

// Note [Half precision arithmetic]
// No operator computes in 16 bits. A kernel reads each float16 or bfloat16
// element exactly into a float (its ComputeType), computes as it does for
// float32 arrays, and rounds the result once, to nearest even, when it
// stores it: c = a * b on float16 is float16(float(a) * float(b)). Sums,
// means, norms and softmax's denominators accumulate as float32's do (in
// double on the CPU), matrix products and convolutions in float32, and a
// scalar operand (x * 0.1) stays a float instead of being rounded to the
// array's type first, as PyTorch computes. The CUDA kernels follow the same
// rule (cuBLAS and cuDNN with float32 compute types), so a CPU device, a
// simulated GPU and a real GPU differ only where their float32 results do.

/// The type kernels compute an element of type T in: float for the 16-bit
/// types (Note [Half precision arithmetic]), T itself otherwise.
template <typename T>
using ComputeType = std::conditional_t<is_half_element<T>, float, T>;

/// `value` converted to element type `To`: to a half type by rounding a
/// float, or a double through round_to_odd (Note [Rounding to 16 bits]; an
/// integer is made a float first, as PyTorch converts), from one through
/// float, else as static_cast converts.
template <typename To, typename From>
TAGFLOW_HOST_DEVICE constexpr To convert_element(From value) {
  constexpr bool to_half = is_half_element<To>;
  constexpr bool from_half = is_half_element<From>;
  if constexpr (std::is_same_v<To, From>) {
    return value;  // the same bits, NaN payloads included
  } else if constexpr (to_half && std::is_same_v<From, double>) {
    return To(round_to_odd(value));
  } else if constexpr (to_half) {
    return To(static_cast<float>(value));
  } else if constexpr (from_half) {
    return static_cast<To>(static_cast<float>(value));
  } else {
    return static_cast<To>(value);
  }
}

}  // namespace tagflow
