#include "engine/schedule.h"

#include <charconv>
#include <vector>

#include <fmt/format.h>

#include "engine/error.h"

namespace tagflow {

namespace {

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t colon = text.find(':', begin);
    parts.push_back(text.substr(begin, colon - begin));
    if (colon == std::string_view::npos) return parts;
    begin = colon + 1;
  }
}

template <typename T>
bool parse_number(std::string_view text, T& out) {
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size();
}

}  // namespace

ScheduleOptions ScheduleOptions::parse(std::string_view text) {
  constexpr const char* kExpected =
      "expected random:SEED, pct:SEED[:DEPTH[:STEPS]] (depth >= 1, steps >= 1), replay:FILE or "
      "none";
  ScheduleOptions o;
  if (text == "none" || text.empty()) return o;
  const std::vector<std::string_view> parts = split(text);
  const std::string_view kind = parts[0];
  if (kind == "replay") {
    TAGFLOW_CHECK(parts.size() >= 2 && !text.substr(7).empty(), "TAGFLOW_SCHEDULE: {}, got \"{}\"",
                  kExpected, text);
    o.policy = SchedulePolicy::kReplay;
    o.replay = std::string(text.substr(7));  // a path may hold colons
    return o;
  }
  bool ok = (kind == "random" && parts.size() == 2) ||
            (kind == "pct" && parts.size() >= 2 && parts.size() <= 4);
  ok = ok && parse_number(parts[1], o.seed);
  if (ok && parts.size() >= 3) ok = parse_number(parts[2], o.depth) && o.depth >= 1;
  if (ok && parts.size() >= 4) ok = parse_number(parts[3], o.steps) && o.steps >= 1;
  TAGFLOW_CHECK(ok, "TAGFLOW_SCHEDULE: {}, got \"{}\"", kExpected, text);
  o.policy = kind == "random" ? SchedulePolicy::kRandom : SchedulePolicy::kPct;
  return o;
}

std::string ScheduleOptions::str() const {
  switch (policy) {
    case SchedulePolicy::kPushOrder:
      return "none";
    case SchedulePolicy::kRandom:
      return fmt::format("random:{}", seed);
    case SchedulePolicy::kPct:
      return fmt::format("pct:{}:{}:{}", seed, depth, steps);
    case SchedulePolicy::kReplay:
      return "replay:" + replay.string();
  }
  return "none";
}

}  // namespace tagflow
