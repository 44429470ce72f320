#include "ops/detail/operator_checks.h"

#include <cmath>
#include <limits>

#include "engine/engine.h"
#include "ops/priority.h"

namespace tagflow::detail {

std::string ordinal(int position) {
  if (position == 1) return "first";
  const int tens = position % 100;
  const char* suffix = "th";
  if (tens < 11 || tens > 13) {
    if (position % 10 == 1) suffix = "st";
    if (position % 10 == 2) suffix = "nd";
    if (position % 10 == 3) suffix = "rd";
  }
  return std::to_string(position) + suffix;
}

void throw_dtype_unsupported(const char* what, DType dtype) {
  throw_error(
      "{}: no kernel here for {} elements (its operator should have refused them before pushing: "
      "please report this)",
      what, dtype_name(dtype));
}

void check_defined(const char* op, const NDArray& array, int position) {
  TAGFLOW_CHECK(array.defined(), "{}: the {} argument is an empty array (default-constructed)", op,
                ordinal(position));
}

void check_same_context(const char* op, std::initializer_list<const NDArray*> inputs) {
  int position = 0;
  Context first;
  for (const NDArray* a : inputs) {
    ++position;
    check_defined(op, *a, position);
    if (position == 1) {
      first = a->context();
      continue;
    }
    TAGFLOW_CHECK(a->context() == first,
                  "{}: all inputs must live on the same context, but the first argument is on {} "
                  "while the {} argument is on {}. Nothing is copied implicitly: move one with "
                  "copyto() or as_in_context()",
                  op, first.str(), ordinal(position), a->context().str());
  }
}

void check_same_context(const char* op, std::span<const NDArray> inputs) {
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const int position = static_cast<int>(i) + 1;
    check_defined(op, inputs[i], position);
    TAGFLOW_CHECK(inputs[i].context() == inputs[0].context(),
                  "{}: all inputs must live on the same context, but the first argument is on {} "
                  "while the {} argument is on {}. Nothing is copied implicitly: move one with "
                  "copyto() or as_in_context()",
                  op, inputs[0].context().str(), ordinal(position), inputs[i].context().str());
  }
}

void check_same_dtype(const char* op, std::initializer_list<const NDArray*> inputs) {
  int position = 0;
  DType first = DType::kFloat32;
  for (const NDArray* a : inputs) {
    ++position;
    if (position == 1) {
      first = a->dtype();
      continue;
    }
    TAGFLOW_CHECK(a->dtype() == first,
                  "{}: all inputs must have the same dtype, but the first argument is {} while "
                  "the {} argument is {}. Convert one with astype()",
                  op, dtype_name(first), ordinal(position), dtype_name(a->dtype()));
  }
}

void check_floating(const char* op, const NDArray& array, int position) {
  TAGFLOW_CHECK(is_floating(array.dtype()),
                "{}: expected a floating-point array (float32, float16 or bfloat16) as the {} "
                "argument, got {}. Convert it with astype(DType::kFloat32)",
                op, ordinal(position), dtype_name(array.dtype()));
}

void check_float32(const char* op, const NDArray& array, int position) {
  TAGFLOW_CHECK(array.dtype() == DType::kFloat32,
                "{}: expected a float32 array as the {} argument, got {}. Convert it with "
                "astype(DType::kFloat32)",
                op, ordinal(position), dtype_name(array.dtype()));
}

void check_scalar_fits(const char* op, double value, DType dtype) {
  if (is_floating(dtype)) return;
  double low = 0;
  double high = 0;
  switch (dtype) {
    case DType::kInt32:
      low = std::numeric_limits<std::int32_t>::min();
      high = std::numeric_limits<std::int32_t>::max();
      break;
    case DType::kInt64:  // doubles hold integers exactly up to 2^53
      low = -9007199254740992.0;
      high = 9007199254740992.0;
      break;
    case DType::kUInt8:
      high = 255;
      break;
    case DType::kFloat32:
    case DType::kFloat16:
    case DType::kBFloat16:
      break;
  }
  TAGFLOW_CHECK(std::isfinite(value) && value == std::trunc(value) && value >= low && value <= high,
                "{}: the scalar {} cannot be used with a {} array: expected an integer in [{}, {}]",
                op, value, dtype_name(dtype), low, high);
}

void push_operation(const char* op, Context ctx, VarList reads, VarList writes, OpFunction fn) {
  Engine::get().push({.name = op,
                      .ctx = ctx,
                      .reads = std::move(reads),
                      .writes = std::move(writes),
                      .priority = current_priority(),
                      .fn = std::move(fn)});
}

}  // namespace tagflow::detail
