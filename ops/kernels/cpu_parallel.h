#pragma once
// parallel_for_range: the loop every CPU kernel uses. Small ranges run in
// the calling thread (an operation on a few elements must not pay for a
// fork); large ones are split over oneTBB's threads in fixed blocks, so a
// kernel's result never depends on how the work was split. Internal to ops/.

#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

namespace tagflow::detail {

/// Elements per block; ranges up to this size run serially.
inline constexpr std::int64_t kParallelGrain = 32 * 1024;

/// Calls `body(begin, end)` over [0, n) in blocks.
template <typename Body>
void parallel_for_range(std::int64_t n, std::int64_t grain, const Body& body) {
  if (n <= grain) {
    if (n > 0) body(std::int64_t{0}, n);
    return;
  }
  tbb::parallel_for(
      tbb::blocked_range<std::int64_t>(0, n, grain),
      [&](const tbb::blocked_range<std::int64_t>& r) { body(r.begin(), r.end()); },
      tbb::simple_partitioner());
}

template <typename Body>
void parallel_for_range(std::int64_t n, const Body& body) {
  parallel_for_range(n, kParallelGrain, body);
}

}  // namespace tagflow::detail
