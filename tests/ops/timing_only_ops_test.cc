// Operators on timing-only simulated GPUs (TAGFLOW_SIM_GPUS=2:h100-sxm:timing,
// set by this binary's main; Note [Timing-only GPUs] in
// engine/detail/sim_stream.h): kernels are timed, not run; reading values
// on the host is refused with an error saying why; memory is the model's
// 80 GiB, reserved without being used.

#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "engine/engine.h"
#include "engine/error.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/ndarray.h"
#include "storage/memory_stats.h"

namespace tagflow {
namespace {

class TimingOnlyOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& gpus = Engine::get().gpus();
    if (gpus.empty() || !gpus[0].timing_only) {
      GTEST_SKIP() << "needs TAGFLOW_SIM_GPUS=N:MODEL:timing (this binary's default)";
    }
  }
};

TEST_F(TimingOnlyOpsTest, ComputingOnTheDeviceWorksAndReadingItIsRefused) {
  const NDArray a = ones({256, 256}, DType::kFloat32, gpu(0));
  const NDArray c = dot(a, a) + 1.0;
  c.wait_to_read();  // device work is waited for as on any GPU
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      static_cast<void>(c.to_vector<float>());
      FAIL() << "a timing-only GPU's values were read";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("timing-only"), std::string::npos) << what;
      EXPECT_NE(what.find("gpu(0)"), std::string::npos) << what;
    }
  }
  // A CPU operator on the copy inherits the error instead of computing garbage.
  EXPECT_THROW(static_cast<void>((c.copyto(cpu(0)) * 2.0).asscalar<float>()), Error);
  // CPU devices still compute.
  EXPECT_EQ(ones({2}, DType::kFloat32, cpu(0)).to_vector<float>(), (std::vector<float>{1, 1}));
  // The failed copies are reported once more by the next wait_for_all
  // (engine.h), and only once.
  try {
    Engine::get().wait_for_all();
  } catch (const Error&) {
  }
  EXPECT_NO_THROW(Engine::get().wait_for_all());
}

TEST_F(TimingOnlyOpsTest, MemoryIsTheModelsAndCostsTheHostNothing) {
  EXPECT_EQ(Engine::get().gpus()[0].total_memory, 80ull << 30);
  // 60 GiB on a host that has far less: reserved, never touched.
  const NDArray big = ones({60ll << 28}, DType::kFloat32, gpu(1));  // a fill, timed, not run
  big.wait_to_read();
  try {
    NDArray more({30ll << 28}, DType::kFloat32, gpu(1));
    FAIL() << "90 GiB fit in an 80 GiB card";
  } catch (const OutOfMemoryError& e) {
    EXPECT_NE(std::string(e.what()).find("gpu(1)"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tagflow
