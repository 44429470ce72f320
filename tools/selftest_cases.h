#pragma once
// The operators `tagflow selftest` checks: for each, how to draw its input
// shapes (broadcasting, odd and empty sizes), how to run it with tagflow, and
// an independent reference of the same function, a plain loop in double
// precision over row-major values.

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "tagflow/tagflow.h"
#include "tools/selftest_references.h"

namespace tagflow::tools {

struct OperatorCase {
  std::string name;
  /// The input shapes of one trial, drawn from `rng`.
  std::function<std::vector<Shape>(std::mt19937_64& rng)> shapes;
  /// The operator through tagflow's public API, on the inputs' device.
  std::function<NDArray(const std::vector<NDArray>& inputs)> run;
  /// The same function in double: row-major inputs (with their shapes) to
  /// row-major output.
  std::function<Values(const std::vector<Values>& inputs, const std::vector<Shape>& shapes)>
      reference;
  /// Where the inputs are drawn (kept away from kinks and poles).
  double low = -2;
  double high = 2;
  /// Whether the gradient is checked too (against central differences of
  /// the reference).
  bool gradient = true;
  /// |got - expected| <= tolerance * (1 + |expected|), per element.
  double tolerance = 2e-5;
  /// float16 or bfloat16: the operator runs in that precision. The drawn
  /// values are rounded to it first, so that the reference sees the very
  /// inputs the operator does; `run` converts them, and the result is read
  /// back through float32.
  DType dtype = DType::kFloat32;
};

/// Every operator case, in the order the report lists them.
std::vector<OperatorCase> operator_cases();

}  // namespace tagflow::tools
