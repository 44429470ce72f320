#include "engine/dependency_state.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace tagflow {

namespace {

/// What a blocker is doing, in words that say where to look.
const char* explain(OperationStage stage) {
  switch (stage) {
    case OperationStage::kWaiting:
      return "waiting, though no pending operation holds it (it is about to run)";
    case OperationStage::kHeldForDevice:
      return "held until device work it reads has finished on its stream";
    case OperationStage::kQueued:
      return "queued: ready, but no worker of its device has taken it";
    case OperationStage::kRunning:
      return "running: its closure has not returned";
    case OperationStage::kLaunched:
      return "launched: asynchronous, its Completion has not been called";
  }
  return "?";
}

std::string header(const PendingOperation& op) {
  return fmt::format("#{} '{}' on {}{}{}", op.seq, op.name, op.ctx.str(),
                     op.queue == QueueKind::kCopy ? " (copy queue)" : "",
                     op.priority != 0 ? fmt::format(", priority {}", op.priority) : "");
}

bool lists(const std::vector<VarHandle>& vars, VarHandle var) {
  return std::find(vars.begin(), vars.end(), var) != vars.end();
}

}  // namespace

const char* to_string(OperationStage stage) {
  switch (stage) {
    case OperationStage::kWaiting:
      return "waiting";
    case OperationStage::kHeldForDevice:
      return "held for device";
    case OperationStage::kQueued:
      return "queued";
    case OperationStage::kRunning:
      return "running";
    case OperationStage::kLaunched:
      return "launched";
  }
  return "?";
}

const PendingOperation* DependencyState::find(std::uint64_t seq) const {
  const auto it =
      std::lower_bound(operations.begin(), operations.end(), seq,
                       [](const PendingOperation& op, std::uint64_t s) { return op.seq < s; });
  return it != operations.end() && it->seq == seq ? &*it : nullptr;
}

std::vector<const PendingOperation*> DependencyState::blockers() const {
  std::vector<const PendingOperation*> out;
  for (const PendingOperation& op : operations) {
    if (op.waits_for.empty()) out.push_back(&op);
  }
  return out;
}

std::size_t DependencyState::waiting_behind(std::uint64_t seq) const {
  // Operations follow only earlier ones, so one pass in push order finds
  // every operation that depends on `seq`, directly or not.
  std::unordered_set<std::uint64_t> behind{seq};
  for (const PendingOperation& op : operations) {
    if (op.seq <= seq) continue;
    for (const Blocker& b : op.waits_for) {
      if (behind.contains(b.seq)) {
        behind.insert(op.seq);
        break;
      }
    }
  }
  return behind.size() - 1;
}

std::string DependencyState::describe(std::size_t max_waiting) const {
  std::string out = fmt::format("engine: {} operations pushed, {} completed, {} pending\n",
                                counts.pushed, counts.completed, counts.pending());
  if (operations.empty()) {
    out += counts.pending() > 0 ? "  (this engine does not list its pending operations)\n"
                                : "  nothing pending\n";
    return out;
  }
  const auto roots = blockers();
  out +=
      fmt::format("blocking ({}): what every other pending operation waits behind\n", roots.size());
  for (const PendingOperation* op : roots) {
    out += fmt::format("  {}: {}; {} operation(s) wait behind it\n", header(*op),
                       explain(op->stage), waiting_behind(op->seq));
  }
  const std::size_t waiting = operations.size() - roots.size();
  if (waiting == 0) return out;
  out += fmt::format("waiting ({}), with the variables they wait on:\n", waiting);
  std::size_t shown = 0;
  for (const PendingOperation& op : operations) {
    if (op.waits_for.empty()) continue;
    if (shown++ == max_waiting) {
      out += fmt::format("  ... and {} more\n", waiting - max_waiting);
      break;
    }
    out += fmt::format("  {} waits for\n", header(op));
    for (const Blocker& b : op.waits_for) {
      const PendingOperation* holder = find(b.seq);
      const char* access = lists(op.writes, b.var) ? "to write" : "to read";
      if (holder == nullptr) {
        out += fmt::format("    var {} {}: held by #{}\n", b.var.str(), access, b.seq);
        continue;
      }
      const char* holds = lists(holder->writes, b.var) ? "writes it" : "reads it";
      out += fmt::format("    var {} {}: held by {}, which {} ({})\n", b.var.str(), access,
                         header(*holder), holds, to_string(holder->stage));
    }
  }
  return out;
}

}  // namespace tagflow
