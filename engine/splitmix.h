#pragma once
// SplitMix64: a seeded 64-bit mixer and the tiny generator built on it
// (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
// OOPSLA 2014). Their output is the same on every platform and compiler,
// unlike std::shuffle's and the std distributions', so a seed names the same
// shuffle, workload or replay everywhere: the data loader's epochs, the
// engine's differential tests and `tagflow stress` use them. Not for
// cryptography; the operators' random numbers are Philox (ops/random.h).
//
// Threads: safe to call concurrently. splitmix64() is a pure function.
// Threads: one thread at a time. A SplitMix64 generator changes with every
// word it draws: give each thread its own (seeded with splitmix64 of its
// number, say).

#include <cstdint>

namespace tagflow {

namespace detail {
/// SplitMix64's increment: 2^64 divided by the golden ratio, made odd.
inline constexpr std::uint64_t kSplitMix64Increment = 0x9E3779B97F4A7C15ULL;
}  // namespace detail

/// SplitMix64's output for the state `x`: x advanced by the golden-ratio
/// increment, then mixed. A bijection on 64-bit words whose outputs for
/// neighbouring inputs look unrelated, so it also hashes counters and
/// combines seeds:
///
///   std::uint64_t client_seed = seed ^ splitmix64(client);
///   std::uint64_t word_k = splitmix64(client_seed + k);  // a counter-based stream
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += detail::kSplitMix64Increment;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

/// The SplitMix64 generator: from `seed`, the words splitmix64(seed),
/// splitmix64(seed + g), splitmix64(seed + 2g), ... where g is the
/// golden-ratio increment.
///
///   SplitMix64 rng(seed);
///   std::swap(order[i - 1], order[rng() % i]);  // a portable Fisher-Yates step
class SplitMix64 {
 public:
  explicit constexpr SplitMix64(std::uint64_t seed) : state_(seed) {}

  /// The next word.
  constexpr std::uint64_t operator()() {
    const std::uint64_t word = splitmix64(state_);
    state_ += detail::kSplitMix64Increment;
    return word;
  }

 private:
  std::uint64_t state_;
};

}  // namespace tagflow
