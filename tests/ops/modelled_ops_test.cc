// Operators on simulated GPUs that keep modelled time (TAGFLOW_SIM_GPUS=
// 4:h100-sxm, set by this binary's main): each kernel lasts what the H100
// model gives for the work worked out here by hand from the shapes (Note
// [Operator work] in ops/kernels/kernel_work.h), as the profiler reports
// it, and computes what the same operator computes on cpu(0).

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "engine/device_model.h"
#include "engine/engine.h"
#include "engine/profiler.h"
#include "ops/conv.h"
#include "ops/creation.h"
#include "ops/elementwise.h"
#include "ops/linalg.h"
#include "ops/ndarray.h"
#include "ops/random.h"

namespace tagflow {
namespace {

class ModelledOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto& gpus = Engine::get().gpus();
    if (gpus.size() < 2 || gpus[0].model != "h100-sxm") {
      GTEST_SKIP() << "needs TAGFLOW_SIM_GPUS=N:h100-sxm (this binary's default)";
    }
  }
  /// ns of a kernel doing `flops` and moving `bytes` on the H100 model
  /// (float32: 66.9 TFLOP/s; 3.35 TB/s; 3 us per launch).
  static std::int64_t h100_ns(double flops, double bytes, double peak = 66.9e12) {
    return std::llround((std::max(flops / peak, bytes / 3.35e12) + 3e-6) * 1e9);
  }
  /// Runs `body` under the profiler; the device span of the operation `name`
  /// (the last one of that name).
  template <typename Body>
  static std::int64_t span_of(const char* name, Body body) {
    Engine::get().wait_for_all();
    profiler::clear();
    {
      profiler::Scope profiling;
      body();
      Engine::get().wait_for_all();
    }
    std::int64_t span = -1;
    for (const profiler::OpEvent& e : profiler::collect().ops) {
      if (e.name == name) span = e.device_ended_ns - e.device_started_ns;
    }
    profiler::clear();
    return span;
  }
};

TEST_F(ModelledOpsTest, MatrixProductLastsItsFlopsAtPeak) {
  const NDArray a = random::uniform(-1, 1, {512, 1024}, gpu(0));
  const NDArray b = random::uniform(-1, 1, {1024, 256}, gpu(0));
  NDArray c;
  const std::int64_t span = span_of("dot", [&] { c = dot(a, b); });
  // 2·512·1024·256 flops; (512·1024 + 1024·256 + 512·256)·4 bytes.
  EXPECT_EQ(span, h100_ns(2.0 * 512 * 1024 * 256, (512.0 * 1024 + 1024 * 256 + 512 * 256) * 4));
  // The values are computed: those of cpu(0), within float32 rounding of
  // sums of 1024 products in another order.
  const std::vector<float> got = c.to_vector<float>();
  const std::vector<float> want = dot(a.copyto(cpu(0)), b.copyto(cpu(0))).to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

TEST_F(ModelledOpsTest, HalfPrecisionProductsRunAtTheTensorCoreRate) {
  const NDArray a = random::uniform(-1, 1, {2048, 2048}, gpu(0)).astype(DType::kFloat16);
  const NDArray b = random::uniform(-1, 1, {2048, 2048}, gpu(0)).astype(DType::kFloat16);
  const std::int64_t span = span_of("dot", [&] { dot(a, b).wait_to_read(); });
  EXPECT_EQ(span, h100_ns(2.0 * 2048 * 2048 * 2048, 3.0 * 2048 * 2048 * 2, 989.4e12));
}

TEST_F(ModelledOpsTest, ElementwiseOperatorsAreMemoryBound) {
  const NDArray x = ones({1 << 20}, DType::kFloat32, gpu(0));
  const NDArray y = ones({1 << 20}, DType::kFloat32, gpu(0));
  const std::int64_t span = span_of("broadcast_add", [&] { (x + y).wait_to_read(); });
  EXPECT_EQ(span, h100_ns(1 << 20, 3.0 * (1 << 20) * 4));
}

TEST_F(ModelledOpsTest, ConvolutionLastsItsFlopsAtPeak) {
  const NDArray x = random::uniform(-1, 1, {8, 16, 32, 32}, gpu(0));
  const NDArray w = random::uniform(-1, 1, {32, 16, 3, 3}, gpu(0));
  NDArray y;
  Conv2DOptions options;
  options.padding = {1, 1};
  const std::int64_t span = span_of("conv2d", [&] { y = conv2d(x, w, NDArray(), options); });
  // Each of the 8·32·32·32 outputs sums 16·3·3 products.
  const double flops = 2.0 * 8 * 32 * 32 * 32 * 16 * 9;
  const double bytes = (8.0 * 16 * 32 * 32 + 8.0 * 32 * 32 * 32 + 32.0 * 16 * 9) * 4;
  EXPECT_EQ(span, h100_ns(flops, bytes));
  const NDArray on_cpu = conv2d(x.copyto(cpu(0)), w.copyto(cpu(0)), NDArray(), options);
  const std::vector<float> got = y.to_vector<float>(), want = on_cpu.to_vector<float>();
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << i;
}

TEST_F(ModelledOpsTest, CopiesCrossTheirLink) {
  const NDArray x = ones({1 << 20}, DType::kFloat32, gpu(0));
  x.wait_to_read();
  // gpu(0) -> gpu(1) over NVLink: 4 MiB at 450 GB/s plus 3 us.
  const std::int64_t peer = span_of("copy", [&] { x.copyto(gpu(1)).wait_to_read(); });
  EXPECT_EQ(peer, std::llround((4.0 * (1 << 20) / 450e9 + 3e-6) * 1e9));
  // Pageable host memory -> gpu(0) over PCIe 5.0: 32 GB/s plus 12 us.
  const NDArray host = ones({1 << 20}, DType::kFloat32, cpu(0));
  host.wait_to_read();
  const std::int64_t upload = span_of("copy", [&] { host.copyto(gpu(0)).wait_to_read(); });
  EXPECT_EQ(upload, std::llround((4.0 * (1 << 20) / 32e9 + 12e-6) * 1e9));
}

}  // namespace
}  // namespace tagflow
