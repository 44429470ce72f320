// Mixed precision (nn/amp.h): autocast scopes and what each layer computes
// in, and dynamic loss scaling in the Trainer: an update from scaled
// gradients equals the unscaled one, an injected overflow skips exactly
// that update and halves the scale, clean steps grow it, and the state
// survives a checkpoint. Every check on CPU devices and simulated GPUs.

#include <unistd.h>
#include <cmath>

#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::wave;

float scalar_of(const NDArray& a) { return a.asscalar<float>(); }

TEST(AmpTest, AutocastRunsDenseAndConvInHalfAndKeepsMastersAndLossesFloat32) {
  EXPECT_EQ(nn::amp::compute_dtype(), DType::kFloat32);
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    for (const Context ctx : {cpu(0), gpu(0)}) {
      SCOPED_TRACE(ctx.str());
      random::seed(3);
      nn::Sequential net;
      net.add(nn::Conv2D(4, 3), nn::BatchNorm(), nn::MaxPool2D(), nn::Dense(3, "relu"));
      net.initialize(init::Xavier(), {ctx});
      const NDArray x = array(wave(2 * 1 * 6 * 6, 0.2f), {2, 1, 6, 6}, ctx);
      const NDArray y = array(std::vector<std::int32_t>{0, 2}, {2}, ctx);
      nn::SoftmaxCrossEntropyLoss loss;
      NDArray out32;
      std::vector<std::vector<float>> grads32;  // the float32 run's gradients
      {
        const auto recording = autograd::record();
        out32 = net(x);
        sum(loss(out32, y)).backward();
      }
      for (const nn::ParameterPtr& p : net.collect_params()) {
        if (p->grad_req() != GradReq::kNull) grads32.push_back(p->grad(ctx).to_vector<float>());
      }
      NDArray out;
      NDArray l;
      {
        const auto recording = autograd::record();
        const auto half = nn::amp::autocast(dtype);
        EXPECT_EQ(nn::amp::compute_dtype(), dtype);
        {
          const auto off = nn::amp::autocast(DType::kFloat32);  // scopes nest
          EXPECT_EQ(nn::amp::compute_dtype(), DType::kFloat32);
        }
        out = net(x);
        l = loss(out, y);
        sum(l).backward();
      }
      EXPECT_EQ(nn::amp::compute_dtype(), DType::kFloat32) << "restored";
      EXPECT_EQ(out.dtype(), dtype);
      EXPECT_EQ(l.dtype(), DType::kFloat32) << "losses take float32";
      // The half network's output follows the float32 one within the
      // 16-bit rounding of a few layers.
      const std::vector<float> a = out.astype(DType::kFloat32).to_vector<float>();
      const std::vector<float> b = out32.to_vector<float>();
      const double unit = dtype == DType::kFloat16 ? 0x1p-11 : 0x1p-8;
      for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_NEAR(a[i], b[i], 16 * unit * (1 + std::abs(b[i]))) << i;
      }
      // Master weights and their gradients stay float32. The dense layer's
      // gradients follow float32's, normwise, within a few roundings; the
      // convolution's do not have to: 16-bit values tie in max pooling's
      // windows where float32 ones do not, and its bias gradient is zero
      // up to rounding (batch norm follows it).
      std::size_t learned = 0;
      for (const nn::ParameterPtr& p : net.collect_params()) {
        EXPECT_EQ(p->data(ctx).dtype(), DType::kFloat32) << p->name();
        if (p->grad_req() == GradReq::kNull) continue;
        ASSERT_EQ(p->grad(ctx).dtype(), DType::kFloat32) << p->name();
        const std::vector<float> g = p->grad(ctx).to_vector<float>();
        const std::vector<float>& reference = grads32[learned++];
        if (p->name().find("dense") == std::string::npos) continue;
        double error = 0;
        double size = 0;
        for (std::size_t i = 0; i < g.size(); ++i) {
          error += std::pow(static_cast<double>(g[i]) - reference[i], 2);
          size += std::pow(static_cast<double>(reference[i]), 2);
        }
        EXPECT_LE(std::sqrt(error), 32 * unit * std::sqrt(size) + 1e-6) << p->name();
      }
    }
  }
  EXPECT_THROW((void)nn::amp::autocast(DType::kInt32), Error);
}

/// A Dense(3 <- 4) with a known loss, for the loss-scaling tests.
struct Problem {
  std::vector<float> x = wave(8 * 4, 0.3f);
  std::vector<float> r = wave(8 * 3, 1.7f);

  /// Backward of sum(dense(x) * r), through `trainer.scale_loss`.
  void backward(nn::Dense& dense, nn::Trainer& trainer, Context ctx, bool overflow = false) const {
    {
      const auto recording = autograd::record();
      NDArray l = sum(dense(array(x, {8, 4}, ctx)) * array(r, {8, 3}, ctx));
      trainer.scale_loss(l).backward();
    }
    if (overflow) {  // an infinity in one gradient, as a float16 overflow gives
      NDArray g = dense.weight()->grad(ctx);
      g *= std::numeric_limits<double>::infinity();
    }
  }
};

TEST(AmpTest, ScaledGradientsGiveTheUnscaledUpdateAndAnOverflowSkipsExactlyItsStep) {
  for (const Context ctx : {cpu(0), gpu(1)}) {
    SCOPED_TRACE(ctx.str());
    const Problem problem;
    auto make = [&] {
      random::seed(5);
      auto dense = std::make_shared<nn::Dense>(3, "", 4);
      dense->initialize(init::Normal(0.3), {ctx});
      return dense;
    };
    const nn::TrainerOptions base{.learning_rate = 0.1, .momentum = 0.9};
    nn::TrainerOptions scaled_options = base;
    scaled_options.loss_scale = {.enabled = true, .initial_scale = 1024, .growth_interval = 2};
    auto plain = make();
    auto scaled = make();
    nn::Trainer plain_trainer(plain->collect_params(), "sgd", base);
    nn::Trainer trainer(scaled->collect_params(), "sgd", scaled_options);
    EXPECT_EQ(plain_trainer.scale_loss(ones({1}, DType::kFloat32, ctx)).asscalar<float>(), 1.f)
        << "without loss scaling the loss is returned as it is";

    // Step 1, clean: scaling by 2^10 and back is exact in float32.
    problem.backward(*plain, plain_trainer, ctx);
    problem.backward(*scaled, trainer, ctx);
    EXPECT_EQ(scalar_of(trainer.loss_scale()), 1024.f);
    plain_trainer.step(8);
    trainer.step(8);
    EXPECT_EQ(scaled->weight()->data(ctx).to_vector<float>(),
              plain->weight()->data(ctx).to_vector<float>());
    EXPECT_EQ(scalar_of(trainer.loss_scale()), 1024.f) << "one clean step: no growth yet";

    // Step 2, an overflow: weights, momentum and bias unchanged, scale halved.
    const std::vector<float> before = scaled->weight()->data(ctx).to_vector<float>();
    const std::vector<float> bias_before = scaled->bias()->data(ctx).to_vector<float>();
    problem.backward(*scaled, trainer, ctx, /*overflow=*/true);
    trainer.step(8);
    EXPECT_EQ(scaled->weight()->data(ctx).to_vector<float>(), before);
    EXPECT_EQ(scaled->bias()->data(ctx).to_vector<float>(), bias_before)
        << "a skipped step leaves every parameter, not only the one that overflowed";
    EXPECT_EQ(scalar_of(trainer.loss_scale()), 512.f);
    EXPECT_EQ(scalar_of(trainer.skipped_updates()), 1.f);

    // Steps 3 and 4, clean: the same updates as the plain trainer's steps 2
    // and 3 (its momentum never saw the skipped step); after two clean
    // steps the scale doubles.
    for (int step = 0; step < 2; ++step) {
      problem.backward(*plain, plain_trainer, ctx);
      problem.backward(*scaled, trainer, ctx);
      plain_trainer.step(8);
      trainer.step(8);
      EXPECT_EQ(scaled->weight()->data(ctx).to_vector<float>(),
                plain->weight()->data(ctx).to_vector<float>())
          << "step " << step;
    }
    EXPECT_EQ(scalar_of(trainer.loss_scale()), 1024.f);
    EXPECT_EQ(scalar_of(trainer.skipped_updates()), 1.f);
  }
}

TEST(AmpTest, ScalingKeepsFloat16GradientsThatWouldUnderflow) {
  // d loss / d out = 1e-8 per element, below float16's smallest value
  // (2^-24, about 6e-8): in float16 it is 0 without scaling. Scaled by
  // 2^16 it survives, and the float32 gradients of the weights come out
  // as float32 training would give them.
  for (const Context ctx : {cpu(0), gpu(0)}) {
    SCOPED_TRACE(ctx.str());
    const NDArray x = array(wave(8 * 4, 0.4f), {8, 4}, ctx);
    auto gradients = [&](bool scaling, DType dtype) {
      random::seed(9);
      auto dense = std::make_shared<nn::Dense>(3, "", 4);
      dense->initialize(init::Normal(0.3), {ctx});
      nn::TrainerOptions options;
      options.loss_scale.enabled = scaling;
      options.loss_scale.initial_scale = 32768;  // 2^16 overflows a float16 loss's gradient
      nn::Trainer trainer(dense->collect_params(), "sgd", options);
      {
        const auto recording = autograd::record();
        const auto precision = nn::amp::autocast(dtype);
        NDArray out = (*dense)(x);
        EXPECT_EQ(out.dtype(), dtype);
        // A loss of the caller's own: a 16-bit one, scaled in float32.
        NDArray l = sum(out * 1e-4) * 1e-4;
        EXPECT_EQ(l.dtype(), dtype);
        trainer.scale_loss(l).backward();
      }
      std::vector<float> g = dense->weight()->grad(ctx).to_vector<float>();
      const float scale = scaling ? trainer.loss_scale().asscalar<float>() : 1.f;
      for (float& v : g) v /= scale;
      return g;
    };
    const std::vector<float> reference = gradients(false, DType::kFloat32);
    const std::vector<float> lost = gradients(false, DType::kFloat16);
    const std::vector<float> kept = gradients(true, DType::kFloat16);
    ASSERT_EQ(kept.size(), reference.size());
    for (std::size_t i = 0; i < reference.size(); ++i) {
      ASSERT_NE(reference[i], 0.f);
      EXPECT_EQ(lost[i], 0.f) << i << ": underflows in float16 without scaling";
      EXPECT_NEAR(kept[i], reference[i], 4e-3 * std::abs(reference[i])) << i;
    }
  }
}

TEST(AmpTest, TheScaleGrowsOnlyWhileItStaysFinite) {
  const Context ctx = cpu(0);
  const Problem problem;
  random::seed(5);
  auto dense = std::make_shared<nn::Dense>(3, "", 4);
  dense->initialize(init::Normal(0.3), {ctx});
  nn::TrainerOptions options{.learning_rate = 0};  // the gradients never change: all clean
  options.loss_scale = {.enabled = true, .initial_scale = 0x1p100, .growth_interval = 1};
  nn::Trainer trainer(dense->collect_params(), "sgd", options);
  std::vector<float> scales;
  for (int step = 0; step < 4; ++step) {
    {
      const auto recording = autograd::record();
      NDArray l = sum((*dense)(array(problem.x, {8, 4}, ctx))) * 0x1p-120;  // scaled: finite
      trainer.scale_loss(l).backward();
    }
    trainer.step(8);
    scales.push_back(scalar_of(trainer.loss_scale()));
  }
  EXPECT_EQ(scales, (std::vector<float>{0x1p101f, 0x1p102f, 0x1p103f, 0x1p104f}));
  // Near float32's largest value: 2^127 would grow to infinity, so it stays.
  options.loss_scale.initial_scale = 0x1p127;
  nn::Trainer top(dense->collect_params(), "sgd", options);
  {
    const auto recording = autograd::record();
    NDArray l = sum((*dense)(array(problem.x, {8, 4}, ctx))) * 0x1p-140;
    top.scale_loss(l).backward();
  }
  top.step(8);
  EXPECT_EQ(scalar_of(top.loss_scale()), 0x1p127f);
  EXPECT_EQ(scalar_of(top.skipped_updates()), 0.f);
}

TEST(AmpTest, TheLossScaleIsSavedWithTheTrainersState) {
  const Context ctx = cpu(0);
  const Problem problem;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tagflow_amp_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  nn::TrainerOptions options{.learning_rate = 0.1};
  options.loss_scale = {.enabled = true, .initial_scale = 256, .growth_interval = 100};
  random::seed(5);
  auto dense = std::make_shared<nn::Dense>(3, "", 4);
  dense->initialize(init::Normal(0.3), {ctx});
  nn::Trainer trainer(dense->collect_params(), "sgd", options);
  problem.backward(*dense, trainer, ctx, /*overflow=*/true);
  trainer.step(8);
  problem.backward(*dense, trainer, ctx);
  trainer.step(8);
  trainer.save_states(dir / "t.safetensors");

  options.loss_scale.growth_interval = 2;  // the saved count of clean steps is 1 of 2
  nn::Trainer resumed(dense->collect_params(), "sgd", options);
  (void)resumed.load_states(dir / "t.safetensors");
  EXPECT_EQ(scalar_of(resumed.loss_scale()), 128.f);
  EXPECT_EQ(scalar_of(resumed.skipped_updates()), 1.f);
  // Growth resumes from the saved count: one more clean step doubles it.
  problem.backward(*dense, resumed, ctx);
  resumed.step(8);
  EXPECT_EQ(scalar_of(resumed.loss_scale()), 256.f);
  nn::Trainer plain(dense->collect_params(), "sgd", {.learning_rate = 0.1});
  (void)plain.load_states(dir / "t.safetensors");  // the scaling state is ignored
  EXPECT_FALSE(plain.loss_scale().defined());
  std::filesystem::remove_all(dir);

  EXPECT_THROW(nn::Trainer(dense->collect_params(), "sgd",
                           {.loss_scale = {.enabled = true, .backoff_factor = 1.5}}),
               Error);
  EXPECT_NE(testing::error_of([&] {
              (void)resumed.scale_loss(ones({2}, DType::kInt32, ctx));
            }).find("expected a floating-point loss, got int32"),
            std::string::npos);
  // The skip flag: one float32 value on the weight's device, else refused
  // before anything runs.
  const NDArray w = ones({3}, DType::kFloat32, ctx);
  const NDArray g = ones({3}, DType::kFloat32, ctx);
  const std::string wrong = testing::error_of(
      [&] { sgd_update(w, g, NDArray(), {.learning_rate = 1}, zeros({2}, DType::kFloat32, ctx)); });
  EXPECT_NE(wrong.find("sgd_update: expected skip_if as one float32 value on cpu(0)"),
            std::string::npos)
      << wrong;
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 1, 1}));
  sgd_update(w, g, NDArray(), {.learning_rate = 1}, ones({1}, DType::kFloat32, ctx));
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{1, 1, 1})) << "skipped";
  NDArray m = zeros({3}, DType::kFloat32, ctx);
  NDArray v = zeros({3}, DType::kFloat32, ctx);
  adam_update(w, g, m, v, {.learning_rate = 1}, 1, zeros({1}, DType::kFloat32, ctx));
  EXPECT_NE(w.to_vector<float>(), (std::vector<float>{1, 1, 1})) << "a zero flag updates";
}

}  // namespace
}  // namespace tagflow
