#pragma once
// ScheduleOptions: a controlled schedule for tests and `tagflow stress`.
// The naive engine then defers what is pushed and, at each wait, runs the
// ready operations one at a time in an order a seeded policy picks, so that
// an ordering bug (a dependency a program forgot to declare) shows up, and
// the run that showed it replays exactly.
//
//   TAGFLOW_SCHEDULE=pct:7:3 ./my_test                   // PCT, seed 7, depth 3
//   TAGFLOW_SCHEDULE=random:7 TAGFLOW_SCHEDULE_RECORD=run.schedule ./my_test
//   TAGFLOW_SCHEDULE=replay:run.schedule ./my_test       // the same interleaving
//
// Threads: concurrent reads, exclusive writes (a value, as a std::string).
//
// Note [Controlled schedules]
// - Pushes (deletions included) are kept, in push order, instead of run.
//   An operation is ready when no earlier kept one conflicts with it on a
//   variable (one of them writes it; a deletion conflicts with everything
//   on its variable). A wait runs ready operations until what it waits for
//   has run; wait_for_all runs what was pushed before it (and picks only
//   among that; what those push is kept for a later wait); more than
//   kMaxKept kept runs them down to half (a thread pushing while another
//   runs them pauses instead, as the naive engine's handed-over pushes do).
//   Picks are made among the ready operations of the oldest kMaxKept kept
//   (while an asynchronous operation awaits its Completion, among the first
//   kMaxKept ready ones that conflict with nothing running, however far
//   back). Each runs to its end, device work included, on the waiting
//   thread, as the naive engine runs an operation; what it pushes is kept
//   the same way.
// - Which ready operation runs is the policy's pick, numbered by push
//   (pushes counted from 0, deletions included):
//   random: uniformly among the ready ones;
//   pct: probabilistic concurrency testing (Burckhardt et al., ASPLOS
//   2010), for operations: each gets a random priority when pushed, the
//   ready one of highest priority runs; at `depth - 1` steps drawn from
//   1..`steps`, the one that would run is lowered below every other
//   instead (the delay that exposes a bug of that depth) and the pick is
//   made again;
//   replay: the order a recorded run took; a pick that is not ready then
//   (the program pushed something else) throws tagflow::Error naming the
//   step, from the wait that made it, once; what follows runs in push order.
// - The run is a function of the seed for a program that pushes from one
//   thread (several client threads push in an order the OS chooses), and
//   `record` writes the picks, so that replaying them needs no seed.
// - Only orders are explored: operations never run at the same time (but
//   while an asynchronous one awaits its Completion, kept ones that a
//   waiting thread needs and that conflict with nothing running run
//   meanwhile: Note [Lending the naive engine] in
//   engine/detail/naive_engine.h), so a data race inside two concurrent
//   operations is the threaded engine's and the sanitizers' to find.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace tagflow {

enum class SchedulePolicy : std::uint8_t {
  kPushOrder,  ///< no control: the naive engine's push order
  kRandom,
  kPct,
  kReplay,
};

struct ScheduleOptions {
  SchedulePolicy policy = SchedulePolicy::kPushOrder;
  std::uint64_t seed = 1;
  /// PCT's bug depth d: the ordering constraints a bug needs; d - 1 change
  /// points. At least 1.
  int depth = 3;
  /// PCT: the steps change points are drawn from, about the operations a
  /// run executes (its guarantee, 1 / (n·k^(d-1)), holds for k >= steps).
  std::int64_t steps = 1000;
  /// kReplay: a schedule written through `record`.
  std::filesystem::path replay;
  /// Where the picks are written, as a schedule file (empty: nowhere).
  std::filesystem::path record;

  /// True when pushes are kept and picked (Note [Controlled schedules]).
  bool controlled() const { return policy != SchedulePolicy::kPushOrder || !record.empty(); }
  /// TAGFLOW_SCHEDULE's syntax: "random:SEED", "pct:SEED[:DEPTH[:STEPS]]",
  /// "replay:FILE" or "none"; throws tagflow::Error saying what it expected.
  static ScheduleOptions parse(std::string_view text);
  /// The same spelling: "pct:7:3:1000".
  std::string str() const;
};

/// Operations a controlled schedule keeps before it runs some.
inline constexpr std::size_t kMaxKept = 256;

}  // namespace tagflow
