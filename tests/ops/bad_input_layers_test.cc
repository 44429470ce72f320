// Wrong input to the operators layers are made of: reductions and softmax,
// matrix products, convolution, pooling, softmax cross-entropy (including
// labels found bad only while the operation runs), batch normalization,
// dropout and the optimiser updates. The harness is bad_input.h; the array operators are in
// bad_input_test.cc.

#include <climits>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/bad_input.h"

namespace tagflow {
namespace {

using testing::Arrays;
using testing::BadInputCase;
using testing::fails_when_run;
using testing::refused;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t kBeyond32Bits = std::int64_t{1} << 31;

std::vector<BadInputCase> reduction_cases() {
  std::vector<BadInputCase> cases;
  using Axis = NDArray (*)(const NDArray&, int, bool);
  using Axes = NDArray (*)(const NDArray&, std::initializer_list<int>, bool);
  using All = NDArray (*)(const NDArray&, bool);
  struct Reduction {
    std::string name;
    Axis axis;
    Axes axes;
    All all;
    bool float_only;
  };
  const std::vector<Reduction> reductions = {{"sum", &sum, &sum, &sum, false},
                                             {"mean", &mean, &mean, &mean, true},
                                             {"max", &max, &max, &max, false},
                                             {"min", &min, &min, &min, false},
                                             {"norm", &norm, &norm, &norm, true}};
  for (const Reduction& r : reductions) {
    cases.push_back(refused(r.name + "_over_a_missing_axis",
                            [f = r.axis](Arrays& x) { return f(x.a, 2, false); },
                            {r.name + ": axis 2 is out of range for an array of shape (2x3)"}));
    cases.push_back(refused(r.name + "_over_a_repeated_axis",
                            [f = r.axes](Arrays& x) {
                              return f(x.a, {0, -2}, false);
                            },
                            {r.name + ": axis -2 repeats axis 0 of an array of shape (2x3)"}));
    cases.push_back(refused(r.name + "_of_an_empty_handle",
                            [f = r.all](Arrays&) { return f(NDArray(), false); },
                            {r.name + ": the first argument is an empty array"}));
    if (r.float_only) {
      cases.push_back(refused(r.name + "_of_int32",
                              [f = r.all](Arrays& x) { return f(x.ints, true); },
                              {r.name + ": expected a floating-point array", "got int32"}));
    }
    if (r.name != "sum" && r.name != "norm") {
      cases.push_back(
          refused(r.name + "_over_an_empty_axis",
                  [f = r.axis](Arrays& x) { return f(x.a.slice(0, 0), 0, true); },
                  {r.name + ": cannot reduce axis 0 of an array of shape (0x3)", "extent 0"}));
    }
  }
  cases.push_back(refused("sum_over_a_span_with_a_missing_axis",
                          [](Arrays& x) {
                            const std::vector<int> axes = {1, -3};
                            return sum(x.a, std::span<const int>(axes));
                          },
                          {"sum: axis -3 is out of range"}));
  cases.push_back(refused("argmax_over_a_missing_axis", [](Arrays& x) { return argmax(x.a, -3); },
                          {"argmax: axis -3 is out of range for an array of shape (2x3)"}));
  cases.push_back(refused("argmax_over_an_empty_axis",
                          [](Arrays& x) { return argmax(x.a.slice(1, 1), 0); },
                          {"argmax: cannot reduce axis 0", "(0x3)"}));
  cases.push_back(refused("softmax_over_a_missing_axis", [](Arrays& x) { return softmax(x.a, 2); },
                          {"softmax: axis 2 is out of range for an array of shape (2x3)"}));
  cases.push_back(refused("softmax_of_int32", [](Arrays& x) { return softmax(x.ints); },
                          {"softmax: expected a floating-point array", "got int32"}));
  cases.push_back(refused("softmax_of_a_scalar", [](Arrays&) { return softmax(zeros(Shape{})); },
                          {"softmax: axis -1 is out of range", "0 dimension(s)"}));
  cases.push_back(refused("log_softmax_over_a_missing_axis",
                          [](Arrays& x) { return log_softmax(x.a, -3); },
                          {"log_softmax: axis -3 is out of range"}));
  cases.push_back(refused("log_softmax_of_an_empty_handle",
                          [](Arrays&) { return log_softmax(NDArray()); },
                          {"log_softmax: the first argument is an empty array"}));
  return cases;
}

std::vector<BadInputCase> product_cases() {
  return {
      refused(
          "dot_of_mismatched_inner_dimensions", [](Arrays& x) { return dot(x.a, x.a); },
          {"dot: inner dimensions differ: the first operand (2x3) has 3 columns, the second (2x3) "
           "has 2 rows"}),
      refused(
          "dot_of_a_transposed_operand_that_does_not_fit",
          [](Arrays& x) { return dot(x.a, x.b, true); },
          {"dot: inner dimensions differ", "(2x3, transposed) has 2 columns", "(3x2) has 3 rows"}),
      refused("dot_of_vectors_of_different_lengths",
              [](Arrays& x) { return dot(x.a.reshape({6}), x.b.reshape({6}).slice(0, 5)); },
              {"dot: inner dimensions differ", "(6) has 6 columns", "(5) has 5 rows"}),
      refused("dot_of_a_3d_operand", [](Arrays& x) { return dot(x.cube, x.a); },
              {"dot: expected 1-D or 2-D operands, got (2x2x3) and (2x3)"}),
      refused("dot_of_int32", [](Arrays& x) { return dot(x.ints, x.b); },
              {"dot: expected a floating-point array", "as the first argument, got int32"}),
      refused("dot_across_gpu_and_cpu", [](Arrays& x) { return dot(x.a_gpu, x.b); },
              {"dot", "first argument is on gpu(0) while the 2nd argument is on cpu(0)"}),
      refused("dot_of_an_empty_handle", [](Arrays& x) { return dot(x.a, NDArray()); },
              {"dot: the 2nd argument is an empty array"}),
      refused("dot_beyond_the_32_bit_range_of_the_blas",
              [](Arrays&) {
                return dot(zeros({kBeyond32Bits, 0}), zeros({0, 1}));
              },
              {"dot", "(2147483648x0)", "32-bit"}),
      refused(
          "batch_dot_of_2d_operands", [](Arrays& x) { return batch_dot(x.a, x.b); },
          {"batch_dot: expected two 3-D operands with the same batch size, got (2x3) and (3x2)"}),
      refused("batch_dot_of_different_batch_sizes",
              [](Arrays& x) {
                return batch_dot(x.cube, zeros({3, 3, 2}));
              },
              {"batch_dot", "same batch size, got (2x2x3) and (3x3x2)"}),
      refused("batch_dot_of_mismatched_inner_dimensions",
              [](Arrays& x) { return batch_dot(x.cube, x.cube); },
              {"batch_dot: inner dimensions differ", "has 3 columns", "has 2 rows"}),
      refused("batch_dot_across_cpu_devices",
              [](Arrays& x) { return batch_dot(x.cube, x.cube.copyto(cpu(1)), false, true); },
              {"batch_dot", "on cpu(0) while the 2nd argument is on cpu(1)"}),
      refused("batch_dot_of_int32",
              [](Arrays& x) { return batch_dot(x.cube, x.cube.astype(DType::kInt32)); },
              {"batch_dot: expected a floating-point array", "as the 2nd argument, got int32"}),
      refused("matmul_of_a_scalar", [](Arrays& x) { return matmul(zeros(Shape{}), x.a); },
              {"matmul: expected operands with at least one axis, got () and (2x3)"}),
      refused("matmul_of_batches_that_do_not_broadcast",
              [](Arrays& x) {
                return matmul(x.cube, zeros({3, 3, 2}));
              },
              {"matmul: shapes (2) and (3) do not broadcast"}),
      refused("matmul_of_mismatched_inner_dimensions", [](Arrays& x) { return matmul(x.a, x.a); },
              {"matmul: inner dimensions differ"}),
      refused("matmul_of_int32", [](Arrays& x) { return matmul(x.a, x.ints); },
              {"matmul: expected a floating-point array", "as the 2nd argument, got int32"}),
      refused("matmul_across_cpu_devices", [](Arrays& x) { return matmul(x.a_cpu1, x.b); },
              {"matmul", "on cpu(1) while the 2nd argument is on cpu(0)"}),
  };
}

std::vector<BadInputCase> convolution_and_pooling_cases() {
  return {
      refused("conv2d_of_a_3d_input", [](Arrays& x) { return conv2d(x.cube, x.weight, NDArray()); },
              {"conv2d: expected the input as a 4-D (batch, channels, height, width) array, "
               "got (2x2x3)"}),
      refused("conv2d_with_a_2d_weight", [](Arrays& x) { return conv2d(x.image, x.a, NDArray()); },
              {"conv2d: expected the weight as a 4-D", "got (2x3)"}),
      refused("conv2d_with_mismatched_channels",
              [](Arrays& x) {
                return conv2d(x.image, zeros({3, 1, 3, 3}), NDArray());
              },
              {"conv2d: the weight (3x1x3x3) expects 1 input channels per group, but the input "
               "(2x2x4x4) has 2 channels in 1 group(s), 2 per group"}),
      refused("conv2d_with_groups_that_do_not_divide_the_channels",
              [](Arrays& x) {
                return conv2d(x.image, zeros({3, 1, 3, 3}), NDArray(), {.groups = 2});
              },
              {"conv2d: the input channels (2) and output channels (3) must both be divisible "
               "by groups (2)"}),
      refused("conv2d_with_zero_groups",
              [](Arrays& x) { return conv2d(x.image, x.weight, NDArray(), {.groups = 0}); },
              {"conv2d: expected a positive number of groups, got 0"}),
      refused("conv2d_with_a_bias_per_input_channel",
              [](Arrays& x) { return conv2d(x.image, x.weight, x.gamma); },
              {"conv2d: expected a bias of shape (3), one per output channel, got (2)"}),
      refused("conv2d_with_stride_zero",
              [](Arrays& x) {
                return conv2d(x.image, x.weight, NDArray(), {.stride = {0, 1}});
              },
              {"conv2d: expected positive strides and dilations, got stride (0, 1) and dilation "
               "(1, 1)"}),
      refused("conv2d_with_dilation_zero",
              [](Arrays& x) {
                return conv2d(x.image, x.weight, NDArray(), {.dilation = {1, 0}});
              },
              {"conv2d", "dilation (1, 0)"}),
      refused("conv2d_with_negative_padding",
              [](Arrays& x) {
                return conv2d(x.image, x.weight, NDArray(), {.padding = {-1, 0}});
              },
              {"conv2d: expected non-negative padding, got (-1, 0)"}),
      refused(
          "conv2d_with_a_kernel_larger_than_the_input",
          [](Arrays& x) {
            return conv2d(x.image, zeros({3, 2, 5, 5}), NDArray());
          },
          {"conv2d: the kernel (5x5 spanning 5x5 with dilation (1, 1)) is larger than the padded "
           "input (4x4 with padding (0, 0))"}),
      refused("conv2d_with_a_dilated_kernel_larger_than_the_input",
              [](Arrays& x) {
                return conv2d(x.image, x.weight, NDArray(), {.dilation = {2, 1}});
              },
              {"conv2d: the kernel (3x3 spanning 5x3 with dilation (2, 1)) is larger"}),
      refused("conv2d_of_no_channels",
              [](Arrays&) {
                return conv2d(zeros({2, 0, 4, 4}), zeros({3, 0, 3, 3}), NDArray());
              },
              {"conv2d: expected non-empty channel and spatial extents", "(2x0x4x4)"}),
      refused("conv2d_of_int32",
              [](Arrays& x) { return conv2d(x.image.astype(DType::kInt32), x.weight, NDArray()); },
              {"conv2d: expected a floating-point array", "as the first argument, got int32"}),
      refused("conv2d_with_an_int32_bias",
              [](Arrays& x) { return conv2d(x.image, x.weight, zeros({3}, DType::kInt32)); },
              {"conv2d: expected a floating-point array", "as the 3rd argument, got int32"}),
      refused("conv2d_with_the_weight_on_a_gpu",
              [](Arrays& x) { return conv2d(x.image, x.weight.copyto(gpu(1)), NDArray()); },
              {"conv2d", "first argument is on cpu(0) while the 2nd argument is on gpu(1)"}),
      refused(
          "conv2d_with_the_bias_on_another_cpu",
          [](Arrays& x) { return conv2d(x.image, x.weight, zeros({3}, DType::kFloat32, cpu(1))); },
          {"conv2d", "while the 3rd argument is on cpu(1)"}),
      refused("conv2d_of_an_empty_handle",
              [](Arrays& x) { return conv2d(NDArray(), x.weight, NDArray()); },
              {"conv2d: the first argument is an empty array"}),
      refused("conv2d_beyond_the_32_bit_range_of_the_blas",
              [](Arrays&) {
                return conv2d(zeros({1, 1, 1, 1}), zeros({1, 1, 1, 1}), NDArray(),
                              {.padding = {23200, 23200}});
              },
              {"conv2d", "46401x46401", "32-bit"}),
      refused("conv2d_with_an_overflowing_padding",
              [](Arrays&) {
                return conv2d(zeros({1, 1, 1, 1}), zeros({1, 1, 1, 1}), NDArray(),
                              {.padding = {INT_MAX, INT_MAX}});
              },
              {"conv2d", "32-bit"}),
      // The lowered image (1024x1024 taps by 1026x1026 positions) is scratch
      // memory of the operation: its failure reaches the wait.
      fails_when_run<OutOfMemoryError>("conv2d_whose_lowered_image_is_larger_than_the_device",
                                       [](Arrays&) {
                                         return conv2d(zeros({1, 1, 1, 1}),
                                                       zeros({1, 1, 1024, 1024}), NDArray(),
                                                       {.padding = {1024, 1024}});
                                       },
                                       {"conv2d", "out of memory on cpu(0)", "4112.02 GiB"}),
      refused<OutOfMemoryError>("conv2d_larger_than_the_device",
                                [](Arrays&) {
                                  return conv2d(zeros({1, 1, 1, 1}), zeros({1 << 20, 1, 1, 1}),
                                                NDArray(), {.padding = {10000, 10000}});
                                },
                                {"out of memory on cpu(0)"}),
      refused(
          "max_pool2d_of_a_3d_input", [](Arrays& x) { return max_pool2d(x.cube); },
          {"max_pool2d: expected the input as a 4-D (batch, channels, height, width) array, got "
           "(2x2x3)"}),
      refused("max_pool2d_with_kernel_zero",
              [](Arrays& x) {
                return max_pool2d(x.image, {0, 2});
              },
              {"max_pool2d: expected a positive kernel and stride, got kernel (0, 2)"}),
      refused("max_pool2d_with_stride_zero",
              [](Arrays& x) {
                return max_pool2d(x.image, {2, 2}, {2, 0});
              },
              {"max_pool2d: expected a positive kernel and stride, got kernel (2, 2) and stride "
               "(2, 0)"}),
      refused("max_pool2d_with_padding_beyond_half_the_kernel",
              [](Arrays& x) {
                return max_pool2d(x.image, {2, 2}, {2, 2}, {2, 0});
              },
              {"max_pool2d: expected padding between 0 and half the kernel, got padding (2, 0) for "
               "kernel (2, 2)"}),
      refused("max_pool2d_with_an_overflowing_padding",
              [](Arrays& x) {
                return max_pool2d(x.image, {2, 2}, {1, 1}, {0, INT_MAX});
              },
              {"max_pool2d: expected padding between 0 and half the kernel", "(0, 2147483647)"}),
      refused("max_pool2d_with_negative_padding",
              [](Arrays& x) {
                return max_pool2d(x.image, {2, 2}, {2, 2}, {0, -1});
              },
              {"max_pool2d", "padding (0, -1)"}),
      refused("max_pool2d_with_a_kernel_larger_than_the_input",
              [](Arrays& x) {
                return max_pool2d(x.image, {5, 5});
              },
              {"max_pool2d: the kernel (5x5) is larger than the padded input (4x4"}),
      refused("max_pool2d_of_an_empty_row",
              [](Arrays&) {
                return max_pool2d(zeros({1, 1, 0, 4}));
              },
              {"max_pool2d: the kernel (2x2) is larger than the padded input (0x4"}),
      refused("max_pool2d_of_int32",
              [](Arrays& x) { return max_pool2d(x.image.astype(DType::kInt32)); },
              {"max_pool2d: expected a floating-point array", "as the first argument, got int32"}),
      refused("avg_pool2d_with_stride_zero",
              [](Arrays& x) {
                return avg_pool2d(x.image, {2, 2}, {0, 0});
              },
              {"avg_pool2d: expected a positive kernel and stride"}),
      refused("avg_pool2d_with_a_kernel_larger_than_the_input",
              [](Arrays& x) {
                return avg_pool2d(x.image, {2, 8}, {1, 1}, {1, 1}, false);
              },
              {"avg_pool2d: the kernel (2x8) is larger than the padded input (6x6"}),
      refused("avg_pool2d_of_an_empty_handle", [](Arrays&) { return avg_pool2d(NDArray()); },
              {"avg_pool2d: the first argument is an empty array"}),
      refused("pool2d_with_padding_beyond_half_the_kernel",
              [](Arrays& x) {
                return pool2d(x.image, PoolType::kAverage, {.kernel = {3, 3}, .padding = {2, 2}});
              },
              {"avg_pool2d: expected padding between 0 and half the kernel"}),
  };
}

/// softmax_cross_entropy of `pred` and int32 `labels` on `pred`'s device,
/// and an array computed from the loss: it inherits a failure.
NDArray loss_of(const NDArray& pred, std::vector<std::int32_t> labels) {
  const auto n = static_cast<std::int64_t>(labels.size());
  return softmax_cross_entropy(pred, array(labels, {n}, pred.context())) * 2.f;
}

std::vector<BadInputCase> loss_and_normalization_cases() {
  return {
      refused(
          "softmax_cross_entropy_of_1d_predictions",
          [](Arrays& x) { return softmax_cross_entropy(x.a.reshape({6}), x.labels); },
          {"softmax_cross_entropy: expected the predictions as a 2-D (batch, classes) array, got "
           "(6)"}),
      refused(
          "softmax_cross_entropy_with_too_many_labels",
          [](Arrays& x) { return softmax_cross_entropy(x.a, zeros({3}, DType::kInt32)); },
          {"softmax_cross_entropy: expected labels of shape (2), one class index per row of the "
           "predictions (2x3), got (3)"}),
      refused("softmax_cross_entropy_with_2d_labels",
              [](Arrays& x) {
                return softmax_cross_entropy(x.a, x.labels.reshape({2, 1}));
              },
              {"softmax_cross_entropy: expected labels of shape (2)", "got (2x1)"}),
      refused("softmax_cross_entropy_of_int32_predictions",
              [](Arrays& x) { return softmax_cross_entropy(x.ints, x.labels); },
              {"softmax_cross_entropy: expected a floating-point array",
               "as the first argument, got int32"}),
      refused("softmax_cross_entropy_with_labels_on_a_gpu",
              [](Arrays& x) { return softmax_cross_entropy(x.a, x.labels.copyto(gpu(1))); },
              {"softmax_cross_entropy", "on cpu(0) while the 2nd argument is on gpu(1)"}),
      refused(
          "softmax_cross_entropy_without_classes",
          [](Arrays& x) {
            return softmax_cross_entropy(zeros({2, 0}), x.labels);
          },
          {"softmax_cross_entropy: expected at least one class, got predictions of shape (2x0)"}),
      refused("softmax_cross_entropy_without_labels",
              [](Arrays& x) { return softmax_cross_entropy(x.a, NDArray()); },
              {"softmax_cross_entropy: the 2nd argument is an empty array"}),
      // Labels are known only once the operation runs: the error reaches the wait.
      fails_when_run<LabelOutOfRangeError>(
          "softmax_cross_entropy_with_a_label_past_the_classes",
          [](Arrays& x) {
            return loss_of(x.a, {0, 3});
          },
          {"softmax_cross_entropy", "label 3 of sample 1 is outside [0, 3)"}),
      fails_when_run<LabelOutOfRangeError>("softmax_cross_entropy_with_a_negative_label_on_cpu1",
                                           [](Arrays& x) {
                                             return loss_of(x.a_cpu1, {-1, 0});
                                           },
                                           {"on cpu(1)", "label -1 of sample 0 is outside [0, 3)"}),
      fails_when_run<LabelOutOfRangeError>(
          "softmax_cross_entropy_with_a_nan_label",
          [](Arrays& x) {
            return softmax_cross_entropy(x.a, array(std::vector<float>{1, NAN}, {2}));
          },
          {"label nan of sample 1"}),
      fails_when_run<LabelOutOfRangeError>(
          "softmax_cross_entropy_gradient_with_a_bad_label",
          [](Arrays& x) {
            NDArray p = x.a.copyto(cpu(0));
            p.attach_grad();
            auto recording = autograd::record();
            sum(softmax_cross_entropy(p, array(std::vector<std::int64_t>{7, 1}, {2}))).backward();
            return p.grad();
          },
          {"label 7 of sample 0"}),
      refused("batch_norm_of_a_1d_input",
              [](Arrays& x) {
                return batch_norm(x.a.reshape({6}), x.gamma, x.beta, x.running_mean, x.running_var);
              },
              {"batch_norm: expected the input as an (N, C) or (N, C, ...) array", "got (6)"}),
      refused("batch_norm_with_gamma_of_another_length",
              [](Arrays& x) {
                return batch_norm(x.image, zeros({3}), x.beta, x.running_mean, x.running_var);
              },
              {"batch_norm: expected gamma (the 2nd argument) of shape (2), one value per "
               "channel of the input (2x2x4x4), got (3)"}),
      refused("batch_norm_with_a_2d_running_variance",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, x.beta, x.running_mean, zeros({2, 1}));
              },
              {"batch_norm: expected running_var (the 5th argument) of shape (2)", "got (2x1)"}),
      refused("batch_norm_of_int32",
              [](Arrays& x) {
                return batch_norm(x.image.astype(DType::kInt32), x.gamma, x.beta, x.running_mean,
                                  x.running_var);
              },
              {"batch_norm: expected a floating-point array", "as the first argument, got int32"}),
      refused("batch_norm_with_beta_on_another_cpu",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, x.beta.copyto(cpu(1)), x.running_mean,
                                  x.running_var);
              },
              {"batch_norm", "on cpu(0) while the 3rd argument is on cpu(1)"}),
      refused("batch_norm_with_eps_zero",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, x.beta, x.running_mean, x.running_var,
                                  {.eps = 0});
              },
              {"batch_norm: expected a finite eps > 0, got 0"}),
      refused("batch_norm_with_a_nan_eps",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, x.beta, x.running_mean, x.running_var,
                                  {.eps = kNaN});
              },
              {"batch_norm: expected a finite eps > 0, got nan"}),
      refused("batch_norm_with_momentum_above_one",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, x.beta, x.running_mean, x.running_var,
                                  {.momentum = 1.5});
              },
              {"batch_norm: expected a momentum in [0, 1], got 1.5"}),
      refused("batch_norm_training_on_one_value_per_channel",
              [](Arrays& x) {
                return batch_norm(zeros({1, 2}), x.gamma, x.beta, x.running_mean, x.running_var);
              },
              {"batch_norm: training normalizes with the batch variance", "(1x2) has 1"}),
      refused("batch_norm_with_one_array_for_both_running_statistics",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, x.beta, x.running_mean, x.running_mean);
              },
              {"batch_norm: running_mean (the 4th argument) shares memory with running_var "
               "(the 5th argument)"}),
      refused("batch_norm_without_beta",
              [](Arrays& x) {
                return batch_norm(x.image, x.gamma, NDArray(), x.running_mean, x.running_var);
              },
              {"batch_norm: the 3rd argument is an empty array"}),
      refused("dropout_with_p_one", [](Arrays& x) { return dropout(x.a, 1, true); },
              {"dropout: expected a drop probability p in [0, 1), got 1"}),
      refused("dropout_with_a_negative_p", [](Arrays& x) { return dropout(x.a, -0.5, false); },
              {"dropout: expected a drop probability p in [0, 1), got -0.5"}),
      refused("dropout_with_a_nan_p", [](Arrays& x) { return dropout(x.a_gpu, kNaN, true, 7); },
              {"dropout", "got nan"}),
      refused("dropout_of_int32", [](Arrays& x) { return dropout(x.ints, 0.5, true); },
              {"dropout: expected a floating-point array", "as the first argument, got int32"}),
      refused("dropout_of_an_empty_handle",
              [](Arrays&) { return dropout(NDArray(), 0.5, true, 7); },
              {"dropout: the first argument is an empty array"}),
  };
}

std::vector<BadInputCase> optimizer_cases() {
  // The weight and the states are updated in place: the harness checks that
  // a refused update leaves them as they were.
  return {
      refused("sgd_update_with_a_gradient_of_another_shape",
              [](Arrays& x) { return sgd_update(x.a, x.b, NDArray(), {}), x.a; },
              {"sgd_update: expected the 2nd argument of the weight's shape (2x3), got (3x2)"}),
      refused("sgd_update_with_an_int32_gradient",
              [](Arrays& x) { return sgd_update(x.a, x.ints, NDArray(), {}), x.a; },
              {"sgd_update: expected a float32 array as the 2nd argument, got int32"}),
      refused("sgd_update_with_the_gradient_on_another_cpu",
              [](Arrays& x) { return sgd_update(x.a, x.a_cpu1, NDArray(), {}), x.a; },
              {"sgd_update", "on cpu(0) while the 2nd argument is on cpu(1)"}),
      refused("sgd_update_with_momentum_and_no_state",
              [](Arrays& x) { return sgd_update(x.a, x.state, NDArray(), {.momentum = 0.9}), x.a; },
              {"sgd_update: the 3rd argument is an empty array"}),
      refused("sgd_update_with_a_state_of_another_shape",
              [](Arrays& x) { return sgd_update(x.a, x.state, x.b, {.momentum = 0.9}), x.a; },
              {"sgd_update: expected the 3rd argument of the weight's shape (2x3), got (3x2)"}),
      refused("sgd_update_with_the_state_on_a_gpu",
              [](Arrays& x) { return sgd_update(x.a, x.state, x.a_gpu, {.momentum = 0.9}), x.a; },
              {"sgd_update", "while the 3rd argument is on gpu(0)"}),
      refused("sgd_update_of_an_int32_weight",
              [](Arrays& x) { return sgd_update(x.ints, x.state, NDArray(), {}), x.ints; },
              {"sgd_update: expected a float32 array as the first argument, got int32"}),
      refused("sgd_update_of_an_empty_weight",
              [](Arrays& x) { return sgd_update(NDArray(), x.state, NDArray(), {}), NDArray(); },
              {"sgd_update: the first argument is an empty array"}),
      refused("adam_update_at_step_zero",
              [](Arrays& x) {
                return adam_update(x.a, x.state2, x.state, x.b.reshape({2, 3}), {}, 0), x.a;
              },
              {"adam_update: expected a step count t >= 1, got 0"}),
      refused("adam_update_with_a_mean_of_another_shape",
              [](Arrays& x) { return adam_update(x.a, x.state2, x.b, x.state, {}, 1), x.a; },
              {"adam_update: expected the 3rd argument of the weight's shape (2x3), got (3x2)"}),
      refused("adam_update_with_the_variance_on_a_gpu",
              [](Arrays& x) { return adam_update(x.a, x.state2, x.state, x.a_gpu, {}, 1), x.a; },
              {"adam_update", "while the 4th argument is on gpu(0)"}),
      refused(
          "adam_update_with_beta1_one",
          [](Arrays& x) {
            return adam_update(x.a, x.state2, x.state, x.b.reshape({2, 3}), {.beta1 = 1}, 1), x.a;
          },
          {"adam_update: expected beta1 in [0, 1) and beta2 in [0, 1), got 1 and 0.999"}),
      refused(
          "adam_update_with_beta2_above_one",
          [](Arrays& x) {
            return adam_update(x.a, x.state2, x.state, x.b.reshape({2, 3}), {.beta2 = 1.5}, 1), x.a;
          },
          {"adam_update", "got 0.9 and 1.5"}),
      refused("adam_update_without_a_variance",
              [](Arrays& x) { return adam_update(x.a, x.state2, x.state, NDArray(), {}, 1), x.a; },
              {"adam_update: the 4th argument is an empty array"}),
  };
}

std::vector<BadInputCase> all_cases() {
  std::vector<BadInputCase> cases;
  for (auto family : {&reduction_cases, &product_cases, &convolution_and_pooling_cases,
                      &loss_and_normalization_cases, &optimizer_cases}) {
    for (BadInputCase& c : family()) cases.push_back(std::move(c));
  }
  return cases;
}

class BadInputLayersTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInputLayersTest, IsRefusedWithATypedErrorAndChangesNothing) {
  testing::run_bad_input_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Layers, BadInputLayersTest, ::testing::ValuesIn(all_cases()),
                         testing::case_name);

}  // namespace
}  // namespace tagflow
