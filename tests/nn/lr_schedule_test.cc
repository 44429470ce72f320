// Learning-rate schedules (nn/lr_schedule.h) against values worked by hand
// from Note [Learning-rate schedules]'s formulas.

#include <cmath>
#include <numbers>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using nn::LrSchedule;

std::vector<double> rates(const LrSchedule& s, int updates, double base) {
  std::vector<double> out;
  for (int t = 1; t <= updates; ++t) out.push_back(s.learning_rate(t, base));
  return out;
}

void expect_rates(const std::vector<double>& got, const std::vector<double>& expected) {
  ASSERT_EQ(got.size(), expected.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], 1e-12) << "update " << i + 1;
  }
}

TEST(LrScheduleTest, FactorAndMultiFactorStepAsMxnetsSchedulers) {
  // Every 2 updates, halved: 1, 1, .5, .5, .25, .25, then not below 0.2.
  expect_rates(rates(LrSchedule::factor_every(2, 0.5, 0.2), 8, 1.0),
               {1, 1, 0.5, 0.5, 0.25, 0.25, 0.2, 0.2});
  // After updates 2 and 4: 1, 1, .1, .1, .01.
  expect_rates(rates(LrSchedule::multifactor({2, 4}, 0.1), 5, 1.0), {1, 1, 0.1, 0.1, 0.01});
  expect_rates(rates(LrSchedule::constant(), 3, 0.3), {0.3, 0.3, 0.3});
}

TEST(LrScheduleTest, CosineAndPolyReachTheirFinalRateAtMaxUpdate) {
  const LrSchedule cosine = LrSchedule::cosine(10, 0.1);
  // final + (1 - final) (1 + cos(pi t / 10)) / 2.
  EXPECT_NEAR(cosine.learning_rate(5, 1.0), 0.1 + 0.9 * 0.5, 1e-12);
  EXPECT_NEAR(cosine.learning_rate(1, 1.0), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi / 10)) / 2,
              1e-12);
  EXPECT_NEAR(cosine.learning_rate(10, 1.0), 0.1, 1e-12);
  EXPECT_NEAR(cosine.learning_rate(11, 1.0), 0.1, 1e-12) << "stays at the final rate";
  const LrSchedule poly = LrSchedule::poly(10, 2);
  EXPECT_NEAR(poly.learning_rate(5, 2.0), 2.0 * 0.25, 1e-12);  // 2 (1 - 5/10)^2
  EXPECT_NEAR(poly.learning_rate(8, 2.0), 2.0 * 0.04, 1e-12);  // 2 (1 - 8/10)^2
  EXPECT_NEAR(poly.learning_rate(20, 2.0), 0, 1e-12);
}

TEST(LrScheduleTest, AWarmUpRisesLinearlyThenTheScheduleStartsFromItsEnd) {
  const LrSchedule s = LrSchedule::cosine(12).with_warmup(4, 0.2);
  // 0.2 + 0.8 t / 4 for t < 4, then cosine over updates 4..12 (8 of them).
  expect_rates(rates(s, 4, 1.0), {0.4, 0.6, 0.8, 1.0});
  EXPECT_NEAR(s.learning_rate(8, 1.0), 0.5, 1e-12);  // half-way: (1 + cos(pi / 2)) / 2
  EXPECT_NEAR(s.learning_rate(12, 1.0), 0, 1e-12);
  expect_rates(rates(LrSchedule::constant().with_warmup(2), 3, 0.5), {0.25, 0.5, 0.5});
  EXPECT_EQ(s.describe(), "cosine(max_update=12, final_lr=0) after 4 warm-up updates from 0.2");
}

TEST(LrScheduleTest, SchedulesThatCannotBeComputedAreRefused) {
  const auto error = [](auto make) { return testing::error_of(make); };
  EXPECT_NE(error([] { (void)LrSchedule::factor_every(0, 0.5); }).find("step >= 1"),
            std::string::npos);
  EXPECT_NE(error([] { (void)LrSchedule::factor_every(2, 1.5); }).find("0 < factor <= 1"),
            std::string::npos);
  EXPECT_NE(error([] {
              (void)LrSchedule::multifactor({4, 2}, 0.1);
            }).find("increasing"),
            std::string::npos);
  EXPECT_NE(
      error([] { (void)LrSchedule::cosine(10).with_warmup(10); }).find("max_update > warmup_steps"),
      std::string::npos);
  EXPECT_NE(error([] { (void)LrSchedule::constant().learning_rate(0, 1); }).find("from 1"),
            std::string::npos);
  EXPECT_EQ(nn::parse_lr_schedule_kind("poly"), nn::LrScheduleKind::kPoly);
  EXPECT_NE(error([] { (void)nn::parse_lr_schedule_kind("linear"); }).find("cosine"),
            std::string::npos);
}

}  // namespace
}  // namespace tagflow
