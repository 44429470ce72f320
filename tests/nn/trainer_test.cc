// The fused optimiser updates against plain double loops, and the Trainer:
// SGD with momentum and Adam over several steps, gradients summed over the
// devices of a parameter, copies kept identical.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "nn/basic_layers.h"
#include "nn/loss.h"
#include "nn/trainer.h"
#include "ops/optimizer_update.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::wave;

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

/// A Dense(3 <- 4) on `devices` whose loss sum(dense(x) * r), x (8, 4) and
/// r (8, 3) split over the devices, has the gradients dW = r^T x and
/// db = sum of r's rows; `gradient` returns them in double, W then b.
struct KnownGradient {
  std::vector<float> x = wave(8 * 4, 0.3f), r = wave(8 * 3, 1.7f);

  std::vector<double> gradient() const {
    std::vector<double> g(3 * 4 + 3, 0);
    for (int b = 0; b < 8; ++b) {
      for (int o = 0; o < 3; ++o) {
        for (int i = 0; i < 4; ++i) g[o * 4 + i] += double{r[b * 3 + o]} * x[b * 4 + i];
        g[12 + o] += r[b * 3 + o];
      }
    }
    return g;
  }
  /// One backward over the devices (the batch split evenly).
  void backward(nn::Dense& dense, const std::vector<Context>& devices) const {
    const auto per = 8 / static_cast<std::int64_t>(devices.size());
    auto recording = autograd::record();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      const auto b = static_cast<std::int64_t>(d) * per;
      NDArray xs = array(std::vector<float>(x.begin() + b * 4, x.begin() + (b + per) * 4), {per, 4},
                         devices[d]);
      NDArray rs = array(std::vector<float>(r.begin() + b * 3, r.begin() + (b + per) * 3), {per, 3},
                         devices[d]);
      sum(dense(xs) * rs).backward();
    }
  }
  static std::vector<double> weights(const nn::Dense& dense, Context ctx) {
    std::vector<double> w;
    for (float v : dense.weight()->data(ctx).to_vector<float>()) w.push_back(v);
    for (float v : dense.bias()->data(ctx).to_vector<float>()) w.push_back(v);
    return w;
  }
};

TEST(TrainerTest, NesterovMomentumMatchesPyTorchsFormula) {
  const KnownGradient known;
  random::seed(3);
  nn::Dense dense(3, "", 4);
  dense.initialize(init::Normal(0.5), {cpu(0)});
  nn::Trainer trainer(dense.collect_params(), "sgd",
                      {.learning_rate = 0.1, .momentum = 0.9, .nesterov = true});
  std::vector<double> w = KnownGradient::weights(dense, cpu(0));
  std::vector<double> buffer(w.size(), 0);
  const std::vector<double> g_sum = known.gradient();
  for (int step = 0; step < 4; ++step) {
    known.backward(dense, {cpu(0)});
    trainer.step(8);
    // PyTorch's SGD(nesterov=True): buf = m buf + g; w -= lr (g + m buf).
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double g = g_sum[i] / 8;
      buffer[i] = 0.9 * buffer[i] + g;
      w[i] -= 0.1 * (g + 0.9 * buffer[i]);
    }
  }
  testing::expect_close(
      [&] {
        std::vector<float> out;
        for (double v : KnownGradient::weights(dense, cpu(0))) out.push_back(static_cast<float>(v));
        return out;
      }(),
      w, 1e-5, 1e-5, "nesterov");
  EXPECT_THROW(nn::Trainer(dense.collect_params(), "sgd", {.nesterov = true}), Error)
      << "Nesterov without momentum";
}

TEST(TrainerTest, ClippingByTheGlobalNormScalesEveryGradientTogetherOnEveryDevice) {
  const KnownGradient known;
  const std::vector<double> g_sum = known.gradient();
  double norm = 0;
  for (double g : g_sum) norm += (g / 8) * (g / 8);
  norm = std::sqrt(norm);
  ASSERT_GT(norm, 0.05);
  for (const double max_norm : {0.05, 1e3}) {
    SCOPED_TRACE(max_norm);
    random::seed(5);
    const std::vector<Context> devices = {cpu(0), cpu(1)};
    nn::Dense dense(3, "", 4);
    dense.initialize(init::Normal(0.5), devices);
    std::vector<double> w = KnownGradient::weights(dense, cpu(0));
    nn::Trainer trainer(dense.collect_params(), "sgd",
                        {.learning_rate = 0.5, .clip_global_norm = max_norm});
    known.backward(dense, devices);
    trainer.step(8);
    const double factor = std::min(1.0, max_norm / (norm + 1e-6));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] -= 0.5 * factor * g_sum[i] / 8;
    for (Context ctx : devices) {
      const std::vector<double> got = KnownGradient::weights(dense, ctx);
      for (std::size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-5) << ctx << " " << i;
    }
    ASSERT_TRUE(trainer.last_global_norm().defined());
    EXPECT_NEAR(trainer.last_global_norm().asscalar<float>(), norm, 1e-5 * norm);
  }
  EXPECT_THROW(nn::Trainer(nn::ParameterDict(), "sgd", {.clip_global_norm = 0}), Error);
}

TEST(TrainerTest, EachUpdateUsesTheSchedulesRate) {
  const KnownGradient known;
  random::seed(7);
  nn::Dense dense(3, "", 4);
  dense.initialize(init::Normal(0.5), {cpu(0)});
  std::vector<double> w = KnownGradient::weights(dense, cpu(0));
  nn::Trainer trainer(dense.collect_params(), "sgd",
                      {.learning_rate = 0.4, .schedule = nn::LrSchedule::factor_every(1, 0.5)});
  EXPECT_DOUBLE_EQ(trainer.next_learning_rate(), 0.4);
  for (int step = 0; step < 3; ++step) {
    known.backward(dense, {cpu(0)});
    trainer.step(8);
  }
  EXPECT_EQ(trainer.updates(), 3);
  EXPECT_DOUBLE_EQ(trainer.next_learning_rate(), 0.05);
  const std::vector<double> g_sum = known.gradient();
  for (std::size_t i = 0; i < w.size(); ++i) w[i] -= (0.4 + 0.2 + 0.1) * g_sum[i] / 8;
  const std::vector<double> got = KnownGradient::weights(dense, cpu(0));
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(got[i], w[i], 1e-5) << i;
}

TEST(TrainerTest, AStateSavedAndLoadedContinuesExactlyAsTheUninterruptedRun) {
  const KnownGradient known;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tagflow_trainer_state_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const std::vector<Context> devices = {cpu(0), cpu(1)};
  for (const std::string optimizer : {"sgd", "adam"}) {
    SCOPED_TRACE(optimizer);
    const nn::TrainerOptions options{.learning_rate = optimizer == "sgd" ? 0.1 : 0.01,
                                     .momentum = optimizer == "sgd" ? 0.9 : 0.0,
                                     .schedule = nn::LrSchedule::cosine(6).with_warmup(2)};
    const auto make = [&](nn::Dense& dense) {
      random::seed(9);
      dense.initialize(init::Normal(0.5), devices);
      return nn::Trainer(dense.collect_params(), optimizer, options);
    };
    nn::Dense whole(3, "", 4);
    nn::Trainer whole_trainer = make(whole);
    nn::Dense first(3, "", 4);
    nn::Trainer first_trainer = make(first);
    for (int step = 0; step < 3; ++step) {
      known.backward(whole, devices);
      whole_trainer.step(8);
      known.backward(first, devices);
      first_trainer.step(8);
    }
    first.save_parameters(dir / "params.safetensors");
    first_trainer.save_states(dir / "trainer.safetensors", {{"epoch", "1"}});
    // A fresh network and trainer, as a new process would make them.
    nn::Dense resumed(3, "", 4);
    nn::Trainer resumed_trainer = make(resumed);
    resumed.load_parameters(dir / "params.safetensors", devices);
    const auto metadata = resumed_trainer.load_states(dir / "trainer.safetensors");
    EXPECT_EQ(metadata.at("epoch"), "1");
    EXPECT_EQ(resumed_trainer.updates(), 3);
    for (int step = 0; step < 3; ++step) {
      known.backward(whole, devices);
      whole_trainer.step(8);
      known.backward(resumed, devices);
      resumed_trainer.step(8);
    }
    for (Context ctx : devices) {
      EXPECT_EQ(resumed.weight()->data(ctx).to_vector<float>(),
                whole.weight()->data(ctx).to_vector<float>())
          << "bit for bit on " << ctx;
      EXPECT_EQ(resumed.bias()->data(ctx).to_vector<float>(),
                whole.bias()->data(ctx).to_vector<float>());
    }
  }
  // The state of another optimizer, or a damaged file, changes nothing.
  nn::Dense dense(3, "", 4);
  dense.initialize(init::Normal(0.5), {cpu(0)});
  nn::Trainer adam(dense.collect_params(), "adam");
  (void)adam.load_states(dir / "trainer.safetensors");  // the last one saved was Adam's
  EXPECT_EQ(adam.updates(), 3);
  nn::Trainer sgd(dense.collect_params(), "sgd", {.momentum = 0.9});
  EXPECT_NE(testing::error_of([&] {
              (void)sgd.load_states(dir / "trainer.safetensors");
            }).find("the state of a adam trainer, this one is sgd"),
            std::string::npos);
  std::filesystem::resize_file(dir / "trainer.safetensors",
                               std::filesystem::file_size(dir / "trainer.safetensors") / 2);
  EXPECT_THROW((void)adam.load_states(dir / "trainer.safetensors"), io::FileError);
  EXPECT_EQ(adam.updates(), 3) << "unchanged by the damaged file";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tagflow
