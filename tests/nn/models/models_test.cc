// The networks of nn/models: their layers, parameter counts (from the
// layer sizes, counted by hand) and outputs' shapes, on every device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

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

/// Parameters of a k x k convolution with bias, and of a batch norm (gamma,
/// beta and the two running statistics).
std::int64_t conv(std::int64_t in, std::int64_t out, std::int64_t k) {
  return out * in * k * k + out;
}
std::int64_t batch_norm(std::int64_t channels) { return 4 * channels; }
/// A residual block from `in` to `out` channels, projected when they differ.
std::int64_t residual(std::int64_t in, std::int64_t out) {
  return conv(in, out, 3) + conv(out, out, 3) + (in != out ? conv(in, out, 1) : 0) +
         2 * batch_norm(out);
}

TEST(ModelsTest, Resnet18HasTheChaptersLayersOnEveryDevice) {
  nn::Sequential net = models::resnet18(10, 1);
  // conv, batch norm, relu, four stages, global pooling, dense.
  ASSERT_EQ(net.size(), 9U);
  for (std::size_t stage = 3; stage < 7; ++stage) {
    const auto& blocks = net.at<nn::Sequential>(stage);
    ASSERT_EQ(blocks.size(), 2U);
    // The first block of stages 2 to 4 halves the image, with a projection.
    EXPECT_EQ(blocks.at<models::Residual>(0).children().size(), stage == 3 ? 4U : 5U);
    EXPECT_EQ(blocks.at<models::Residual>(1).children().size(), 4U);
  }
  const std::int64_t expected = conv(1, 64, 3) + batch_norm(64) + residual(64, 64) +
                                residual(64, 64) + residual(64, 128) + residual(128, 128) +
                                residual(128, 256) + residual(256, 256) + residual(256, 512) +
                                residual(512, 512) + (512 * 10 + 10);
  net.initialize(init::Normal(0.01), testing::all_devices());
  // 28x28 images: the stages see 28, 14, 7 and 4 pixels.
  NDArray x = random::uniform(0, 1, {2, 1, 28, 28}, cpu(0));
  NDArray y = x;
  for (std::size_t i = 0; i < net.size(); ++i) {
    y = net[i](y);
    if (i >= 3 && i <= 6) {
      const std::int64_t side[] = {28, 14, 7, 4};
      EXPECT_EQ(y.shape(), (Shape{2, 64 << (i - 3), side[i - 3], side[i - 3]})) << "stage " << i;
    }
  }
  EXPECT_EQ(y.shape(), Shape({2, 10}));
  EXPECT_EQ(parameter_count(net), expected) << "once the first call inferred the shapes";
  // Smaller images on every device: the same scores from the same weights.
  const NDArray small = random::uniform(0, 1, {2, 1, 8, 8}, cpu(0));
  const std::vector<float> reference = net(small).to_vector<float>();
  for (Context ctx : testing::all_devices()) {
    SCOPED_TRACE(ctx.str());
    testing::expect_close(net(small.copyto(ctx)).to_vector<float>(),
                          std::vector<double>(reference.begin(), reference.end()), 1e-5, 1e-5,
                          "resnet18 on " + ctx.str());
  }
}

/// Two steps of ResNet-18 on a batch of 8 split into `parts` parts, part p
/// on devices[p % devices.size()], the parts taken in turn from the
/// `rotation`-th (and backwards with `parts_reversed`); each device's losses
/// are summed, then backward, then one update. Returns each step's total
/// loss and the weights of the first convolution and of the dense layer
/// afterwards.
std::vector<float> resnet_steps(const std::vector<Context>& devices, int parts,
                                bool parts_reversed = false, int rotation = 0) {
  const std::vector<float> x = testing::random_floats(8 * 1 * 8 * 8, 0, 1, 21);
  const std::vector<std::int32_t> y = {3, 1, 4, 1, 5, 9, 2, 6};
  random::seed(5);
  nn::Sequential net = models::resnet18(10, 1);
  net.initialize(init::Xavier(), devices);
  nn::Trainer trainer(net.collect_params(), "sgd", {.learning_rate = 0.005, .momentum = 0.9});
  nn::SoftmaxCrossEntropyLoss loss;
  std::vector<float> out;
  const std::int64_t per = 8 / parts;
  for (int step = 0; step < 2; ++step) {
    std::vector<NDArray> device_loss(devices.size());
    {
      auto recording = autograd::record();
      for (int q = 0; q < parts; ++q) {
        const int p = ((parts_reversed ? parts - 1 - q : q) + rotation) % parts;
        const std::size_t d = static_cast<std::size_t>(p) % devices.size();
        const auto b = p * per;
        NDArray xs = array(std::vector<float>(x.begin() + b * 64, x.begin() + (b + per) * 64),
                           {per, 1, 8, 8}, devices[d]);
        NDArray ys =
            array(std::vector<std::int32_t>(y.begin() + b, y.begin() + b + per), {per}, devices[d]);
        NDArray l = sum(loss(net(xs), ys));
        device_loss[d] = device_loss[d].defined() ? device_loss[d] + l : l;
      }
    }
    float total = 0;
    for (NDArray& l : device_loss) {
      l.backward();
      total += l.asscalar<float>();
    }
    trainer.step(8);
    out.push_back(total);
  }
  for (float w : net.at<nn::Conv2D>(0).weight()->data(devices[0]).to_vector<float>()) {
    out.push_back(w);
  }
  for (float w : net.at<nn::Dense>(8).weight()->data(devices[0]).to_vector<float>()) {
    out.push_back(w);
  }
  return out;
}

TEST(ModelsTest, Resnet18TrainsAlikeOnOneTwoAndFourDevices) {
  // Batch norm normalises each device's part of the batch by that part's
  // statistics (as MXNet's and PyTorch's data parallelism without a
  // synchronised batch norm), so the reference for D devices is one device
  // computing the same D parts in turn, its losses summed. The devices sum
  // the gradients in another order, and with batch norm over parts of two
  // images the steps amplify that rounding far beyond float32's, by an
  // amount that differs between CPUs and kernels. So the bound is measured:
  // the same reference with its parts taken in other orders (backwards, and
  // from the middle both ways) sums the same gradients in yet other orders;
  // the devices must stay within a few times the farthest of them. A real
  // fault (a part counted twice or lost, a sum over the wrong devices)
  // moves the weights by the size of a part's gradient, far more.
  std::vector<Context> devices = testing::all_devices();
  ASSERT_GE(devices.size(), 4u);
  devices.resize(4);
  for (const int count : {2, 4}) {
    SCOPED_TRACE(count);
    const std::vector<float> one = resnet_steps({devices[0]}, count);
    const std::vector<float> several =
        resnet_steps(std::vector<Context>(devices.begin(), devices.begin() + count), count);
    ASSERT_EQ(several.size(), one.size());
    // Distances over the whole vector (the losses and the weights): an
    // element the reordering happened to leave alone is no yardstick.
    const auto distance = [&](const std::vector<float>& other) {
      double d = 0;
      for (std::size_t i = 0; i < one.size(); ++i) d += std::pow(double(other[i]) - one[i], 2);
      return std::sqrt(d);
    };
    double apart = 0;
    for (const auto& [reversed, rotation] :
         {std::pair{true, 0}, std::pair{false, count / 2}, std::pair{true, count / 2}}) {
      const std::vector<float> reordered = resnet_steps({devices[0]}, count, reversed, rotation);
      ASSERT_EQ(reordered.size(), one.size());
      apart = std::max(apart, distance(reordered));
    }
    double size = 0;
    for (float v : one) size += std::pow(double(v), 2);
    const double off = distance(several);
    EXPECT_LE(off, 4 * apart + 1e-6 * std::sqrt(size))
        << count << " devices: " << off << " from the reference, whose parts in other orders "
        << "are up to " << apart << " from it";
  }
}

TEST(ModelsTest, RefuseNoClasses) {
  EXPECT_THROW(models::lenet(0), Error);
  EXPECT_THROW(models::mlp(-1), Error);
  EXPECT_THROW(models::resnet18(0), Error);
  EXPECT_THROW(models::resnet18(10, -1), Error);
  EXPECT_THROW(models::Residual(0), Error);
}

}  // namespace
}  // namespace tagflow
