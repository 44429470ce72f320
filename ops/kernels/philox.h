#pragma once
// Philox-4x32: the counter-based random number generator of Salmon et al.,
// "Parallel Random Numbers: As Easy as 1, 2, 3" (SC'11), written once for
// the host and CUDA devices. A pure function of a 128-bit counter and a
// 64-bit key: no state, so any element of a random array can be computed by
// any thread in any order and still get the same bits. Internal to ops/.
//
//   PhiloxBlock bits = philox4x32_10({{c0, c1, c2, c3}}, {{key_lo, key_hi}});

#include <cstdint>

#include "ops/kernels/host_device.h"

namespace tagflow::detail {

/// Four 32-bit words: a counter, or the generator's output for one counter.
struct PhiloxBlock {
  std::uint32_t word[4];
};

/// The 64-bit key, as two words (low first).
struct PhiloxKey {
  std::uint32_t word[2];
};

namespace philox {

inline constexpr std::uint32_t kMultiplier0 = 0xD2511F53u;
inline constexpr std::uint32_t kMultiplier1 = 0xCD9E8D57u;
inline constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;  // golden ratio
inline constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;  // sqrt(3) - 1

/// One round: two 32x32->64 multiplications, the high halves mixed with
/// the other counter words and the key.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE PhiloxBlock round(PhiloxBlock c, PhiloxKey k) {
  const std::uint64_t p0 = static_cast<std::uint64_t>(kMultiplier0) * c.word[0];
  const std::uint64_t p1 = static_cast<std::uint64_t>(kMultiplier1) * c.word[2];
  const auto hi0 = static_cast<std::uint32_t>(p0 >> 32);
  const auto lo0 = static_cast<std::uint32_t>(p0);
  const auto hi1 = static_cast<std::uint32_t>(p1 >> 32);
  const auto lo1 = static_cast<std::uint32_t>(p1);
  return {{hi1 ^ c.word[1] ^ k.word[0], lo1, hi0 ^ c.word[3] ^ k.word[1], lo0}};
}

}  // namespace philox

/// Philox-4x32 with `rounds` rounds; the key is bumped by the Weyl
/// constants between rounds, as in Random123's philox4x32_R.
template <int rounds>
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE PhiloxBlock philox4x32(PhiloxBlock counter, PhiloxKey key) {
  static_assert(rounds >= 1 && rounds <= 16, "Philox is defined for 1 to 16 rounds");
  counter = philox::round(counter, key);
#if defined(__CUDACC__)
#pragma unroll
#endif
  for (int r = 1; r < rounds; ++r) {
    key.word[0] += philox::kWeyl0;
    key.word[1] += philox::kWeyl1;
    counter = philox::round(counter, key);
  }
  return counter;
}

/// The generator tagflow uses: ten rounds, the recommended (Crush-resistant)
/// count.
TAGFLOW_HOST_DEVICE TAGFLOW_INLINE PhiloxBlock philox4x32_10(PhiloxBlock counter, PhiloxKey key) {
  return philox4x32<10>(counter, key);
}

}  // namespace tagflow::detail
