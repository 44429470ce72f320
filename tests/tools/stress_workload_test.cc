// The stress workloads and their serial replay (tools/stress_workload.h):
// the replay follows the engine's error rules step by step, generation is
// deterministic and respects the devices' variables and the rates, and the
// replay tells a reordering apart (so the stress check can fail).

#include "tools/stress_workload.h"

#include <algorithm>
#include <set>

#include <gtest/gtest.h>

namespace tagflow::tools::stress {
namespace {

constexpr std::uint64_t kSeed = 7;

Replay fresh_replay(int slots = 4) {
  return Replay(kSeed, 0, slots, {shared_value(kSeed, 0), shared_value(kSeed, 1)});
}

Step compute(std::uint64_t id, int write, std::array<int, 2> reads, bool rmw) {
  Step s;
  s.kind = StepKind::kCompute;
  s.id = id;
  s.write = write;
  s.reads = reads;
  s.read_modify_write = rmw;
  return s;
}

Step copy(std::uint64_t id, int from, int to) {
  Step s;
  s.kind = StepKind::kCopy;
  s.id = id;
  s.reads = {from, -1};
  s.write = to;
  s.device = 1;
  return s;
}

TEST(StressReplay, ComputeMixesItsInputsAndTheOldValue) {
  Replay r = fresh_replay();
  const Value a = r.slot(0).value, b = r.slot(1).value, old = r.slot(2).value;
  Step s = compute(11, 2, {0, 1}, true);
  s.reads_shared = true;
  ASSERT_TRUE(r.apply(s));
  const std::array<Value, 3> inputs = {a, b, shared_value(kSeed, 0)};
  EXPECT_EQ(r.slot(2).value, mix_values(s, inputs.data(), 3, &old));
  EXPECT_NE(r.slot(2).value, old);
  // An overwrite ignores the old value.
  Step w = compute(12, 3, {0, -1}, false);
  ASSERT_TRUE(r.apply(w));
  EXPECT_EQ(r.slot(3).value, mix_values(w, &a, 1, nullptr));
}

TEST(StressReplay, FollowsTheEnginesErrorRules) {
  Replay r = fresh_replay();
  const Value before = r.slot(0).value;
  Step fail = compute(20, 0, {-1, -1}, true);
  fail.fails = true;
  EXPECT_FALSE(r.apply(fail));
  EXPECT_EQ(r.slot(0).errors, std::vector<std::uint64_t>{20});
  EXPECT_EQ(r.slot(0).value, before) << "a failed step changes nothing";

  // A reader is skipped and passes the error on; its target keeps its value.
  const Value target = r.slot(1).value;
  EXPECT_FALSE(r.apply(compute(21, 1, {0, -1}, false)));
  EXPECT_EQ(r.slot(1).errors, std::vector<std::uint64_t>{20});
  EXPECT_EQ(r.slot(1).value, target);

  // Modifying an erroneous variable in place keeps the error...
  EXPECT_FALSE(r.apply(compute(22, 1, {-1, -1}, true)));
  EXPECT_EQ(r.slot(1).errors, std::vector<std::uint64_t>{20});
  // ...overwriting it from clean inputs clears it.
  EXPECT_TRUE(r.apply(compute(23, 1, {2, -1}, false)));
  EXPECT_TRUE(r.slot(1).errors.empty());

  // Two different errors read at once: either may be passed on.
  Step fail2 = compute(24, 2, {-1, -1}, true);
  fail2.fails = true;
  EXPECT_FALSE(r.apply(fail2));
  EXPECT_FALSE(r.apply(compute(25, 3, {0, 2}, false)));
  EXPECT_EQ(std::set<std::uint64_t>(r.slot(3).errors.begin(), r.slot(3).errors.end()),
            (std::set<std::uint64_t>{20, 24}));

  // A copy from a clean variable overwrites the error; from an erroneous one
  // it passes it on.
  EXPECT_TRUE(r.apply(copy(26, 1, 3)));
  EXPECT_TRUE(r.slot(3).errors.empty());
  EXPECT_EQ(r.slot(3).value, r.slot(1).value);
  EXPECT_FALSE(r.apply(copy(27, 0, 3)));
  EXPECT_EQ(r.slot(3).errors, std::vector<std::uint64_t>{20});

  // Deleting the variable gives the slot a fresh one.
  Step del;
  del.kind = StepKind::kDelete;
  del.id = 28;
  del.write = 0;
  EXPECT_TRUE(r.apply(del));
  EXPECT_TRUE(r.slot(0).errors.empty());
  EXPECT_EQ(r.slot(0).generation, 1u);
  EXPECT_EQ(r.slot(0).value, initial_value(kSeed, 0, 1, 0));
  EXPECT_NE(r.slot(0).value, before);
}

TEST(StressWorkload, GenerationIsDeterministicAndRespectsDevicesAndRates) {
  const ClientShape shape{.slots = 24, .num_devices = 3, .steps = 6000};
  Mix mix;
  mix.fail = 3;
  mix.alloc_fail = 30;
  const auto steps = generate_round(kSeed, 1, 2, shape, mix);
  ASSERT_EQ(steps.size(), 6000u);
  EXPECT_EQ(generate_round(kSeed, 1, 2, shape, mix)[4321].id, steps[4321].id);
  EXPECT_NE(generate_round(kSeed, 1, 3, shape, mix)[0].id, steps[0].id);
  std::set<std::uint64_t> ids;
  int kinds[4] = {}, async = 0, failing = 0, prioritized = 0;
  for (const Step& s : steps) {
    EXPECT_TRUE(ids.insert(s.id).second) << "ids must be unique";
    ++kinds[static_cast<int>(s.kind)];
    ASSERT_GE(s.device, 0);
    ASSERT_LT(s.device, 3);
    if (s.kind == StepKind::kCompute) {
      EXPECT_EQ(s.write % 3, s.device) << "a compute step writes a variable of its device";
      for (int r : s.reads) EXPECT_TRUE(r < 0 || r % 3 == s.device) << "and reads only those";
    }
    if (s.kind == StepKind::kCopy) {
      EXPECT_EQ(s.write % 3, s.device);
      EXPECT_NE(s.reads[0] % 3, s.device) << "a copy crosses devices";
    }
    async += s.async ? 1 : 0;
    failing += s.fails && s.kind != StepKind::kAllocate ? 1 : 0;
    prioritized += s.priority != 0 ? 1 : 0;
  }
  // Rates within a few points of what was asked (6000 draws).
  EXPECT_NEAR(kinds[static_cast<int>(StepKind::kCopy)], 6000 * 0.20, 150);
  EXPECT_NEAR(kinds[static_cast<int>(StepKind::kAllocate)], 6000 * 0.05, 80);
  EXPECT_NEAR(kinds[static_cast<int>(StepKind::kDelete)], 6000 * 0.01, 40);
  const int operations = kinds[0] + kinds[1];
  EXPECT_NEAR(async, operations * 0.15, 150);
  EXPECT_NEAR(prioritized, operations * 0.20, 150);
  EXPECT_NEAR(failing, operations * 0.03, 60);

  Mix none;
  none.copy = none.allocate = none.remove = 0;
  for (const Step& s : generate_round(kSeed, 0, 0, shape, none)) {
    EXPECT_EQ(s.kind, StepKind::kCompute);
  }
  // One device: nothing to copy between.
  for (const Step& s :
       generate_round(kSeed, 0, 0, {.slots = 8, .num_devices = 1, .steps = 500}, mix)) {
    EXPECT_NE(s.kind, StepKind::kCopy);
  }
}

TEST(StressReplay, ReorderingTwoConflictingStepsChangesTheResult) {
  const ClientShape shape{.slots = 6, .num_devices = 1, .steps = 300};
  Mix mix;
  mix.allocate = mix.remove = 0;
  int differing = 0, tried = 0;
  for (int round = 0; round < 10; ++round) {
    const auto steps = generate_round(kSeed, 0, round, shape, mix);
    auto final_values = [&](const std::vector<Step>& order) {
      Replay r(kSeed, 0, shape.slots, {shared_value(kSeed, 0)});
      for (const Step& s : order) r.apply(s);
      std::vector<Value> values;
      for (int s = 0; s < shape.slots; ++s) values.push_back(r.slot(s).value);
      return values;
    };
    const auto expected = final_values(steps);
    for (std::size_t i = 0; i + 1 < steps.size(); ++i) {
      // The second modifies in place what the first writes, and nothing later
      // overwrites that variable (which would erase the difference): both
      // orders and both steps matter to the final state.
      if (steps[i].write != steps[i + 1].write || !steps[i + 1].read_modify_write) continue;
      const bool overwritten_later = std::any_of(
          steps.begin() + static_cast<std::ptrdiff_t>(i) + 2, steps.end(),
          [&](const Step& s) { return s.write == steps[i].write && !s.read_modify_write; });
      if (overwritten_later) continue;
      auto swapped = steps;
      std::swap(swapped[i], swapped[i + 1]);
      ++tried;
      differing += final_values(swapped) != expected ? 1 : 0;
      auto dropped = steps;
      dropped.erase(dropped.begin() + static_cast<std::ptrdiff_t>(i));
      EXPECT_NE(final_values(dropped), expected) << "dropping step " << i << " went unnoticed";
    }
  }
  ASSERT_GT(tried, 10);
  EXPECT_EQ(differing, tried) << "a swap of two writes of one variable went unnoticed";
}

}  // namespace
}  // namespace tagflow::tools::stress
