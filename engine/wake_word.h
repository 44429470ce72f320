#pragma once
// WakeWord: a 32-bit epoch that threads sleep on and others bump to wake
// them, with no system call when nobody sleeps.
//
// std::atomic::notify_one enters the kernel on every call in this standard
// library, even with no thread waiting; the engine bumps a wake word on hot
// paths, so it counts the threads actually blocked, and the wake-ups already
// on their way to them, and calls the futex only for threads still asleep
// (Linux; elsewhere it falls back to std::atomic wait/notify).

#include <atomic>
#include <cstdint>

namespace tagflow::detail {

class WakeWord {
 public:
  /// The current epoch; pass it to wait() after re-checking the condition.
  std::uint32_t epoch() const { return word_.load(std::memory_order_seq_cst); }

  /// Blocks while the epoch is still `seen` (may return spuriously).
  void wait(std::uint32_t seen);

  /// Bumps the epoch and wakes one (or every) blocked thread, if any.
  void wake_one() { bump(1); }
  void wake_all() { bump(kAll); }

 private:
  static constexpr int kAll = 0x7fffffff;
  void bump(int count);

  // sleepers_ packs the threads blocked in wait() (low half) and the
  // wake-ups issued to them and not yet taken (high half).
  static constexpr std::uint32_t kOneBlocked = 1;
  static constexpr std::uint32_t kOneSignalled = 1u << 16;
  static std::uint32_t blocked(std::uint32_t s) { return s & 0xffffu; }
  static std::uint32_t signalled(std::uint32_t s) { return s >> 16; }

  std::atomic<std::uint32_t> word_{0};
  std::atomic<std::uint32_t> sleepers_{0};
};

}  // namespace tagflow::detail
