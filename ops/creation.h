#pragma once
// Creating arrays: from host values, filled, ranges, uninitialised. Every
// function takes the device last (`cpu(0)` by default) and checks that it
// exists: `array({1, 2, 3}, gpu(10))` with two GPUs throws DeviceError
// "gpu(10) does not exist: 2 GPUs (gpu(0)..gpu(1), simulated)".
//
//   NDArray a = array({1.f, 2.f, 3.f}, gpu(0));
//   NDArray b = zeros({3, 2}, DType::kFloat32, gpu(0));
//   NDArray r = arange(0, 10);          // [0. 1. ... 9.]
//
// Threads: safe to call concurrently. array() copies its values before it
// returns; fill() writes its array in push order, as any operator.

#include <cstdint>
#include <initializer_list>
#include <span>
#include <vector>

#include "ops/ndarray.h"

namespace tagflow {

/// A 1-D array of `values`.
NDArray array(std::initializer_list<float> values, Context ctx = cpu());
/// An array of `shape` from row-major `values` (`values.size()` must equal
/// the shape's size). The values are copied before the call returns.
template <typename T>
NDArray array(std::span<const T> values, Shape shape, Context ctx = cpu());
template <typename T>
NDArray array(const std::vector<T>& values, Shape shape, Context ctx = cpu()) {
  return array(std::span<const T>(values), shape, ctx);
}

/// Uninitialised memory (its values are whatever the allocator hands out).
NDArray empty(Shape shape, DType dtype = DType::kFloat32, Context ctx = cpu());
NDArray zeros(Shape shape, DType dtype = DType::kFloat32, Context ctx = cpu());
NDArray ones(Shape shape, DType dtype = DType::kFloat32, Context ctx = cpu());
/// Every element `value` (converted to `dtype`).
NDArray full(Shape shape, double value, DType dtype = DType::kFloat32, Context ctx = cpu());
/// The same on `ctx` in float32: `ones({3, 4}, gpu(0))`.
NDArray empty(Shape shape, Context ctx);
NDArray zeros(Shape shape, Context ctx);
NDArray ones(Shape shape, Context ctx);
NDArray full(Shape shape, double value, Context ctx);
NDArray zeros_like(const NDArray& like);
NDArray ones_like(const NDArray& like);
/// start, start + step, ... below `stop` (above it for a negative step).
NDArray arange(double start, double stop, double step = 1, DType dtype = DType::kFloat32,
               Context ctx = cpu());

/// Fills `out` with `value` (an engine operation writing it).
void fill(const NDArray& out, double value);

}  // namespace tagflow
