#pragma once
// Random arrays, generated on the array's device by an engine operation
// (like mx.nd.random): nothing is generated on the host and copied.
//
//   random::seed(42);                                    // like mx.random.seed(42)
//   NDArray u = random::uniform(-1, 1, {2, 3}, gpu(0));  // in [-1, 1)
//   NDArray z = random::normal(0, 1, {1000});            // N(0, 1) on cpu(0)
//   NDArray w = random::normal(0, 0.01, {64, 32}, /*seed=*/7);
//
// Reproducible everywhere: the values depend only on the seed, the call
// number and the element's index, never on the device, its thread count or
// the engine's scheduling. The same seed and the same sequence of calls give
// the same float32 bits on cpu(i), simulated GPUs and real GPUs (normal: up
// to a rare last-bit difference on real GPUs, whose log/cos/sin differ from
// the host's; see normal_pair in ops/kernels/random_kernels.h).
//
// Each call without an explicit seed takes the next call number of a
// process-wide counter, on the calling thread, in program order; seed()
// sets the key and resets the counter. Before any seed() the generator is
// as after seed(0). A call with an explicit seed uses that key and call
// number 0 and leaves the global state alone: it gives exactly what the
// first call after seed(that seed) gives.
//
// The generator is Philox-4x32-10 (ops/kernels/philox.h); see Note
// [Counter-based random numbers] in ops/kernels/random_kernels.h.
//
// Threads: safe to call concurrently. One lock keeps the global key and
// counter consistent; but while several threads draw from the global
// generator, the values each call gets depend on the order the threads call
// in. For values that do not, give each thread's calls seeds of their own.

#include <cstdint>

#include "ops/ndarray.h"

namespace tagflow::random {

/// Sets the key of the global generator and restarts its call sequence:
/// the calls after `seed(s)` repeat the values of the calls after any
/// earlier `seed(s)`.
void seed(std::uint64_t seed_value);

/// Values uniformly distributed in [low, high): never `high`, even after
/// rounding to `dtype`. Needs finite low < high with a value of `dtype` in
/// between; `dtype` is float32, float16 or bfloat16 (a half type gets the
/// float32 draw rounded to nearest, kept inside [low, high); integers are
/// not drawn by this function).
///
///   NDArray u = random::uniform(0, 1, {2, 2}, gpu(1));
NDArray uniform(double low, double high, Shape shape, Context ctx = cpu(),
                DType dtype = DType::kFloat32);
/// The same with its own key `seed_value` (call number 0); the global
/// generator is neither read nor advanced.
///
///   NDArray a = random::uniform(0, 1, {3}, 5);  // always the same three values
NDArray uniform(double low, double high, Shape shape, std::uint64_t seed_value, Context ctx = cpu(),
                DType dtype = DType::kFloat32);

/// Values normally distributed with mean `mean` and standard deviation
/// `stddev` (finite, >= 0; 0 gives `mean` everywhere), by Box-Muller in
/// double precision, as float32 or rounded from it to float16 or bfloat16.
///
///   NDArray z = random::normal(0, 1, {4, 4}, gpu(0));
NDArray normal(double mean, double stddev, Shape shape, Context ctx = cpu(),
               DType dtype = DType::kFloat32);
/// The same with its own key `seed_value` (call number 0); the global
/// generator is neither read nor advanced.
NDArray normal(double mean, double stddev, Shape shape, std::uint64_t seed_value,
               Context ctx = cpu(), DType dtype = DType::kFloat32);

}  // namespace tagflow::random
