#include "engine/dump_signal.h"

#include <semaphore.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <spdlog/spdlog.h>

#include "engine/engine.h"
#include "engine/error.h"

namespace tagflow {

namespace {

// Note [Dumping on a signal]
// A signal handler may only call async-signal-safe functions: sem_post is
// one, taking a snapshot (locks, allocation) is not. The handler posts a
// semaphore; a thread started with the first installation waits on it and
// does the work, as an ordinary thread that runs no operation.
sem_t g_requests;
std::atomic<int> g_dumps{0};

void on_signal(int) { sem_post(&g_requests); }

void write_all(const std::string& text) {
  const char* p = text.data();
  std::size_t left = text.size();
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void serve_requests() {
  for (;;) {
    if (sem_wait(&g_requests) != 0) continue;  // EINTR
    std::string text;
    try {
      text = "tagflow dependency state (on signal)\n" + Engine::get().dependency_state().describe();
    } catch (const std::exception& e) {
      text = std::string("tagflow dependency state: unavailable: ") + e.what() + "\n";
    }
    write_all(text);
    g_dumps.fetch_add(1, std::memory_order_release);
  }
}

}  // namespace

bool install_dump_signal(int signal) {
  static std::mutex mutex;
  static std::set<int> installed;
  std::lock_guard lock(mutex);
  if (installed.contains(signal)) return true;
  struct sigaction current {};
  TAGFLOW_CHECK(signal != SIGKILL && signal != SIGSTOP && sigaction(signal, nullptr, &current) == 0,
                "install_dump_signal: expected a signal that can be handled, got {}", signal);
  if (current.sa_handler != SIG_DFL) {
    spdlog::info("dump signal {}: the program handles it; not installed", signal);
    return false;
  }
  static bool serving = false;
  if (!serving) {
    TAGFLOW_CHECK(sem_init(&g_requests, 0, 0) == 0,
                  "install_dump_signal: expected a semaphore for the dump thread, sem_init "
                  "failed: {}",
                  std::strerror(errno));
    std::thread(serve_requests).detach();
    serving = true;
  }
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  TAGFLOW_CHECK(sigaction(signal, &action, nullptr) == 0,
                "install_dump_signal: cannot handle signal {}", signal);
  installed.insert(signal);
  return true;
}

int dump_signal_count() { return g_dumps.load(std::memory_order_acquire); }

}  // namespace tagflow
