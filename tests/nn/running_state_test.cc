// BatchNorm's running statistics in data-parallel training (Note [Running
// state across devices] in nn/trainer.h): after every step each device's copy
// is the mean of the copies the forward passes left, computed independently
// here in double; a saved network is the same file whichever device was
// first, and evaluates to the same outputs on every device it is loaded on.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/common/test_directory.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using Values = std::vector<float>;

constexpr std::int64_t kBatch = 12;  // split evenly over 2 and 3 devices

std::shared_ptr<nn::Sequential> conv_bn_net(const std::vector<Context>& devices) {
  random::seed(21);
  auto net = std::make_shared<nn::Sequential>();
  net->add(nn::Conv2D(4, 3), nn::BatchNorm(), nn::Activation("relu"), nn::Dense(3));
  net->initialize(init::Xavier(), devices);
  return net;
}

/// Batch `step`: images (kBatch, 2, 6, 6), the two halves far apart in
/// scale so that each device's slice has statistics of its own.
std::pair<NDArray, NDArray> batch(int step) {
  std::vector<float> images =
      testing::random_floats(kBatch * 72, -1.f, 1.f, static_cast<std::uint32_t>(step + 3));
  for (std::size_t i = images.size() / 2; i < images.size(); ++i) images[i] = 3 * images[i] + 2;
  const std::vector<std::int32_t> labels =
      testing::random_ints<std::int32_t>(kBatch, 0, 2, static_cast<std::uint32_t>(step + 3));
  return {array(images, {kBatch, 2, 6, 6}), array(labels, {kBatch})};
}

nn::BatchNorm& batch_norm_of(nn::Sequential& net) { return net.at<nn::BatchNorm>(1); }

/// Forward and backward of one batch split over `devices` (training mode).
void forward_backward(nn::Sequential& net, const std::vector<Context>& devices, int step) {
  const auto [data, label] = batch(step);
  const std::vector<NDArray> xs = nn::split_and_load(data, devices);
  const std::vector<NDArray> ys = nn::split_and_load(label, devices);
  nn::SoftmaxCrossEntropyLoss loss_function;
  std::vector<NDArray> losses;
  {
    auto recording = autograd::record();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      losses.push_back(loss_function(net(xs[d]), ys[d]));
    }
  }
  for (NDArray& l : losses) l.backward();
}

/// The mean of `copies`' values, in double.
std::vector<double> mean_of(const std::vector<NDArray>& copies) {
  std::vector<double> mean(static_cast<std::size_t>(copies[0].size()), 0.0);
  for (const NDArray& c : copies) {
    const Values v = c.to_vector<float>();
    for (std::size_t i = 0; i < v.size(); ++i) mean[i] += v[i] / static_cast<double>(copies.size());
  }
  return mean;
}

TEST(RunningStateTest, TrainerKeepsEveryDevicesStatisticsTheMeanOfThem) {
  for (const std::vector<Context>& devices :
       std::vector<std::vector<Context>>{{gpu(0), gpu(1)}, {cpu(0), cpu(1), gpu(2)}}) {
    auto net = conv_bn_net(devices);
    (*net)(batch(0).first.slice(0, 1).copyto(devices[0]));  // shapes inferred
    nn::Trainer trainer(net->collect_params(), "sgd", {.learning_rate = 0.1});
    for (int step = 0; step < 4; ++step) {
      forward_backward(*net, devices, step);
      // What the forward passes left on each device, before the step.
      std::vector<std::vector<double>> expected;
      for (const nn::ParameterPtr& p :
           {batch_norm_of(*net).running_mean(), batch_norm_of(*net).running_var()}) {
        const std::vector<NDArray> copies = p->list_data();
        EXPECT_NE(copies[0].to_vector<float>(), copies.back().to_vector<float>())
            << "the slices' statistics should differ, step " << step;
        expected.push_back(mean_of(copies));
      }
      trainer.step(kBatch);
      int which = 0;
      for (const nn::ParameterPtr& p :
           {batch_norm_of(*net).running_mean(), batch_norm_of(*net).running_var()}) {
        const std::vector<NDArray> copies = p->list_data();
        const Values first = copies[0].to_vector<float>();
        for (std::size_t d = 1; d < copies.size(); ++d) {
          EXPECT_EQ(copies[d].to_vector<float>(), first) << p->name() << " on " << devices[d];
        }
        // Summed in float over n copies, then divided: n - 1 roundings of
        // the sum and one of the quotient, each within half an ulp of
        // values below the largest copy (at most 3 copies, so 3 ulps of it).
        const std::vector<double>& mean = expected[static_cast<std::size_t>(which++)];
        for (std::size_t i = 0; i < mean.size(); ++i) {
          double largest = 0;
          for (const NDArray& c : p->list_data()) {
            largest = std::max(largest, std::abs(double(c.to_vector<float>()[i])));
          }
          EXPECT_NEAR(first[i], mean[i], 3 * std::ldexp(std::max(largest, std::abs(mean[i])), -23))
              << p->name() << "[" << i << "], step " << step;
        }
      }
    }
  }
}

TEST(RunningStateTest, ASavedNetworkEvaluatesTheSameOnEveryDevice) {
  const std::filesystem::path dir = testing::make_test_directory("running_state");
  const std::vector<Context> devices = {gpu(0), gpu(1)};
  auto net = conv_bn_net(devices);
  (*net)(batch(0).first.slice(0, 1).copyto(devices[0]));
  // Trained by hand, without a Trainer: the statistics stay per device.
  for (int step = 0; step < 3; ++step) forward_backward(*net, devices, step);
  const nn::ParameterPtr mean = batch_norm_of(*net).running_mean();
  const nn::ParameterPtr var = batch_norm_of(*net).running_var();
  ASSERT_NE(mean->data(gpu(0)).to_vector<float>(), mean->data(gpu(1)).to_vector<float>());
  net->save_parameters(dir / "net.safetensors");

  // The file holds the mean of the copies, computed in double, rounded once.
  const auto saved = io::load_safetensors(dir / "net.safetensors");
  for (const auto& [name, p] :
       {std::pair{"1.running_mean", mean}, std::pair{"1.running_var", var}}) {
    const std::vector<double> expected = mean_of(p->list_data());
    Values rounded;
    for (double v : expected) rounded.push_back(static_cast<float>(v));
    bool found = false;
    for (const auto& [saved_name, value] : saved) {
      if (saved_name != name) continue;
      found = true;
      EXPECT_EQ(value.to_vector<float>(), rounded) << name;
    }
    EXPECT_TRUE(found) << name;
  }

  // Loaded on any device, the network predicts the same.
  const NDArray x = batch(7).first;
  Values reference;
  for (Context ctx : {cpu(0), gpu(0), gpu(1), cpu(1)}) {
    auto loaded = conv_bn_net({ctx});
    loaded->load_parameters(dir / "net.safetensors", ctx);
    const Values out = (*loaded)(x.copyto(ctx)).to_vector<float>();
    if (reference.empty()) {
      reference = out;
    } else {
      EXPECT_EQ(out, reference) << ctx;
    }
  }
}

}  // namespace
}  // namespace tagflow
