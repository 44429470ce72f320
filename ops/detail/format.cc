#include "ops/detail/format.h"

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <functional>
#include <iterator>
#include <limits>
#include <optional>
#include <utility>
#include <vector>

#include "engine/error.h"
#include "ops/half.h"

// The code below follows numpy/core/arrayprint.py of NumPy 1.24 with its
// default options; the numpy function each part mirrors is named beside it.

namespace tagflow::detail {
namespace {

// NumPy's default print options (np.get_printoptions()).
constexpr std::size_t kPrecision = 8;             // most digits after the point
constexpr std::size_t kLineWidth = 75;            // characters per line
constexpr std::int64_t kSummaryThreshold = 1000;  // larger arrays are summarised
constexpr std::int64_t kEdgeItems = 3;            // items kept at each end of a summarised axis

/// The array being printed: its row-major shape, the stride of each axis in
/// elements, and whether numpy would summarise it.
struct ArrayShape {
  std::span<const std::int64_t> extents;
  std::vector<std::int64_t> strides;
  bool summarise = false;
};

/// Checks `shape` against the number of values and derives the rest.
ArrayShape describe_shape(std::span<const std::int64_t> shape, std::size_t value_count) {
  TAGFLOW_CHECK(!shape.empty(), "format_array: expected at least one dimension, got a 0-d shape");
  ArrayShape array{shape, std::vector<std::int64_t>(shape.size()), false};
  std::int64_t size = 1;
  for (std::size_t axis = shape.size(); axis-- > 0;) {
    TAGFLOW_CHECK(shape[axis] >= 0, "format_array: expected dimension {} to be >= 0, got {}", axis,
                  shape[axis]);
    array.strides[axis] = size;
    size *= shape[axis];
  }
  TAGFLOW_CHECK(static_cast<std::size_t>(size) == value_count,
                "format_array: expected {} values for the shape, got {}", size, value_count);
  array.summarise = size > kSummaryThreshold;
  return array;
}

/// The indices printed along an axis of `length` (numpy's `_leading_trailing`):
/// all of them, or the first and last kEdgeItems around a gap, std::nullopt,
/// that prints as "...".
std::vector<std::optional<std::int64_t>> shown_slots(std::int64_t length, bool summarise) {
  std::vector<std::optional<std::int64_t>> slots;
  if (!summarise || length <= 2 * kEdgeItems) {
    for (std::int64_t i = 0; i < length; ++i) slots.emplace_back(i);
    return slots;
  }
  for (std::int64_t i = 0; i < kEdgeItems; ++i) slots.emplace_back(i);
  slots.emplace_back(std::nullopt);
  for (std::int64_t i = length - kEdgeItems; i < length; ++i) slots.emplace_back(i);
  return slots;
}

/// Appends the row-major positions of the printed elements to `positions`.
void collect_shown_positions(const ArrayShape& array, std::size_t axis, std::int64_t offset,
                             std::vector<std::int64_t>& positions) {
  for (const auto& slot : shown_slots(array.extents[axis], array.summarise)) {
    if (!slot) continue;
    const std::int64_t position = offset + *slot * array.strides[axis];
    if (axis + 1 == array.extents.size()) {
      positions.push_back(position);
    } else {
      collect_shown_positions(array, axis + 1, position, positions);
    }
  }
}

/// The values numpy prints; widths and notation are chosen from these alone.
template <typename T>
std::vector<T> shown_values(std::span<const T> values, const ArrayShape& array) {
  std::vector<std::int64_t> positions;
  collect_shown_positions(array, 0, 0, positions);
  std::vector<T> shown;
  shown.reserve(positions.size());
  for (std::int64_t position : positions)
    shown.push_back(values[static_cast<std::size_t>(position)]);
  return shown;
}

std::string pad_to_left(std::string text, std::size_t width) {
  if (text.size() < width) text.insert(0, width - text.size(), ' ');
  return text;
}

/// Formats the element at a row-major position, already padded.
using ElementFormatter = std::function<std::string(std::int64_t position)>;

/// Lays elements out in nested brackets as numpy's `_formatArray` does: rows
/// wrap before kLineWidth with continuation lines indented past the brackets,
/// and the blocks of axis k are separated by ndim - 1 - k newlines.
class NestedPrinter {
 public:
  NestedPrinter(const ArrayShape& array, ElementFormatter format_element)
      : array_(array), format_element_(std::move(format_element)) {}

  std::string print() const { return print_axis(0, 0, " ", kLineWidth); }

 private:
  /// `indent` is where this axis' items start on a new line; `width` is the
  /// room left before the closing brackets of the enclosing axes.
  std::string print_axis(std::size_t axis, std::int64_t offset, const std::string& indent,
                         std::size_t width) const {
    const std::string items = axis + 1 == array_.extents.size()
                                  ? print_row(offset, indent, width)
                                  : print_blocks(axis, offset, indent, width);
    std::string text = "[";  // appended, not concatenated: GCC 12 misreports `+` here
    text.append(items, indent.size());
    text += ']';
    return text;
  }

  std::string print_row(std::int64_t offset, const std::string& indent, std::size_t width) const {
    const std::size_t line_limit = width - 1;  // leaves room for the ']'
    const auto slots = shown_slots(array_.extents.back(), array_.summarise);
    std::string text;
    std::string line = indent;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      const std::string word = slots[i] ? format_element_(offset + *slots[i]) : "...";
      if (line.size() + word.size() > line_limit && line.size() > indent.size()) {
        text += line.substr(0, line.find_last_not_of(' ') + 1) + "\n";
        line = indent;
      }
      line += word;
      if (i + 1 < slots.size()) line += ' ';
    }
    return text + line;
  }

  std::string print_blocks(std::size_t axis, std::int64_t offset, const std::string& indent,
                           std::size_t width) const {
    const std::string separator(array_.extents.size() - 1 - axis, '\n');
    const auto slots = shown_slots(array_.extents[axis], array_.summarise);
    std::string text;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      text += indent;
      text += slots[i] ? print_axis(axis + 1, offset + *slots[i] * array_.strides[axis],
                                    indent + " ", width - 1)
                       : "...";
      if (i + 1 < slots.size()) text += separator;
    }
    return text;
  }

  const ArrayShape& array_;
  ElementFormatter format_element_;
};

/// A finite float's text split at the point, as numpy pads it: "-12.5" is
/// {"-12", "5"}; a scientific mantissa "1.25" (of 1.25e-05) is {"1", "25"}.
struct FloatDigits {
  std::string integer;   ///< sign and integer digits, e.g. "-0"
  std::string fraction;  ///< digits after the point, possibly none
};

std::string float_text(float value, std::chars_format format, std::optional<int> precision = {}) {
  std::array<char, 128> buffer{};
  char* const end = buffer.data() + buffer.size();
  const auto result = precision ? std::to_chars(buffer.data(), end, value, format, *precision)
                                : std::to_chars(buffer.data(), end, value, format);
  assert(result.ec == std::errc{});
  return std::string(buffer.data(), result.ptr);
}

/// True when `text` reads back as `value` in `width` (float32: the same
/// float; float16: the same float16).
bool reads_back(const std::string& text, float value, FloatWidth width) {
  if (width == FloatWidth::kFloat16) {  // the decimal rounded once to float16
    double parsed = 0;
    const auto result = std::from_chars(text.data(), text.data() + text.size(), parsed);
    return result.ec == std::errc{} && Half(round_to_odd(parsed)).bits == Half(value).bits;
  }
  float parsed = 0;
  const auto result = std::from_chars(text.data(), text.data() + text.size(), parsed);
  return result.ec == std::errc{} && parsed == value;
}

FloatDigits split_at_point(const std::string& text) {
  const std::size_t point = text.find('.');
  if (point == std::string::npos) return {text, ""};
  return {text.substr(0, point), text.substr(point + 1)};
}

/// The mantissa of the shortest scientific text that reads back as the same
/// element (numpy's 'unique' mode). A float32 needs at most 9 significant
/// digits and a float16 5, so numpy's cut at kPrecision fraction digits
/// never applies.
FloatDigits shortest_mantissa(float value, FloatWidth width) {
  std::string text = float_text(value, std::chars_format::scientific);
  if (width == FloatWidth::kFloat16) {
    for (int digits = 0; digits <= 4; ++digits) {
      text = float_text(value, std::chars_format::scientific, digits);
      if (reads_back(text, value, width)) break;
    }
  }
  return split_at_point(text.substr(0, text.find('e')));
}

/// Positional digits in numpy's 'maxprec' mode: every integer digit exactly
/// (numpy's `min_digits=0` runs Dragon4 down to the units place, so 74413168.
/// stays exact where the shortest digits would give 74413170.), then the
/// shortest fraction that reads back as the same float32, correctly rounded to
/// kPrecision digits when longer and without trailing zeros. std::to_chars'
/// shortest fixed form is exactly the first two for a float32; a float16's
/// fraction is the fewest correctly rounded digits that read back as it.
FloatDigits positional_digits(float value, FloatWidth width) {
  if (width == FloatWidth::kFloat16) {
    std::string text;
    for (int digits = 0; digits <= static_cast<int>(kPrecision); ++digits) {
      text = float_text(value, std::chars_format::fixed, digits);
      if (reads_back(text, value, width)) break;
    }
    if (const std::size_t point = text.find('.'); point != std::string::npos) {
      text.erase(text.find_last_not_of('0') + 1);
      if (text.back() == '.') text.pop_back();
    }
    return split_at_point(text);
  }
  std::string text = float_text(value, std::chars_format::fixed);
  const std::size_t point = text.find('.');
  if (point != std::string::npos && text.size() - point - 1 > kPrecision) {
    text = float_text(value, std::chars_format::fixed, static_cast<int>(kPrecision));
    text.erase(text.find_last_not_of('0') + 1);
  }
  return split_at_point(text);
}

/// Whether numpy uses scientific notation (`FloatingFormat.fillFormat`): when a
/// non-zero finite magnitude is >= 1e8 or < 1e-4, or the largest is more than
/// 1000 times the smallest. numpy compares the float32 extremes with the Python
/// floats 1e8 and 1e-4 in double but divides them in float32, and so do we:
/// [1e-4, 1e-2] is scientific since float32(1e-4) < 1e-4, and [6.36998, 6369.98]
/// is positional since their float32 quotient rounds to exactly 1000.
/// A float16's quotient is rounded to float16, as numpy divides float16s.
bool uses_scientific(const std::vector<float>& finite_values, FloatWidth width) {
  float largest = 0;
  float smallest = std::numeric_limits<float>::infinity();
  for (float value : finite_values) {
    if (value == 0) continue;
    largest = std::max(largest, std::fabs(value));
    smallest = std::min(smallest, std::fabs(value));
  }
  if (largest == 0) return false;
  float ratio = largest / smallest;  // float32 division, may overflow to inf
  if (width == FloatWidth::kFloat16) ratio = static_cast<float>(Half(ratio));
  return static_cast<double>(largest) >= 1e8 || static_cast<double>(smallest) < 1e-4 ||
         ratio > 1000.0f;
}

/// How every element of one float array is padded, shared by all elements.
struct FloatLayout {
  bool scientific = false;
  std::size_t pad_left = 0;         ///< width of sign and integer digits
  std::size_t pad_right = 0;        ///< width of everything after the point
  std::size_t fraction_digits = 0;  ///< scientific: mantissa digits after the point
};

/// numpy's `FloatingFormat.fillFormat` for floatmode 'maxprec'.
FloatLayout choose_float_layout(const std::vector<float>& shown, FloatWidth width) {
  std::vector<float> finite;
  std::copy_if(shown.begin(), shown.end(), std::back_inserter(finite),
               [](float value) { return std::isfinite(value); });
  FloatLayout layout;
  layout.scientific = uses_scientific(finite, width);
  std::size_t fraction_width = 0;
  for (float value : finite) {
    const FloatDigits digits =
        layout.scientific ? shortest_mantissa(value, width) : positional_digits(value, width);
    layout.pad_left = std::max(layout.pad_left, digits.integer.size());
    fraction_width = std::max(fraction_width, digits.fraction.size());
  }
  layout.fraction_digits = fraction_width;
  // A scientific fraction is followed by "e+XX": numpy's exponent width is two
  // digits unless one needs more, and a float32 never does (|exponent| <= 45).
  layout.pad_right = layout.scientific ? fraction_width + 4 : fraction_width;

  // "nan", "inf" and "-inf" are right-aligned to the full width, widening it if needed.
  const bool has_non_finite = finite.size() != shown.size();
  const bool has_negative_infinity = std::any_of(
      shown.begin(), shown.end(), [](float value) { return std::isinf(value) && value < 0; });
  if (has_non_finite) {
    const std::size_t widest_word = has_negative_infinity ? 4 : 3;
    const std::size_t point_and_after = layout.pad_right + 1;
    if (widest_word > point_and_after) {
      layout.pad_left = std::max(layout.pad_left, widest_word - point_and_after);
    }
  }
  return layout;
}

/// One element in the layout (`FloatingFormat.__call__`).
std::string format_float(float value, const FloatLayout& layout, FloatWidth element) {
  const std::size_t width = layout.pad_left + 1 + layout.pad_right;
  if (std::isnan(value)) return pad_to_left("nan", width);
  if (std::isinf(value)) return pad_to_left(value < 0 ? "-inf" : "inf", width);
  if (layout.scientific) {
    // Every element gets exactly fraction_digits digits of its exact value,
    // correctly rounded (Dragon4 with `min_digits`): beside an element needing
    // 8 digits, 280.18555 prints as 2.80185547e+02, not 2.80185550e+02.
    const auto digits = static_cast<int>(layout.fraction_digits);
    std::string text = float_text(value, std::chars_format::scientific, digits);
    if (const std::size_t e = text.find('e'); digits == 0 && e != std::string::npos) {
      text.insert(e, 1, '.');
    }
    return pad_to_left(text, width);
  }
  const FloatDigits digits = positional_digits(value, element);
  std::string text = pad_to_left(digits.integer, layout.pad_left);
  text += '.';
  text += digits.fraction;
  return text.append(layout.pad_right - digits.fraction.size(), ' ');
}

}  // namespace

std::string format_array(std::span<const float> values, std::span<const std::int64_t> shape,
                         FloatWidth width) {
  const ArrayShape array = describe_shape(shape, values.size());
  if (values.empty()) return "[]";
  const FloatLayout layout = choose_float_layout(shown_values(values, array), width);
  return NestedPrinter(array,
                       [&](std::int64_t position) {
                         return format_float(values[static_cast<std::size_t>(position)], layout,
                                             width);
                       })
      .print();
}

std::string format_array(std::span<const std::int64_t> values,
                         std::span<const std::int64_t> shape) {
  const ArrayShape array = describe_shape(shape, values.size());
  if (values.empty()) return "[]";
  // numpy's IntegerFormat: right-aligned to the wider of the extremes shown.
  const std::vector<std::int64_t> shown = shown_values(values, array);
  const auto [smallest, largest] = std::minmax_element(shown.begin(), shown.end());
  const std::size_t width =
      std::max(std::to_string(*smallest).size(), std::to_string(*largest).size());
  return NestedPrinter(array,
                       [&](std::int64_t position) {
                         return pad_to_left(
                             std::to_string(values[static_cast<std::size_t>(position)]), width);
                       })
      .print();
}

}  // namespace tagflow::detail
