#pragma once
// Operation: what is pushed onto the engine. A closure, the context it runs
// on, the variables it reads and writes, and scheduling hints.
//
// Threads: concurrent reads, exclusive writes. VarHandle, RunContext and
// Operation are values (as an int); push() takes an Operation's closure.
// Threads: one thread at a time. OpFunction and Completion are move-only;
// the thread that finishes an asynchronous operation's work, whichever it
// is, calls its Completion's done() or fail() once.
// Threads: safe to call concurrently. intern_name() takes a lock.

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "engine/context.h"
#include "engine/inline_function.h"
#include "engine/small_vector.h"

namespace tagflow {

class Stream;

namespace detail {
struct VarBlock;
struct OpBlock;
struct VarHandleBits;
}  // namespace detail

/// Handle to an engine variable (a dependency tag): a small value type of 8
/// bytes naming the variable's record and the generation it was made at, so
/// that a handle kept after delete_var is refused with StaleVariableError
/// instead of reaching whatever variable reuses the record (Note [Variable
/// generations] in engine/detail/var_block.h). Null by default; compares,
/// orders, hashes and prints.
///
///   VarHandle x = engine.new_var();
///   std::unordered_map<VarHandle, int> uses{{x, 0}};
///   if (x != nullptr) engine.delete_var(x);   // x is stale from here on
class VarHandle {
 public:
  constexpr VarHandle() noexcept = default;
  /// The null handle, so that `VarHandle v = nullptr;` and `v == nullptr` read well.
  constexpr VarHandle(std::nullptr_t) noexcept {}  // NOLINT: implicit on purpose

  /// True unless null.
  constexpr explicit operator bool() const noexcept { return bits_ != 0; }
  /// The generation of its variable's record the handle was made at.
  constexpr std::uint32_t generation() const noexcept {
    return static_cast<std::uint32_t>(bits_ >> kAddressBits);
  }
  /// The encoded value: equal for equal handles (for hashing and printing).
  constexpr std::uint64_t bits() const noexcept { return bits_; }
  /// "0x7f3a2c001040 (generation 3)", or "null".
  std::string str() const;

  friend constexpr bool operator==(const VarHandle&, const VarHandle&) = default;
  friend constexpr auto operator<=>(const VarHandle&, const VarHandle&) = default;

 private:
  friend struct detail::VarHandleBits;
  /// The record's address without its low kAlignmentBits (zero: records are
  /// aligned to cache lines) in the low bits; the generation above.
  static constexpr int kAlignmentBits = 6;
  static constexpr int kAddressBits = 42;
  std::uint64_t bits_ = 0;
};

/// Prints `var.str()`.
std::ostream& operator<<(std::ostream& os, const VarHandle& var);

/// The variables an operation reads or writes. Up to four inline.
using VarList = detail::SmallVector<VarHandle, 4>;

/// Which of a device's queues runs an operation. A hint for GPUs (compute
/// stream or copy stream); CPU devices have one pool and ignore it.
enum class QueueKind : std::uint8_t { kCompute = 0, kCopy = 1 };

/// What a running operation knows about where it runs.
struct RunContext {
  Context ctx;
  /// The device stream the operation's work is enqueued on (GPUs, real or
  /// simulated); null on CPU devices.
  Stream* stream = nullptr;
  /// Index of the worker within its device pool.
  int worker = 0;
};

/// Handed to an asynchronous operation; call `done()` (or `fail(error)`)
/// exactly once, from any thread, when the work has finished. Dropping it
/// without calling either fails the operation rather than hang its waiters.
/// Before it does, the thread holding it may push, and wait for what does
/// not wait for the operation, on every engine (the naive one lends itself,
/// Note [Lending the naive engine] in engine/detail/naive_engine.h). Waits
/// that never return from there: wait_for_all, a wait on what the operation
/// writes (or, for wait_to_write, reads), and one on what depends on it.
class Completion {
 public:
  Completion() = default;
  Completion(Completion&& other) noexcept : op_(std::exchange(other.op_, nullptr)) {}
  Completion& operator=(Completion&& other) noexcept;
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion();

  /// Marks the operation finished successfully.
  void done();
  /// Marks it failed; the error is stored on every variable it writes.
  void fail(std::exception_ptr error);
  /// True until done() or fail() has been called.
  bool pending() const { return op_ != nullptr; }

 private:
  friend struct detail::OpBlock;
  explicit Completion(detail::OpBlock* op) : op_(op) {}
  detail::OpBlock* op_ = nullptr;
};

/// The closure of an operation. Built from either
///  - `void(const RunContext&)`: synchronous, finished when it returns; or
///  - `void(const RunContext&, Completion)`: asynchronous, finished when the
///    Completion is called.
class OpFunction {
 public:
  using Body = detail::InlineFunction<void(const RunContext&, Completion*), 48>;

  OpFunction() = default;

  template <typename F, typename D = std::decay_t<F>,
            typename = std::enable_if_t<!std::is_same_v<D, OpFunction>>>
  OpFunction(F&& f)  // NOLINT: implicit, so `.fn = [](auto&){...}` reads well
      : body_(std::in_place_type<Adapter<D>>, std::forward<F>(f)) {
    static_assert(std::is_invocable_v<D&, const RunContext&, Completion> ||
                      std::is_invocable_v<D&, const RunContext&>,
                  "an operation's closure takes (const RunContext&) or "
                  "(const RunContext&, Completion)");
  }

  bool is_async() const { return body_.tag(); }
  explicit operator bool() const { return static_cast<bool>(body_); }
  Body& body() { return body_; }

 private:
  /// The closure as the engine calls it, made in place from the user's
  /// (one copy of what it captured, no wrapper around a wrapper).
  template <typename D>
  struct Adapter {
    /// Asynchronous: kept in the type-erased body, so that an OpFunction
    /// is no larger than it (Note [The record's size] in
    /// engine/detail/op_block.h).
    static constexpr bool kInlineFunctionTag =
        std::is_invocable_v<D&, const RunContext&, Completion>;
    D g;
    void operator()(const RunContext& rc, Completion* c) {
      if constexpr (std::is_invocable_v<D&, const RunContext&, Completion>) {
        g(rc, std::move(*c));
      } else {
        g(rc);
      }
    }
  };

  Body body_;
};

/// An operation to push. Fields read like a sentence:
///
///   engine.push({.name = "add", .ctx = cpu(0),
///                .reads = {a, b}, .writes = {c},
///                .fn = [=](const RunContext&) { c_data[0] = a_data[0] + b_data[0]; }});
///
/// A variable listed twice counts once; one listed in both `reads` and
/// `writes` is scheduled as a write and, for error propagation, as a read
/// (the operation is skipped if it carries an error, see Note [Errors on
/// variables] in engine.h). A variable listed only in `writes` is treated as
/// overwritten: a successful write clears an error stored on it.
struct Operation {
  /// Shown in errors and traces. Must outlive the operation: a string
  /// literal, or a name from `intern_name()`.
  const char* name = "op";
  Context ctx = cpu(0);
  VarList reads;
  VarList writes;
  /// Higher runs first among the ready operations of a device.
  int priority = 0;
  QueueKind queue = QueueKind::kCompute;
  /// The closure; last, so that it reads last where it is usually longest.
  OpFunction fn;
};

/// Operations on several devices that meet there: the parts of a collective
/// (an all-reduce over GPUs), where a GPU's part does not finish until every
/// part has been launched. Push them with Engine::push_group (Note [Launch
/// groups] in engine/engine.h).
///
///   engine.push_group({.parts = {part_on_gpu0, part_on_gpu1},
///                      .together = [&](std::span<const RunContext> rcs) { ... }});
struct LaunchGroup {
  /// One operation per device, each synchronous (its closure launches device
  /// work and returns); at most one per device.
  std::vector<Operation> parts;
  /// Optional: launches every part from one thread, given the parts'
  /// RunContexts in order, for an engine that launches them together (the
  /// naive engine) instead of calling each part's closure in turn. NCCL
  /// wants this: one thread's calls for several GPUs go between
  /// ncclGroupStart and ncclGroupEnd. Unset, the parts' closures are called
  /// one after the other.
  std::function<void(std::span<const RunContext>)> together;
};

/// The most distinct names intern_name() keeps, and the longest it keeps.
inline constexpr std::size_t kMaxInternedNames = 4096;
inline constexpr std::size_t kMaxInternedNameLength = 256;

/// Returns a copy of `name` that lives as long as the process, for
/// operation names built at run time: the same pointer for the same text.
/// The table is bounded, so that a service running for weeks cannot grow it
/// without end: name operations by kind ("allreduce bucket"), not by
/// instance ("step 81273"). Names are cut to kMaxInternedNameLength
/// characters; once kMaxInternedNames distinct names are kept, a new one
/// comes back as "(too many operation names)" and a warning is logged once.
///
///   engine.push({.name = intern_name(fmt::format("{} forward", layer)), ...});
const char* intern_name(std::string_view name);

}  // namespace tagflow

template <>
struct std::hash<tagflow::VarHandle> {
  std::size_t operator()(const tagflow::VarHandle& var) const noexcept {
    return std::hash<std::uint64_t>{}(var.bits());
  }
};
