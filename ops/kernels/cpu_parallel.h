#pragma once
// parallel_for_range: the loop every CPU kernel uses. Small ranges run in
// the calling thread (an operation on a few elements must not pay for a
// fork); large ones are split over oneTBB's threads in fixed blocks, so a
// kernel's result never depends on how the work was split. Internal to ops/.

#include <algorithm>
#include <cstdint>

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>

// Note [oneTBB under ThreadSanitizer]
// oneTBB's library is not instrumented: ThreadSanitizer sees neither the
// start and end of a parallel_for's tasks nor oneTBB's own task handoffs,
// and reports races inside and around every parallel loop. Under TSan the
// loops therefore run their blocks one after the other in the calling
// thread: TSan then checks everything tagflow itself synchronises (the
// engine, the allocators, the kernels' use of memory), and the parallel
// path is covered by the ordinary and ASan builds, which compare every
// kernel against serial references.
#if defined(__SANITIZE_THREAD__)
#define TAGFLOW_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TAGFLOW_TSAN 1
#endif
#endif

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
#ifdef TAGFLOW_TSAN
  for (std::int64_t begin = 0; begin < n; begin += grain) body(begin, std::min(n, begin + grain));
#else
  tbb::parallel_for(
      tbb::blocked_range<std::int64_t>(0, n, grain),
      [&](const tbb::blocked_range<std::int64_t>& r) { body(r.begin(), r.end()); },
      tbb::simple_partitioner());
#endif
}

template <typename Body>
void parallel_for_range(std::int64_t n, const Body& body) {
  parallel_for_range(n, kParallelGrain, body);
}

}  // namespace tagflow::detail
