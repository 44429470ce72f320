// Wrong input to the array operators: creation, NDArray's own members,
// autograd, elementwise operators, joins, transpose, one_hot and random.
// Each case names the exact error and words of its message; the harness
// (bad_input.h) checks that nothing changed and that the engine and every
// device carry on. bad_input_layers_test.cc has the operators of layers.

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/bad_input.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::Arrays;
using testing::BadInputCase;
using testing::refused;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr std::int64_t kHuge = std::int64_t{1} << 32;  // two of them overflow a size
constexpr std::int64_t kBig = std::int64_t{1} << 40;   // 4 TiB of float32

using Binary = NDArray (*)(const NDArray&, const NDArray&);
using WithScalar = NDArray (*)(const NDArray&, double);
using InPlace = NDArray& (*)(NDArray&, const NDArray&);
using InPlaceScalar = NDArray& (*)(NDArray&, double);
using Unary = NDArray (*)(const NDArray&);

std::vector<BadInputCase> creation_and_ndarray_cases() {
  std::vector<BadInputCase> cases = {
      // --- creation ------------------------------------------------------------------
      refused("array_with_too_few_values",
              [](Arrays&) {
                return array(std::vector<float>{1, 2, 3}, {2, 2});
              },
              {"array", "expected 4 values for shape (2x2), got 3"}),
      refused<DeviceError>("array_on_a_missing_gpu", [](Arrays&) { return array({1.f}, gpu(7)); },
                           {"gpu(7) does not exist", "2 GPUs"}),
      refused<DeviceError>("zeros_on_a_negative_cpu",
                           [](Arrays&) { return zeros({2}, DType::kFloat32, cpu(-1)); },
                           {"cpu(-1) does not exist", "cpu(0)..cpu(63)"}),
      refused<DeviceError>("empty_on_a_missing_cpu",
                           [](Arrays&) { return empty({2}, DType::kInt32, cpu(64)); },
                           {"cpu(64) does not exist"}),
      refused("ones_with_a_negative_extent",
              [](Arrays&) {
                return ones({2, -3});
              },
              {"shape", "non-negative extents", "-3 at axis 1"}),
      refused("zeros_with_nine_axes",
              [](Arrays&) {
                return zeros({1, 1, 1, 1, 1, 1, 1, 1, 1});
              },
              {"shape", "at most 8 dimensions, got 9"}),
      refused("zeros_whose_size_overflows",
              [](Arrays&) {
                return zeros({kHuge, kHuge});
              },
              {"shape", "4294967296x4294967296", "2^63 - 1 elements"}),
      refused("random_uniform_of_a_shape_whose_size_overflows",
              [](Arrays&) {
                return random::uniform(0, 1, {kHuge, 2, kHuge});
              },
              {"shape", "4294967296x2x4294967296"}),
      refused("zeros_whose_bytes_overflow", [](Arrays&) { return zeros({std::int64_t{1} << 62}); },
              {"4611686018427387904", "float32", "2^63 - 1 bytes"}),
      refused("empty_int64_whose_bytes_overflow",
              [](Arrays&) {
                return empty({std::int64_t{1} << 61, 2}, DType::kInt64);
              },
              {"2305843009213693952x2", "int64"}),
      refused<OutOfMemoryError>("zeros_larger_than_the_device",
                                [](Arrays&) { return zeros({kBig}); },
                                {"out of memory on cpu(0)", "4096.00 GiB", "limit"}),
      refused<OutOfMemoryError>("ones_larger_than_the_gpu",
                                [](Arrays&) { return ones({kBig}, DType::kInt32, gpu(1)); },
                                {"out of memory on gpu(1)", "4096.00 GiB"}),
      refused<OutOfMemoryError>("random_normal_larger_than_the_device",
                                [](Arrays&) {
                                  return random::normal(0, 1, {kBig, 2}, cpu(1));
                                },
                                {"out of memory on cpu(1)", "8192.00 GiB"}),
      refused("full_of_a_fraction_as_int32", [](Arrays&) { return full({2}, 0.5, DType::kInt32); },
              {"fill", "scalar 0.5", "int32", "expected an integer in [-2147483648, 2147483647]"}),
      refused("full_of_nan_as_uint8", [](Arrays&) { return full({2}, kNaN, DType::kUInt8); },
              {"fill", "nan", "uint8", "[0, 255]"}),
      refused("fill_an_int32_array_with_a_fraction",
              [](Arrays& x) {
                fill(x.ints, 2.5);
                return x.ints;
              },
              {"fill", "scalar 2.5", "int32"}),
      refused("fill_an_empty_handle",
              [](Arrays&) {
                fill(NDArray(), 1);
                return NDArray();
              },
              {"fill", "first argument is an empty array"}),
      refused("zeros_like_an_empty_handle", [](Arrays&) { return zeros_like(NDArray()); },
              {"zeros_like", "empty array"}),
      refused("ones_like_an_empty_handle", [](Arrays&) { return ones_like(NDArray()); },
              {"ones_like", "empty array"}),
      refused("arange_with_step_zero", [](Arrays&) { return arange(0, 5, 0); },
              {"arange", "non-zero step", "got 0, 5, 0"}),
      refused("arange_from_nan", [](Arrays&) { return arange(kNaN, 5); },
              {"arange", "expected finite start", "nan"}),
      refused("arange_of_too_many_elements", [](Arrays&) { return arange(0, 1e13); },
              {"arange: expected fewer than 10^12 elements, got 10000000000000 from start 0, stop "
               "10000000000000 and step 1"}),
      refused("arange_past_int32", [](Arrays&) { return arange(0, 4e9, 1e9, DType::kInt32); },
              {"arange", "scalar 3000000000 cannot be used with a int32 array"}),
      // --- copies and conversions --------------------------------------------------------
      refused("copyto_a_destination_of_another_shape",
              [](Arrays& x) {
                x.a.copyto(x.b);
                return x.b;
              },
              {"copyto", "destination of shape (2x3) and dtype float32, got (3x2) float32"}),
      refused("copyto_a_destination_of_another_dtype",
              [](Arrays& x) {
                x.a.copyto(x.ints);
                return x.ints;
              },
              {"copyto", "dtype float32, got (2x3) int32"}),
      refused("copyto_an_empty_destination",
              [](Arrays& x) {
                x.a.copyto(NDArray());
                return NDArray();
              },
              {"copyto", "destination array is empty"}),
      refused("copyto_an_overlapping_view",
              [](Arrays& x) {
                const NDArray flat = x.a.reshape({6});
                flat.slice(0, 4).copyto(flat.slice(2, 6));
                return x.a;
              },
              {"copyto", "overlap", "(4)"}),
      refused<DeviceError>("copyto_a_missing_device", [](Arrays& x) { return x.a.copyto(gpu(2)); },
                           {"gpu(2) does not exist"}),
      refused("copyto_from_an_empty_handle", [](Arrays&) { return NDArray().copyto(cpu(1)); },
              {"copyto", "empty"}),
      refused<DeviceError>("as_in_context_of_a_missing_device",
                           [](Arrays& x) { return x.a.as_in_context(cpu(99)); },
                           {"cpu(99) does not exist"}),
      refused("astype_of_an_empty_handle", [](Arrays&) { return NDArray().astype(DType::kInt32); },
              {"astype", "empty"}),
      // --- views ----------------------------------------------------------------------
      refused("reshape_to_another_size",
              [](Arrays& x) {
                return x.a.reshape({4, 2});
              },
              {"reshape", "shape (2x3) (6 elements) as (4x2)"}),
      refused("reshape_with_two_unknown_extents",
              [](Arrays& x) {
                return x.a.reshape({-1, -1});
              },
              {"reshape", "at most one -1", "(-1x-1)"}),
      refused("reshape_with_a_negative_extent",
              [](Arrays& x) {
                return x.a.reshape({-2, -3});
              },
              {"reshape", "extents >= 0", "(-2x-3)"}),
      refused("reshape_to_an_indivisible_size",
              [](Arrays& x) {
                return x.a.reshape({-1, 4});
              },
              {"reshape", "as (-1x4)"}),
      refused("reshape_to_an_overflowing_size",
              [](Arrays& x) {
                return x.a.reshape({kHuge, kHuge});
              },
              {"reshape", "(6 elements) as (4294967296x4294967296)"}),
      refused("reshape_with_an_unknown_extent_and_an_overflowing_size",
              [](Arrays& x) {
                return x.a.reshape({kHuge, -1, kHuge});
              },
              {"reshape", "as (4294967296x-1x4294967296)"}),
      refused("slice_past_the_end", [](Arrays& x) { return x.a.slice(1, 3); },
              {"slice", "expected 0 <= begin <= end <= 2 for shape (2x3), got [1, 3)"}),
      refused("slice_reversed", [](Arrays& x) { return x.a.slice(2, 1); }, {"slice", "got [2, 1)"}),
      refused("slice_from_a_negative_row", [](Arrays& x) { return x.a.slice(-1, 1); },
              {"slice", "got [-1, 1)"}),
      refused("slice_of_a_scalar", [](Arrays&) { return zeros(Shape{}).slice(0, 0); },
              {"slice", "at least one axis", "shape ()"}),
      refused("index_past_the_end", [](Arrays& x) { return x.a[2]; },
              {"operator[]", "index 2 is out of range for shape (2x3)"}),
      refused("index_negative", [](Arrays& x) { return x.a[-1]; }, {"operator[]", "index -1"}),
      refused("squeeze_an_axis_longer_than_one", [](Arrays& x) { return x.a.squeeze(0); },
              {"squeeze", "axis 0 of shape (2x3) has extent 2, expected 1"}),
      refused("squeeze_a_missing_axis", [](Arrays& x) { return x.a.squeeze(2); },
              {"squeeze", "axis 2 is out of range", "(2x3)"}),
      refused("expand_dims_out_of_range", [](Arrays& x) { return x.a.expand_dims(-4); },
              {"expand_dims", "axis -4 is out of range for shape (2x3): expected [-3, 2]"}),
      refused("expand_dims_to_nine_axes",
              [](Arrays&) {
                return zeros({1, 1, 1, 1, 1, 1, 1, 2}).expand_dims(0);
              },
              {"expand_dims", "9 dimensions", "at most 8"}),
      refused("squeeze_an_empty_handle", [](Arrays&) { return NDArray().squeeze(); },
              {"squeeze", "empty"}),
      refused("reshape_an_empty_handle", [](Arrays&) { return NDArray().reshape({1}); },
              {"reshape", "empty"}),
      refused("reshape_to_a_shape_of_another_size",
              [](Arrays& x) {
                return x.a.reshape(Shape{3, 3});
              },
              {"reshape", "as (3x3)"}),
      // --- host access ----------------------------------------------------------------------
      refused("asscalar_of_six_elements",
              [](Arrays& x) { return (void)x.a.asscalar<float>(), NDArray(); },
              {"asscalar", "one element, got shape (2x3)"}),
      refused("data_of_another_type",
              [](Arrays& x) { return (void)x.a.data<std::int32_t>(), NDArray(); },
              {"data<int32>", "float32"}),
      refused("to_vector_of_an_empty_handle",
              [](Arrays&) { return (void)NDArray().to_vector<float>(), NDArray(); },
              {"to_vector", "empty"}),
      refused("wait_to_read_an_empty_handle",
              [](Arrays&) { return NDArray().wait_to_read(), NDArray(); },
              {"wait_to_read", "empty"}),
      refused("wait_to_write_an_empty_handle",
              [](Arrays&) { return NDArray().wait_to_write(), NDArray(); },
              {"wait_to_write", "empty"}),
      refused("var_of_an_empty_handle", [](Arrays&) { return (void)NDArray().var(), NDArray(); },
              {"var", "empty"}),
      refused("raw_data_of_an_empty_handle",
              [](Arrays&) { return (void)NDArray().raw_data(), NDArray(); }, {"raw_data", "empty"}),
      refused("str_of_an_empty_handle", [](Arrays&) { return (void)NDArray().str(), NDArray(); },
              {"str", "empty"}),
      // --- autograd ---------------------------------------------------------------------
      refused("grad_without_attach_grad", [](Arrays& x) { return x.a.grad(); },
              {"grad", "no gradient buffer", "attach_grad()"}),
      refused("attach_grad_to_an_empty_handle",
              [](Arrays&) { return NDArray().attach_grad(), NDArray(); }, {"attach_grad", "empty"}),
      refused("backward_without_history", [](Arrays& x) { return x.a.backward(), NDArray(); },
              {"backward", "no recorded history", "autograd::record()"}),
      refused("backward_of_an_empty_head",
              [](Arrays&) { return autograd::backward(NDArray()), NDArray(); },
              {"backward", "head is an empty array"}),
      refused("backward_with_a_head_gradient_of_another_shape",
              [](Arrays& x) {
                NDArray p = x.a.copyto(cpu(0));
                p.attach_grad();
                auto recording = autograd::record();
                (p * 2.f).backward(x.b);
                return p.grad();
              },
              {"backward",
               "head gradient of shape (2x3) float32 on cpu(0), got (3x2) float32 on cpu(0)"}),
      refused("backward_twice",
              [](Arrays& x) {
                NDArray p = x.a.copyto(cpu(0));
                p.attach_grad();
                auto recording = autograd::record();
                const NDArray y = square(p) * 2.f;
                y.backward();
                y.backward();
                return p.grad();
              },
              {"backward", "freed by an earlier backward", "retain_graph"}),
      refused("in_place_while_recording",
              [](Arrays& x) {
                NDArray p = x.a.copyto(cpu(0));
                p.attach_grad();
                auto recording = autograd::record();
                return p += x.a;
              },
              {"broadcast_add", "in-place", "`a = a + b`"}),
  };
  return cases;
}

std::vector<BadInputCase> elementwise_cases() {
  std::vector<BadInputCase> cases;
  const std::vector<std::pair<std::string, Unary>> unary = {
      {"exp", &exp},       {"log", &log},         {"sqrt", &sqrt},
      {"square", &square}, {"abs", &abs},         {"negative", &negative},
      {"relu", &relu},     {"sigmoid", &sigmoid}, {"tanh", &tanh}};
  for (const auto& [name, f] : unary) {
    cases.push_back(refused(name + "_of_an_empty_handle", [f = f](Arrays&) { return f(NDArray()); },
                            {name + ": the first argument is an empty array"}));
    if (name == "exp" || name == "log" || name == "sqrt" || name == "sigmoid" || name == "tanh") {
      cases.push_back(refused(
          name + "_of_int32", [f = f](Arrays& x) { return f(x.ints); },
          {name + ": expected a floating-point array", "as the first argument, got int32"}));
    }
  }
  cases.push_back(refused("unary_minus_of_an_empty_handle", [](Arrays&) { return -NDArray(); },
                          {"negative", "empty"}));

  const std::vector<std::pair<std::string, Binary>> binary = {
      {"broadcast_add", [](const NDArray& p, const NDArray& q) { return p + q; }},
      {"broadcast_sub", [](const NDArray& p, const NDArray& q) { return p - q; }},
      {"broadcast_mul", [](const NDArray& p, const NDArray& q) { return p * q; }},
      {"broadcast_div", [](const NDArray& p, const NDArray& q) { return p / q; }},
      {"broadcast_power", [](const NDArray& p, const NDArray& q) { return power(p, q); }},
      {"broadcast_maximum", [](const NDArray& p, const NDArray& q) { return maximum(p, q); }},
      {"broadcast_minimum", [](const NDArray& p, const NDArray& q) { return minimum(p, q); }},
      {"broadcast_equal", [](const NDArray& p, const NDArray& q) { return equal(p, q); }},
      {"broadcast_not_equal", [](const NDArray& p, const NDArray& q) { return not_equal(p, q); }},
      {"broadcast_lesser", [](const NDArray& p, const NDArray& q) { return lesser(p, q); }},
      {"broadcast_lesser_equal",
       [](const NDArray& p, const NDArray& q) { return lesser_equal(p, q); }},
      {"broadcast_greater", [](const NDArray& p, const NDArray& q) { return greater(p, q); }},
      {"broadcast_greater_equal",
       [](const NDArray& p, const NDArray& q) { return greater_equal(p, q); }}};
  for (const auto& [name, f] : binary) {
    cases.push_back(refused(
        name + "_of_shapes_that_do_not_broadcast", [f = f](Arrays& x) { return f(x.a, x.b); },
        {name + ": shapes (2x3) and (3x2) do not broadcast: axis 0 has 2 against 3"}));
    cases.push_back(
        refused(name + "_across_cpu_devices", [f = f](Arrays& x) { return f(x.a, x.a_cpu1); },
                {name, "the first argument is on cpu(0) while the 2nd argument is on cpu(1)"}));
    cases.push_back(
        refused(name + "_of_mixed_dtypes", [f = f](Arrays& x) { return f(x.a, x.ints); },
                {name, "the first argument is float32 while the 2nd argument is int32"}));
    cases.push_back(refused(name + "_of_an_empty_handle",
                            [f = f](Arrays& x) { return f(NDArray(), x.a); },
                            {name + ": the first argument is an empty array"}));
  }
  cases.push_back(
      refused("broadcast_add_across_cpu_and_gpu", [](Arrays& x) { return x.a_gpu + x.a; },
              {"broadcast_add", "first argument is on gpu(0) while the 2nd argument is on cpu(0)",
               "copyto()"}));
  cases.push_back(
      refused("broadcast_add_across_pinned_and_pageable_memory",
              [](Arrays& x) {
                return zeros({2, 3}, DType::kFloat32, cpu_pinned(0)) + x.a;
              },
              {"broadcast_add", "on cpu_pinned(0) while the 2nd argument is on cpu(0)"}));
  cases.push_back(refused("broadcast_power_of_int32",
                          [](Arrays& x) { return power(x.ints, x.ints); },
                          {"broadcast_power", "float32", "got int32"}));

  const std::vector<std::pair<std::string, WithScalar>> scalar = {
      {"plus_scalar", [](const NDArray& p, double s) { return p + s; }},
      {"minus_scalar", [](const NDArray& p, double s) { return p - s; }},
      {"mul_scalar", [](const NDArray& p, double s) { return p * s; }},
      {"div_scalar", [](const NDArray& p, double s) { return p / s; }},
      {"rminus_scalar", [](const NDArray& p, double s) { return s - p; }},
      {"rdiv_scalar", [](const NDArray& p, double s) { return s / p; }},
      {"maximum_scalar", [](const NDArray& p, double s) { return maximum(p, s); }},
      {"minimum_scalar", [](const NDArray& p, double s) { return minimum(p, s); }},
      {"equal_scalar", [](const NDArray& p, double s) { return equal(p, s); }},
      {"not_equal_scalar", [](const NDArray& p, double s) { return not_equal(p, s); }},
      {"lesser_scalar", [](const NDArray& p, double s) { return lesser(p, s); }},
      {"lesser_equal_scalar", [](const NDArray& p, double s) { return lesser_equal(p, s); }},
      {"greater_scalar", [](const NDArray& p, double s) { return greater(p, s); }},
      {"greater_equal_scalar", [](const NDArray& p, double s) { return greater_equal(p, s); }}};
  for (const auto& [name, f] : scalar) {
    cases.push_back(refused(name + "_of_a_fraction_and_int32",
                            [f = f](Arrays& x) { return f(x.ints, 1.5); },
                            {name + ": the scalar 1.5 cannot be used with a int32 array"}));
    cases.push_back(refused(name + "_of_an_empty_handle",
                            [f = f](Arrays&) { return f(NDArray(), 1); }, {name, "empty array"}));
  }
  cases.push_back(refused("plus_scalar_on_the_left_of_an_empty_handle",
                          [](Arrays&) { return 1.0 + NDArray(); },
                          {"plus_scalar: the 2nd argument is an empty array"}));
  cases.push_back(refused("mul_scalar_on_the_left_of_a_fraction_and_uint8",
                          [](Arrays& x) { return 0.5 * x.ints.astype(DType::kUInt8); },
                          {"mul_scalar: the scalar 0.5 cannot be used with a uint8 array"}));
  cases.push_back(refused("power_scalar_of_int32", [](Arrays& x) { return power(x.ints, 2.0); },
                          {"power_scalar", "float32", "int32"}));
  cases.push_back(refused(
      "rpower_scalar_of_int32", [](Arrays& x) { return power(2.0, x.ints); },
      {"rpower_scalar",
       "floating-point array (float32, float16 or bfloat16) as the 2nd argument, got int32"}));

  const std::vector<std::pair<std::string, InPlace>> in_place = {
      {"broadcast_add", [](NDArray& p, const NDArray& q) -> NDArray& { return p += q; }},
      {"broadcast_sub", [](NDArray& p, const NDArray& q) -> NDArray& { return p -= q; }},
      {"broadcast_mul", [](NDArray& p, const NDArray& q) -> NDArray& { return p *= q; }},
      {"broadcast_div", [](NDArray& p, const NDArray& q) -> NDArray& { return p /= q; }}};
  for (const auto& [name, f] : in_place) {
    cases.push_back(refused(name + "_in_place_of_another_shape",
                            [f = f](Arrays& x) { return f(x.a, x.b); },
                            {name, "(2x3) and (3x2) do not broadcast"}));
    cases.push_back(refused(name + "_in_place_growing_the_target",
                            [f = f](Arrays& x) { return f(x.a, x.cube); },
                            {name, "in-place result keeps the shape of the first argument (2x3)",
                             "broadcasting with (2x2x3) gives (2x2x3)"}));
    cases.push_back(refused(name + "_in_place_across_devices",
                            [f = f](Arrays& x) { return f(x.a, x.a_gpu); },
                            {name, "on cpu(0) while the 2nd argument is on gpu(0)"}));
  }
  const std::vector<std::pair<std::string, InPlaceScalar>> in_place_scalar = {
      {"plus_scalar", [](NDArray& p, double s) -> NDArray& { return p += s; }},
      {"minus_scalar", [](NDArray& p, double s) -> NDArray& { return p -= s; }},
      {"mul_scalar", [](NDArray& p, double s) -> NDArray& { return p *= s; }},
      {"div_scalar", [](NDArray& p, double s) -> NDArray& { return p /= s; }}};
  for (const auto& [name, f] : in_place_scalar) {
    cases.push_back(refused(name + "_in_place_of_a_fraction_and_int32",
                            [f = f](Arrays& x) { return f(x.ints, 0.25); },
                            {name + ": the scalar 0.25 cannot be used with a int32 array"}));
  }

  cases.push_back(refused("clip_with_low_above_high", [](Arrays& x) { return clip(x.a, 2, 1); },
                          {"clip", "expected low <= high, got low 2 and high 1"}));
  cases.push_back(refused("clip_with_a_nan_bound", [](Arrays& x) { return clip(x.a, kNaN, 1); },
                          {"clip", "low nan"}));
  cases.push_back(refused("clip_of_int32_to_a_fraction",
                          [](Arrays& x) { return clip(x.ints, 0, 2.5); },
                          {"clip", "scalar 2.5", "int32"}));
  cases.push_back(refused("clip_of_an_empty_handle", [](Arrays&) { return clip(NDArray(), 0, 1); },
                          {"clip", "empty"}));
  cases.push_back(refused("where_of_another_shape", [](Arrays& x) { return where(x.a, x.a, x.b); },
                          {"where", "one shape, got (2x3), (2x3) and (3x2)"}));
  cases.push_back(
      refused("where_of_mixed_dtypes", [](Arrays& x) { return where(x.a, x.a, x.ints); },
              {"where", "the first argument is float32 while the 2nd argument is int32"}));
  cases.push_back(refused(
      "where_with_a_condition_elsewhere", [](Arrays& x) { return where(x.a_cpu1, x.a, x.a); },
      {"where", "first argument is on cpu(1) while the 2nd argument is on cpu(0)"}));
  return cases;
}

std::vector<BadInputCase> join_and_layout_cases() {
  return {
      refused("concat_of_nothing", [](Arrays&) { return concat(std::span<const NDArray>()); },
              {"concat: expected at least one array, got none"}),
      refused("concat_of_mismatched_extents",
              [](Arrays& x) {
                return concat({x.a, x.b}, 1);
              },
              {"concat", "except along axis 1",
               "first argument has shape (2x3) while the 2nd argument "
               "has shape (3x2)"}),
      refused("concat_of_mixed_ranks",
              [](Arrays& x) {
                return concat({x.a, x.cube});
              },
              {"concat", "(2x3)", "(2x2x3)"}),
      refused("concat_along_a_missing_axis",
              [](Arrays& x) {
                return concat({x.a, x.a}, 2);
              },
              {"concat: axis 2 is out of range for an array of shape (2x3)"}),
      refused("concat_of_mixed_dtypes",
              [](Arrays& x) {
                return concat({x.a, x.a, x.ints});
              },
              {"concat", "first argument is float32 while the 3rd argument is int32"}),
      refused("concat_across_devices",
              [](Arrays& x) {
                return concat({x.a, x.a_gpu});
              },
              {"concat", "first argument is on cpu(0) while the 2nd argument is on gpu(0)"}),
      refused("concat_with_an_empty_handle",
              [](Arrays& x) {
                return concat({x.a, NDArray()});
              },
              {"concat: the 2nd argument is an empty array"}),
      refused("concat_to_an_overflowing_extent",
              [](Arrays&) {
                const NDArray part = zeros({0, std::int64_t{1} << 62});
                return concat({part, part}, 1);
              },
              {"concat", "4611686018427387904", "2^63 - 1"}),
      refused("stack_of_nothing", [](Arrays&) { return stack(std::span<const NDArray>()); },
              {"stack: expected at least one array, got none"}),
      refused("stack_of_mismatched_shapes",
              [](Arrays& x) {
                return stack({x.a, x.b});
              },
              {"stack: expected inputs of one shape", "(2x3)", "(3x2)"}),
      refused(
          "stack_along_a_missing_axis",
          [](Arrays& x) {
            return stack({x.a, x.a}, 3);
          },
          {"stack: axis 3 is out of range for inputs of shape (2x3): expected an axis in [-3, 2]"}),
      refused("stack_to_nine_axes",
              [](Arrays&) {
                const NDArray part = zeros({1, 1, 1, 1, 1, 1, 1, 1});
                return stack({part, part});
              },
              {"stack: the result would have 9 dimensions, but arrays have at most 8"}),
      refused("stack_across_cpu_devices",
              [](Arrays& x) {
                return stack({x.a_cpu1, x.a});
              },
              {"stack", "cpu(1)", "cpu(0)"}),
      refused("stack_of_mixed_dtypes",
              [](Arrays& x) {
                return stack({x.ints, x.a});
              },
              {"stack", "int32", "float32"}),
      refused("transpose_with_too_few_axes",
              [](Arrays& x) {
                return transpose(x.cube, {1, 0});
              },
              {"transpose: expected 3 axes for shape (2x2x3), got 2"}),
      refused("transpose_with_a_repeated_axis",
              [](Arrays& x) {
                return transpose(x.cube, {0, 1, -3});
              },
              {"transpose: axis 0 appears twice"}),
      refused("transpose_with_a_missing_axis",
              [](Arrays& x) {
                return transpose(x.cube, {0, 1, 3});
              },
              {"transpose: axis 3 is out of range for an array of shape (2x2x3)"}),
      refused("transpose_with_a_span_of_too_many_axes",
              [](Arrays& x) {
                const std::vector<int> axes = {0, 1, 2};
                return transpose(x.a, std::span<const int>(axes));
              },
              {"transpose: expected 2 axes for shape (2x3), got 3"}),
      refused("transpose_of_an_empty_handle", [](Arrays&) { return transpose(NDArray()); },
              {"transpose: the first argument is an empty array"}),
      refused("one_hot_of_a_negative_depth", [](Arrays& x) { return one_hot(x.labels, -1); },
              {"one_hot: expected depth >= 0, got -1"}),
      refused("one_hot_with_an_on_value_outside_uint8",
              [](Arrays& x) { return one_hot(x.labels, 3, 256, 0, DType::kUInt8); },
              {"one_hot: the scalar 256 cannot be used with a uint8 array"}),
      refused("one_hot_to_nine_axes",
              [](Arrays&) {
                return one_hot(zeros({1, 1, 1, 1, 1, 1, 1, 1}), 2);
              },
              {"one_hot: the result would have 9 dimensions"}),
      refused("one_hot_of_an_overflowing_depth",
              [](Arrays& x) { return one_hot(x.a, std::int64_t{1} << 62); },
              {"one_hot", "(2x3)", "4611686018427387904", "2^63 - 1"}),
      refused<OutOfMemoryError>("one_hot_larger_than_the_device",
                                [](Arrays& x) { return one_hot(x.a, kBig); },
                                {"out of memory on cpu(0)", "24576.00 GiB"}),
      refused("one_hot_of_an_empty_handle", [](Arrays&) { return one_hot(NDArray(), 2); },
              {"one_hot: the first argument is an empty array"}),
      refused("uniform_with_low_above_high", [](Arrays&) { return random::uniform(1, 0, {2}); },
              {"random_uniform: expected finite low < high, got low 1 and high 0"}),
      refused("uniform_of_int32",
              [](Arrays&) { return random::uniform(0, 1, {2}, cpu(), DType::kInt32); },
              {"random_uniform: expected dtype float32, float16 or bfloat16, got int32"}),
      refused("uniform_without_a_float_between",
              [](Arrays&) { return random::uniform(1 + 1e-12, 1 + 2e-12, {2}, std::uint64_t{3}); },
              {"random_uniform", "contains no float32 value"}),
      refused<DeviceError>("uniform_on_a_missing_gpu",
                           [](Arrays&) { return random::uniform(0, 1, {2}, gpu(3)); },
                           {"gpu(3) does not exist"}),
      refused(
          "normal_with_a_negative_stddev", [](Arrays&) { return random::normal(0, -1, {2}); },
          {"random_normal: expected a finite mean and a finite stddev >= 0, got mean 0 and stddev "
           "-1"}),
      refused("normal_with_a_nan_mean",
              [](Arrays&) { return random::normal(kNaN, 1, {2}, 5, gpu(1)); },
              {"random_normal", "mean nan"}),
  };
}

std::vector<BadInputCase> all_cases() {
  std::vector<BadInputCase> cases;
  for (auto family : {&creation_and_ndarray_cases, &elementwise_cases, &join_and_layout_cases}) {
    for (BadInputCase& c : family()) cases.push_back(std::move(c));
  }
  return cases;
}

class BadInputTest : public ::testing::TestWithParam<BadInputCase> {};

TEST_P(BadInputTest, IsRefusedWithATypedErrorAndChangesNothing) {
  testing::run_bad_input_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Arrays, BadInputTest, ::testing::ValuesIn(all_cases()),
                         testing::case_name);

}  // namespace
}  // namespace tagflow
