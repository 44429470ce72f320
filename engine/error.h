#pragma once
// The error types tagflow throws, and the one check helper used everywhere.
//
// Threads: safe to call concurrently. An error is immutable once thrown, so
// the one stored on a variable may be rethrown and read by several waiting
// threads at once.

#include <exception>
#include <stdexcept>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "engine/context.h"

namespace tagflow {

/// Base of every error tagflow throws on bad input or misuse.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An operation failed while running on the engine. Stored on every
/// variable the operation writes and rethrown by the waits that depend on it.
class OperationError : public Error {
 public:
  OperationError(std::string op_name, Context ctx, std::exception_ptr cause);

  /// Name the failed operation was pushed with.
  const std::string& op_name() const { return op_name_; }
  /// Context it ran on.
  Context context() const { return ctx_; }
  /// The exception the operation threw, for callers that want its type.
  std::exception_ptr cause() const { return cause_; }

 private:
  std::string op_name_;
  Context ctx_;
  std::exception_ptr cause_;
};

/// A wait was issued from inside an engine operation, where it would deadlock.
class WaitInsideOperationError : public Error {
 public:
  using Error::Error;
};

/// A device that does not exist was named (e.g. `gpu(10)` with two GPUs).
class DeviceError : public Error {
 public:
  using Error::Error;
};

/// A VarHandle was used after delete_var: it names a variable that no longer
/// exists (Note [Variable generations] in engine/detail/var_block.h). The
/// call that throws it changes nothing.
class StaleVariableError : public Error {
 public:
  using Error::Error;
};

/// An engine (or a DataLoader) started before fork() was used in the child,
/// where its threads do not exist (Note [Engine lifetime] in engine.h).
class ForkError : public Error {
 public:
  using Error::Error;
};

/// Values were asked of an array a timing-only simulated GPU never computed
/// (TAGFLOW_SIM_GPUS=N:model:timing, Note [Timing-only GPUs] in
/// engine/detail/sim_stream.h): its kernels are only timed.
class NotComputedError : public Error {
 public:
  using Error::Error;
};

/// A configuration the engine cannot take: a setting out of range, or
/// Engine::configure() called once the process-wide engine has started with
/// other settings. `setting()` names the first one concerned, as its
/// environment variable ("TAGFLOW_CPU_WORKERS").
class ConfigError : public Error {
 public:
  ConfigError(std::string setting, const std::string& message)
      : Error(message), setting_(std::move(setting)) {}
  const std::string& setting() const { return setting_; }

 private:
  std::string setting_;
};

namespace detail {
template <typename E = Error, typename... Args>
[[noreturn]] void throw_error(fmt::format_string<Args...> format, Args&&... args) {
  throw E(fmt::format(format, std::forward<Args>(args)...));
}
/// Text of the exception held by `e`, or a placeholder for non-std ones.
std::string describe(const std::exception_ptr& e);
}  // namespace detail

}  // namespace tagflow

/// Throws `tagflow::Error` with a formatted message when `cond` is false.
/// The message names the operation, what was expected and what came:
///
///   TAGFLOW_CHECK(n > 0, "push: expected at least one variable, got {}", n);
#define TAGFLOW_CHECK(cond, ...)                                     \
  do {                                                               \
    if (!(cond)) [[unlikely]]                                        \
      ::tagflow::detail::throw_error<::tagflow::Error>(__VA_ARGS__); \
  } while (false)

/// Same as TAGFLOW_CHECK with a specific error type.
#define TAGFLOW_CHECK_AS(ErrorType, cond, ...)                \
  do {                                                        \
    if (!(cond)) [[unlikely]]                                 \
      ::tagflow::detail::throw_error<ErrorType>(__VA_ARGS__); \
  } while (false)
