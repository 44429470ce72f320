// The fused optimiser updates against plain double loops, and the Trainer:
// SGD with momentum and Adam over several steps, gradients summed over the
// devices of a parameter, copies kept identical.

#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "nn/basic_layers.h"
#include "nn/loss.h"
#include "nn/trainer.h"
#include "ops/optimizer_update.h"
#include "tagflow/tagflow.h"

namespace tagflow {
namespace {

std::vector<float> wave(std::size_t n, float phase) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = std::sin(static_cast<float>(i) * 1.3f + phase);
  return v;
}

TEST(OptimizerTest, SgdWithMomentumAndAdamMatchDoubleLoops) {
  const std::size_t n = 1000;
  for (Context ctx : {cpu(0), gpu(0)}) {
    std::vector<double> w(n), m(n, 0), am(n, 0), av(n, 0), aw(n);
    const std::vector<float> w0 = wave(n, 0.1f);
    for (std::size_t i = 0; i < n; ++i) w[i] = aw[i] = w0[i];
    NDArray weight = array(w0, {static_cast<std::int64_t>(n)}, ctx);
    NDArray momentum = zeros_like(weight);
    NDArray adam_weight = array(w0, {static_cast<std::int64_t>(n)}, ctx);
    NDArray mean = zeros_like(weight);
    NDArray variance = zeros_like(weight);
    const SgdOptions sgd{.learning_rate = 0.1,
                         .momentum = 0.9,
                         .weight_decay = 0.01,
                         .rescale_grad = 0.5,
                         .clip_gradient = 0.8};
    const AdamOptions adam{.learning_rate = 0.01, .weight_decay = 0.001, .rescale_grad = 0.5};
    for (int t = 1; t <= 3; ++t) {
      const std::vector<float> g = wave(n, static_cast<float>(t));
      NDArray grad = array(g, {static_cast<std::int64_t>(n)}, ctx);
      sgd_update(weight, grad, momentum, sgd);
      adam_update(adam_weight, grad, mean, variance, adam, t);
      for (std::size_t i = 0; i < n; ++i) {
        double gi = std::clamp(0.5 * g[i], -0.8, 0.8) + 0.01 * w[i];
        m[i] = 0.9 * m[i] - 0.1 * gi;
        w[i] += m[i];
        double ga = 0.5 * g[i] + 0.001 * aw[i];
        am[i] = 0.9 * am[i] + 0.1 * ga;
        av[i] = 0.999 * av[i] + 0.001 * ga * ga;
        aw[i] -= 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t)) * am[i] /
                 (std::sqrt(av[i]) + 1e-8);
      }
    }
    const std::vector<float> got = weight.to_vector<float>();
    const std::vector<float> got_adam = adam_weight.to_vector<float>();
    for (std::size_t i = 0; i < n; ++i) {
      EXPECT_NEAR(got[i], w[i], 1e-5) << ctx << " sgd " << i;
      EXPECT_NEAR(got_adam[i], aw[i], 1e-5) << ctx << " adam " << i;
    }
  }
  EXPECT_THROW(sgd_update(zeros({3}), zeros({4}), zeros({3}), {.momentum = 0.9}), Error);
  EXPECT_THROW(adam_update(zeros({3}), zeros({3}), zeros({3}), zeros({3}), {}, 0), Error);
}

TEST(TrainerTest, ParametersOnSeveralDevicesGetTheSummedGradientAndStayIdentical) {
  // The same batch split over two devices must give the update of the whole
  // batch on one device.
  const std::vector<float> x = wave(8 * 4, 0.5f);
  const std::vector<std::int32_t> y = {0, 1, 2, 0, 1, 2, 0, 1};
  auto train = [&](const std::vector<Context>& devices) {
    random::seed(11);
    nn::Dense dense(3, "", 4);
    dense.initialize(init::Normal(0.2), devices);
    nn::Trainer trainer(dense.collect_params(), "sgd", {.learning_rate = 0.5, .momentum = 0.5});
    nn::SoftmaxCrossEntropyLoss loss;
    const std::int64_t per_device = 8 / static_cast<std::int64_t>(devices.size());
    for (int step = 0; step < 3; ++step) {
      {
        auto recording = autograd::record();
        for (std::size_t d = 0; d < devices.size(); ++d) {
          const auto begin = static_cast<std::int64_t>(d) * per_device;
          NDArray xs =
              array(std::vector<float>(x.begin() + begin * 4, x.begin() + (begin + per_device) * 4),
                    {per_device, 4}, devices[d]);
          NDArray ys =
              array(std::vector<std::int32_t>(y.begin() + begin, y.begin() + begin + per_device),
                    {per_device}, devices[d]);
          sum(loss(dense(xs), ys)).backward();
        }
      }
      trainer.step(8);
    }
    std::vector<std::vector<float>> copies;
    for (Context c : devices) copies.push_back(dense.weight()->data(c).to_vector<float>());
    return copies;
  };
  const auto one = train({cpu(0)});
  const auto two = train({cpu(1), gpu(0)});
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], two[1]) << "the copies must stay identical";
  for (std::size_t i = 0; i < one[0].size(); ++i) EXPECT_NEAR(two[0][i], one[0][i], 1e-5);
  EXPECT_THROW(nn::Trainer(nn::ParameterDict(), "rmsprop"), Error);
}

}  // namespace
}  // namespace tagflow
