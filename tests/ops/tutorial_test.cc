// The tutorials' GPU steps (../shared/seeds: "GPU computing", "Use GPUs"),
// replayed step for step on simulated GPUs: contexts, storage on a device,
// copies, as_in_context identity, computing on the device, printing, and
// the error for inputs on different devices.

#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"

namespace tagflow {
namespace {

std::string printed(const NDArray& a) {
  std::ostringstream os;
  os << a;
  return os.str();
}

TEST(TutorialTest, ContextsPrintAsInTheTutorial) {
  std::ostringstream os;
  os << cpu() << ", " << gpu() << ", " << gpu(1);
  EXPECT_EQ(os.str(), "cpu(0), gpu(0), gpu(1)");
  EXPECT_EQ(num_gpus(), 2);
  EXPECT_EQ(try_gpu(), gpu(0));
  EXPECT_EQ(try_gpu(10), cpu(0));
  EXPECT_EQ(try_all_gpus(), (std::vector<Context>{gpu(0), gpu(1)}));
  // Simulated GPUs (the test main's) run host kernels: not real GPUs.
  EXPECT_FALSE(is_real_gpu(gpu(0)));
  EXPECT_FALSE(is_real_gpu(gpu(10)));
  EXPECT_FALSE(is_real_gpu(cpu(0)));
}

TEST(TutorialTest, ArraysLiveOnTheCpuByDefault) {
  NDArray x = array({1, 2, 3});
  EXPECT_EQ(x.context(), cpu(0));
  EXPECT_EQ(printed(x), "[1. 2. 3.]\n<NDArray 3 @cpu(0)>");
}

TEST(TutorialTest, StorageOnTheGpu) {
  NDArray a = array({1, 2, 3}, gpu());
  NDArray b = zeros({3, 2}, DType::kFloat32, gpu());
  EXPECT_EQ(printed(a), "[1. 2. 3.]\n<NDArray 3 @gpu(0)>");
  EXPECT_EQ(printed(b), "[[0. 0.]\n [0. 0.]\n [0. 0.]]\n<NDArray 3x2 @gpu(0)>");
  try {
    (void)array({1, 2, 3}, gpu(10));
    FAIL() << "gpu(10) does not exist";
  } catch (const DeviceError& e) {
    EXPECT_STREQ(e.what(), "gpu(10) does not exist: 2 GPUs (gpu(0)..gpu(1), simulated)");
  }
}

TEST(TutorialTest, CopiesBetweenDevicesAndAsInContextIdentity) {
  NDArray x = array({1, 2, 3});
  NDArray y = x.copyto(gpu());
  NDArray z = x.as_in_context(gpu());
  EXPECT_EQ(printed(y), "[1. 2. 3.]\n<NDArray 3 @gpu(0)>");
  EXPECT_EQ(printed(z), "[1. 2. 3.]\n<NDArray 3 @gpu(0)>");
  NDArray yy = y.as_in_context(gpu());
  NDArray zz = z.copyto(gpu());
  EXPECT_TRUE(yy.same_as(y));   // `yy is y`: True
  EXPECT_FALSE(zz.same_as(z));  // `zz is z`: False
  EXPECT_NE(zz.raw_data(), z.raw_data()) << "copyto always allocates";
}

TEST(TutorialTest, ComputingOnTheGpu) {
  NDArray x = array({1, 2, 3});
  NDArray y = x.copyto(gpu());
  NDArray z = x.as_in_context(gpu());
  NDArray r = exp(z + 2) * y;
  EXPECT_EQ(r.context(), gpu(0));
  EXPECT_EQ(printed(r), "[ 20.085537 109.1963   445.2395  ]\n<NDArray 3 @gpu(0)>");
}

TEST(TutorialTest, InputsOnDifferentDevicesAreAnErrorNotACopy) {
  NDArray x = array({1, 2, 3});
  NDArray y = x.copyto(gpu());
  try {
    (void)(x + y);
    FAIL() << "x is on cpu(0), y on gpu(0)";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "broadcast_add: all inputs must live on the same context, but the first argument "
                 "is on cpu(0) while the 2nd argument is on gpu(0). Nothing is copied implicitly: "
                 "move one with copyto() or as_in_context()");
  }
}

TEST(TutorialTest, HostAccessCopiesBackFromTheGpu) {
  NDArray y = array({1, 2, 3}, gpu(1));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ((y * 2).to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(array({7}, gpu(1)).asscalar<float>(), 7.f);
}

}  // namespace
}  // namespace tagflow
