// User-defined blocks, written as a user writes them (public API only): the
// tutorials' residual block with its own children and an arbitrary
// forward, a block of several inputs, and the rest of the network API on
// them: deferred shapes, collect_params, save and load by structural name,
// Trainer, data parallelism, the profiler, typed access to children and
// printing like Gluon's print(net).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/common/test_directory.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;

/// The tutorials' residual block: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)),
/// the shortcut a 1x1 convolution when the block changes channels or stride.
class Residual : public nn::Block {
 public:
  explicit Residual(int channels, bool use_1x1conv = false, int strides = 1)
      : nn::Block("residual"),
        conv1_(register_child(
            nn::Conv2D(channels, 3, "", {.stride = {strides, strides}, .padding = {1, 1}}))),
        conv2_(register_child(nn::Conv2D(channels, 3, "", {.padding = {1, 1}}))),
        bn1_(register_child(nn::BatchNorm())),
        bn2_(register_child(nn::BatchNorm())) {
    if (use_1x1conv) {
      conv3_ = register_child(nn::Conv2D(channels, 1, "", {.stride = {strides, strides}}));
    }
  }

  NDArray forward(const NDArray& x) override {
    NDArray y = relu((*bn1_)((*conv1_)(x)));
    y = (*bn2_)((*conv2_)(y));
    return relu(y + (conv3_ ? (*conv3_)(x) : x));
  }

 private:
  std::shared_ptr<nn::Conv2D> conv1_, conv2_, conv3_;
  std::shared_ptr<nn::BatchNorm> bn1_, bn2_;
};

/// A residual block of dense layers, small enough to check against a plain
/// double loop: relu(x + dense2(relu(dense1(x)))), and a learned scale of
/// its own.
class DenseResidual : public nn::Block {
 public:
  explicit DenseResidual(int units)
      : nn::Block("denseresidual"),
        dense1_(register_child(nn::Dense(units, "relu"))),
        dense2_(register_child(nn::Dense(units))),
        scale_(register_parameter("scale", Shape{units}, init::One())) {}

  NDArray forward(const NDArray& x) override {
    return relu(x + (*dense2_)((*dense1_)(x)) * scale_->data(x.context()));
  }
  nn::Dense& dense1() const { return *dense1_; }
  nn::Dense& dense2() const { return *dense2_; }
  const nn::ParameterPtr& scale() const { return scale_; }

 private:
  std::shared_ptr<nn::Dense> dense1_, dense2_;
  nn::ParameterPtr scale_;
};

/// Two inputs and a branch: sigmoid(gate(a)) * value(b), or value(b) alone
/// when `gated` is off.
class Gated : public nn::Block {
 public:
  explicit Gated(int units, bool gated = true)
      : nn::Block("gated"),
        gated_(gated),
        gate_(register_child(nn::Dense(units, "sigmoid"))),
        value_(register_child(nn::Dense(units))) {}

  NDArray forward_inputs(const std::vector<NDArray>& in) override {
    TAGFLOW_CHECK(in.size() == 2, "{}: expected 2 inputs, got {}", name(), in.size());
    NDArray v = (*value_)(in[1]);
    return gated_ ? (*gate_)(in[0]) * v : v;
  }

 private:
  bool gated_;
  std::shared_ptr<nn::Dense> gate_, value_;
};

std::vector<double> dense_reference(const std::vector<double>& x, int rows, int in,
                                    const std::vector<float>& w, const std::vector<float>& b,
                                    bool relu_after) {
  const int out = static_cast<int>(b.size());
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (int r = 0; r < rows; ++r) {
    for (int u = 0; u < out; ++u) {
      double total = b[static_cast<std::size_t>(u)];
      for (int f = 0; f < in; ++f) {
        total += x[static_cast<std::size_t>(r * in + f)] * w[static_cast<std::size_t>(u * in + f)];
      }
      y[static_cast<std::size_t>(r * out + u)] = relu_after ? std::max(0.0, total) : total;
    }
  }
  return y;
}

TEST(CustomBlockTest, DenseResidualMatchesAPlainLoopOnEveryDevice) {
  for (Context ctx : testing::all_devices()) {
    random::seed(3);
    DenseResidual block(6);
    block.initialize(init::Normal(0.5), {ctx});
    EXPECT_FALSE(block.dense1().weight()->initialized()) << "deferred until the first call";
    const std::vector<float> x = testing::random_floats(4 * 6, -1, 1, 9);
    block.scale()->set_data(array(testing::random_floats(6, 0.5f, 1.5f, 10), {6}, ctx));
    const NDArray y = block(array(x, {4, 6}, ctx));
    ASSERT_EQ(block.dense1().weight()->shape(), (Shape{6, 6}));
    const std::vector<double> xd(x.begin(), x.end());
    const std::vector<double> h =
        dense_reference(xd, 4, 6, block.dense1().weight()->data(ctx).to_vector<float>(),
                        block.dense1().bias()->data(ctx).to_vector<float>(), true);
    const std::vector<double> g =
        dense_reference(h, 4, 6, block.dense2().weight()->data(ctx).to_vector<float>(),
                        block.dense2().bias()->data(ctx).to_vector<float>(), false);
    const std::vector<float> s = block.scale()->data(ctx).to_vector<float>();
    std::vector<double> expected(xd.size());
    for (std::size_t i = 0; i < xd.size(); ++i) {
      expected[i] = std::max(0.0, xd[i] + g[i] * s[i % 6]);
    }
    testing::expect_close(y.to_vector<float>(), expected, 1e-5, 1e-6, "on " + ctx.str());
  }
}

TEST(CustomBlockTest, ResidualBlocksInferShapesAndNameTheirParameters) {
  nn::Sequential net;
  net.add(Residual(3), Residual(6, /*use_1x1conv=*/true, /*strides=*/2));
  net.initialize(cpu(1));
  const NDArray y =
      net(array(testing::random_floats(2 * 3 * 8 * 8, -1, 1, 4), {2, 3, 8, 8}, cpu(1)));
  EXPECT_EQ(y.shape(), (Shape{2, 6, 4, 4}));
  EXPECT_GE(y.min().asscalar<float>(), 0.f) << "a relu ends the block";
  // Parameters: the first block's 2 convolutions and 2 batch norms, the
  // second's and its projection.
  EXPECT_EQ(net.collect_params().size(), 2u * (2 * 2 + 2 * 4) + 2);
  std::vector<std::string> structural;
  for (const auto& [name, p] : net.structural_params()) structural.push_back(name);
  EXPECT_EQ(structural.front(), "0.0.weight");
  EXPECT_NE(std::find(structural.begin(), structural.end(), "1.4.weight"), structural.end())
      << "the projection is the second block's fifth child";
  EXPECT_EQ(net.at<Residual>(1).child_as<nn::Conv2D>(4).weight()->shape(), (Shape{6, 3, 1, 1}));
}

TEST(CustomBlockTest, SavedParametersLoadIntoAFreshNetworkOfTheSameStructure) {
  const std::filesystem::path dir = testing::make_test_directory("custom_block_test");
  random::seed(8);
  const NDArray x = array(testing::random_floats(3 * 2 * 4 * 4, -1, 1, 2), {3, 2, 4, 4});
  nn::Sequential flat;
  flat.add(Residual(2, true), nn::Flatten(), nn::Dense(5), DenseResidual(5), nn::Dense(3));
  flat.initialize(init::Xavier(), {cpu(0)});
  const NDArray before = flat(x);
  const std::filesystem::path file = dir / "residual.safetensors";
  flat.save_parameters(file);

  nn::Sequential fresh;
  fresh.add(Residual(2, true), nn::Flatten(), nn::Dense(5), DenseResidual(5), nn::Dense(3));
  fresh.load_parameters(file, gpu(0));
  EXPECT_EQ(fresh(x.copyto(gpu(0))).to_vector<float>(), before.to_vector<float>());
  // Another structure is refused, naming what differs.
  nn::Sequential other;
  other.add(Residual(2, false), nn::Flatten(), nn::Dense(5), DenseResidual(5), nn::Dense(3));
  EXPECT_NE(error_of<io::FileError>([&] { other.load_parameters(file, cpu(0)); }).find("0.4"),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

/// Trains DenseResidual for a few steps on `devices`, the batch split
/// across them; returns the losses and the final parameters (first device).
std::pair<std::vector<float>, std::vector<std::vector<float>>> train(
    const std::vector<Context>& devices) {
  random::seed(12);
  nn::Sequential net;
  net.add(DenseResidual(8), nn::Dense(4));
  net.initialize(init::Xavier(), devices);
  nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.5});
  nn::SoftmaxCrossEntropyLoss loss_function;
  const NDArray data = array(testing::random_floats(16 * 8, -1, 1, 13), {16, 8});
  const NDArray label = array(testing::random_ints<std::int32_t>(16, 0, 3, 14), {16});
  std::vector<float> losses;
  for (int step = 0; step < 20; ++step) {
    const std::vector<NDArray> xs = nn::split_and_load(data, devices);
    const std::vector<NDArray> ys = nn::split_and_load(label, devices);
    std::vector<NDArray> parts;
    {
      auto recording = autograd::record();
      for (std::size_t d = 0; d < devices.size(); ++d)
        parts.push_back(loss_function(net(xs[d]), ys[d]));
    }
    float total = 0;
    for (NDArray& l : parts) {
      l.backward();
      total += l.sum().asscalar<float>();
    }
    trainer.step(16);
    losses.push_back(total / 16);
  }
  std::vector<std::vector<float>> parameters;
  for (const auto& p : net.collect_params()) {
    parameters.push_back(p->data(devices[0]).to_vector<float>());
    for (Context ctx : devices) {
      EXPECT_EQ(p->data(ctx).to_vector<float>(), parameters.back())
          << p->name() << " on " << ctx.str();
    }
  }
  return {losses, parameters};
}

TEST(CustomBlockTest, TrainsWithTrainerOnOneAndSeveralDevices) {
  const auto [one_losses, one_parameters] = train({cpu(0)});
  EXPECT_LT(one_losses.back(), 0.7f * one_losses.front()) << "training lowers the loss";
  const auto [two_losses, two_parameters] = train({cpu(0), cpu(1)});
  const auto [gpu_losses, gpu_parameters] = train({gpu(0), gpu(1)});
  ASSERT_EQ(two_parameters.size(), one_parameters.size());
  for (std::size_t i = 0; i < one_losses.size(); ++i) {
    EXPECT_NEAR(two_losses[i], one_losses[i], 1e-4) << "step " << i;
    EXPECT_NEAR(gpu_losses[i], one_losses[i], 1e-4) << "step " << i;
  }
  for (std::size_t p = 0; p < one_parameters.size(); ++p) {
    for (std::size_t k = 0; k < one_parameters[p].size(); ++k) {
      EXPECT_NEAR(two_parameters[p][k], one_parameters[p][k], 1e-4);
      EXPECT_EQ(gpu_parameters[p][k], two_parameters[p][k]) << "same split, same sums";
    }
  }
}

TEST(CustomBlockTest, TheProfilerSeesTheBlocksOperators) {
  DenseResidual block(4);
  block.initialize(cpu(0));
  const NDArray x = array(testing::random_floats(8, -1, 1, 1), {2, 4});
  block(x).wait_to_read();  // shapes inferred outside the profile
  profiler::clear();
  {
    profiler::Scope profiling;
    block(x).wait_to_read();
  }
  const profiler::Trace trace = profiler::collect();
  std::vector<std::string> names;
  for (const auto& op : trace.ops) names.push_back(op.name);
  for (const char* expected : {"dot", "relu", "broadcast_add", "broadcast_mul"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

TEST(CustomBlockTest, SeveralInputsAndBranches) {
  random::seed(2);
  Gated gated(3);
  gated.initialize(cpu(0));
  const NDArray a = array(testing::random_floats(6, -1, 1, 5), {2, 3});
  const NDArray b = array(testing::random_floats(8, -1, 1, 6), {2, 4});
  const NDArray y = gated({a, b});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  const NDArray expected = gated.child_as<nn::Dense>(0)(a) * gated.child_as<nn::Dense>(1)(b);
  EXPECT_EQ(y.to_vector<float>(), expected.to_vector<float>());
  EXPECT_EQ(error_of([&] { gated(a); }), gated.name() + ": expected 2 inputs, got 1");
  Gated ungated(3, false);
  ungated.initialize(cpu(0));
  EXPECT_EQ(ungated({a, b}).shape(), (Shape{2, 3}));
  EXPECT_FALSE(ungated.child_as<nn::Dense>(0).weight()->initialized())
      << "the branch not taken never saw an input";

  struct Nothing : nn::Block {
    Nothing() : nn::Block("nothing") {}
  } nothing;
  EXPECT_EQ(error_of([&] { nothing(a); }),
            nothing.name() +
                ": the block defines neither forward(x) nor forward_inputs(inputs); a block "
                "overrides one of them");
  DenseResidual single(3);
  single.initialize(cpu(0));
  EXPECT_EQ(error_of([&] {
              single({a, a});
            }),
            single.name() +
                ": expected one input, got 2; a block of several inputs overrides "
                "forward_inputs()");
}

/// A block whose parameter is made apart and adopted, as a Python subclass
/// makes one (`self.scale = gluon.Parameter("scale", shape=(1,))`).
class Scaled : public nn::Block {
 public:
  explicit Scaled(nn::ParameterPtr scale) : nn::Block("scaled") {
    scale_ = adopt_parameter("scale", std::move(scale));
  }
  NDArray forward(const NDArray& x) override { return x * scale_->data(x.context()); }
  nn::ParameterPtr adopt_again(nn::ParameterPtr p) {
    return adopt_parameter("again", std::move(p));
  }

 private:
  nn::ParameterPtr scale_;
};

TEST(CustomBlockTest, AnAdoptedParameterIsNamedTrainedAndSavedAsTheBlocksOwn) {
  auto made = std::make_shared<nn::Parameter>("scale", Shape{1}, init::One());
  nn::Sequential net;
  auto block = std::make_shared<Scaled>(made);
  net.add(block);
  EXPECT_EQ(made->name(), block->name() + "_scale");
  ASSERT_EQ(net.collect_params().size(), 1u);
  EXPECT_EQ(net.structural_params().at(0).first, "0.scale");
  net.initialize(cpu());
  EXPECT_EQ(net(array({2.f, 3.f})).to_vector<float>(), (std::vector<float>{2.f, 3.f}));
  // A parameter belongs to one block: adopting it again is refused, and
  // changes nothing.
  const std::string message = error_of([&] { block->adopt_again(made); });
  EXPECT_NE(message.find("already belongs to block " + block->name()), std::string::npos)
      << message;
  EXPECT_EQ(net.collect_params().size(), 1u);
  EXPECT_EQ(made->name(), block->name() + "_scale");
}

TEST(CustomBlockTest, TypedAccessToChildren) {
  nn::Sequential net;
  net.add(nn::Dense(4, "relu"), nn::Activation("tanh"), DenseResidual(4));
  EXPECT_EQ(net.at<nn::Dense>(0).weight()->shape(), (Shape{4, 0}));
  // The typed child is the very block the class holds.
  EXPECT_EQ(&net.at<DenseResidual>(2).dense2(), &net.at<DenseResidual>(2).child_as<nn::Dense>(1));
  EXPECT_EQ(error_of([&] { net.at<nn::Dense>(1); }),
            net.name() + ": child 1 is " + net[1].name() + " (Activation), not a Dense");
  EXPECT_EQ(error_of([&] { net.at<nn::Dense>(3); }),
            net.name() + ": expected a child position below 3, got 3");
}

template <typename B>
class Wrapped : public nn::Block {
 public:
  Wrapped() : nn::Block("wrapped"), inner_(register_child(B(2))) {}
  NDArray forward(const NDArray& x) override { return (*inner_)(x); }

 private:
  std::shared_ptr<B> inner_;
};

TEST(CustomBlockTest, ATemplateBlockIsNamedWithItsArguments) {
  Wrapped<nn::Dense> wrapped;
  std::ostringstream printed;
  printed << wrapped;
  EXPECT_EQ(printed.str(), "Wrapped<tagflow::nn::Dense>(\n  (0): Dense(None -> 2, linear)\n)");
}

TEST(CustomBlockTest, PrintsAsGluonPrintsANetworkAndItsParameters) {
  nn::Sequential net;
  net.add(nn::Conv2D(6, 5, "sigmoid", {.padding = {2, 2}}), nn::MaxPool2D(2, 2),
          nn::Dense(120, "relu"), nn::Dropout(0.5), DenseResidual(120), nn::Dense(10));
  std::ostringstream printed;
  printed << net;
  EXPECT_EQ(printed.str(),
            "Sequential(\n"
            "  (0): Conv2D(None -> 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2), "
            "Activation(sigmoid))\n"
            "  (1): MaxPool2D(size=(2, 2), stride=(2, 2), padding=(0, 0))\n"
            "  (2): Dense(None -> 120, Activation(relu))\n"
            "  (3): Dropout(p = 0.5)\n"
            "  (4): DenseResidual(\n"
            "    (0): Dense(None -> 120, Activation(relu))\n"
            "    (1): Dense(None -> 120, linear)\n"
            "  )\n"
            "  (5): Dense(None -> 10, linear)\n"
            ")");
  net.initialize(init::Xavier(), {cpu(0), gpu(1)});
  (void)net(zeros({1, 1, 8, 8}, gpu(1)));
  std::ostringstream after;
  after << net.at<nn::Dense>(2);
  EXPECT_EQ(after.str(), "Dense(96 -> 120, Activation(relu))");
  std::ostringstream params;
  params << net.collect_params();
  const std::string conv = net[0].name();
  EXPECT_EQ(params.str().substr(0, params.str().find('\n', params.str().find('\n') + 1)),
            "ParameterDict (\n  Parameter " + conv +
                "_weight (shape=(6, 1, 5, 5), dtype=float32, ctx=[cpu(0), gpu(1)])");
  EXPECT_NE(params.str().find("Parameter " + conv +
                              "_bias (shape=(6,), dtype=float32, "
                              "ctx=[cpu(0), gpu(1)])"),
            std::string::npos);
  EXPECT_EQ(params.str().back(), ')');
}

}  // namespace
}  // namespace tagflow
