#pragma once
// format_array: an array printed exactly as NumPy 1.24's str(ndarray) prints
// it with the default print options, which is how MXNet users see arrays.

#include <cstdint>
#include <span>
#include <string>

namespace tagflow::detail {

/// The element type whose values are printed: NumPy prints the shortest
/// digits that read back as the same element of it.
enum class FloatWidth : std::uint8_t { kFloat32, kFloat16 };

/// NumPy's str() of a float32 array (or, with FloatWidth::kFloat16, of a
/// float16 one whose values `values` holds exactly), e.g. "[[0. 0.]\n [0. 0.]]" or
/// "[ 20.085537 109.1963   445.2395  ]". `shape` has at least one dimension;
/// `values` are row-major and hold product(shape) elements. Throws
/// tagflow::Error when the shape is empty, negative, or does not match.
///
///   std::vector<float> v{1, 2, 3};
///   std::vector<std::int64_t> shape{3};
///   format_array(v, shape);  // "[1. 2. 3.]"
std::string format_array(std::span<const float> values, std::span<const std::int64_t> shape,
                         FloatWidth width = FloatWidth::kFloat32);

/// NumPy's str() of an integer array (any integer dtype, widened to int64):
/// elements right-aligned to a common width, e.g. "[ 1  2 -3]".
std::string format_array(std::span<const std::int64_t> values, std::span<const std::int64_t> shape);

}  // namespace tagflow::detail
