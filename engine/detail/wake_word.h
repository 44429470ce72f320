#pragma once
// WakeWord: an epoch that threads sleep on and others bump to wake them,
// entering the kernel only for threads actually asleep.
//
// Note [Wake words]
// std::atomic::notify_one enters the kernel on every call in this standard
// library, even with no thread waiting; the engine bumps wake words on hot
// paths. So one 64-bit word holds the 32-bit epoch (the futex word), the
// number of threads registered to sleep, and the number of wake-ups issued
// to them and not yet taken. A thread registers only while the epoch is the
// one it checked its condition against; a bump advances the epoch and issues
// a wake-up only to registered threads not already being woken. Each issued
// wake-up is therefore owed to a thread that will return (woken, or finding
// the epoch moved when it enters the kernel), and is taken back when one
// does: a burst of bumps while one sleeper wakes up costs one system call,
// and no wake-up is ever lost to a thread that saw the bump coming.

#include <atomic>
#include <chrono>
#include <cstdint>

namespace tagflow::detail {

class WakeWord {
 public:
  /// The current epoch; pass it to wait() after re-checking the condition.
  std::uint32_t epoch() const { return epoch_of(state_.load(std::memory_order_seq_cst)); }

  /// Blocks while the epoch is still `seen` (may return spuriously).
  void wait(std::uint32_t seen) { wait_for(seen, std::chrono::nanoseconds::zero()); }
  /// The same, for at most `limit` (no limit when zero).
  void wait_for(std::uint32_t seen, std::chrono::nanoseconds limit);

  /// Advances the epoch and wakes one (or every) sleeping thread, if any.
  void wake_one() { bump(false); }
  void wake_all() { bump(true); }

 private:
  static constexpr std::uint64_t kOneBlocked = std::uint64_t{1} << 32;
  static constexpr std::uint64_t kOneSignalled = std::uint64_t{1} << 48;
  static std::uint32_t epoch_of(std::uint64_t s) { return static_cast<std::uint32_t>(s); }
  static std::uint64_t blocked(std::uint64_t s) { return (s >> 32) & 0xffffu; }
  static std::uint64_t signalled(std::uint64_t s) { return s >> 48; }

  void bump(bool all);
  std::uint32_t* futex_word();

  std::atomic<std::uint64_t> state_{0};
};

}  // namespace tagflow::detail
