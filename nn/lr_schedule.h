#pragma once
// Learning-rate schedules, as MXNet's lr_scheduler computes them (and
// PyTorch's StepLR, MultiStepLR, CosineAnnealingLR and PolynomialLR, with a
// linear warm-up in front):
//
//   nn::Trainer trainer(net.collect_params(), "sgd",
//                       {.learning_rate = 0.1, .momentum = 0.9,
//                        .schedule = nn::LrSchedule::cosine(/*max_update=*/1000)
//                                        .with_warmup(/*steps=*/100)});
//
// Note [Learning-rate schedules]
// Updates are numbered from 1 (the first trainer.step() is update 1), and
// the rate of update t, for a base rate b, is:
// - during the warm-up, t < warmup_steps: begin + (b - begin) t / warmup_steps
//   (linear from warmup_begin_lr, reaching b at t = warmup_steps);
// - constant: b;
// - factor: b factor^floor((t - 1) / step), never below stop_factor_lr
//   (MXNet's FactorScheduler: the rate changes after every `step` updates);
// - multifactor: b factor^k, k the number of `steps` below t (MXNet's
//   MultiFactorScheduler: at steps {s1, s2}, updates s1 + 1 on use b factor);
// - cosine: final + (b - final) (1 + cos(pi (t - w) / (max_update - w))) / 2
//   for t <= max_update, w = warmup_steps, then final;
// - poly: final + (b - final) (1 - (t - w) / (max_update - w))^power for
//   t <= max_update, then final.
// The trainer counts its updates (Trainer::updates()), so a schedule's
// position is that count, saved with the trainer's state.
//
// Threads: concurrent reads, exclusive writes (a value, as a std::vector).
// learning_rate(), check() and describe() keep no state.

#include <cstdint>
#include <string>
#include <vector>

namespace tagflow::nn {

enum class LrScheduleKind { kConstant, kFactor, kMultiFactor, kCosine, kPoly };

struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::kConstant;
  std::int64_t step = 0;            ///< factor: the rate changes every `step` updates
  std::vector<std::int64_t> steps;  ///< multifactor: after these updates, increasing
  double factor = 1;                ///< factor, multifactor: the rate is multiplied by it
  double stop_factor_lr = 1e-8;     ///< factor: the rate never falls below this
  std::int64_t max_update = 0;      ///< cosine, poly: the update where final_lr is reached
  double final_lr = 0;              ///< cosine, poly
  double power = 2;                 ///< poly
  std::int64_t warmup_steps = 0;    ///< updates of linear warm-up (0: none)
  double warmup_begin_lr = 0;       ///< the rate of update 0 of the warm-up

  static LrSchedule constant() { return {}; }
  static LrSchedule factor_every(std::int64_t every, double by, double floor_lr = 1e-8);
  static LrSchedule multifactor(std::vector<std::int64_t> at, double by);
  static LrSchedule cosine(std::int64_t last_update, double end_lr = 0);
  static LrSchedule poly(std::int64_t last_update, double exponent = 2, double end_lr = 0);
  /// The same schedule after a linear warm-up of `steps` updates from `begin_lr`.
  LrSchedule with_warmup(std::int64_t updates, double begin_lr = 0) const;

  /// The rate of update `t` (from 1) for the base rate `base_lr` (Note
  /// [Learning-rate schedules]). Throws tagflow::Error for t < 1.
  double learning_rate(std::int64_t t, double base_lr) const;
  /// Throws tagflow::Error, saying what was expected and what came, for a
  /// schedule that cannot be computed (a factor step of 0, decreasing steps,
  /// max_update not after the warm-up, a negative rate...).
  void check() const;
  /// "cosine(max_update=1000, final_lr=0) after 100 warm-up updates from 0".
  std::string describe() const;
};

/// "constant", "factor", "multifactor", "cosine", "poly".
const char* to_string(LrScheduleKind kind);
/// The kind named `name`; throws tagflow::Error listing the names for another.
LrScheduleKind parse_lr_schedule_kind(const std::string& name);

}  // namespace tagflow::nn
