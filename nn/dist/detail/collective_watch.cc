#include "nn/dist/detail/collective_watch.h"

#include <cmath>

#include "engine/error.h"

namespace tagflow::dist {

CollectiveWatch::CollectiveWatch(Seconds timeout) : timeout_(timeout) {
  TAGFLOW_CHECK(std::isfinite(timeout.count()) && timeout.count() > 0,
                "CollectiveWatch: expected a timeout > 0 seconds, got {}", timeout.count());
}

std::uint64_t CollectiveWatch::enqueued(Clock::time_point now) {
  const std::uint64_t id = next_id_++;
  collectives_.emplace(id, Collective{.enqueued = now, .started = std::nullopt});
  return id;
}

void CollectiveWatch::started(std::uint64_t id, Clock::time_point now) {
  const auto it = collectives_.find(id);
  if (it != collectives_.end() && !it->second.started) it->second.started = now;
}

void CollectiveWatch::finished(std::uint64_t id) { collectives_.erase(id); }

bool CollectiveWatch::has_started(std::uint64_t id) const {
  const auto it = collectives_.find(id);
  return it != collectives_.end() && it->second.started.has_value();
}

CollectiveWatch::Seconds CollectiveWatch::since_enqueued(std::uint64_t id,
                                                         Clock::time_point now) const {
  const auto it = collectives_.find(id);
  return it == collectives_.end() ? Seconds{} : Seconds(now - it->second.enqueued);
}

void CollectiveWatch::call_began(std::uint64_t slot, Clock::time_point now) {
  calls_.insert_or_assign(slot, now);
}

void CollectiveWatch::call_ended(std::uint64_t slot) { calls_.erase(slot); }

std::optional<CollectiveWatch::Wait> CollectiveWatch::longest(Clock::time_point now) const {
  std::optional<Wait> longest;
  const auto consider = [&](Wait::Kind kind, std::uint64_t id, Clock::time_point since) {
    const Seconds waited = now - since;
    if (!longest || waited > longest->waited)
      longest = Wait{.kind = kind, .id = id, .waited = waited};
  };
  for (const auto& [id, collective] : collectives_) {
    if (collective.started) consider(Wait::kCollective, id, *collective.started);
  }
  for (const auto& [slot, began] : calls_) consider(Wait::kCall, slot, began);
  return longest;
}

std::optional<CollectiveWatch::Wait> CollectiveWatch::late(Clock::time_point now) const {
  std::optional<Wait> wait = longest(now);
  if (wait && wait->waited > timeout_) return wait;
  return std::nullopt;
}

}  // namespace tagflow::dist
