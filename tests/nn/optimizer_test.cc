// Optimizers as objects (nn/optimizer.h): AdamW and an optimizer written
// outside the library against double loops, its state saved and loaded by
// the Trainer, the names a Trainer takes, and what it refuses.

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::wave;

constexpr std::int64_t kSize = 64;

/// One parameter whose gradient the test writes, trained alone.
struct OneParameter {
  explicit OneParameter(Context at) : ctx(at) {
    p = std::make_shared<nn::Parameter>("w", Shape{kSize}, init::Zero());
    p->initialize(init::Zero(), {ctx});
    p->set_data(array(wave(kSize, 0.5f), {kSize}, ctx));
    params.add(p);
  }
  void set_grad(const std::vector<float>& g) const { array(g, {kSize}, ctx).copyto(p->grad(ctx)); }
  std::vector<float> weight() const { return p->data(ctx).to_vector<float>(); }

  Context ctx;
  nn::ParameterPtr p;
  nn::ParameterDict params;
};

std::vector<double> doubles(const std::vector<float>& v) { return {v.begin(), v.end()}; }

/// RMSProp, written as a user would: operators on the weight and its state.
class Rmsprop final : public nn::Optimizer {
 public:
  std::string name() const override { return "rmsprop"; }
  std::vector<std::string> state_names() const override { return {"s"}; }
  void update(const NDArray& weight, const NDArray& grad, std::span<const NDArray> state,
              const nn::UpdateStep& step) const override {
    const NDArray g = grad * step.rescale_grad;
    NDArray s = state[0], w = weight;
    s *= 0.9;
    s += square(g) * 0.1;
    w -= g / sqrt(s + 1e-8) * step.learning_rate;
  }
};

TEST(OptimizerObjectTest, AdamWDecaysTheWeightApartFromTheMomentsOnEveryDevice) {
  for (Context ctx : testing::all_devices()) {
    SCOPED_TRACE(ctx.str());
    OneParameter one(ctx);
    nn::Trainer trainer(one.params, nn::adamw({.weight_decay = 0.1}), {.learning_rate = 0.01});
    EXPECT_EQ(trainer.optimizer(), "adamw");
    std::vector<double> w = doubles(one.weight()), m(kSize, 0), v(kSize, 0);
    for (int t = 1; t <= 3; ++t) {
      const std::vector<float> g = wave(kSize, static_cast<float>(t));
      one.set_grad(g);
      trainer.step(4);
      for (std::size_t i = 0; i < w.size(); ++i) {
        w[i] *= 1 - 0.01 * 0.1;  // decoupled: not in the moments
        const double gi = g[i] / 4.0;
        m[i] = 0.9 * m[i] + 0.1 * gi;
        v[i] = 0.999 * v[i] + 0.001 * gi * gi;
        w[i] -= 0.01 * std::sqrt(1 - std::pow(0.999, t)) / (1 - std::pow(0.9, t)) * m[i] /
                (std::sqrt(v[i]) + 1e-8);
      }
    }
    testing::expect_close(one.weight(), w, 1e-5, 1e-5, "adamw");
    // Loss scaling's overflow flag skips the decay with the step.
    const std::vector<float> before = one.weight();
    const NDArray state[] = {zeros({kSize}, DType::kFloat32, ctx),
                             zeros({kSize}, DType::kFloat32, ctx)};
    trainer.optimizer_object().update(
        one.p->data(ctx), one.p->grad(ctx), state,
        {.learning_rate = 0.01, .t = 4, .skip_if = full({1}, 1.0, DType::kFloat32, ctx)});
    EXPECT_EQ(one.weight(), before) << "skipped";
  }
}

TEST(OptimizerObjectTest, AnOptimizerOfYourOwnTrainsAndItsStateIsSavedAndLoaded) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tagflow_optimizer_object_" +
                    std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::create_directories(dir);
  const auto optimizer = std::make_shared<const Rmsprop>();
  OneParameter whole(cpu(0)), first(cpu(0));
  nn::Trainer whole_trainer(whole.params, optimizer, {.learning_rate = 0.05});
  nn::Trainer first_trainer(first.params, optimizer, {.learning_rate = 0.05});
  std::vector<double> w = doubles(whole.weight()), s(kSize, 0);
  const auto step_all = [&](int t, std::vector<OneParameter*> ones,
                            std::vector<nn::Trainer*> trainers) {
    const std::vector<float> g = wave(kSize, static_cast<float>(t) * 0.7f);
    for (OneParameter* one : ones) one->set_grad(g);
    for (nn::Trainer* trainer : trainers) trainer->step(2);
    for (std::size_t i = 0; i < w.size(); ++i) {
      const double gi = g[i] / 2.0;
      s[i] = 0.9 * s[i] + 0.1 * gi * gi;
      w[i] -= 0.05 * gi / std::sqrt(s[i] + 1e-8);
    }
  };
  for (int t = 1; t <= 2; ++t) step_all(t, {&whole, &first}, {&whole_trainer, &first_trainer});
  first_trainer.save_states(dir / "state.safetensors");
  std::vector<std::string> names;
  for (const auto& [name, value] : io::load_safetensors(dir / "state.safetensors")) {
    names.push_back(name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"0.s"}));
  // Resumed by a fresh trainer on the weights the first one reached.
  OneParameter resumed(cpu(0));
  resumed.p->set_data(first.p->data(cpu(0)));
  nn::Trainer resumed_trainer(resumed.params, optimizer, {.learning_rate = 0.05});
  (void)resumed_trainer.load_states(dir / "state.safetensors");
  EXPECT_EQ(resumed_trainer.updates(), 2);
  for (int t = 3; t <= 4; ++t) step_all(t, {&whole, &resumed}, {&whole_trainer, &resumed_trainer});
  testing::expect_close(whole.weight(), w, 1e-5, 1e-5, "rmsprop against the double loop");
  EXPECT_EQ(resumed.weight(), whole.weight()) << "bit for bit";
  // Another optimizer's trainer refuses the file, naming both.
  OneParameter other(cpu(0));
  nn::Trainer adam(other.params, "adam");
  EXPECT_NE(testing::error_of([&] {
              (void)adam.load_states(dir / "state.safetensors");
            }).find("the state of a rmsprop trainer, this one is adam"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(OptimizerObjectTest, NamesMakeTheLibrarysOptimizersAndObjectsRefuseTheNamedOptions) {
  OneParameter by_name(cpu(0)), by_object(cpu(0));
  nn::Trainer nag(by_name.params, "nag", {.learning_rate = 0.1, .momentum = 0.9});
  nn::Trainer sgd(by_object.params, nn::sgd({.momentum = 0.9, .nesterov = true}),
                  {.learning_rate = 0.1});
  EXPECT_EQ(nag.optimizer(), "sgd") << "its state is sgd's";
  for (int t = 1; t <= 3; ++t) {
    const std::vector<float> g = wave(kSize, static_cast<float>(t));
    by_name.set_grad(g);
    by_object.set_grad(g);
    nag.step(1);
    sgd.step(1);
  }
  EXPECT_EQ(by_name.weight(), by_object.weight());
  EXPECT_NE(testing::error_of([&] { nn::Trainer(by_object.params, nn::adam(), {.momentum = 0.9}); })
                .find("momentum, nesterov, weight_decay, beta1, beta2, epsilon and clip_gradient "
                      "are the object's"),
            std::string::npos);
  EXPECT_NE(testing::error_of([&] { nn::Trainer(by_object.params, "lamb"); })
                .find("unknown optimizer \"lamb\"; expected \"sgd\", \"nag\", \"adam\" or "
                      "\"adamw\""),
            std::string::npos);
  EXPECT_THROW(nn::Trainer(by_object.params, nn::OptimizerPtr()), Error);
  EXPECT_THROW((void)nn::sgd({.momentum = -1}), Error);
  EXPECT_THROW((void)nn::adam({.beta1 = 1}), Error);
}

}  // namespace
}  // namespace tagflow
