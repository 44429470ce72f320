// `tagflow train`'s loop on the real Fashion-MNIST (skipped when the
// dataset-fashion-mnist package is missing): LeNet learns from a part of the
// training set, the same seed gives the same losses whatever the number of
// loader threads and whatever the number of devices the batches are split
// across (1, 2, 4: CPU devices and simulated GPUs), and parameters saved on
// one device and loaded into a fresh network on another give the same test
// accuracy.

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"
#include "tools/checkpoint.h"
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

TEST(TrainTest, HalfPrecisionLearnsWithFloat32MastersAndReportsItsMemory) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 4096;
  options.test_limit = 2000;
  options.devices = {cpu(0), gpu(0)};  // a CPU device and a simulated GPU
  const auto float32 = tools::run_train(options);
  for (const DType dtype : {DType::kFloat16, DType::kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    options.dtype = dtype;
    const auto results = tools::run_train(options);
    ASSERT_EQ(results.size(), 1u);
    // 64 updates of 64 images: as far from chance as float32 gets.
    EXPECT_GT(results[0].test_accuracy, 0.5);
    EXPECT_NEAR(results[0].test_accuracy, float32[0].test_accuracy, 0.1);
    // 16-bit activations take half the memory, but CPU devices stage each
    // kernel's operands through float32: about as much as float32 at most.
    EXPECT_GT(results[0].peak_bytes, 0u);
    EXPECT_LT(static_cast<double>(results[0].peak_bytes),
              1.25 * static_cast<double>(float32[0].peak_bytes));
    if (dtype == DType::kFloat16) {
      // The scale starts at 2^16 and halves at each of the first steps whose
      // gradients overflow; 64 clean steps are far from the 2000 that grow
      // it.
      EXPECT_GE(results[0].skipped_updates, 1) << "LeNet's gradients overflow at 2^16";
      EXPECT_LT(results[0].skipped_updates, 16);
      EXPECT_EQ(results[0].loss_scale * std::exp2(results[0].skipped_updates), 65536.0);
    } else {
      EXPECT_EQ(results[0].loss_scale, 0) << "bfloat16 needs no loss scaling";
    }
  }
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
  // Training on several devices sums each batch's gradients in another
  // order than one device does: every sum rounds differently, by a few
  // float32 ulps, and training amplifies such differences from step to step
  // by an amount no fixed bound knows (it differs between CPUs and kernel
  // families). So the bound is measured: the same one-device training with
  // its learning rate moved by 2^-22 (every update perturbed by a few
  // float32 roundings) shows how far a rounding-sized difference carries;
  // several devices must stay within a few times that spread. A real fault
  // (a gradient summed twice or over the wrong count) moves every update by
  // a far larger relative amount.
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 1000;  // 15 batches of 64 and one of 40: every split is uneven somewhere
  options.epochs = 2;
  const auto one = tools::run_train(options);
  ASSERT_EQ(one.size(), 2u);
  std::vector<tools::EpochResult> spread(2);
  for (const double factor : {1 + std::ldexp(1.0, -22), 1 - std::ldexp(1.0, -22)}) {
    tools::TrainOptions perturbed = options;
    perturbed.learning_rate = options.learning_rate * factor;
    const auto moved = tools::run_train(perturbed);
    ASSERT_EQ(moved.size(), 2u);
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
      spread[epoch].loss =
          std::max(spread[epoch].loss, std::abs(moved[epoch].loss - one[epoch].loss));
      spread[epoch].train_accuracy =
          std::max(spread[epoch].train_accuracy,
                   std::abs(moved[epoch].train_accuracy - one[epoch].train_accuracy));
      spread[epoch].test_accuracy =
          std::max(spread[epoch].test_accuracy,
                   std::abs(moved[epoch].test_accuracy - one[epoch].test_accuracy));
    }
  }
  const std::vector<std::vector<Context>> device_sets = {
      {cpu(0), cpu(1)}, {cpu(0), cpu(1), cpu(2), cpu(3)}, {gpu(0), gpu(1), gpu(2), gpu(3)}};
  for (const std::vector<Context>& devices : device_sets) {
    options.devices = devices;
    const auto many = tools::run_train(options);
    ASSERT_EQ(many.size(), 2u);
    for (std::size_t epoch = 0; epoch < 2; ++epoch) {
      const std::string what = std::to_string(devices.size()) + " devices from " +
                               devices[0].str() + ", epoch " + std::to_string(epoch);
      // The floors: one float32 rounding of the mean loss, and one sample
      // in a thousand flipping on a near tie of two scores.
      EXPECT_NEAR(many[epoch].loss, one[epoch].loss,
                  4 * spread[epoch].loss + 1e-6 * one[epoch].loss)
          << what << " (perturbed by 2^-22: " << spread[epoch].loss << ")";
      EXPECT_NEAR(many[epoch].train_accuracy, one[epoch].train_accuracy,
                  4 * spread[epoch].train_accuracy + 1e-3)
          << what;
      EXPECT_NEAR(many[epoch].test_accuracy, one[epoch].test_accuracy,
                  4 * spread[epoch].test_accuracy + 1e-3)
          << what;
    }
  }
}

TEST(TrainTest, DeviceListsAreParsedOrRefusedClearly) {
  EXPECT_EQ(tools::parse_devices("cpu:0,cpu:1"), (std::vector<Context>{cpu(0), cpu(1)}));
  EXPECT_EQ(tools::parse_devices("gpu:1,cpu:0"), (std::vector<Context>{gpu(1), cpu(0)}));
  EXPECT_EQ(tools::parse_devices("all"), try_all_gpus());
  EXPECT_EQ(tools::parse_devices("gpu:1..3"), (std::vector<Context>{gpu(1), gpu(2), gpu(3)}));
  EXPECT_EQ(tools::parse_devices("cpu:0,gpu:0..1"), (std::vector<Context>{cpu(0), gpu(0), gpu(1)}));
  EXPECT_EQ(tools::parse_devices("gpu:2..2"), (std::vector<Context>{gpu(2)}));
  auto error_of = [](const std::string& text) {
    return testing::error_of([&] { (void)tools::parse_devices(text); });
  };
  EXPECT_NE(error_of("cpu:0,cpu:0").find("cpu(0) is listed twice"), std::string::npos);
  EXPECT_NE(error_of("cpu:0,").find("expected"), std::string::npos) << error_of("cpu:0,");
  EXPECT_NE(error_of("tpu:0").find("expected"), std::string::npos) << error_of("tpu:0");
  EXPECT_NE(error_of("gpu:7").find("gpu(7)"), std::string::npos) << error_of("gpu:7");
  EXPECT_NE(error_of("cpu_pinned:0").find("not a device to run on"), std::string::npos);
  EXPECT_NE(error_of("gpu:2..1").find("first index up to last"), std::string::npos);
  EXPECT_NE(error_of("gpu:0..x").find("expected a range"), std::string::npos);
  EXPECT_NE(error_of("gpu:0..").find("expected a range"), std::string::npos);
  EXPECT_NE(error_of("gpu:0..9").find("gpu(4)"), std::string::npos) << error_of("gpu:0..9");
  EXPECT_NE(error_of("gpu:0..1,gpu:1").find("gpu(1) is listed twice"), std::string::npos);
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

/// A path under the temporary directory, unique to this test run.
std::filesystem::path temporary(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("tagflow-train-test-" +
          std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" + name);
}

TEST(TrainTest, OutputFilesAreCheckedBeforeAnyWork) {
  // A missing data set would be the first error if the files were checked
  // later: the run must stop at the output file, before reading anything.
  tools::TrainOptions options = small_run();
  options.data_dir = temporary("no-data");
  const std::filesystem::path missing = temporary("no-such-directory");
  options.save = missing / "lenet.safetensors";
  EXPECT_EQ(testing::error_of([&] { (void)tools::run_train(options); }),
            "train: --save: expected a file in an existing directory, got '" +
                options.save.string() + "' (no directory '" + missing.string() + "')");
  options.save.clear();
  options.profile = missing / "trace.json";
  EXPECT_EQ(testing::error_of([&] { (void)tools::run_train(options); }),
            "train: --profile: expected a file in an existing directory, got '" +
                options.profile.string() + "' (no directory '" + missing.string() + "')");
  options.profile.clear();
  options.save = std::filesystem::temp_directory_path();
  EXPECT_EQ(testing::error_of([&] { (void)tools::run_train(options); }),
            "train: --save: expected a file, got '" + options.save.string() + "' (a directory)");
  options.save = std::filesystem::path("lenet.safetensors");  // in the working directory
  EXPECT_NE(testing::error_of([&] { (void)tools::run_train(options); }).find("no-data"),
            std::string::npos)
      << "a file name alone is in the working directory, which exists";
}

TEST(TrainTest, ADivergingLossStopsTheRunAndSaysWhatToDo) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 512;
  options.epochs = 3;
  options.learning_rate = 100;
  ::testing::internal::CaptureStdout();
  const std::string error = testing::error_of([&] { (void)tools::run_train(options); });
  const std::string printed = ::testing::internal::GetCapturedStdout();
  // 512 images in batches of 64: the first loss is finite; which batch
  // diverges first is the run's, the same at every run (the seed is fixed).
  EXPECT_EQ(error.rfind("train: the training diverged: expected a finite loss, got ", 0), 0u)
      << error;
  EXPECT_NE(error.find(" in epoch 1/3, batch "), std::string::npos) << error;
  EXPECT_NE(error.find(" of 8 (sgd, learning rate 100); try a lower --lr, such as 10"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("batch 1 of"), std::string::npos) << "the first batch's loss is finite";
  EXPECT_EQ(printed.find("epoch "), std::string::npos) << "no epoch line of a diverged epoch";
}

TEST(TrainTest, SchedulesCountInEpochsAndBecomeUpdates) {
  tools::TrainOptions options;
  options.epochs = 3;
  options.lr_schedule = "factor";
  options.lr_steps = {1};
  EXPECT_EQ(tools::make_schedule(options, 8).step, 8);
  options.lr_schedule = "multifactor";
  options.lr_steps = {1, 2.5};
  EXPECT_EQ(tools::make_schedule(options, 8).steps, (std::vector<std::int64_t>{8, 20}));
  options.lr_schedule = "cosine";
  options.warmup_epochs = 0.5;
  const nn::LrSchedule cosine = tools::make_schedule(options, 8);
  EXPECT_EQ(cosine.max_update, 24) << "the last update of the last epoch";
  EXPECT_EQ(cosine.warmup_steps, 4);
  EXPECT_DOUBLE_EQ(cosine.learning_rate(2, 0.1), 0.05) << "half-way through the warm-up";
  options.warmup_epochs = 3;
  EXPECT_NE(testing::error_of([&] {
              (void)tools::make_schedule(options, 8);
            }).find("--warmup-epochs: expected fewer epochs of warm-up than of training"),
            std::string::npos);
  options.warmup_epochs = 0;
  options.lr_schedule = "factor";
  options.lr_steps = {};
  EXPECT_NE(testing::error_of([&] {
              (void)tools::make_schedule(options, 8);
            }).find("expected one --lr-steps value"),
            std::string::npos);
}

TEST(TrainTest, MomentumWeightDecayClippingAndASchedulesTrain) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 4096;
  options.epochs = 2;
  options.momentum = 0.9;
  options.nesterov = true;
  options.weight_decay = 5e-4;
  options.clip_grad_norm = 5;
  options.lr_schedule = "cosine";
  options.warmup_epochs = 0.5;
  options.learning_rate = 0.05;
  ::testing::internal::CaptureStdout();
  const auto results = tools::run_train(options);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("sgd learning rate 0.05 (cosine(max_update=128, final_lr=0) after 32 "
                         "warm-up updates from 0), Nesterov momentum 0.9, weight decay 0.0005, "
                         "gradients clipped to norm 5"),
            std::string::npos)
      << printed;
  ASSERT_EQ(results.size(), 2u);
  EXPECT_LT(results[1].loss, results[0].loss);
  EXPECT_GT(results[1].test_accuracy, 0.6);
  options.optimizer = "adam";
  EXPECT_NE(testing::error_of([&] {
              (void)tools::run_train(options);
            }).find("--momentum and --nesterov apply to sgd"),
            std::string::npos);
}

/// The bytes of a file.
std::string bytes_of(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// A fresh directory under the temporary one, removed at the end.
class Scratch {
 public:
  Scratch()
      : path_(std::filesystem::temp_directory_path() /
              ("tagflow-resume-" +
               std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "-" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~Scratch() { std::filesystem::remove_all(path_); }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

void expect_same_epochs(const std::vector<tools::EpochResult>& resumed,
                        const std::vector<tools::EpochResult>& whole, std::size_t first) {
  ASSERT_EQ(resumed.size() + first, whole.size());
  for (std::size_t i = 0; i < resumed.size(); ++i) {
    EXPECT_EQ(resumed[i].loss, whole[first + i].loss) << "epoch " << first + i + 1;
    EXPECT_EQ(resumed[i].train_accuracy, whole[first + i].train_accuracy);
    EXPECT_EQ(resumed[i].test_accuracy, whole[first + i].test_accuracy);
  }
}

TEST(TrainTest, ARunStoppedAndResumedEndsAsTheRunNeverStopped) {
  SKIP_WITHOUT_FASHION_MNIST();
  const Scratch dir;
  tools::TrainOptions options = small_run();
  options.limit = 2048;  // 32 batches of 64 per epoch
  options.epochs = 3;
  options.momentum = 0.9;
  options.lr_schedule = "cosine";
  options.warmup_epochs = 0.5;
  options.checkpoint_dir = dir / "whole";
  options.save = dir / "whole.safetensors";
  const auto whole = tools::run_train(options);
  const std::vector<tools::Checkpoint> kept = tools::list_checkpoints(dir / "whole");
  ASSERT_EQ(kept.size(), 3u) << "one per epoch";
  EXPECT_EQ(kept[0].dir.filename(), "epoch-0003") << "newest first";

  // Stopped 8 batches into epoch 2 (as SIGTERM would), then resumed.
  options.checkpoint_dir = dir / "stopped";
  options.save = dir / "resumed.safetensors";
  options.stop_after = 40;
  try {
    (void)tools::run_train(options);
    ADD_FAILURE() << "expected the run to stop";
  } catch (const tools::TrainingStopped& e) {
    EXPECT_EQ(e.checkpoint().filename(), "epoch-0001-batch-00008") << e.what();
    EXPECT_EQ(e.signal(), 0);
  }
  options.stop_after = 0;
  options.resume_dir = dir / "stopped";
  const auto resumed = tools::run_train(options);
  expect_same_epochs(resumed, whole, 1);
  EXPECT_EQ(bytes_of(dir / "resumed.safetensors"), bytes_of(dir / "whole.safetensors"))
      << "the same parameters, bit for bit";

  // Killed between checkpoints: the newest one damaged (half written), a
  // partial directory left; the run goes back to the one before (after
  // epoch 1) and still ends the same.
  std::filesystem::create_directories(dir / "killed");
  std::filesystem::copy(dir / "whole" / "epoch-0001", dir / "killed" / "epoch-0001",
                        std::filesystem::copy_options::recursive);
  std::filesystem::copy(dir / "whole" / "epoch-0002", dir / "killed" / "epoch-0002",
                        std::filesystem::copy_options::recursive);
  std::filesystem::create_directories(dir / "killed" / ".partial-epoch-0003");
  const auto damaged = dir / "killed" / "epoch-0002" / "trainer.safetensors";
  std::filesystem::resize_file(damaged, std::filesystem::file_size(damaged) - 100);
  options.resume_dir = dir / "killed";
  options.checkpoint_dir = dir / "killed";
  options.save = dir / "killed.safetensors";
  ::testing::internal::CaptureStderr();
  const auto after_kill = tools::run_train(options);
  const std::string warnings = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warnings.find("skipping " + (dir / "killed" / "epoch-0002").string()),
            std::string::npos)
      << warnings;
  expect_same_epochs(after_kill, whole, 1);
  EXPECT_EQ(bytes_of(dir / "killed.safetensors"), bytes_of(dir / "whole.safetensors"));

  // Another batch size cannot continue the run exactly: refused.
  options.batch_size = 32;
  EXPECT_NE(testing::error_of([&] {
              (void)tools::run_train(options);
            }).find("was made with batch_size 64, this run has 32"),
            std::string::npos);
  // Nothing to resume from yet (killed before the first checkpoint): the
  // run starts over; checkpoints that all fail to load are refused.
  options.batch_size = 64;
  options.resume_dir = dir / "nothing-here";
  options.checkpoint_dir = dir / "nothing-here";
  options.save = dir / "over.safetensors";
  expect_same_epochs(tools::run_train(options), whole, 0);
  EXPECT_EQ(bytes_of(dir / "over.safetensors"), bytes_of(dir / "whole.safetensors"));
  for (const auto& c : tools::list_checkpoints(dir / "nothing-here")) {
    std::filesystem::resize_file(c.dir / "parameters.safetensors", 10);
  }
  EXPECT_NE(testing::error_of([&] {
              (void)tools::run_train(options);
            }).find("expected a checkpoint that loads in"),
            std::string::npos);
}

TEST(TrainTest, OnlyTheNewestCheckpointsStay) {
  SKIP_WITHOUT_FASHION_MNIST();
  const Scratch dir;
  tools::TrainOptions options = small_run();
  options.limit = 512;
  options.epochs = 4;
  options.checkpoint_dir = dir / "c";
  options.keep_checkpoints = 2;
  (void)tools::run_train(options);
  const auto kept = tools::list_checkpoints(dir / "c");
  ASSERT_EQ(kept.size(), 2u);
  EXPECT_EQ(kept[0].dir.filename(), "epoch-0004");
  EXPECT_EQ(kept[1].dir.filename(), "epoch-0003");
  const auto metadata = tools::validate_checkpoint(kept[0]);
  EXPECT_EQ(metadata.at("model"), "lenet");
  EXPECT_EQ(metadata.at("epoch"), "4");
  EXPECT_EQ(metadata.at("seed"), "1");
  EXPECT_EQ(metadata.at("tagflow.version"), version_string());
}

TEST(TrainTest, CheckpointsAreTheDirectoriesNamedAsOnes) {
  const Scratch dir;
  for (const char* name : {"epoch-0002", "epoch-0002-batch-00017", "epoch-0010", "epoch-0001",
                           "epoch-12", "epoch-0003-batch-17", "epoch-0003-", "epoch-0003-batch-",
                           "epoch-0003x", "epoch-0003-batch-00001x", ".partial-epoch-0009",
                           "Epoch-0004", "epoch-1234567890", "epoch--001"}) {
    std::filesystem::create_directories(dir / "c" / name);
  }
  std::ofstream(dir / "c" / "epoch-0011") << "a file, not a checkpoint";
  const std::vector<tools::Checkpoint> found = tools::list_checkpoints(dir / "c");
  std::vector<std::string> names;
  for (const tools::Checkpoint& c : found) names.push_back(c.dir.filename().string());
  EXPECT_EQ(names, (std::vector<std::string>{"epoch-0010", "epoch-0002-batch-00017", "epoch-0002",
                                             "epoch-0001"}));
  ASSERT_EQ(found.size(), 4u);
  EXPECT_EQ(found[1].position.epoch, 2);
  EXPECT_EQ(found[1].position.batch, 17);
  EXPECT_EQ(found[0].position.epoch, 10);
  EXPECT_EQ(found[0].position.batch, 0);
  for (int epoch : {1, 123456789}) {
    for (std::int64_t batch : {std::int64_t{0}, std::int64_t{1}, std::int64_t{999999999999}}) {
      const tools::CheckpointPosition position{.epoch = epoch, .batch = batch};
      std::filesystem::create_directories(dir / "d" / tools::checkpoint_name(position));
    }
  }
  EXPECT_EQ(tools::list_checkpoints(dir / "d").size(), 6u) << "every name written is read";
  EXPECT_EQ(tools::list_checkpoints(dir / "d")[0].position.batch, 999999999999);
}

TEST(TrainTest, AdamGetsItsOwnDefaultLearningRate) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options;  // the learning rate not set
  options.optimizer = "adam";
  options.limit = 2048;
  options.epochs = 1;
  options.batch_size = 64;
  options.progress = false;
  ::testing::internal::CaptureStdout();
  const auto results = tools::run_train(options);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(printed.find("adam learning rate 0.001\n"), std::string::npos) << printed;
  ASSERT_EQ(results.size(), 1u);
  // With SGD's 0.1, Adam stays at chance (0.1) or diverges.
  EXPECT_GT(results[0].test_accuracy, 0.5);
  EXPECT_EQ(tools::default_learning_rate("sgd"), 0.1);
  EXPECT_EQ(tools::default_learning_rate("adam"), 0.001);
  EXPECT_NE(testing::error_of([] {
              (void)tools::default_learning_rate("lamb");
            }).find("unknown optimizer \"lamb\"; expected sgd or adam"),
            std::string::npos);
}

TEST(TrainTest, AShortRunIsProfiledAndNoProfileIsExplained) {
  SKIP_WITHOUT_FASHION_MNIST();
  // Note [Profiled batches]: 3 batches of 64, shorter than the usual window.
  tools::TrainOptions options = small_run();
  options.limit = 3 * 64;
  options.profile = temporary("short.json");
  ::testing::internal::CaptureStderr();
  (void)tools::run_train(options);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(std::filesystem::exists(options.profile)) << said;
  EXPECT_NE(said.find("(batches 0 to 2 of 3) to " + options.profile.string()), std::string::npos)
      << said;
  std::filesystem::remove(options.profile);

  options.epochs = 0;
  ::testing::internal::CaptureStderr();
  (void)tools::run_train(options);
  said = ::testing::internal::GetCapturedStderr();
  EXPECT_FALSE(std::filesystem::exists(options.profile));
  EXPECT_NE(said.find("train: --profile: no trace written: the trace records training batches "
                      "(5 to 9 of the first epoch), and --epochs 0 trains none"),
            std::string::npos)
      << said;
}

TEST(TrainTest, StatusGoesToStderrAndResultsToStdout) {
  SKIP_WITHOUT_FASHION_MNIST();
  tools::TrainOptions options = small_run();
  options.limit = 256;
  options.save = temporary("status.safetensors");
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  (void)tools::run_train(options);
  const std::string results = ::testing::internal::GetCapturedStdout();
  const std::string status = ::testing::internal::GetCapturedStderr();
  std::filesystem::remove(options.save);
  EXPECT_NE(results.find("\nepoch  1/1: loss "), std::string::npos) << results;
  EXPECT_EQ(results.find("saved"), std::string::npos) << results;
  EXPECT_NE(status.find("train: saved the parameters to " + options.save.string()),
            std::string::npos)
      << status;
}

TEST(TrainTest, TheProgressLineShowsEpochLossSpeedAndTimeLeft) {
  const tools::Progress training{.epoch = 3,
                                 .epochs = 10,
                                 .phase = "train",
                                 .done = 58,
                                 .total = 235,
                                 .loss = 0.4312,
                                 .images_per_second = 23785.4,
                                 .seconds_left = 65.2};
  EXPECT_EQ(tools::format_progress(training),
            "epoch 3/10 train [=======>                      ]    58/235  loss 0.4312  "
            "23785 images/s  1:05 left");
  tools::Progress testing_phase = training;
  testing_phase.phase = "test";
  testing_phase.loss = -1;  // not shown
  testing_phase.seconds_left = 2 * 3600 + 61;
  EXPECT_EQ(tools::format_progress(testing_phase),
            "epoch 3/10 test  [=======>                      ]    58/235  23785 images/s  2:01:01 "
            "left");
  tools::Progress start = training;
  start.done = 0;
  start.images_per_second = 0;  // not known yet: neither shown
  start.seconds_left = -1;
  EXPECT_EQ(tools::format_progress(start),
            "epoch 3/10 train [>                             ]     0/235  loss 0.4312");
  tools::Progress evaluating_only = testing_phase;
  evaluating_only.epochs = 0;  // --epochs 0
  EXPECT_EQ(tools::format_progress(evaluating_only).substr(0, 7), "test  [");
  tools::Progress diverging = training;
  diverging.loss = std::numeric_limits<double>::quiet_NaN();
  EXPECT_NE(tools::format_progress(diverging).find("loss nan"), std::string::npos);
  diverging.loss = 3e30;
  EXPECT_NE(tools::format_progress(diverging).find("loss 3.000e+30"), std::string::npos);
  const tools::Progress widest{.epoch = 100000,
                               .epochs = 100000,
                               .phase = "train",
                               .done = 59999,
                               .total = 60000,
                               .loss = 1e300,
                               .images_per_second = 1e9,
                               .seconds_left = 1e7};
  const std::string line = tools::format_progress(widest);
  EXPECT_LT(line.size(), 100u) << line;
  EXPECT_EQ(line.substr(0, 32), "epoch 100000/100000 train [=====") << "the bar narrows";
}

}  // namespace
}  // namespace tagflow
