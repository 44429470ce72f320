// `tagflow train` on eight timing-only H100 models (TAGFLOW_SIM_GPUS=
// 8:h100-sxm:timing, set by this binary's main; Note [Predicted training]):
// a prediction per epoch whose figures agree with one another, a step on
// more GPUs predicted faster per image, options that need values refused,
// and run_train told to leave such GPUs to the prediction.

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"
#include "tools/train.h"
#include "tools/train_prediction.h"

namespace tagflow {
namespace {

class TrainPredictionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& gpus = Engine::get().gpus();
    if (gpus.size() < 8 || !gpus[0].timing_only) {
      GTEST_SKIP() << "needs TAGFLOW_SIM_GPUS=8:MODEL:timing (this binary's default)";
    }
    if (!std::filesystem::exists(data::default_fashion_mnist_dir())) {
      GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)";
    }
  }
  static tools::TrainOptions run_on(int gpus, std::int64_t batch_per_gpu) {
    tools::TrainOptions options;
    options.model = "resnet18";
    options.epochs = 2;
    options.limit = 1024;
    options.batch_size = batch_per_gpu * gpus;
    options.progress = false;
    options.devices.clear();
    for (int i = 0; i < gpus; ++i) options.devices.push_back(gpu(i));
    return options;
  }
};

TEST_F(TrainPredictionTest, EachEpochIsPredictedAndItsFiguresAgree) {
  const auto epochs = tools::predict_training(run_on(8, 32));
  ASSERT_EQ(epochs.size(), 2u);
  for (const tools::PredictedEpoch& e : epochs) {
    EXPECT_EQ(e.images, 1024);
    EXPECT_EQ(e.batches, 4);
    EXPECT_GT(e.seconds, 0);
    EXPECT_NEAR(e.images_per_second * e.seconds, 1024, 1e-6);
    EXPECT_NEAR(e.step_seconds * 4, e.seconds, 1e-12);
    // Eight GPUs sum gradients; what overlaps compute is part of it.
    EXPECT_GT(e.communication_seconds, 0);
    EXPECT_GE(e.overlapped_seconds, 0);
    EXPECT_LE(e.overlapped_seconds, e.communication_seconds);
    EXPECT_LT(e.communication_seconds, e.step_seconds);
    EXPECT_GT(e.peak_bytes, 0u);
    EXPECT_LT(e.peak_bytes, 80ull << 30);
  }
}

TEST_F(TrainPredictionTest, OneGpuSumsNothingAndMoreGpusTrainMoreImagesPerSecond) {
  const auto one = tools::predict_training(run_on(1, 32));
  const auto eight = tools::predict_training(run_on(8, 32));
  EXPECT_EQ(one[0].communication_seconds, 0);
  EXPECT_GT(eight[1].images_per_second, 2 * one[1].images_per_second);
  // The same work per GPU: a step is never faster with more GPUs to sum over.
  EXPECT_GE(eight[1].step_seconds, one[1].step_seconds);
}

TEST_F(TrainPredictionTest, OptionsThatNeedValuesAreRefused) {
  tools::TrainOptions options = run_on(2, 16);
  options.save = std::filesystem::temp_directory_path() / "never-written.safetensors";
  EXPECT_NE(testing::error_of([&] {
              (void)tools::predict_training(options);
            }).find("--save needs values"),
            std::string::npos);
  options = run_on(2, 16);
  options.devices = {gpu(0), cpu(0)};
  EXPECT_NE(testing::error_of([&] {
              (void)tools::predict_training(options);
            }).find("every device or none"),
            std::string::npos);
  EXPECT_NE(
      testing::error_of([&] { (void)tools::run_train(run_on(2, 16)); }).find("predict_training"),
      std::string::npos);
}

}  // namespace
}  // namespace tagflow
