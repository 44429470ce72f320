#include "tagflow/engine/wake_word.h"

#if defined(__linux__)
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace tagflow::detail {

namespace {
#if defined(__linux__)
// The futex word is the atomic's own storage (std::atomic<uint32_t> is a
// plain 32-bit word on Linux targets).
static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));
std::uint32_t* futex_word(std::atomic<std::uint32_t>& word) {
  return reinterpret_cast<std::uint32_t*>(&word);
}
#endif
}  // namespace

void WakeWord::wait(std::uint32_t seen) {
  // Counted before the kernel re-reads the word: a bump after this count
  // sees us; a bump before it changed the word, and the futex returns at once.
  sleepers_.fetch_add(kOneBlocked, std::memory_order_seq_cst);
#if defined(__linux__)
  syscall(SYS_futex, futex_word(word_), FUTEX_WAIT_PRIVATE, seen, nullptr, nullptr, 0);
#else
  word_.wait(seen, std::memory_order_seq_cst);
#endif
  // Leave, taking one outstanding wake-up with us if there is one (they are
  // interchangeable: whoever wakes first serves it).
  std::uint32_t state = sleepers_.load(std::memory_order_relaxed);
  for (;;) {
    const std::uint32_t next =
        state - kOneBlocked - (signalled(state) > 0 ? kOneSignalled : 0);
    if (sleepers_.compare_exchange_weak(state, next, std::memory_order_seq_cst)) break;
  }
}

void WakeWord::bump(int count) {
  word_.fetch_add(1, std::memory_order_seq_cst);
  // Enter the kernel only for threads blocked and not already being woken:
  // a burst of bumps while one sleeper wakes up costs one system call.
  std::uint32_t state = sleepers_.load(std::memory_order_seq_cst);
  std::uint32_t wake = 0;
  for (;;) {
    const std::uint32_t idle = blocked(state) - signalled(state);
    if (idle == 0) return;
    wake = count == kAll ? idle : 1;
    if (sleepers_.compare_exchange_weak(state, state + wake * kOneSignalled,
                                        std::memory_order_seq_cst)) {
      break;
    }
  }
#if defined(__linux__)
  syscall(SYS_futex, futex_word(word_), FUTEX_WAKE_PRIVATE, static_cast<int>(wake), nullptr,
          nullptr, 0);
#else
  if (wake == 1) {
    word_.notify_one();
  } else {
    word_.notify_all();
  }
#endif
}

}  // namespace tagflow::detail
