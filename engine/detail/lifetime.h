#pragma once
// What an engine must live through besides its own work: fork() and the
// process's exit (Note [Engine lifetime] in engine.h). ForkCheck tells a
// forked child from the process an engine, or a data loader, was started
// in; the exit flag tells engine threads that the process is ending.
// Internal to the library.
//
//   ForkCheck fork_check_;   // a member, made with the object
//   ...
//   if (fork_check_.forked()) [[unlikely]] throw_fork_error("push", "the engine was");

#include <atomic>
#include <cstdint>
#include <memory>
#include <string_view>

namespace tagflow::detail {

/// Forks this process descends from since the first ForkCheck was made:
/// a pthread_atfork handler adds one in each child.
extern std::atomic<std::uint32_t> g_forks;

/// Remembers the process it was made in.
class ForkCheck {
 public:
  /// Starts counting forks, if nothing did yet, and takes the count.
  ForkCheck();
  /// True in a child forked since this check was made. One relaxed load:
  /// the count only changes in the child's single thread, before fork()
  /// returns there.
  bool forked() const { return g_forks.load(std::memory_order_relaxed) != made_at_; }

 private:
  std::uint32_t made_at_;
};

/// Throws ForkError for `what`, called in a forked child on something whose
/// threads exist only in the parent. `started` says what, with its verb:
/// "the engine was", "the DataLoader's workers were".
[[noreturn]] void throw_fork_error(const char* what, const char* started = "the engine was");

/// Keeps `object` for the rest of the process instead of destroying it:
/// what a forked child must not destroy (threads of the parent, condition
/// variables they wait on, whose destruction would wait for them forever) is
/// handed here, to a static list that keeps it reachable for LeakSanitizer.
/// Takes no lock of tagflow's, which a thread of the parent may have held.
void abandon_pointer(const void* object) noexcept;
template <typename T>
void abandon(std::unique_ptr<T> object) noexcept {
  if (object) abandon_pointer(object.release());
}

/// True once the process-wide engine's exit hook has started: spdlog's
/// registry, and any other static, may be destroyed from then on.
bool exit_started() noexcept;
/// Called by the exit hook.
void note_exit_started() noexcept;

/// Logs `message` followed by `detail` as an error through spdlog, or once
/// exit has started, writes it straight to standard error.
void log_error(std::string_view message, std::string_view detail = {}) noexcept;

/// Blocks the calling thread until the process ends: where the workers of
/// the process-wide engine stop once exit() was called from inside an
/// operation (Note [Engine lifetime]).
[[noreturn]] void park_until_exit() noexcept;

}  // namespace tagflow::detail
