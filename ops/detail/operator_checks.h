#pragma once
// The checks every operator makes before pushing anything: inputs defined,
// on one context, of the dtypes it accepts. Each error names the operator,
// what was expected and what came. Internal to ops/.

#include <initializer_list>
#include <span>
#include <string>

#include "ops/ndarray.h"

namespace tagflow::detail {

/// "first", "2nd", "3rd", "4th"...: MXNet's wording for argument positions.
std::string ordinal(int position);

/// Throws unless `array` is defined; `position` counts from 1.
void check_defined(const char* op, const NDArray& array, int position);

/// Throws unless every input lives on the first one's context:
/// "broadcast_add: all inputs must live on the same context, but the first
/// argument is on cpu(0) while the 2nd argument is on gpu(0) ...".
void check_same_context(const char* op, std::initializer_list<const NDArray*> inputs);
/// The same for a run of inputs (concat, stack), counted from 1.
void check_same_context(const char* op, std::span<const NDArray> inputs);

/// Throws unless every input has the first one's dtype.
void check_same_dtype(const char* op, std::initializer_list<const NDArray*> inputs);

/// Throws unless `array` holds float32, float16 or bfloat16 (the operators
/// of real analysis).
void check_floating(const char* op, const NDArray& array, int position);

/// Throws unless `array` holds float32 (what only float32 kernels take).
void check_float32(const char* op, const NDArray& array, int position);

/// Throws unless `value` is exactly representable in `dtype` (a scalar
/// operand of an integer array must be an integer in range).
void check_scalar_fits(const char* op, double value, DType dtype);

/// Pushes `fn` as operation `op` on `ctx`; a tiny wrapper over Engine::push
/// that keeps the operators short.
void push_operation(const char* op, Context ctx, VarList reads, VarList writes, OpFunction fn);

}  // namespace tagflow::detail
