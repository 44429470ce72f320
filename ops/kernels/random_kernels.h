#pragma once
// The random array kernels: the bodies that turn Philox bits into values,
// written once for the host and CUDA devices, and the entry points of the
// CPU kernels (random_cpu.cc, also run by simulated GPUs) and the CUDA ones
// (random.cu). Internal to ops/.
//
// Note [Counter-based random numbers]
// Element i of the array made by one call is computed from Philox-4x32-10
// (philox.h) with key = the seed and counter = (call number, i / 4): the
// counter's words 0-1 hold the call number and words 2-3 i / 4, low word
// first; the element takes output word i % 4. So a value depends only on
// (seed, call number, i): not on the device, the number of threads, the
// block size or the order in which blocks run, and the CPU, simulated-GPU
// and CUDA kernels give the same bits (for normal, up to the rare case
// described at normal_pair). The call number is taken on the calling
// thread, in program order, when the operator is called (random.cc), so the
// engine's scheduling cannot change it either.
//
// Floating point is pinned down so that host and device round alike: the
// affine maps use fma (correctly rounded on both, and never split or
// contracted differently by the compilers), conversions to float round to
// nearest, and a uniform value is clamped into the floats of [low, high).

#include <cmath>
#include <cstdint>

#include "ops/kernels/host_device.h"
#include "ops/kernels/philox.h"

namespace tagflow::detail {

/// Which random stream a call reads: its key and its call number.
struct RandomDraw {
  std::uint64_t seed = 0;
  std::uint64_t call = 0;
};

/// uniform(low, high): `scale` = high - low; every value is clamped into
/// [min_value, max_value], the float32 values of [low, high).
struct UniformParams {
  double low = 0;
  double scale = 1;
  float min_value = 0;
  float max_value = 0;
};

/// normal(mean, stddev).
struct NormalParams {
  double mean = 0;
  double stddev = 1;
};

/// Elements per Philox block: each call of the generator gives four words.
inline constexpr std::int64_t kRandomGroup = 4;

/// The four words of group `group` (elements 4 * group .. 4 * group + 3).
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE PhiloxBlock random_bits(RandomDraw draw, std::int64_t group) {
  const auto g = static_cast<std::uint64_t>(group);
  const PhiloxBlock counter = {
      {static_cast<std::uint32_t>(draw.call), static_cast<std::uint32_t>(draw.call >> 32),
       static_cast<std::uint32_t>(g), static_cast<std::uint32_t>(g >> 32)}};
  const PhiloxKey key = {
      {static_cast<std::uint32_t>(draw.seed), static_cast<std::uint32_t>(draw.seed >> 32)}};
  return philox4x32_10(counter, key);
}

/// A uniform float in [low, high) from the top 24 bits of `bits`: u =
/// (bits >> 8) / 2^24 in [0, 1), then low + scale * u rounded once (fma)
/// and clamped, since rounding to float may reach `high`.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE float uniform_value(std::uint32_t bits, const UniformParams& p) {
  const double u = static_cast<double>(bits >> 8) * 0x1p-24;
  const auto v = static_cast<float>(::fma(p.scale, u, p.low));
  return v < p.min_value ? p.min_value : (v > p.max_value ? p.max_value : v);
}

/// Two normal floats from two words by Box-Muller, computed in double:
/// radius sqrt(-2 log u1) with u1 = (a + 1) / 2^32 in (0, 1], angle
/// 2 pi b / 2^32. sqrt, the products and fma round identically on host and
/// device; log, cos and sin are not correctly rounded by either library
/// (CUDA documents up to 1-2 ulp), so the doubles may differ in their last
/// bits, and the floats then differ only when a double lies within a few
/// ulp of the midpoint between two floats: of the order of one value in
/// 10^8.
/// (A simulated GPU runs the host code: identical to the CPU, always.)
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE void normal_pair(std::uint32_t a, std::uint32_t b,
                                                    const NormalParams& p, float& first,
                                                    float& second) {
  constexpr double kTwoPi = 6.283185307179586476925286766559;
  const double u1 = static_cast<double>(static_cast<std::uint64_t>(a) + 1) * 0x1p-32;
  const double angle = kTwoPi * (static_cast<double>(b) * 0x1p-32);
  const double radius = ::sqrt(-2.0 * ::log(u1));
  const double z0 = radius * ::cos(angle);
  const double z1 = radius * ::sin(angle);
  first = static_cast<float>(::fma(p.stddev, z0, p.mean));
  second = static_cast<float>(::fma(p.stddev, z1, p.mean));
}

/// Writes the elements of `group` that lie below `n`.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE void uniform_group(RandomDraw draw, const UniformParams& p,
                                                      float* out, std::int64_t group,
                                                      std::int64_t n) {
  const PhiloxBlock bits = random_bits(draw, group);
  const std::int64_t first = group * kRandomGroup;
  for (int j = 0; j < kRandomGroup && first + j < n; ++j) {
    out[first + j] = uniform_value(bits.word[j], p);
  }
}

/// Elements 4g, 4g+1 come from words 0 and 1 (cos, sin); 4g+2, 4g+3 from
/// words 2 and 3.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE void normal_group(RandomDraw draw, const NormalParams& p,
                                                     float* out, std::int64_t group,
                                                     std::int64_t n) {
  const PhiloxBlock bits = random_bits(draw, group);
  const std::int64_t first = group * kRandomGroup;
  for (int pair = 0; pair < 2; ++pair) {
    const std::int64_t i = first + 2 * pair;
    if (i >= n) break;
    float z0 = 0;
    float z1 = 0;
    normal_pair(bits.word[2 * pair], bits.word[2 * pair + 1], p, z0, z1);
    out[i] = z0;
    if (i + 1 < n) out[i + 1] = z1;
  }
}

namespace cpu_kernels {
void random_uniform(RandomDraw draw, const UniformParams& params, float* out, std::int64_t n);
void random_normal(RandomDraw draw, const NormalParams& params, float* out, std::int64_t n);
}  // namespace cpu_kernels

namespace gpu_kernels {
void random_uniform(RandomDraw draw, const UniformParams& params, float* out, std::int64_t n,
                    void* stream);
void random_normal(RandomDraw draw, const NormalParams& params, float* out, std::int64_t n,
                   void* stream);
}  // namespace gpu_kernels

}  // namespace tagflow::detail
