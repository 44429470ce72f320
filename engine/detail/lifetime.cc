#include "engine/detail/lifetime.h"

#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "engine/error.h"

namespace tagflow::detail {

std::atomic<std::uint32_t> g_forks{0};

namespace {

std::atomic<bool> g_exit_started{false};

void count_fork_in_child() { g_forks.fetch_add(1, std::memory_order_relaxed); }

/// A node of the abandoned objects' list; the nodes themselves are never freed.
struct Abandoned {
  const void* object;
  Abandoned* next;
};
std::atomic<Abandoned*> g_abandoned{nullptr};

void write_stderr(std::string_view text) noexcept {
  while (!text.empty()) {
    const ssize_t n = ::write(STDERR_FILENO, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<std::size_t>(n));
  }
}

}  // namespace

ForkCheck::ForkCheck() {
  static std::once_flag watching;
  std::call_once(watching, [] {
    // Without the handler, a child would look like its parent: fail loudly.
    TAGFLOW_CHECK(pthread_atfork(nullptr, nullptr, count_fork_in_child) == 0,
                  "engine: expected to register a fork handler, pthread_atfork failed");
  });
  made_at_ = g_forks.load(std::memory_order_relaxed);
}

void throw_fork_error(const char* what, const char* started) {
  throw_error<ForkError>(
      "{}: {} started in the parent process before fork() and cannot be used in this child "
      "process, where its threads do not exist. Fork before the parent first uses tagflow, "
      "start the child with exec (posix_spawn, or fork() then exec()) so that it starts its own "
      "engine, or keep the work in the parent (a DataLoader's workers are threads)",
      what, started);
}

void abandon_pointer(const void* object) noexcept {
  auto* node = new (std::nothrow) Abandoned{object, nullptr};
  if (node == nullptr) return;  // the object leaks unlisted: LeakSanitizer may name it
  Abandoned* head = g_abandoned.load(std::memory_order_relaxed);
  do {
    node->next = head;
  } while (!g_abandoned.compare_exchange_weak(head, node, std::memory_order_release,
                                              std::memory_order_relaxed));
}

bool exit_started() noexcept { return g_exit_started.load(std::memory_order_acquire); }

void note_exit_started() noexcept { g_exit_started.store(true, std::memory_order_release); }

void log_error(std::string_view message, std::string_view detail) noexcept {
  try {
    if (!exit_started()) {
      spdlog::error("{}{}", message, detail);
      return;
    }
    write_stderr(fmt::format("[tagflow] [error] {}{}\n", message, detail));
  } catch (...) {
    write_stderr(message);
    write_stderr("\n");
  }
}

void park_until_exit() noexcept {
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace tagflow::detail
