#pragma once
// DType: the element type of an array. float32 for computation; float16
// and bfloat16 (ops/half.h) for storage and mixed precision; int32, int64
// and uint8 for labels and raw data.
//
// Threads: safe to call concurrently. DType is an enum, and the functions
// here are constexpr functions of it.

#include <cstdint>
#include <string_view>
#include <type_traits>

#include <cstddef>

#include "ops/half.h"

namespace tagflow {

enum class DType : std::uint8_t {
  kFloat32 = 0,
  kInt32 = 1,
  kInt64 = 2,
  kUInt8 = 3,
  kFloat16 = 4,
  kBFloat16 = 5,
};

/// "float32", "int32", "int64", "uint8", "float16", "bfloat16".
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32:
      return "float32";
    case DType::kInt32:
      return "int32";
    case DType::kInt64:
      return "int64";
    case DType::kUInt8:
      return "uint8";
    case DType::kFloat16:
      return "float16";
    case DType::kBFloat16:
      return "bfloat16";
  }
  return "unknown";
}

/// Bytes per element.
constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32:
      return 4;
    case DType::kInt32:
      return 4;
    case DType::kInt64:
      return 8;
    case DType::kUInt8:
      return 1;
    case DType::kFloat16:
    case DType::kBFloat16:
      return 2;
  }
  return 0;
}

/// True for float16 and bfloat16.
constexpr bool is_half(DType t) { return t == DType::kFloat16 || t == DType::kBFloat16; }
/// True for float32, float16 and bfloat16.
constexpr bool is_floating(DType t) { return t == DType::kFloat32 || is_half(t); }

/// The DType of a C++ element type: `dtype_of<float>` is DType::kFloat32.
template <typename T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kFloat32;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return DType::kInt32;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return DType::kInt64;
  } else if constexpr (std::is_same_v<T, Half>) {
    return DType::kFloat16;
  } else if constexpr (std::is_same_v<T, BFloat16>) {
    return DType::kBFloat16;
  } else {
    static_assert(std::is_same_v<T, std::uint8_t>,
                  "array elements are float, Half, BFloat16, int32_t, int64_t or uint8_t");
    return DType::kUInt8;
  }
}();

}  // namespace tagflow

namespace tagflow::detail {
/// Throws tagflow::Error: `what` has no kernel for `dtype` (a half type
/// reaching a kernel of TAGFLOW_DTYPE_SWITCH, which operators refuse first).
[[noreturn]] void throw_dtype_unsupported(const char* what, DType dtype);
}  // namespace tagflow::detail

/// One case of the switches below: `T` bound to `type` for `value`.
#define TAGFLOW_DTYPE_CASE_(value, type, T, ...) \
  case ::tagflow::DType::value: {                \
    using T = type;                              \
    __VA_ARGS__;                                 \
  } break;

/// The cases of the dtypes arithmetic kernels compute in.
#define TAGFLOW_ARITHMETIC_DTYPE_CASES_(T, ...)             \
  TAGFLOW_DTYPE_CASE_(kFloat32, float, T, __VA_ARGS__)      \
  TAGFLOW_DTYPE_CASE_(kInt32, std::int32_t, T, __VA_ARGS__) \
  TAGFLOW_DTYPE_CASE_(kInt64, std::int64_t, T, __VA_ARGS__) \
  TAGFLOW_DTYPE_CASE_(kUInt8, std::uint8_t, T, __VA_ARGS__)

/// Runs `...` with `T` bound to the C++ type of `dtype`, one of the types
/// arithmetic kernels compute in (float, int32, int64, uint8); a half type
/// throws (operators convert or refuse those before their kernels run):
///
///   TAGFLOW_DTYPE_SWITCH(a.dtype(), T, { fill<T>(a, value); });
#define TAGFLOW_DTYPE_SWITCH(dtype, T, ...)                        \
  switch (dtype) {                                                 \
    TAGFLOW_ARITHMETIC_DTYPE_CASES_(T, __VA_ARGS__)                \
    case ::tagflow::DType::kFloat16:                               \
    case ::tagflow::DType::kBFloat16:                              \
      ::tagflow::detail::throw_dtype_unsupported(__func__, dtype); \
  }

/// TAGFLOW_DTYPE_SWITCH over every dtype, Half and BFloat16 included: for
/// kernels that only move or convert elements (convert_element in half.h).
#define TAGFLOW_ANY_DTYPE_SWITCH(dtype, T, ...)                         \
  switch (dtype) {                                                      \
    TAGFLOW_ARITHMETIC_DTYPE_CASES_(T, __VA_ARGS__)                     \
    TAGFLOW_DTYPE_CASE_(kFloat16, ::tagflow::Half, T, __VA_ARGS__)      \
    TAGFLOW_DTYPE_CASE_(kBFloat16, ::tagflow::BFloat16, T, __VA_ARGS__) \
  }

/// TAGFLOW_DTYPE_SWITCH over the floating-point dtypes (float, Half,
/// BFloat16), for the kernels of real analysis (softmax, losses, pooling);
/// an integer dtype throws (operators refuse those before pushing).
#define TAGFLOW_FLOAT_DTYPE_SWITCH(dtype, T, ...)                       \
  switch (dtype) {                                                      \
    TAGFLOW_DTYPE_CASE_(kFloat32, float, T, __VA_ARGS__)                \
    TAGFLOW_DTYPE_CASE_(kFloat16, ::tagflow::Half, T, __VA_ARGS__)      \
    TAGFLOW_DTYPE_CASE_(kBFloat16, ::tagflow::BFloat16, T, __VA_ARGS__) \
    case ::tagflow::DType::kInt32:                                      \
    case ::tagflow::DType::kInt64:                                      \
    case ::tagflow::DType::kUInt8:                                      \
      ::tagflow::detail::throw_dtype_unsupported(__func__, dtype);      \
  }
