#include "nn/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/error.h"

namespace tagflow::nn {

LrSchedule LrSchedule::factor_every(std::int64_t every, double by, double floor_lr) {
  LrSchedule s{.kind = LrScheduleKind::kFactor, .step = every, .factor = by};
  s.stop_factor_lr = floor_lr;
  s.check();
  return s;
}

LrSchedule LrSchedule::multifactor(std::vector<std::int64_t> at, double by) {
  LrSchedule s{.kind = LrScheduleKind::kMultiFactor, .steps = std::move(at), .factor = by};
  s.check();
  return s;
}

LrSchedule LrSchedule::cosine(std::int64_t last_update, double end_lr) {
  LrSchedule s{.kind = LrScheduleKind::kCosine, .max_update = last_update, .final_lr = end_lr};
  s.check();
  return s;
}

LrSchedule LrSchedule::poly(std::int64_t last_update, double exponent, double end_lr) {
  LrSchedule s{.kind = LrScheduleKind::kPoly,
               .max_update = last_update,
               .final_lr = end_lr,
               .power = exponent};
  s.check();
  return s;
}

LrSchedule LrSchedule::with_warmup(std::int64_t updates, double begin_lr) const {
  LrSchedule s = *this;
  s.warmup_steps = updates;
  s.warmup_begin_lr = begin_lr;
  s.check();
  return s;
}

void LrSchedule::check() const {
  TAGFLOW_CHECK(warmup_steps >= 0 && warmup_begin_lr >= 0,
                "LrSchedule: expected warmup_steps >= 0 and warmup_begin_lr >= 0, got {} and {}",
                warmup_steps, warmup_begin_lr);
  switch (kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kFactor:
      TAGFLOW_CHECK(step >= 1 && factor > 0 && factor <= 1 && stop_factor_lr >= 0,
                    "LrSchedule factor: expected step >= 1, 0 < factor <= 1 and "
                    "stop_factor_lr >= 0, got {}, {} and {}",
                    step, factor, stop_factor_lr);
      break;
    case LrScheduleKind::kMultiFactor:
      TAGFLOW_CHECK(!steps.empty() && factor > 0 && factor <= 1,
                    "LrSchedule multifactor: expected at least one step and 0 < factor <= 1, "
                    "got {} steps and {}",
                    steps.size(), factor);
      for (std::size_t i = 0; i < steps.size(); ++i) {
        TAGFLOW_CHECK(steps[i] >= 1 && (i == 0 || steps[i] > steps[i - 1]),
                      "LrSchedule multifactor: expected increasing steps >= 1, got [{}]",
                      fmt::join(steps, ", "));
      }
      break;
    case LrScheduleKind::kCosine:
    case LrScheduleKind::kPoly:
      TAGFLOW_CHECK(max_update > warmup_steps && final_lr >= 0 && power > 0,
                    "LrSchedule {}: expected max_update > warmup_steps ({}), final_lr >= 0 and "
                    "power > 0, got {}, {} and {}",
                    to_string(kind), warmup_steps, max_update, final_lr, power);
      break;
  }
}

double LrSchedule::learning_rate(std::int64_t t, double base_lr) const {
  TAGFLOW_CHECK(t >= 1, "LrSchedule: updates count from 1, got {}", t);
  if (t < warmup_steps) {
    return warmup_begin_lr +
           (base_lr - warmup_begin_lr) * static_cast<double>(t) / static_cast<double>(warmup_steps);
  }
  switch (kind) {
    case LrScheduleKind::kConstant:
      return base_lr;
    case LrScheduleKind::kFactor:
      return std::max(stop_factor_lr,
                      base_lr * std::pow(factor, static_cast<double>((t - 1) / step)));
    case LrScheduleKind::kMultiFactor: {
      const auto passed =
          std::count_if(steps.begin(), steps.end(), [t](std::int64_t s) { return s < t; });
      return base_lr * std::pow(factor, static_cast<double>(passed));
    }
    case LrScheduleKind::kCosine:
    case LrScheduleKind::kPoly: {
      if (t > max_update) return final_lr;
      const double progress =
          static_cast<double>(t - warmup_steps) / static_cast<double>(max_update - warmup_steps);
      const double shape = kind == LrScheduleKind::kCosine
                               ? (1 + std::cos(std::numbers::pi * progress)) / 2
                               : std::pow(1 - progress, power);
      return final_lr + (base_lr - final_lr) * shape;
    }
  }
  return base_lr;
}

std::string LrSchedule::describe() const {
  std::string text;
  switch (kind) {
    case LrScheduleKind::kConstant:
      text = "constant";
      break;
    case LrScheduleKind::kFactor:
      text = fmt::format("factor(step={}, factor={}, stop_factor_lr={})", step, factor,
                         stop_factor_lr);
      break;
    case LrScheduleKind::kMultiFactor:
      text = fmt::format("multifactor(steps=[{}], factor={})", fmt::join(steps, ", "), factor);
      break;
    case LrScheduleKind::kCosine:
      text = fmt::format("cosine(max_update={}, final_lr={})", max_update, final_lr);
      break;
    case LrScheduleKind::kPoly:
      text = fmt::format("poly(max_update={}, power={}, final_lr={})", max_update, power, final_lr);
      break;
  }
  if (warmup_steps > 0) {
    text += fmt::format(" after {} warm-up updates from {}", warmup_steps, warmup_begin_lr);
  }
  return text;
}

const char* to_string(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::kConstant:
      return "constant";
    case LrScheduleKind::kFactor:
      return "factor";
    case LrScheduleKind::kMultiFactor:
      return "multifactor";
    case LrScheduleKind::kCosine:
      return "cosine";
    case LrScheduleKind::kPoly:
      return "poly";
  }
  return "?";
}

LrScheduleKind parse_lr_schedule_kind(const std::string& name) {
  for (LrScheduleKind kind :
       {LrScheduleKind::kConstant, LrScheduleKind::kFactor, LrScheduleKind::kMultiFactor,
        LrScheduleKind::kCosine, LrScheduleKind::kPoly}) {
    if (name == to_string(kind)) return kind;
  }
  detail::throw_error(
      "unknown learning-rate schedule \"{}\"; expected constant, factor, multifactor, cosine or "
      "poly",
      name);
}

}  // namespace tagflow::nn
