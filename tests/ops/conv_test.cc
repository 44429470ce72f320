// conv2d against a direct double-precision loop on every device, for many
// geometries (stride, padding, dilation, groups and depthwise, 1x1 and 5x5
// kernels, batches of 1 to 20, non-square everything); grouped and dilated
// convolutions' forward and both backward passes within 1e-5 of double
// precision (what float32 gives and TF32 does not); identical bits on every
// device and with one thread or many; gradients of the input, weights and
// bias against finite differences; empty batches, views as inputs, and the
// errors.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ops/kernels/conv_kernels.h"
#include "tagflow/tagflow.h"
#include "tests/ops/conv_reference.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::ConvCase;
using testing::error_of;
using testing::output_shape;
using testing::random_floats;
using testing::reference_conv;
using testing::reference_conv_gradients;
using testing::ReferenceGradients;
using testing::Values;

/// Runs each test with each way the CPU kernels convolve (TAGFLOW_CPU_CONV):
/// oneDNN where it has a kernel (with and without Winograd's algorithm, which
/// none of these geometries suits: see WinogradIsWithinItsBound), and
/// lowering to matrix products always.
class ConvKernels : public ::testing::TestWithParam<CpuConv> {
 protected:
  void SetUp() override { detail::cpu_kernels::override_cpu_conv(GetParam()); }
  void TearDown() override { detail::cpu_kernels::override_cpu_conv(std::nullopt); }
};

INSTANTIATE_TEST_SUITE_P(Cpu, ConvKernels,
                         ::testing::Values(CpuConv::kAuto, CpuConv::kDirect, CpuConv::kIm2col),
                         [](const ::testing::TestParamInfo<CpuConv>& kind) {
                           return std::string(to_string(kind.param));
                         });

std::vector<ConvCase> forward_cases() {
  return {
      {"3x3 pad 1", {2, 3, 8, 8}, {4, 3, 3, 3}, {.padding = {1, 1}}},
      {"stride 2, no bias", {3, 2, 9, 7}, {5, 2, 3, 3}, {.stride = {2, 2}}, false},
      {"dilation 2, pad 2", {1, 3, 10, 10}, {2, 3, 3, 3}, {.padding = {2, 2}, .dilation = {2, 2}}},
      {"2 groups", {2, 4, 6, 6}, {6, 2, 3, 3}, {.groups = 2}},
      {"depthwise", {3, 5, 7, 7}, {5, 1, 3, 3}, {.padding = {1, 1}, .groups = 5}},
      {"depthwise x2, no bias", {1, 3, 6, 5}, {6, 1, 3, 3}, {.groups = 3}, false},
      {"1x1", {3, 8, 5, 5}, {4, 8, 1, 1}, {}},
      {"1x1 stride 2", {2, 4, 6, 6}, {3, 4, 1, 1}, {.stride = {2, 2}}},
      {"5x5 pad 2", {3, 3, 12, 12}, {6, 3, 5, 5}, {.padding = {2, 2}}},
      {"non-square",
       {2, 3, 9, 11},
       {4, 3, 2, 5},
       {.stride = {2, 1}, .padding = {1, 2}, .dilation = {1, 2}}},
      {"kernel fills the padded input", {1, 2, 4, 4}, {3, 2, 6, 6}, {.padding = {1, 1}}},
      {"batch 20", {20, 3, 6, 6}, {4, 3, 3, 3}, {.padding = {1, 1}}},
      {"all extents 1", {1, 1, 1, 1}, {1, 1, 1, 1}, {}},
      {"groups, stride, dilation, pad",
       {2, 4, 10, 8},
       {4, 2, 3, 3},
       {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}, .groups = 2}},
  };
}

TEST_P(ConvKernels, ForwardMatchesDirectLoopsOnEveryDevice) {
  std::uint32_t seed = 10;
  for (const ConvCase& c : forward_cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<float> xh =
        random_floats(static_cast<std::size_t>(c.x.size()), -1, 1, ++seed);
    const std::vector<float> wh =
        random_floats(static_cast<std::size_t>(c.w.size()), -1, 1, ++seed);
    const std::vector<float> bh = random_floats(static_cast<std::size_t>(c.w[0]), -1, 1, ++seed);
    const Values bd(bh.begin(), bh.end());
    Values magnitude;
    const Values expected =
        reference_conv(Values(xh.begin(), xh.end()), c.x, Values(wh.begin(), wh.end()), c.w,
                       c.bias ? &bd : nullptr, c.options, &magnitude);
    // Each output is a float32 sum of K = C/groups * kh * kw products plus the
    // bias: within (K + 2) u sum|terms| of the exact value, u = 2^-24
    // (the worst case of any summation order).
    const double k = static_cast<double>(c.w[1] * c.w[2] * c.w[3]);
    std::vector<float> first;
    for (Context ctx : all_devices()) {
      const NDArray b = c.bias ? array(bh, {c.w[0]}, ctx) : NDArray();
      const NDArray y = conv2d(array(xh, c.x, ctx), array(wh, c.w, ctx), b, c.options);
      ASSERT_EQ(y.shape(), output_shape(c.x, c.w, c.options));
      ASSERT_EQ(y.context(), ctx);
      const std::vector<float> got = y.to_vector<float>();
      ASSERT_EQ(got.size(), expected.size());
      int reported = 0;
      for (std::size_t i = 0; i < got.size(); ++i) {
        const double bound = (k + 2) * std::ldexp(magnitude[i], -24) + 1e-30;
        if (std::abs(got[i] - expected[i]) > bound && reported++ < 5) {
          ADD_FAILURE() << ctx << ": element " << i << " is " << got[i] << ", expected "
                        << expected[i] << " within " << bound;
        }
      }
      // The same CPU kernel serves every device here: the same bits.
      if (first.empty()) first = got;
      EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)), 0) << ctx;
    }
  }
}

/// Checks d sum(conv2d(x, w, b) * r) / d{x, w, b} against central differences
/// of the double reference (step 1e-6: exact to ~1e-9), as autograd_test.cc
/// does; the tolerance covers the float32 forward and backward passes.
void check_conv_gradients(const ConvCase& c, Context ctx) {
  SCOPED_TRACE(c.name + " on " + ctx.str());
  std::vector<Shape> shapes = {c.x, c.w};
  if (c.bias) shapes.push_back(Shape{c.w[0]});
  std::vector<std::vector<float>> host;
  std::vector<NDArray> inputs;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    host.push_back(random_floats(static_cast<std::size_t>(shapes[i].size()), -1, 1, 50 + i));
    inputs.push_back(array(host.back(), shapes[i], ctx));
    inputs.back().attach_grad();
  }
  const Shape ys = output_shape(c.x, c.w, c.options);
  const std::vector<float> r = random_floats(static_cast<std::size_t>(ys.size()), -1, 1, 7);
  {
    auto recording = autograd::record();
    const NDArray y = conv2d(inputs[0], inputs[1], c.bias ? inputs[2] : NDArray(), c.options);
    sum(y * array(r, ys, ctx)).backward();
  }
  std::vector<Values> x;
  for (const auto& h : host) x.emplace_back(h.begin(), h.end());
  testing::expect_gradients_match_finite_differences(x, inputs, [&] {
    return testing::weighted_sum(
        reference_conv(x[0], c.x, x[1], c.w, c.bias ? &x[2] : nullptr, c.options), r);
  });
}

TEST_P(ConvKernels, GradientsOfInputWeightsAndBiasMatchFiniteDifferences) {
  const std::vector<ConvCase> cases = {
      {"3x3 pad 1", {2, 3, 5, 5}, {4, 3, 3, 3}, {.padding = {1, 1}}},
      {"stride 2, dilation 2, no bias",
       {2, 2, 9, 8},
       {3, 2, 3, 3},
       {.stride = {2, 2}, .padding = {1, 1}, .dilation = {2, 2}},
       false},
      {"2 groups", {1, 4, 6, 5}, {6, 2, 2, 3}, {.stride = {1, 2}, .padding = {0, 1}, .groups = 2}},
      {"depthwise", {2, 3, 5, 5}, {3, 1, 3, 3}, {.padding = {1, 1}, .groups = 3}},
      {"1x1", {3, 4, 3, 3}, {2, 4, 1, 1}, {}},
      {"5x5 pad 2", {1, 2, 6, 6}, {2, 2, 5, 5}, {.padding = {2, 2}}},
      {"batch 20", {20, 2, 4, 4}, {3, 2, 3, 3}, {.padding = {1, 1}}},
  };
  for (const ConvCase& c : cases) {
    for (Context ctx : all_devices()) check_conv_gradients(c, ctx);
  }
}

/// Every element of `got` within 1e-5 of the sum of the absolute values of
/// its terms from the exact value: float32 arithmetic in any order stays
/// within (K + 2) 2^-24 of it for the K <= 150 terms of these cases (under
/// 1e-5), where TF32 (inputs rounded to 2^-11) does not. Relative to the
/// magnitude, not to the value: a sum of terms of both signs may cancel.
void expect_within_1e5(const std::vector<float>& got, const Values& expected,
                       const Values& magnitude, const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  int reported = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double bound = 1e-5 * magnitude[i] + 1e-30;
    if (std::abs(got[i] - expected[i]) > bound && reported++ < 5) {
      ADD_FAILURE() << what << ": element " << i << " is " << got[i] << ", expected " << expected[i]
                    << " within " << bound;
    }
  }
}

TEST_P(ConvKernels, GroupedAndDilatedPassesAreWithin1e5OfDoublePrecisionOnEveryDevice) {
  // Forward, input gradient and weight gradient, each against its own
  // double-precision sum. Each pass sums at most 150 terms per element.
  const std::vector<ConvCase> cases = {
      {"2 groups, dilation 2, pad 2",
       {2, 4, 7, 6},
       {6, 2, 3, 3},
       {.padding = {2, 2}, .dilation = {2, 2}, .groups = 2}},
      {"depthwise x2, stride 2, dilation (2, 3)",
       {3, 3, 10, 11},
       {6, 1, 3, 2},
       {.stride = {2, 2}, .padding = {1, 2}, .dilation = {2, 3}, .groups = 3}},
      {"4 groups, dilation (3, 1)",
       {1, 8, 12, 10},
       {4, 2, 2, 3},
       {.padding = {0, 1}, .dilation = {3, 1}, .groups = 4}},
      {"dilation 2, 1 group", {2, 3, 7, 7}, {4, 3, 3, 3}, {.padding = {2, 2}, .dilation = {2, 2}}},
  };
  std::uint32_t seed = 300;
  for (const ConvCase& c : cases) {
    const Shape ys = output_shape(c.x, c.w, c.options);
    // The largest number of terms of any element of any pass.
    const std::int64_t terms =
        std::max({c.w[1] * c.w[2] * c.w[3], c.w[0] / c.options.groups * c.w[2] * c.w[3],
                  ys[0] * ys[2] * ys[3]});
    ASSERT_LE(terms, 150) << c.name << ": the 1e-5 bound needs (K + 2) 2^-24 below it";
    const std::vector<float> xh =
        random_floats(static_cast<std::size_t>(c.x.size()), -1, 1, ++seed);
    const std::vector<float> wh =
        random_floats(static_cast<std::size_t>(c.w.size()), -1, 1, ++seed);
    const std::vector<float> dyh =
        random_floats(static_cast<std::size_t>(ys.size()), -1, 1, ++seed);
    const Values xd(xh.begin(), xh.end());
    const Values wd(wh.begin(), wh.end());
    Values y_magnitude;
    const Values y = reference_conv(xd, c.x, wd, c.w, nullptr, c.options, &y_magnitude);
    const ReferenceGradients grads =
        reference_conv_gradients(xd, c.x, wd, c.w, Values(dyh.begin(), dyh.end()), c.options);
    for (Context ctx : all_devices()) {
      SCOPED_TRACE(c.name + " on " + ctx.str());
      NDArray x = array(xh, c.x, ctx);
      NDArray w = array(wh, c.w, ctx);
      x.attach_grad();
      w.attach_grad();
      NDArray out;
      {
        auto recording = autograd::record();
        out = conv2d(x, w, NDArray(), c.options);
        // d sum(out * dy) / d out = dy exactly.
        sum(out * array(dyh, ys, ctx)).backward();
      }
      expect_within_1e5(out.to_vector<float>(), y, y_magnitude, "forward");
      expect_within_1e5(x.grad().to_vector<float>(), grads.dx, grads.dx_magnitude,
                        "input gradient");
      expect_within_1e5(w.grad().to_vector<float>(), grads.dw, grads.dw_magnitude,
                        "weight gradient");
    }
  }
}

TEST_P(ConvKernels, OnlyTheNeededGradientsAreComputedAndAgreeAcrossDevices) {
  const Shape xs{17, 3, 6, 6}, ws{4, 3, 3, 3};
  const std::vector<float> xh = random_floats(static_cast<std::size_t>(xs.size()), -1, 1, 3);
  const std::vector<float> wh = random_floats(static_cast<std::size_t>(ws.size()), -1, 1, 4);
  std::vector<float> first;
  for (Context ctx : all_devices()) {
    NDArray x = array(xh, xs, ctx);  // data: no gradient wanted
    NDArray w = array(wh, ws, ctx);
    w.attach_grad();
    {
      auto recording = autograd::record();
      sum(square(conv2d(x, w, NDArray(), {.padding = {1, 1}}))).backward();
    }
    EXPECT_THROW((void)x.grad(), Error);
    const std::vector<float> got = w.grad().to_vector<float>();
    if (first.empty()) first = got;
    EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)), 0) << ctx;
  }
}

TEST_P(ConvKernels, ResultsDoNotDependOnTheNumberOfThreads) {
  // Large enough that the kernels split their work over threads: the
  // lowering by (image, group) and chunks of the batch; oneDNN (ungrouped,
  // 48 images of 1.3 MFLOP) in 4 calls and 16 chunks of the weight gradient.
  struct Case {
    Shape xs, ws;
    int groups;
  };
  for (const Case& c :
       {Case{{40, 4, 12, 12}, {8, 2, 3, 3}, 2}, Case{{48, 16, 12, 12}, {32, 16, 3, 3}, 1}}) {
    const std::vector<float> xh = random_floats(static_cast<std::size_t>(c.xs.size()), -1, 1, 21);
    const std::vector<float> wh = random_floats(static_cast<std::size_t>(c.ws.size()), -1, 1, 22);
    const auto run = [&] {
      NDArray x = array(xh, c.xs);
      NDArray w = array(wh, c.ws);
      x.attach_grad();
      w.attach_grad();
      NDArray y;
      {
        auto recording = autograd::record();
        y = conv2d(x, w, NDArray(), {.padding = {1, 1}, .groups = c.groups});
        sum(square(max_pool2d(y))).backward();
      }
      std::vector<float> all = y.to_vector<float>();
      for (const NDArray* g : {&x, &w}) {
        const std::vector<float> grad = g->grad().to_vector<float>();
        all.insert(all.end(), grad.begin(), grad.end());
      }
      return all;
    };
    testing::expect_same_bits_on_one_and_all_threads(run);
  }
}

TEST_P(ConvKernels, EmptyBatchesAndViewsAsInputs) {
  for (Context ctx : all_devices()) {
    NDArray w = ones({4, 3, 3, 3}, DType::kFloat32, ctx);
    NDArray b = ones({4}, DType::kFloat32, ctx);
    w.attach_grad();
    b.attach_grad();
    NDArray empty_batch = zeros({0, 3, 5, 5}, DType::kFloat32, ctx);
    {
      auto recording = autograd::record();
      const NDArray y = conv2d(empty_batch, w, b, {.padding = {1, 1}});
      EXPECT_EQ(y.shape(), (Shape{0, 4, 5, 5}));
      sum(y).backward();
    }
    EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(108, 0.f));
    EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(4, 0.f));

    // Slices of larger arrays (views at an offset) give what copies give.
    const NDArray xs = array(random_floats(4 * 3 * 6 * 6, -1, 1, 8), {4, 3, 6, 6}, ctx);
    const NDArray ws = array(random_floats(8 * 3 * 3 * 3, -1, 1, 9), {8, 3, 3, 3}, ctx);
    const NDArray x_view = xs.slice(1, 3);
    const NDArray w_view = ws.slice(4, 8);
    const NDArray x_copy = x_view.copyto(ctx);
    const NDArray w_copy = w_view.copyto(ctx);
    EXPECT_EQ(conv2d(x_view, w_view, NDArray(), {.stride = {2, 2}}).to_vector<float>(),
              conv2d(x_copy, w_copy, NDArray(), {.stride = {2, 2}}).to_vector<float>());
  }
}

TEST(ConvTest, BadInputGetsClearErrorsAndLeavesTheEngineUsable) {
  const NDArray x = zeros({2, 4, 5, 5});
  const NDArray w = zeros({6, 4, 3, 3});
  const NDArray none;
  EXPECT_EQ(error_of([&] {
              (void)conv2d(zeros({4, 5, 5}), w, none);
            }),
            "conv2d: expected the input as a 4-D (batch, channels, height, width) array, got "
            "(4x5x5)");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, zeros({6, 4, 3}), none);
            }),
            "conv2d: expected the weight as a 4-D (out_channels, in_channels / groups, kernel_h, "
            "kernel_w) array, got (6x4x3)");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, zeros({6, 1, 3, 3}), none, {.groups = 3});
            }),
            "conv2d: the input channels (4) and output channels (6) must both be divisible by "
            "groups (3)");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, zeros({6, 3, 3, 3}), none);
            }),
            "conv2d: the weight (6x3x3x3) expects 3 input channels per group, but the input "
            "(2x4x5x5) has 4 channels in 1 group(s), 4 per group");
  EXPECT_EQ(error_of([&] { (void)conv2d(x, w, zeros({4})); }),
            "conv2d: expected a bias of shape (6), one per output channel, got (4)");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, w, none, {.stride = {0, 1}});
            }),
            "conv2d: expected positive strides and dilations, got stride (0, 1) and dilation "
            "(1, 1)");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, w, none, {.dilation = {1, -2}});
            }),
            "conv2d: expected positive strides and dilations, got stride (1, 1) and dilation "
            "(1, -2)");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, w, none, {.padding = {-1, 0}});
            }),
            "conv2d: expected non-negative padding, got (-1, 0)");
  EXPECT_EQ(error_of([&] { (void)conv2d(x, w, none, {.groups = 0}); }),
            "conv2d: expected a positive number of groups, got 0");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, w, none, {.dilation = {3, 1}});
            }),
            "conv2d: the kernel (3x3 spanning 7x3 with dilation (3, 1)) is larger than the "
            "padded input (5x5 with padding (0, 0))");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(x, zeros({6, 4, 8, 1}), none, {.padding = {1, 1}});
            }),
            "conv2d: the kernel (8x1 spanning 8x1 with dilation (1, 1)) is larger than the "
            "padded input (7x7 with padding (1, 1))");
  EXPECT_EQ(error_of([&] { (void)conv2d(x.astype(DType::kInt32), w, none); }),
            "conv2d: expected a floating-point array (float32, float16 or bfloat16) as the first "
            "argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] { (void)conv2d(x.astype(DType::kBFloat16), w, none); }),
            "conv2d: all inputs must have the same dtype, but the first argument is bfloat16 "
            "while the 2nd argument is float32. Convert one with astype()");
  EXPECT_EQ(error_of([&] { (void)conv2d(x, none, none); }),
            "conv2d: the 2nd argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of([&] { (void)conv2d(x, w, zeros({6}, DType::kFloat32, gpu(0))); }),
            "conv2d: all inputs must live on the same context, but the first argument is on "
            "cpu(0) while the 3rd argument is on gpu(0). Nothing is copied implicitly: move one "
            "with copyto() or as_in_context()");
  EXPECT_EQ(error_of([&] {
              (void)conv2d(zeros({2, 4, 0, 5}), w, none);
            }),
            "conv2d: expected non-empty channel and spatial extents, got input (2x4x0x5) and "
            "weight (6x4x3x3)");
  // Still usable: a 3x3 box filter of ones over ones counts the window.
  const NDArray y = conv2d(ones({1, 1, 3, 3}), ones({1, 1, 3, 3}), ones({1}), {.padding = {1, 1}});
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{5, 7, 5, 7, 10, 7, 5, 7, 5}));
}

}  // namespace
}  // namespace tagflow
