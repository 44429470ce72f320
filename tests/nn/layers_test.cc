// Parameters, blocks, the basic layers and the losses: shapes inferred on the
// first call, identical copies on several devices, forward passes and
// losses against plain double loops, gradients through a small network, and
// the errors.

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "nn/basic_layers.h"
#include "nn/loss.h"
#include "tagflow/tagflow.h"

namespace tagflow {
namespace {

std::vector<float> values(std::size_t n, float scale) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(static_cast<float>(i) * 0.7f + 0.3f);
  return v;
}

TEST(LayersTest, DenseInfersItsInputSizeAndMatchesAPlainLoop) {
  random::seed(1);
  nn::Dense dense(3, "relu");
  dense.initialize(init::Xavier(), {cpu(0)});
  EXPECT_FALSE(dense.weight()->initialized()) << "deferred until the shape is known";
  const std::vector<float> x = values(2 * 2 * 5, 1.f);  // (2, 2, 5) flattens to (2, 10)
  NDArray y = dense(array(x, {2, 2, 5}));
  ASSERT_EQ(y.shape(), (Shape{2, 3}));
  ASSERT_EQ(dense.weight()->shape(), (Shape{3, 10}));
  const std::vector<float> w = dense.weight()->data().to_vector<float>();
  const std::vector<float> b = dense.bias()->data().to_vector<float>();
  const std::vector<float> got = y.to_vector<float>();
  for (int i = 0; i < 2; ++i) {
    for (int u = 0; u < 3; ++u) {
      double total = b[static_cast<std::size_t>(u)];
      for (int f = 0; f < 10; ++f) {
        total += double{x[static_cast<std::size_t>(i * 10 + f)]} *
                 w[static_cast<std::size_t>(u * 10 + f)];
      }
      EXPECT_NEAR(got[static_cast<std::size_t>(i * 3 + u)], std::max(0.0, total), 1e-5);
    }
  }
  EXPECT_THROW((void)dense(zeros({2, 7})), Error);  // 7 features, the weight wants 10
}

TEST(LayersTest, DenseWithoutFlatteningMapsTheLastAxisAndItsGradientsSumOverTheOthers) {
  random::seed(2);
  for (Context ctx : {cpu(0), gpu(0)}) {
    SCOPED_TRACE(ctx.str());
    nn::Dense dense(3, "", 0, true, nullptr, init::Normal(0.5), /*flatten=*/false);
    dense.initialize(init::Xavier(), {ctx});
    const std::vector<float> x = values(2 * 4 * 5, 1.f);  // (2, 4, 5): 8 rows of 5 features
    const NDArray input = array(x, {2, 4, 5}, ctx);
    NDArray y;
    {
      auto recording = autograd::record();
      y = dense(input);
    }
    ASSERT_EQ(y.shape(), (Shape{2, 4, 3}));
    ASSERT_EQ(dense.weight()->shape(), (Shape{3, 5}));
    y.backward();  // the gradient of sum(y)
    const std::vector<float> w = dense.weight()->data(ctx).to_vector<float>();
    const std::vector<float> b = dense.bias()->data(ctx).to_vector<float>();
    const std::vector<float> got = y.to_vector<float>();
    const std::vector<float> dw = dense.weight()->grad(ctx).to_vector<float>();
    const std::vector<float> db = dense.bias()->grad(ctx).to_vector<float>();
    for (std::size_t u = 0; u < 3; ++u) {
      for (std::size_t row = 0; row < 8; ++row) {
        double total = b[u];
        for (std::size_t f = 0; f < 5; ++f) total += double{x[row * 5 + f]} * w[u * 5 + f];
        EXPECT_NEAR(got[row * 3 + u], total, 1e-5) << row << ", " << u;
      }
      for (std::size_t f = 0; f < 5; ++f) {
        double column = 0;  // d sum(y) / dW[u][f]: feature f summed over the rows
        for (std::size_t row = 0; row < 8; ++row) column += x[row * 5 + f];
        EXPECT_NEAR(dw[u * 5 + f], column, 1e-5) << u << ", " << f;
      }
      EXPECT_EQ(db[u], 8.f) << u;
    }
    EXPECT_EQ(dense(array(values(5, 1.f), {5}, ctx)).shape(), (Shape{3}));  // one row
    EXPECT_THROW((void)dense(zeros({2, 4}, DType::kFloat32, ctx)), Error);  // 4 features, not 5
  }
}

/// The number in a block's name ("dense12" gives 12).
int number_of(const std::string& name) {
  return std::stoi(name.substr(name.find_first_of("0123456789")));
}

TEST(LayersTest, BlocksMadeInOneAddAreNamedInTheOrderTheyAppear) {
  nn::Sequential net;
  auto made_before = std::make_shared<nn::Dense>(5);
  net.add(nn::Dense(8), nn::Activation("relu"), nn::Dense(4), made_before, nn::Dense(2),
          nn::Activation("tanh"));
  const int first = number_of(net[0].name());
  EXPECT_EQ(net[0].name(), "dense" + std::to_string(first));
  EXPECT_EQ(net[2].name(), "dense" + std::to_string(first + 1));
  EXPECT_EQ(net[4].name(), "dense" + std::to_string(first + 2));
  EXPECT_EQ(net[3].name(), made_before->name()) << "made before the call: keeps its name";
  EXPECT_LT(number_of(made_before->name()), first);
  EXPECT_LT(number_of(net[1].name()), number_of(net[5].name()));
  // The parameters carry their block's new name, in the same order.
  std::vector<std::string> names;
  for (const auto& p : net.collect_params()) names.push_back(p->name());
  ASSERT_EQ(names.size(), 8u);
  EXPECT_EQ(names[0], net[0].name() + "_weight");
  EXPECT_EQ(names[1], net[0].name() + "_bias");
  EXPECT_EQ(names[2], net[2].name() + "_weight");
  EXPECT_EQ(names[6], net[4].name() + "_weight");
}

/// A block whose constructor makes its own children.
class Outer : public nn::Block {
 public:
  Outer() : nn::Block("outer"), inner_(register_child(nn::Dense(3))) {}
  NDArray forward(const NDArray& x) override { return (*inner_)(x); }
  const nn::Dense& inner() const { return *inner_; }

 private:
  std::shared_ptr<nn::Dense> inner_;
};

TEST(LayersTest, ChildrenMadeInsideBlocksOfOneAddAreNumberedInOrderToo) {
  nn::Sequential net;
  net.add(Outer(), nn::Dense(2), Outer());
  const auto& first = dynamic_cast<const Outer&>(net[0]);
  const auto& last = dynamic_cast<const Outer&>(net[2]);
  EXPECT_LT(number_of(first.name()), number_of(last.name()));
  // Depth first: outer's dense, then the middle dense, then the last outer's.
  EXPECT_EQ(number_of(net[1].name()), number_of(first.inner().name()) + 1);
  EXPECT_EQ(number_of(last.inner().name()), number_of(net[1].name()) + 1);
  EXPECT_EQ(last.inner().weight()->name(), last.inner().name() + "_weight");
}

TEST(LayersTest, InitializeWithoutAnInitializerUsesGluonsDefault) {
  const auto check_uniform = [](const nn::Parameter& p, Context ctx) {
    const std::vector<float> w = p.data(ctx).to_vector<float>();
    float largest = 0;
    for (float v : w) largest = std::max(largest, std::abs(v));
    EXPECT_LE(largest, 0.07f) << p.name() << ": init::Uniform() draws from [-0.07, 0.07]";
    EXPECT_GT(largest, 0.f) << p.name() << ": drawn, not zeros";
  };
  nn::Dense one(4, "", 3);
  one.initialize(gpu(1));
  EXPECT_EQ(one.weight()->list_ctx(), std::vector<Context>{gpu(1)});
  check_uniform(*one.weight(), gpu(1));
  nn::Dense two(4, "", 3);
  two.initialize({cpu(1), gpu(0)});
  EXPECT_EQ(two.weight()->list_ctx(), (std::vector<Context>{cpu(1), gpu(0)}));
  check_uniform(*two.weight(), gpu(0));
  EXPECT_EQ(two.weight()->data(cpu(1)).to_vector<float>(),
            two.weight()->data(gpu(0)).to_vector<float>());
  EXPECT_THROW(two.initialize(cpu(0)), Error);  // twice without force_reinit
  two.initialize(cpu(0), /*force_reinit=*/true);
  EXPECT_EQ(two.weight()->list_ctx(), std::vector<Context>{cpu(0)});
}

TEST(LayersTest, SequentialNamesCollectsAndInitializesIdenticalCopiesOnEveryDevice) {
  nn::Sequential net;
  auto hidden = std::make_shared<nn::Dense>(4, "tanh", 6);
  net.add(hidden, nn::Dense(2, "", 4));
  const nn::ParameterDict params = net.collect_params();
  ASSERT_EQ(params.size(), 4u);
  EXPECT_EQ(params.get(hidden->weight()->name())->shape(), (Shape{4, 6}));
  EXPECT_NE(hidden->name().find("dense"), std::string::npos);
  EXPECT_THROW((void)params.get("nothing"), Error);
  net.initialize(init::Normal(0.5), {cpu(0), gpu(0), gpu(1)});
  for (const auto& p : params) {
    const std::vector<float> first = p->data(cpu(0)).to_vector<float>();
    EXPECT_EQ(p->data(gpu(0)).to_vector<float>(), first) << p->name();
    EXPECT_EQ(p->data(gpu(1)).to_vector<float>(), first) << p->name();
    EXPECT_THROW((void)p->data(cpu(1)), Error);
    EXPECT_THROW((void)p->data(), Error);  // several devices: say which
  }
  EXPECT_THROW(net.initialize(init::Zero(), {cpu(0)}), Error);  // twice without force_reinit
  net.initialize(init::One(), {cpu(1)}, /*force_reinit=*/true);
  EXPECT_EQ(hidden->weight()->data().to_vector<float>(), std::vector<float>(24, 1.f));
  try {
    (void)net(zeros({3, 6}, DType::kFloat32, gpu(0)));
    ADD_FAILURE() << "the parameters live on cpu(1) only";
  } catch (const Error& e) {
    // The layer, the parameter, where it lives and where the input is; no
    // internal function's name.
    EXPECT_EQ(std::string(e.what()),
              hidden->name() + ": parameter '" + hidden->name() +
                  "_weight' lives on cpu(1), not on gpu(0), where it is used (a layer uses its "
                  "parameters on its input's device); put the network on every device it runs on "
                  "(collect_params().reset_ctx({cpu(1), gpu(0)}), or initialize(init, {cpu(1), "
                  "gpu(0)}) before its first use), or move the input with as_in_context(cpu(1))");
  }
  // The advice works: moved to both devices, the network runs on gpu(0).
  net.collect_params().reset_ctx({cpu(1), gpu(0)});
  EXPECT_EQ(net(zeros({3, 6}, DType::kFloat32, gpu(0))).context(), gpu(0));
  net.collect_params().reset_ctx({cpu(1)});
  {
    nn::Dense deferred(3);
    deferred.initialize(cpu(0));
    try {
      (void)deferred.weight()->data(cpu(0));
      ADD_FAILURE() << "deferred until the first forward pass";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                deferred.name() + ": the value of parameter '" + deferred.name() +
                    "_weight' asked for, but the parameter is not initialized yet: its shape is "
                    "inferred on the first forward pass, so run one (net(x)) first");
    }
  }
  {
    nn::Dense fresh(3, "", 2);
    try {
      (void)fresh(zeros({1, 2}));
      ADD_FAILURE() << "not initialized";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                fresh.name() + ": the value of parameter '" + fresh.name() +
                    "_weight' asked for, but the parameter is not initialized: call "
                    "initialize() on the network first");
    }
  }
  // Weights 1; the biases keep their own initializer (zeros): tanh(sum(x))
  // in each hidden unit, then 4 times that in each output.
  const std::vector<float> x = values(6 * 3, 0.2f);
  const std::vector<float> y = net(array(x, {3, 6}, cpu(1))).to_vector<float>();
  for (int i = 0; i < 3; ++i) {
    double total = 0;
    for (int f = 0; f < 6; ++f) total += x[static_cast<std::size_t>(i * 6 + f)];
    const double expected = 4 * std::tanh(total);
    EXPECT_NEAR(y[static_cast<std::size_t>(i * 2)], expected, 1e-5);
    EXPECT_NEAR(y[static_cast<std::size_t>(i * 2 + 1)], expected, 1e-5);
  }
}

TEST(LayersTest, LossesMatchPlainLoops) {
  const std::vector<float> logits = values(4 * 3, 2.f);
  const std::vector<std::int32_t> labels = {2, 0, 1, 2};
  for (Context ctx : {cpu(0), gpu(0)}) {
    const std::vector<float> ce =
        nn::SoftmaxCrossEntropyLoss()(array(logits, {4, 3}, ctx), array(labels, {4}, ctx))
            .to_vector<float>();
    const std::vector<float> target = values(4 * 3, 1.f);
    const std::vector<float> l2 =
        nn::L2Loss()(array(logits, {4, 3}, ctx), array(target, {4, 3}, ctx)).to_vector<float>();
    const std::vector<float> l1 =
        nn::L1Loss()(array(logits, {4, 3}, ctx), array(target, {4, 3}, ctx)).to_vector<float>();
    for (int i = 0; i < 4; ++i) {
      double top = -1e300, total = 0, sq = 0, ab = 0;
      for (int c = 0; c < 3; ++c)
        top = std::max(top, double{logits[static_cast<std::size_t>(i * 3 + c)]});
      for (int c = 0; c < 3; ++c) {
        const auto k = static_cast<std::size_t>(i * 3 + c);
        total += std::exp(logits[k] - top);
        sq += (double{logits[k]} - target[k]) * (double{logits[k]} - target[k]);
        ab += std::abs(double{logits[k]} - target[k]);
      }
      const double expected_ce =
          -(logits[static_cast<std::size_t>(i * 3 + labels[static_cast<std::size_t>(i)])] - top -
            std::log(total));
      EXPECT_NEAR(ce[static_cast<std::size_t>(i)], expected_ce, 1e-5) << ctx;
      EXPECT_NEAR(l2[static_cast<std::size_t>(i)], 0.5 * sq / 3, 1e-5) << ctx;
      EXPECT_NEAR(l1[static_cast<std::size_t>(i)], ab / 3, 1e-5) << ctx;
    }
  }
  EXPECT_THROW((void)nn::SoftmaxCrossEntropyLoss()(zeros({4, 3}), zeros({5})), Error);
}

TEST(LayersTest, GradientsReachEveryParameterAndGradientDescentLowersTheLoss) {
  // Softmax cross-entropy's gradient with respect to the logits is
  // softmax - one_hot: with a single Dense layer, dW = (p - y)ᵀ x exactly.
  random::seed(3);
  nn::Dense dense(3, "", 5);
  dense.initialize(init::Normal(0.3), {gpu(1)});
  const std::vector<float> x = values(4 * 5, 1.f);
  const std::vector<std::int32_t> labels = {0, 2, 1, 1};
  NDArray input = array(x, {4, 5}, gpu(1));
  NDArray label = array(labels, {4}, gpu(1));
  nn::SoftmaxCrossEntropyLoss loss;
  NDArray logits;
  {
    auto recording = autograd::record();
    logits = dense(input);
    sum(loss(logits, label)).backward();
  }
  const std::vector<float> p = softmax(logits.detach(), 1).to_vector<float>();
  const std::vector<float> dw = dense.weight()->grad(gpu(1)).to_vector<float>();
  const std::vector<float> db = dense.bias()->grad(gpu(1)).to_vector<float>();
  for (int u = 0; u < 3; ++u) {
    double bias_grad = 0;
    for (int i = 0; i < 4; ++i) {
      bias_grad += p[static_cast<std::size_t>(i * 3 + u)] -
                   (labels[static_cast<std::size_t>(i)] == u ? 1 : 0);
    }
    EXPECT_NEAR(db[static_cast<std::size_t>(u)], bias_grad, 1e-5);
    for (int f = 0; f < 5; ++f) {
      double expected = 0;
      for (int i = 0; i < 4; ++i) {
        const double delta = p[static_cast<std::size_t>(i * 3 + u)] -
                             (labels[static_cast<std::size_t>(i)] == u ? 1 : 0);
        expected += delta * x[static_cast<std::size_t>(i * 5 + f)];
      }
      EXPECT_NEAR(dw[static_cast<std::size_t>(u * 5 + f)], expected, 1e-5);
    }
  }
  // A few steps of plain gradient descent lower the loss.
  auto total_loss = [&] { return sum(loss(dense(input), label)).asscalar<float>(); };
  const float before = total_loss();
  for (int step = 0; step < 20; ++step) {
    {
      auto recording = autograd::record();
      sum(loss(dense(input), label)).backward();
    }
    for (const auto& param : dense.collect_params()) {
      param->set_data(param->data(gpu(1)) - param->grad(gpu(1)) * 0.1);
    }
  }
  EXPECT_LT(total_loss(), before * 0.75f);  // 4.23 -> 2.24 in 20 steps
}

TEST(LayersTest, DropoutDropsOnlyWhileTraining) {
  nn::Dropout drop(0.25);
  const std::vector<float> x = values(4000, 1.f);
  for (Context ctx : {cpu(0), gpu(1)}) {
    const NDArray input = array(x, {40, 100}, ctx);
    EXPECT_TRUE(drop(input).same_as(input)) << "outside record(): the identity";
    random::seed(5);
    NDArray y;
    {
      auto recording = autograd::record();
      y = drop(input);
    }
    const std::vector<float> got = y.to_vector<float>();
    int dropped = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      if (got[i] == 0.f && x[i] != 0.f) {
        ++dropped;
      } else {
        ASSERT_FLOAT_EQ(got[i], x[i] / 0.75f) << "element " << i << " on " << ctx;
      }
    }
    // 1000 expected; 5 standard deviations (27) either side.
    EXPECT_NEAR(dropped, 1000, 140) << ctx;
    {
      auto predicting = autograd::record(/*train_mode=*/false);
      EXPECT_TRUE(drop(input).same_as(input)) << "recording in predict mode: the identity";
    }
  }
  EXPECT_THROW(nn::Dropout(1.0), Error);
  EXPECT_THROW(nn::Dropout(-0.1), Error);
}

TEST(LayersTest, BatchNormUsesBatchStatisticsWhileTrainingAndRunningOnesAfter) {
  // (N, C, H, W) = (3, 2, 2, 2): per channel 12 values.
  const std::vector<float> x = values(3 * 2 * 2 * 2, 2.f);
  auto channel_of = [](std::size_t i) { return (i / 4) % 2; };
  double mean[2] = {0, 0}, var[2] = {0, 0};
  for (std::size_t i = 0; i < x.size(); ++i) mean[channel_of(i)] += x[i] / 12.0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    var[channel_of(i)] += (x[i] - mean[channel_of(i)]) * (x[i] - mean[channel_of(i)]) / 12.0;
  }
  for (Context ctx : {cpu(1), gpu(0)}) {
    nn::BatchNorm norm(0.9, 1e-5);
    norm.initialize(init::Xavier(), {ctx});  // gamma, beta, statistics: their own initializers
    const NDArray input = array(x, {3, 2, 2, 2}, ctx);
    NDArray y;
    {
      auto recording = autograd::record();
      y = norm(input);
    }
    ASSERT_EQ(norm.gamma()->shape(), (Shape{2}));
    const std::vector<float> trained = y.to_vector<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t c = channel_of(i);
      EXPECT_NEAR(trained[i], (x[i] - mean[c]) / std::sqrt(var[c] + 1e-5), 1e-4) << i;
    }
    // running = 0.9 running + 0.1 batch statistic (the variance unbiased).
    const std::vector<float> running_mean = norm.running_mean()->data().to_vector<float>();
    const std::vector<float> running_var = norm.running_var()->data().to_vector<float>();
    for (std::size_t c = 0; c < 2; ++c) {
      EXPECT_NEAR(running_mean[c], 0.1 * mean[c], 1e-6) << ctx;
      EXPECT_NEAR(running_var[c], 0.9 + 0.1 * var[c] * 12.0 / 11.0, 1e-6) << ctx;
    }
    // Predicting: the running statistics, which stay as they are.
    const std::vector<float> predicted = norm(input).to_vector<float>();
    for (std::size_t i = 0; i < x.size(); ++i) {
      const std::size_t c = channel_of(i);
      EXPECT_NEAR(predicted[i], (x[i] - running_mean[c]) / std::sqrt(running_var[c] + 1e-5), 1e-5)
          << i;
    }
    EXPECT_EQ(norm.running_mean()->data().to_vector<float>(), running_mean);
    EXPECT_EQ(norm.running_mean()->grad_req(), GradReq::kNull);
    // MXNet's rule: the running variance follows the biased batch variance.
    nn::BatchNorm mxnet_rule(0.9, 1e-5, true, true, 0, /*unbiased_running_var=*/false);
    mxnet_rule.initialize(init::Xavier(), {ctx});
    {
      auto recording = autograd::record();
      (void)mxnet_rule(input);
    }
    const std::vector<float> biased = mxnet_rule.running_var()->data().to_vector<float>();
    for (std::size_t c = 0; c < 2; ++c) EXPECT_NEAR(biased[c], 0.9 + 0.1 * var[c], 1e-6) << ctx;
    EXPECT_THROW((void)norm(zeros({3, 5, 2, 2}, DType::kFloat32, ctx)), Error);  // 5 channels
  }
  EXPECT_THROW(nn::BatchNorm(1.5), Error);
  EXPECT_THROW(nn::BatchNorm(0.9, 0), Error);
}

TEST(LayersTest, TheTrainerLeavesBatchNormsRunningStatisticsToTheForwardPass) {
  nn::Sequential net;
  net.add(nn::Dense(4, "", 3), nn::BatchNorm(), nn::Dense(2));
  net.initialize(init::Normal(0.5), {cpu(0)});
  nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.5});
  const NDArray x = array(values(6 * 3, 1.f), {6, 3});
  const NDArray label = array(std::vector<std::int32_t>{0, 1, 1, 0, 1, 0}, {6});
  nn::SoftmaxCrossEntropyLoss loss;
  auto& norm = static_cast<nn::BatchNorm&>(net[1]);
  std::vector<float> expected_mean(4, 0.f);
  for (int step = 0; step < 3; ++step) {
    NDArray hidden;
    {
      auto recording = autograd::record();
      hidden = net[0](x);
      loss(net[2](net[1](hidden)), label).backward();
    }
    // The forward pass moved the running mean towards the batch mean, and
    // the optimizer step must not touch it.
    const std::vector<float> batch_mean = mean(hidden.detach(), 0).to_vector<float>();
    for (std::size_t c = 0; c < 4; ++c) {
      expected_mean[c] = 0.9f * expected_mean[c] + 0.1f * batch_mean[c];
    }
    trainer.step(6);
    const std::vector<float> running = norm.running_mean()->data().to_vector<float>();
    for (std::size_t c = 0; c < 4; ++c) EXPECT_NEAR(running[c], expected_mean[c], 1e-5);
  }
}

}  // namespace
}  // namespace tagflow
