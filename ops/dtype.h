#pragma once
// DType: the element type of an array. float32 for computation; int32,
// int64 and uint8 for labels and raw data.

#include <cstdint>
#include <string_view>
#include <type_traits>

#include <cstddef>

namespace tagflow {

enum class DType : std::uint8_t { kFloat32 = 0, kInt32 = 1, kInt64 = 2, kUInt8 = 3 };

/// "float32", "int32", "int64", "uint8".
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
  }
  return 0;
}

/// The DType of a C++ element type: `dtype_of<float>` is DType::kFloat32.
template <typename T>
inline constexpr DType dtype_of = [] {
  if constexpr (std::is_same_v<T, float>) {
    return DType::kFloat32;
  } else if constexpr (std::is_same_v<T, std::int32_t>) {
    return DType::kInt32;
  } else if constexpr (std::is_same_v<T, std::int64_t>) {
    return DType::kInt64;
  } else {
    static_assert(std::is_same_v<T, std::uint8_t>,
                  "array elements are float, int32_t, int64_t or uint8_t");
    return DType::kUInt8;
  }
}();

}  // namespace tagflow

/// Runs `...` with `T` bound to the C++ type of `dtype`:
///
///   TAGFLOW_DTYPE_SWITCH(a.dtype(), T, { fill<T>(a, value); });
#define TAGFLOW_DTYPE_SWITCH(dtype, T, ...) \
  switch (dtype) {                          \
    case ::tagflow::DType::kFloat32: {      \
      using T = float;                      \
      __VA_ARGS__;                          \
    } break;                                \
    case ::tagflow::DType::kInt32: {        \
      using T = std::int32_t;               \
      __VA_ARGS__;                          \
    } break;                                \
    case ::tagflow::DType::kInt64: {        \
      using T = std::int64_t;               \
      __VA_ARGS__;                          \
    } break;                                \
    case ::tagflow::DType::kUInt8: {        \
      using T = std::uint8_t;               \
      __VA_ARGS__;                          \
    } break;                                \
  }
