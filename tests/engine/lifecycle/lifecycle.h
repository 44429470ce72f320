#pragma once
// What the lifecycle programs share (Note [Engine lifetime] in
// engine/engine.h): a check that ends the program with a message, and
// waiting for a child process with a time limit, so that a child that hangs
// fails the test instead of hanging it. Each program is written as a user's
// program would be: plain main(), exit status 0 when every check held.

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace tagflow::lifecycle {

[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "%s:%d: check failed: %s\n", file, line, what.c_str());
  std::fflush(stderr);
  std::_Exit(1);  // not exit(): what failed may be what exit() would run into
}

/// Ends the program with status 1 and a message when `cond` is false.
#define LIFECYCLE_CHECK(cond, message)                                              \
  do {                                                                              \
    if (!(cond))                                                                    \
      ::tagflow::lifecycle::fail(__FILE__, __LINE__,                                \
                                 std::string(#cond) + ": " + std::string(message)); \
  } while (false)

/// How a child process ended.
struct Ended {
  bool timed_out = false;  ///< killed after overrunning its time
  bool exited = false;     ///< exited (else killed by `signal`)
  int status = -1;         ///< exit status
  int signal = 0;
  double seconds = 0;

  bool exited_with(int expected) const { return !timed_out && exited && status == expected; }
  std::string describe() const {
    std::ostringstream s;
    if (timed_out) {
      s << "still running after " << seconds << " s (killed)";
    } else if (exited) {
      s << "exited with status " << status << " after " << seconds << " s";
    } else {
      s << "killed by signal " << signal << " after " << seconds << " s";
    }
    return s.str();
  }
};

/// Waits for child `pid` at most `limit`; kills it (SIGKILL) when it overruns,
/// after printing its threads' stacks with gdb when LIFECYCLE_DEBUG_HANG is set.
inline Ended wait_for(pid_t pid, std::chrono::milliseconds limit) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  Ended ended;
  auto elapsed = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  for (;;) {
    int status = 0;
    const pid_t done = waitpid(pid, &status, WNOHANG);
    if (done == pid) {
      ended.exited = WIFEXITED(status);
      ended.status = ended.exited ? WEXITSTATUS(status) : -1;
      ended.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      ended.seconds = elapsed();
      return ended;
    }
    if (done < 0 || Clock::now() - start > limit) {
      if (std::getenv("LIFECYCLE_DEBUG_HANG")) {
        std::string cmd = "gdb -p " + std::to_string(pid) + " -batch -ex 'thread apply all bt' >&2";
        (void)std::system(cmd.c_str());
      }
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ended.timed_out = true;
      ended.seconds = elapsed();
      return ended;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

/// Runs this program again with `args`, the environment plus `env`
/// ("NAME=VALUE"), its standard output and error into the file `log`, for
/// at most `limit`.
inline Ended run_self(const std::vector<std::string>& args, const std::vector<std::string>& env,
                      const std::string& log, std::chrono::milliseconds limit) {
  std::vector<std::string> arguments{"/proc/self/exe"};
  arguments.insert(arguments.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : arguments) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> environment(env);
  for (char** e = environ; *e != nullptr; ++e) environment.emplace_back(*e);  // env wins: first
  std::vector<char*> envp;
  for (std::string& e : environment) envp.push_back(e.data());
  envp.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  const int failed = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  LIFECYCLE_CHECK(failed == 0, "posix_spawn of this program failed");
  return wait_for(pid, limit);
}

/// The whole content of the file `path`.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace tagflow::lifecycle
