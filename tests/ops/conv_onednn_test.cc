// oneDNN's convolution kernels called directly (ops/kernels/conv_onednn.h):
// every pass of the geometries of LeNet and ResNet-18, on batches that the
// calls and the weight gradient's chunks cut unevenly, against direct loops
// in double precision; the direct kernels within float32's bound, Winograd's
// within its own, each taken where this processor has it; and the version
// that `tagflow info` reports.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <tbb/global_control.h>
#include <oneapi/dnnl/dnnl.hpp>

#include "ops/kernels/conv_kernels.h"
#include "ops/kernels/conv_onednn.h"
#include "ops/kernels/conv_onednn_plan.h"
#include "tagflow/tagflow.h"
#include "tests/ops/conv_reference.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::ConvCase;
using testing::output_shape;
using testing::random_floats;
using testing::reference_conv;
using testing::reference_conv_gradients;
using testing::ReferenceGradients;
using testing::Values;

/// The kernel's geometry for one case, as conv2d makes it.
detail::ConvGeometry geometry_of(const ConvCase& c) {
  const Shape ys = output_shape(c.x, c.w, c.options);
  detail::ConvGeometry g;
  g.batch = c.x[0];
  g.in_channels = c.x[1];
  g.in_h = c.x[2];
  g.in_w = c.x[3];
  g.out_channels = c.w[0];
  g.out_h = ys[2];
  g.out_w = ys[3];
  g.kernel_h = static_cast<int>(c.w[2]);
  g.kernel_w = static_cast<int>(c.w[3]);
  g.stride_h = c.options.stride[0];
  g.stride_w = c.options.stride[1];
  g.pad_h = c.options.padding[0];
  g.pad_w = c.options.padding[1];
  g.dilation_h = c.options.dilation[0];
  g.dilation_w = c.options.dilation[1];
  g.groups = c.options.groups;
  return g;
}

/// Runs the three passes of `c` through oneDNN directly (each must take the
/// geometry, each pass with a kernel whose name holds `kernel`) and checks
/// every element against the double reference within `bound` times the sum
/// of its terms' magnitudes (0: float32's bound for a sum in any order,
/// (K + 2) 2^-24); returns the largest error so measured.
double check_onednn_passes(const ConvCase& c, bool winograd, const std::string& kernel,
                           double bound, std::uint32_t seed) {
  SCOPED_TRACE(c.name);
  using detail::onednn::Pass;
  for (const Pass pass : {Pass::kForward, Pass::kBackwardData, Pass::kBackwardWeight}) {
    const auto plan = detail::onednn::choose_plan(pass, geometry_of(c), c.x[0],
                                                  pass != Pass::kBackwardData, winograd);
    if (plan == nullptr) {
      ADD_FAILURE() << "pass " << static_cast<int>(pass) << ": oneDNN has no kernel for it";
      continue;
    }
    EXPECT_NE(plan->implementation.find(kernel), std::string::npos)
        << "pass " << static_cast<int>(pass) << " runs " << plan->implementation;
  }
  const Shape ys = output_shape(c.x, c.w, c.options);
  const std::int64_t terms =
      std::max({c.w[1] * c.w[2] * c.w[3], c.w[0] * c.w[2] * c.w[3], ys[0] * ys[2] * ys[3]});
  if (bound == 0) bound = static_cast<double>(terms + 2) * std::ldexp(1.0, -24);
  const std::vector<float> xh = random_floats(static_cast<std::size_t>(c.x.size()), -1, 1, ++seed);
  const std::vector<float> wh = random_floats(static_cast<std::size_t>(c.w.size()), -1, 1, ++seed);
  const std::vector<float> bh = random_floats(static_cast<std::size_t>(c.w[0]), -1, 1, ++seed);
  const std::vector<float> dyh = random_floats(static_cast<std::size_t>(ys.size()), -1, 1, ++seed);
  const Values xd(xh.begin(), xh.end()), wd(wh.begin(), wh.end()), bd(bh.begin(), bh.end());
  Values y_magnitude;
  const Values y = reference_conv(xd, c.x, wd, c.w, &bd, c.options, &y_magnitude);
  const ReferenceGradients grads =
      reference_conv_gradients(xd, c.x, wd, c.w, Values(dyh.begin(), dyh.end()), c.options);
  const detail::ConvGeometry g = geometry_of(c);
  std::vector<float> got_y(y.size(), NAN), got_dx(xh.size(), NAN), got_dw(wh.size(), NAN),
      got_db(bh.size(), NAN);
  // The bias gradient, dy summed per output channel, and its terms' magnitudes.
  Values db(bh.size(), 0), db_magnitude(bh.size(), 0);
  for (std::int64_t i = 0; i < ys.size(); ++i) {
    const auto channel = static_cast<std::size_t>(i / (ys[2] * ys[3]) % ys[1]);
    db[channel] += dyh[static_cast<std::size_t>(i)];
    db_magnitude[channel] += std::abs(dyh[static_cast<std::size_t>(i)]);
  }
  namespace onednn = detail::onednn;
  EXPECT_TRUE(
      onednn::conv2d_forward(g, xh.data(), wh.data(), bh.data(), got_y.data(), cpu(0), winograd));
  EXPECT_TRUE(
      onednn::conv2d_backward_data(g, wh.data(), dyh.data(), got_dx.data(), cpu(0), winograd));
  EXPECT_TRUE(onednn::conv2d_backward_weight(g, xh.data(), dyh.data(), got_dw.data(), got_db.data(),
                                             cpu(0), winograd));
  double largest = 0;
  const auto expect_within = [&](const std::vector<float>& got, const Values& expected,
                                 const Values& magnitude, const char* what) {
    int reported = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const double error = std::abs(got[i] - expected[i]);
      largest = std::max(largest, error / (magnitude[i] + 1e-30));
      const double tolerance = bound * magnitude[i] + 1e-30;
      if (!(error <= tolerance) && reported++ < 5) {
        ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected "
                      << expected[i] << " within " << tolerance;
      }
    }
  };
  expect_within(got_y, y, y_magnitude, "forward");
  expect_within(got_dx, grads.dx, grads.dx_magnitude, "input gradient");
  expect_within(got_dw, grads.dw, grads.dw_magnitude, "weight gradient");
  expect_within(got_db, db, db_magnitude, "bias gradient");
  return largest;
}

TEST(ConvOneDnnTest, OneDnnRunsEveryPassOfTheNetworksLayersWithinTheFloat32Bound) {
  // oneDNN's direct kernels called directly: they must take these geometries
  // (those of LeNet and ResNet-18, and batches that the calls and the weight
  // gradient's chunks cut unevenly), and every pass must stay within the
  // bound of float32 sums in any order.
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1, batch 37", {37, 16, 6, 6}, {9, 16, 3, 3}, {.padding = {1, 1}}},
      {"1x1 stride 2 (the shortcut)", {5, 16, 9, 9}, {32, 16, 1, 1}, {.stride = {2, 2}}},
      {"3x3 stride 2 pad 1", {4, 16, 7, 7}, {32, 16, 3, 3}, {.stride = {2, 2}, .padding = {1, 1}}},
      {"one input channel, 5x5 (LeNet's first)", {19, 1, 12, 12}, {6, 1, 5, 5}, {}},
      {"6 to 16 channels, 5x5 (LeNet's second)", {21, 6, 8, 8}, {16, 6, 5, 5}, {}},
      {"3x3 pad 1 on 14x14 (Winograd's, not taken)",
       {3, 16, 14, 14},
       {16, 16, 3, 3},
       {.padding = {1, 1}}},
  };
  std::uint32_t seed = 700;
  for (const ConvCase& c : cases) (void)check_onednn_passes(c, false, "jit", 0, seed += 10);
}

TEST(ConvOneDnnTest, TheWeightGradientOfSmallOutputsIsCutByChannelsWithinTheFloat32Bound) {
  // Layers of 64 output positions or fewer and 128 channels or more: each
  // call takes a slice of the output channels over the whole batch (in the
  // first case the last slice is shorter), and writes its part of the
  // gradient and the bias's.
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1 on 4x4, 144 channels", {5, 16, 4, 4}, {144, 16, 3, 3}, {.padding = {1, 1}}},
      {"3x3 stride 2 to 4x4, 128 channels",
       {3, 24, 7, 7},
       {128, 24, 3, 3},
       {.stride = {2, 2}, .padding = {1, 1}}},
      {"1x1 stride 2 to 4x4, 160 channels (the shortcut)",
       {4, 32, 7, 7},
       {160, 32, 1, 1},
       {.stride = {2, 2}}},
  };
  const std::vector<std::int64_t> per_call = {64, 64, 80};
  std::uint32_t seed = 800;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(detail::onednn::weight_gradient_channels_per_call(geometry_of(cases[i])), per_call[i])
        << cases[i].name;
    (void)check_onednn_passes(cases[i], false, "jit", 0, seed += 10);
  }
  // Not cut by channels: larger outputs, or fewer channels.
  const ConvCase larger = {"", {1, 16, 9, 9}, {128, 16, 3, 3}, {.padding = {1, 1}}};
  const ConvCase fewer = {"", {1, 16, 4, 4}, {112, 16, 3, 3}, {.padding = {1, 1}}};
  EXPECT_EQ(detail::onednn::weight_gradient_channels_per_call(geometry_of(larger)), 0);
  EXPECT_EQ(detail::onednn::weight_gradient_channels_per_call(geometry_of(fewer)), 0);
}

TEST(ConvOneDnnTest, TheWeightGradientHasTheSameBitsOnOneThreadAsOnAll) {
  // Cut by channels and by chunks of the batch: the cuts follow the
  // geometry, not the threads.
  const std::vector<ConvCase> cases = {
      {"by channels", {6, 16, 4, 4}, {144, 16, 3, 3}, {.padding = {1, 1}}},
      {"by chunks", {37, 16, 6, 6}, {9, 16, 3, 3}, {.padding = {1, 1}}},
  };
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(c.name);
    const detail::ConvGeometry g = geometry_of(c);
    const Shape ys = output_shape(c.x, c.w, c.options);
    const std::vector<float> x = random_floats(static_cast<std::size_t>(c.x.size()), -1, 1, 31);
    const std::vector<float> dy = random_floats(static_cast<std::size_t>(ys.size()), -1, 1, 32);
    const auto gradient = [&] {
      std::vector<float> dw(static_cast<std::size_t>(c.w.size())),
          db(static_cast<std::size_t>(c.w[0]));
      EXPECT_TRUE(detail::onednn::conv2d_backward_weight(g, x.data(), dy.data(), dw.data(),
                                                         db.data(), cpu(0), false));
      dw.insert(dw.end(), db.begin(), db.end());
      return dw;
    };
    const std::vector<float> all = gradient();
    std::vector<float> one;
    {
      const tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
      one = gradient();
    }
    ASSERT_EQ(all.size(), one.size());
    EXPECT_EQ(std::memcmp(all.data(), one.data(), all.size() * sizeof(float)), 0);
  }
}

TEST(ConvOneDnnTest, TheCpuKernelLibrariesNameOneDnnAndItsVersion) {
  const auto libraries = cpu_kernel_libraries();
  ASSERT_EQ(libraries.size(), 3u);
  EXPECT_EQ(libraries[0].first, "OpenBLAS");
  EXPECT_NE(libraries[0].second.find("OpenBLAS 0."), std::string::npos) << libraries[0].second;
  EXPECT_EQ(libraries[1].first, "oneDNN");
  const dnnl_version_t* v = dnnl_version();
  EXPECT_EQ(libraries[1].second.rfind(std::to_string(v->major) + "." + std::to_string(v->minor) +
                                          "." + std::to_string(v->patch) + ", ",
                                      0),
            0u)
      << libraries[1].second;
  EXPECT_NE(libraries[1].second.find(" kernels"), std::string::npos) << libraries[1].second;
  EXPECT_EQ(libraries[2].first, "matrix products");
  EXPECT_NE(libraries[2].second.find("TAGFLOW_CPU_GEMM"), std::string::npos) << libraries[2].second;
}

TEST(ConvOneDnnTest, WinogradIsWithinItsBound) {
  // Winograd's F(4x4, 3x3) transforms its inputs, weights and outputs with
  // constants up to 8 and so rounds more than a direct sum: each element
  // within 2e-5 of the sum of its terms' magnitudes (measured: about 7e-7
  // here), not within float32's bound. oneDNN 2.6 has it for AVX-512 only;
  // elsewhere (another processor, or ONEDNN_MAX_CPU_ISA below AVX-512) the
  // direct kernels must serve these geometries instead.
  const bool avx512 =
      (dnnl_get_effective_cpu_isa() & dnnl_cpu_isa_avx512_core) == dnnl_cpu_isa_avx512_core;
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1 on 14x14, batch 9", {9, 16, 14, 14}, {16, 16, 3, 3}, {.padding = {1, 1}}},
      {"3x3 pad 1 on 28x28, 32 to 16 channels",
       {2, 32, 28, 28},
       {16, 32, 3, 3},
       {.padding = {1, 1}}},
  };
  std::uint32_t seed = 900;
  for (const ConvCase& c : cases) {
    const double largest = check_onednn_passes(c, true, avx512 ? "wino" : "jit", 2e-5, seed += 10);
    std::printf("%s: largest error %.3g of the terms' magnitude\n", c.name.c_str(), largest);
  }
}

}  // namespace
}  // namespace tagflow
