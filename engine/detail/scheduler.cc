#include "engine/detail/scheduler.h"

#include <algorithm>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace tagflow::detail {

namespace {

constexpr const char* kHeader = "# tagflow schedule";

/// Initial PCT priorities lie above every lowered one (which are < depth).
constexpr std::uint64_t kInitialPriorityBase = std::uint64_t{1} << 32;

}  // namespace

Scheduler::Scheduler(ScheduleOptions options)
    : options_(std::move(options)), random_(splitmix64(options_.seed)) {
  if (options_.policy == SchedulePolicy::kPct) {
    // depth - 1 distinct steps in 1..steps, in order.
    const auto wanted = static_cast<std::size_t>(
        std::min<std::int64_t>(options_.depth - 1, std::max<std::int64_t>(options_.steps, 0)));
    while (change_points_.size() < wanted) {
      const auto step =
          static_cast<std::int64_t>(random_() % static_cast<std::uint64_t>(options_.steps)) + 1;
      if (std::find(change_points_.begin(), change_points_.end(), step) == change_points_.end()) {
        change_points_.push_back(step);
      }
    }
    std::sort(change_points_.begin(), change_points_.end());
  }
  if (options_.policy == SchedulePolicy::kReplay) {
    std::ifstream in(options_.replay);
    TAGFLOW_CHECK(in.good(), "schedule \"{}\": cannot open the file to replay",
                  options_.replay.string());
    std::string line;
    std::int64_t number = 0;
    while (std::getline(in, line)) {
      ++number;
      if (line.empty() || line[0] == '#') continue;
      std::uint64_t id = 0;
      std::istringstream parse(line);
      TAGFLOW_CHECK(static_cast<bool>(parse >> id) && parse.eof(),
                    "schedule \"{}\", line {}: expected an operation number, got \"{}\"",
                    options_.replay.string(), number, line);
      replay_.push_back(id);
    }
  }
}

Scheduler::~Scheduler() {
  try {
    write_record();
  } catch (const Error&) {  // NOLINT(bugprone-empty-catch): written at each wait_for_all too
  }
}

void Scheduler::on_push(std::uint64_t id) {
  if (options_.policy != SchedulePolicy::kPct) return;
  priority_[id] = kInitialPriorityBase + (random_() >> 1);
}

std::uint64_t Scheduler::pick(std::span<const std::uint64_t> ready) {
  ++step_;
  std::uint64_t chosen = ready[0];
  switch (options_.policy) {
    case SchedulePolicy::kPushOrder:
      break;
    case SchedulePolicy::kRandom:
      chosen = ready[random_() % ready.size()];
      break;
    case SchedulePolicy::kPct: {
      auto highest = [&] {
        return *std::max_element(ready.begin(), ready.end(), [&](std::uint64_t a, std::uint64_t b) {
          return priority_[a] < priority_[b];
        });
      };
      chosen = highest();
      while (next_change_ < change_points_.size() && change_points_[next_change_] == step_) {
        // The delay of Note [Controlled schedules]: below every other.
        priority_[chosen] = static_cast<std::uint64_t>(options_.depth) - 1 - next_change_;
        ++next_change_;
        chosen = highest();
      }
      break;
    }
    case SchedulePolicy::kReplay: {
      if (diverged_) break;  // reported once; the rest runs in push order
      diverged_ = true;      // until the checks below pass
      const auto at = static_cast<std::size_t>(step_ - 1);
      TAGFLOW_CHECK(at < replay_.size(),
                    "schedule \"{}\": the run needs step {}, but the recorded run ended after {}: "
                    "the program pushed more than when it was recorded",
                    options_.replay.string(), step_, replay_.size());
      chosen = replay_[at];
      TAGFLOW_CHECK(std::find(ready.begin(), ready.end(), chosen) != ready.end(),
                    "schedule \"{}\": the replay diverged at step {}: the recorded run ran "
                    "operation {} there, which is not ready now (ready: {}); the program did not "
                    "push what it pushed when recorded",
                    options_.replay.string(), step_, chosen,
                    fmt::join(ready.subspan(0, std::min<std::size_t>(ready.size(), 8)), ", "));
      diverged_ = false;
      break;
    }
  }
  if (options_.policy == SchedulePolicy::kPct) priority_.erase(chosen);
  if (!options_.record.empty()) picks_.push_back(chosen);
  return chosen;
}

void Scheduler::write_record() const {
  if (options_.record.empty()) return;
  std::ofstream out(options_.record, std::ios::trunc);
  out << kHeader << ": " << options_.str() << ", " << picks_.size() << " steps\n";
  for (std::uint64_t id : picks_) out << id << '\n';
  out.flush();
  TAGFLOW_CHECK(out.good(), "schedule: cannot write the record to \"{}\"",
                options_.record.string());
}

}  // namespace tagflow::detail
