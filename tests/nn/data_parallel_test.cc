// Data-parallel training: the same seed and global batch give the same
// losses and parameters on 1, 2 and 4 devices (CPU devices, simulated GPUs,
// a mix), the aggregated gradient of a split batch is the whole batch's
// gradient on one device, and every device's copy stays bit-identical.

#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;

constexpr std::int64_t kBatch = 16;
constexpr int kSteps = 4;

/// A small LeNet: convolution, pooling and dense layers, as the tutorials'.
std::shared_ptr<nn::Sequential> small_lenet() {
  auto net = std::make_shared<nn::Sequential>();
  net->add(nn::Conv2D(4, 3, "relu"), nn::MaxPool2D(2, 2), nn::Dense(16, "relu"), nn::Dense(10));
  return net;
}

/// Batch `step` of images (kBatch, 1, 10, 10) and labels in 0..9, on cpu(0).
std::pair<NDArray, NDArray> batch(int step) {
  const auto seed = static_cast<std::uint32_t>(step + 1);
  const std::vector<float> images = testing::random_floats(kBatch * 100, -1.f, 1.f, seed);
  const std::vector<std::int32_t> labels = testing::random_ints<std::int32_t>(kBatch, 0, 9, seed);
  return {array(images, {kBatch, 1, 10, 10}), array(labels, {kBatch})};
}

std::string text(const std::vector<Context>& devices) {
  std::string s;
  for (Context c : devices) s += c.str() + " ";
  return s;
}

struct TrainingRun {
  std::vector<double> losses;  ///< the whole batch's summed loss, per step
  /// Every parameter's value on each device, in registration order.
  std::vector<std::vector<std::vector<float>>> parameters;
};

/// kSteps steps of `optimizer` on `devices`, each batch split across them,
/// the loss summed on each device and read once at the end.
TrainingRun train(const std::vector<Context>& devices, const std::string& optimizer) {
  random::seed(5);
  auto net = small_lenet();
  net->initialize(init::Xavier(), devices);
  nn::Trainer trainer(net->collect_params(), optimizer,
                      {.learning_rate = optimizer == "sgd" ? 0.2 : 0.01, .momentum = 0.9});
  nn::SoftmaxCrossEntropyLoss loss_function;
  std::vector<std::vector<NDArray>> step_losses;
  for (int step = 0; step < kSteps; ++step) {
    const auto [data, label] = batch(step);
    const std::vector<NDArray> xs = nn::split_and_load(data, devices);
    const std::vector<NDArray> ys = nn::split_and_load(label, devices);
    std::vector<NDArray> losses;
    {
      auto recording = autograd::record();
      for (std::size_t d = 0; d < devices.size(); ++d) {
        losses.push_back(loss_function((*net)(xs[d]), ys[d]));
      }
    }
    for (NDArray& l : losses) l.backward();
    trainer.step(kBatch);
    std::vector<NDArray> sums;
    for (const NDArray& l : losses) sums.push_back(sum(l));
    step_losses.push_back(sums);
  }
  TrainingRun run;
  for (const auto& sums : step_losses) {
    double total = 0;
    for (const NDArray& s : sums) total += s.asscalar<float>();
    run.losses.push_back(total);
  }
  for (const nn::ParameterPtr& p : net->collect_params()) {
    std::vector<std::vector<float>> copies;
    for (Context c : devices) copies.push_back(p->data(c).to_vector<float>());
    run.parameters.push_back(copies);
  }
  return run;
}

TEST(DataParallelTest, OneTwoAndFourDevicesGiveTheSameTraining) {
  const std::vector<std::vector<Context>> device_sets = {{cpu(0), cpu(1)},
                                                         {cpu(0), cpu(1), cpu(2), cpu(3)},
                                                         {gpu(0), gpu(1)},
                                                         {gpu(0), gpu(1), gpu(2), gpu(3)},
                                                         {gpu(1), cpu(2), gpu(3), cpu(0)}};
  for (const std::string optimizer : {"sgd", "adam"}) {
    const TrainingRun one = train({cpu(0)}, optimizer);
    const TrainingRun one_gpu = train({gpu(2)}, optimizer);
    EXPECT_EQ(one_gpu.losses, one.losses) << "a simulated GPU runs the CPU kernels";
    for (const std::vector<Context>& devices : device_sets) {
      const std::string what = optimizer + " on " + text(devices);
      const TrainingRun many = train(devices, optimizer);
      ASSERT_EQ(many.losses.size(), one.losses.size());
      for (std::size_t s = 0; s < one.losses.size(); ++s) {
        EXPECT_NEAR(many.losses[s], one.losses[s], 1e-4 * std::abs(one.losses[s]))
            << what << ": step " << s;
      }
      ASSERT_EQ(many.parameters.size(), one.parameters.size());
      for (std::size_t p = 0; p < one.parameters.size(); ++p) {
        const std::vector<float>& reference = one.parameters[p][0];
        const std::vector<double> expected(reference.begin(), reference.end());
        for (std::size_t d = 0; d < devices.size(); ++d) {
          EXPECT_EQ(many.parameters[p][d], many.parameters[p][0])
              << what << ": parameter " << p << " differs between devices 0 and " << d;
        }
        testing::expect_close(many.parameters[p][0], expected, 1e-4, 1e-5,
                              what + ": parameter " + std::to_string(p));
      }
    }
  }
}

TEST(DataParallelTest, AggregatedGradientIsTheWholeBatchGradient) {
  const std::vector<Context> devices = {cpu(1), gpu(0), cpu(3), gpu(3)};
  random::seed(9);
  auto net = small_lenet();
  net->initialize(init::Xavier(), devices);
  nn::SoftmaxCrossEntropyLoss loss_function;
  const auto [data, label] = batch(0);
  // The whole batch on devices[0] alone, through the same parameters.
  {
    auto recording = autograd::record();
    loss_function((*net)(data.copyto(devices[0])), label.copyto(devices[0])).backward();
  }
  std::vector<std::vector<float>> whole;
  for (const nn::ParameterPtr& p : net->collect_params()) {
    whole.push_back(p->grad(devices[0]).to_vector<float>());
  }
  // The same batch split over the four devices, then aggregated.
  const std::vector<NDArray> xs = nn::split_and_load(data, devices);
  const std::vector<NDArray> ys = nn::split_and_load(label, devices);
  {
    auto recording = autograd::record();
    for (std::size_t d = 0; d < devices.size(); ++d) {
      loss_function((*net)(xs[d]), ys[d]).backward();
    }
  }
  nn::Trainer trainer(net->collect_params(), "sgd", {.learning_rate = 0.1});
  trainer.allreduce_grads();
  std::size_t index = 0;
  for (const nn::ParameterPtr& p : net->collect_params()) {
    const std::vector<double> expected(whole[index].begin(), whole[index].end());
    for (Context c : devices) {
      testing::expect_close(p->grad(c).to_vector<float>(), expected, 1e-4, 1e-6,
                            p->name() + " on " + c.str());
    }
    ++index;
  }
  // A second sum before the update would count every device twice.
  EXPECT_NE(error_of([&] { trainer.allreduce_grads(); }).find("already aggregated"),
            std::string::npos);
  trainer.update(kBatch);
  trainer.allreduce_grads();  // allowed again after the update
}

}  // namespace
}  // namespace tagflow
