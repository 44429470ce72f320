#include "engine/detail/wake_word.h"

#include <bit>
#include <ctime>
#include <thread>

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tagflow::detail {

// The futex word is the low half of the state: its first four bytes on a
// little-endian machine.
static_assert(std::endian::native == std::endian::little, "WakeWord assumes little-endian");
static_assert(sizeof(std::atomic<std::uint64_t>) == sizeof(std::uint64_t));

std::uint32_t* WakeWord::futex_word() { return reinterpret_cast<std::uint32_t*>(&state_); }

void WakeWord::wait_for(std::uint32_t seen, std::chrono::nanoseconds limit) {
  // Register, unless the epoch has moved since the caller's check.
  std::uint64_t state = state_.load(std::memory_order_seq_cst);
  do {
    if (epoch_of(state) != seen) return;
  } while (!state_.compare_exchange_weak(state, state + kOneBlocked, std::memory_order_seq_cst));
#if defined(__linux__)
  // A timeout is a spurious return: the leaving below is the same.
  timespec relative{};
  relative.tv_sec = static_cast<time_t>(limit.count() / 1'000'000'000);
  relative.tv_nsec = static_cast<long>(limit.count() % 1'000'000'000);
  syscall(SYS_futex, futex_word(), FUTEX_WAIT_PRIVATE, seen,
          limit.count() > 0 ? &relative : nullptr, nullptr, 0);
#else
  const auto until = std::chrono::steady_clock::now() + limit;
  while (epoch() == seen && (limit.count() == 0 || std::chrono::steady_clock::now() < until)) {
    std::this_thread::yield();
  }
#endif
  // Leave, taking an outstanding wake-up with us if there is one (they are
  // interchangeable: each is owed to some registered thread, which returns).
  state = state_.load(std::memory_order_relaxed);
  std::uint64_t next;
  do {
    next = state - kOneBlocked - (signalled(state) > 0 ? kOneSignalled : 0);
  } while (!state_.compare_exchange_weak(state, next, std::memory_order_seq_cst));
}

void WakeWord::bump(bool all) {
  std::uint64_t state = state_.load(std::memory_order_seq_cst);
  std::uint64_t wake;
  for (;;) {
    const std::uint64_t asleep = blocked(state) - signalled(state);
    wake = all ? asleep : (asleep > 0 ? 1 : 0);
    const std::uint64_t next_epoch = static_cast<std::uint32_t>(epoch_of(state) + 1u);
    const std::uint64_t next =
        (state & ~std::uint64_t{0xffffffffu}) + next_epoch + wake * kOneSignalled;
    if (state_.compare_exchange_weak(state, next, std::memory_order_seq_cst)) break;
  }
  if (wake == 0) return;
#if defined(__linux__)
  syscall(SYS_futex, futex_word(), FUTEX_WAKE_PRIVATE, static_cast<int>(wake), nullptr, nullptr, 0);
#endif
}

}  // namespace tagflow::detail
