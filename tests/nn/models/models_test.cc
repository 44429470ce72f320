// The networks of nn/models: their layers, parameter counts (from the
// layer sizes, counted by hand) and outputs' shapes, on every device.
#include <gtest/gtest.h>

#include <cstdint>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

std::int64_t parameter_count(const nn::Block& net) {
  std::int64_t total = 0;
  for (const auto& p : net.collect_params()) total += p->shape().size();
  return total;
}

TEST(ModelsTest, LenetHasTheTutorialsLayersOnEveryDevice) {
  for (Context ctx : testing::all_devices()) {
    SCOPED_TRACE(ctx.str());
    nn::Sequential net = models::lenet();
    ASSERT_EQ(net.size(), 7U);
    net.initialize(init::Xavier(), {ctx});
    NDArray scores = net(random::uniform(0, 1, {3, 1, 28, 28}, ctx));
    EXPECT_EQ(scores.shape(), Shape({3, 10}));
    // conv 5x5 1->6, conv 3x3 6->16, then 16x5x5 -> 120 -> 84 -> 10.
    const std::int64_t expected =
        (6 * 25 + 6) + (16 * 6 * 9 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10);
    EXPECT_EQ(parameter_count(net), expected);
  }
}

TEST(ModelsTest, MlpScoresEachClass) {
  nn::Sequential net = models::mlp(7);
  net.initialize(init::Normal(0.01), {cpu(0)});
  NDArray scores = net(random::uniform(0, 1, {2, 1, 28, 28}));
  EXPECT_EQ(scores.shape(), Shape({2, 7}));
  EXPECT_EQ(parameter_count(net), (784 * 256 + 256) + (256 * 128 + 128) + (128 * 7 + 7));
}

TEST(ModelsTest, RefuseNoClasses) {
  EXPECT_THROW(models::lenet(0), Error);
  EXPECT_THROW(models::mlp(-1), Error);
}

}  // namespace
}  // namespace tagflow
