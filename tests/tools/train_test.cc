// `tagflow train`'s loop on the real Fashion-MNIST (skipped when the
// dataset-fashion-mnist package is missing): LeNet learns from a part of the
// training set, the same seed gives the same losses whatever the number of
// loader threads and whatever the number of devices the batches are split
// across (1, 2, 4: CPU devices and simulated GPUs), and parameters saved on
// one device and loaded into a fresh network on another give the same test
// accuracy.

#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"
#include "tools/train.h"

namespace tagflow {
namespace {

bool have_fashion_mnist() {
  return std::filesystem::exists(data::default_fashion_mnist_dir() / "t10k-images-idx3-ubyte.gz") ||
         std::filesystem::exists(data::default_fashion_mnist_dir() / "t10k-images-idx3-ubyte");
}

#define SKIP_WITHOUT_FASHION_MNIST()                                                          \
  if (!have_fashion_mnist()) {                                                                \
    GTEST_SKIP() << "Fashion-MNIST is not installed (apt-get install dataset-fashion-mnist)"; \
  }

tools::TrainOptions small_run() {
  tools::TrainOptions options;
  options.epochs = 1;
  options.batch_size = 64;
  options.learning_rate = 0.1;
  options.limit = 12000;
  options.progress = false;
  return options;
}

TEST(TrainTest, LeNetLearnsFromPartOfTheTrainingSet) {
  SKIP_WITHOUT_FASHION_MNIST();
  const auto results = tools::run_train(small_run());
  ASSERT_EQ(results.size(), 1u);
  // 188 steps of 64 images; chance is 0.1, and a network that does not learn
  // stays near it.
  EXPECT_GT(results[0].test_accuracy, 0.70);
  EXPECT_GT(results[0].train_accuracy, 0.5);
  EXPECT_LT(results[0].loss, 1.0);
}

TEST(TrainTest, TheSameSeedGivesTheSameLossesWhateverTheLoaderThreads) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 2048;
  options.epochs = 2;
  options.num_workers = 0;
  const auto serial = tools::run_train(options);
  options.num_workers = 3;
  const auto threaded = tools::run_train(options);
  ASSERT_EQ(serial.size(), 2u);
  ASSERT_EQ(threaded.size(), 2u);
  for (std::size_t epoch = 0; epoch < 2; ++epoch) {
    EXPECT_NEAR(threaded[epoch].loss, serial[epoch].loss, 1e-6 * serial[epoch].loss) << epoch;
    EXPECT_EQ(threaded[epoch].train_accuracy, serial[epoch].train_accuracy) << epoch;
  }
  options.seed = 2;
  EXPECT_NE(tools::run_train(options)[0].loss, serial[0].loss) << "another seed, other losses";
}

TEST(TrainTest, OneTwoAndFourDevicesGiveTheSameLosses) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 1000;  // 15 batches of 64 and one of 40: every split is uneven somewhere
  options.epochs = 2;
  const auto one = tools::run_train(options);
  ASSERT_EQ(one.size(), 2u);
  const std::vector<std::vector<Context>> device_sets = {
      {cpu(0), cpu(1)}, {cpu(0), cpu(1), cpu(2), cpu(3)}, {gpu(0), gpu(1), gpu(2), gpu(3)}};
  for (const std::vector<Context>& devices : device_sets) {
    options.devices = devices;
    const auto many = tools::run_train(options);
    ASSERT_EQ(many.size(), 2u);
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
      const std::string what = std::to_string(devices.size()) + " devices from " +
                               devices[0].str() + ", epoch " + std::to_string(epoch);
      EXPECT_NEAR(many[epoch].loss, one[epoch].loss, 1e-4 * one[epoch].loss) << what;
      // A sample may flip on a near tie of two scores: the sums over devices
      // round differently, and after two epochs of 1000 images 10 of the
      // 10000 test images flip on two CPU devices (the losses agree to 1e-4).
      EXPECT_NEAR(many[epoch].train_accuracy, one[epoch].train_accuracy, 2e-3) << what;
      EXPECT_NEAR(many[epoch].test_accuracy, one[epoch].test_accuracy, 2e-3) << what;
    }
  }
}

TEST(TrainTest, DeviceListsAreParsedOrRefusedClearly) {
  EXPECT_EQ(tools::parse_devices("cpu:0,cpu:1"), (std::vector<Context>{cpu(0), cpu(1)}));
  EXPECT_EQ(tools::parse_devices("gpu:1,cpu:0"), (std::vector<Context>{gpu(1), cpu(0)}));
  EXPECT_EQ(tools::parse_devices("all"), try_all_gpus());
  auto error_of = [](const std::string& text) {
    return testing::error_of([&] { (void)tools::parse_devices(text); });
  };
  EXPECT_NE(error_of("cpu:0,cpu:0").find("cpu(0) is listed twice"), std::string::npos);
  EXPECT_NE(error_of("cpu:0,").find("expected"), std::string::npos) << error_of("cpu:0,");
  EXPECT_NE(error_of("tpu:0").find("expected"), std::string::npos) << error_of("tpu:0");
  EXPECT_NE(error_of("gpu:7").find("gpu(7)"), std::string::npos) << error_of("gpu:7");
  EXPECT_NE(error_of("cpu_pinned:0").find("not a device to run on"), std::string::npos);
  tools::TrainOptions options = small_run();
  options.devices = {cpu(0), cpu(1)};
  options.batch_size = 1;
  EXPECT_NE(testing::error_of([&] {
              (void)tools::run_train(options);
            }).find("cannot be split across 2 devices"),
            std::string::npos);
}

TEST(TrainTest, ParametersSavedOnOneDeviceEvaluateTheSameInAFreshNetworkOnAnother) {
  SKIP_WITHOUT_FASHION_MNIST();
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() /
      ("tagflow-train-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       ".safetensors");
  tools::TrainOptions options = small_run();
  options.limit = 4096;
  options.save = file;
  const auto trained = tools::run_train(options);
  ASSERT_EQ(trained.size(), 1u);

  tools::TrainOptions evaluate;
  evaluate.epochs = 0;
  evaluate.load = file;
  evaluate.devices = {gpu(1)};  // simulated by the test main
  evaluate.progress = false;
  const auto reloaded = tools::run_train(evaluate);
  std::filesystem::remove(file);
  ASSERT_EQ(reloaded.size(), 1u);
  // The same kernels on both (simulated GPUs run the CPU ones); one image of
  // 10000 may still flip on a near tie of two scores.
  EXPECT_NEAR(reloaded[0].test_accuracy, trained[0].test_accuracy, 1.5e-4);
}

}  // namespace
}  // namespace tagflow
