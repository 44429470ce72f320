// batch_norm against a plain double-precision loop on every device: training
// and inference, ranks 2 to 5, the running statistics over two steps (MXNet's
// momentum, the unbiased variance) and untouched in inference; gradients of
// the input, gamma and beta against finite differences in both modes; the
// same bits with one thread or many; a large mean; empty batches; views of
// one array as running statistics; and the errors, which leave everything
// as it was.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::all_devices;
using testing::error_of;
using testing::expect_close;
using testing::random_floats;
using Values = std::vector<double>;

/// The input as (batch, channels, spatial).
struct Dims {
  std::int64_t n = 0, c = 0, s = 1;
  std::size_t at(std::int64_t image, std::int64_t channel, std::int64_t i) const {
    return static_cast<std::size_t>((image * c + channel) * s + i);
  }
  double per_channel() const { return static_cast<double>(n * s); }
};

Dims dims_of(const Shape& x) {
  Dims d{x[0], x[1], 1};
  for (int axis = 2; axis < x.ndim(); ++axis) d.s *= x[axis];
  return d;
}

Values doubles(const std::vector<float>& v) { return Values(v.begin(), v.end()); }

/// The batch's mean and biased variance per channel, two passes in double.
void reference_statistics(const Values& x, const Dims& d, Values& mean, Values& var) {
  mean.assign(static_cast<std::size_t>(d.c), 0);
  var.assign(static_cast<std::size_t>(d.c), 0);
  for (std::int64_t c = 0; c < d.c; ++c) {
    double sum = 0;
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < d.s; ++i) sum += x[d.at(n, c, i)];
    }
    const double mu = sum / d.per_channel();
    double squares = 0;
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t i = 0; i < d.s; ++i)
        squares += (x[d.at(n, c, i)] - mu) * (x[d.at(n, c, i)] - mu);
    }
    mean[static_cast<std::size_t>(c)] = mu;
    var[static_cast<std::size_t>(c)] = squares / d.per_channel();
  }
}

/// gamma (x - mean) / sqrt(var + eps) + beta, per channel.
Values reference_normalize(const Values& x, const Dims& d, const Values& gamma, const Values& beta,
                           const Values& mean, const Values& var, double eps) {
  Values y(x.size());
  for (std::int64_t n = 0; n < d.n; ++n) {
    for (std::int64_t c = 0; c < d.c; ++c) {
      const auto k = static_cast<std::size_t>(c);
      for (std::int64_t i = 0; i < d.s; ++i) {
        const std::size_t j = d.at(n, c, i);
        y[j] = gamma[k] * (x[j] - mean[k]) / std::sqrt(var[k] + eps) + beta[k];
      }
    }
  }
  return y;
}

/// The whole operator: with the batch's statistics in training, else with
/// the running ones.
Values reference_batch_norm(const Values& x, const Dims& d, const Values& gamma, const Values& beta,
                            const Values& running_mean, const Values& running_var, bool training,
                            double eps) {
  if (!training) return reference_normalize(x, d, gamma, beta, running_mean, running_var, eps);
  Values mean, var;
  reference_statistics(x, d, mean, var);
  return reference_normalize(x, d, gamma, beta, mean, var, eps);
}

/// running = momentum running + (1 - momentum) batch, the variance unbiased
/// (PyTorch's rule) or biased (MXNet's).
void reference_update(const Values& x, const Dims& d, double momentum, bool unbiased,
                      Values& running_mean, Values& running_var) {
  Values mean, var;
  reference_statistics(x, d, mean, var);
  const double m = d.per_channel();
  const double correction = unbiased ? m / (m - 1) : 1.0;
  for (std::size_t c = 0; c < mean.size(); ++c) {
    running_mean[c] = momentum * running_mean[c] + (1 - momentum) * mean[c];
    running_var[c] = momentum * running_var[c] + (1 - momentum) * var[c] * correction;
  }
}

/// Random arguments for an input of `shape`: the input away from zero mean,
/// gamma around 1, positive running variances.
struct Arguments {
  Shape shape;
  std::vector<float> x, gamma, beta, running_mean, running_var;
  Arguments(Shape s, std::uint32_t seed) : shape(s) {
    const auto channels = static_cast<std::size_t>(s[1]);
    x = random_floats(static_cast<std::size_t>(s.size()), -2, 3, seed);
    gamma = random_floats(channels, 0.5f, 1.5f, seed + 1);
    beta = random_floats(channels, -1, 1, seed + 2);
    running_mean = random_floats(channels, -1, 1, seed + 3);
    running_var = random_floats(channels, 0.5f, 2, seed + 4);
  }
};

std::vector<Shape> forward_shapes() {
  return {{7, 5}, {2, 3}, {4, 3, 5, 7}, {3, 2, 6}, {2, 3, 2, 3, 2}, {1, 4, 3, 3}, {33, 2, 1, 9}};
}

TEST(BatchNormTest, TrainingMatchesTheReferenceAndUpdatesTheRunningStatisticsTwice) {
  std::uint32_t seed = 10;
  for (const bool unbiased : {true, false})
    for (const Shape& shape : forward_shapes()) {
      SCOPED_TRACE(shape.str() + (unbiased ? ", unbiased running variance" : ", biased"));
      const Arguments a(shape, seed += 10);
      const std::vector<float> x2 =
          random_floats(static_cast<std::size_t>(shape.size()), -3, 1, seed + 5);
      const Dims d = dims_of(shape);
      const BatchNormOptions options{
          .eps = 1e-3, .momentum = 0.8, .unbiased_running_var = unbiased};
      const Values gamma = doubles(a.gamma), beta = doubles(a.beta);
      const Values expected1 =
          reference_batch_norm(doubles(a.x), d, gamma, beta, {}, {}, true, 1e-3);
      const Values expected2 =
          reference_batch_norm(doubles(x2), d, gamma, beta, {}, {}, true, 1e-3);
      Values mean1 = doubles(a.running_mean), var1 = doubles(a.running_var);
      reference_update(doubles(a.x), d, 0.8, unbiased, mean1, var1);
      Values mean2 = mean1, var2 = var1;
      reference_update(doubles(x2), d, 0.8, unbiased, mean2, var2);

      std::vector<float> first;
      for (Context ctx : all_devices()) {
        SCOPED_TRACE(ctx.str());
        const NDArray g = array(a.gamma, {shape[1]}, ctx);
        const NDArray b = array(a.beta, {shape[1]}, ctx);
        const NDArray running_mean = array(a.running_mean, {shape[1]}, ctx);
        const NDArray running_var = array(a.running_var, {shape[1]}, ctx);
        const NDArray y1 =
            batch_norm(array(a.x, shape, ctx), g, b, running_mean, running_var, options);
        ASSERT_EQ(y1.shape(), shape);
        ASSERT_EQ(y1.context(), ctx);
        expect_close(y1.to_vector<float>(), expected1, 1e-5, 1e-5, "y, step 1");
        expect_close(running_mean.to_vector<float>(), mean1, 1e-6, 1e-6, "running mean, step 1");
        expect_close(running_var.to_vector<float>(), var1, 1e-6, 1e-6, "running var, step 1");
        const NDArray y2 =
            batch_norm(array(x2, shape, ctx), g, b, running_mean, running_var, options);
        expect_close(y2.to_vector<float>(), expected2, 1e-5, 1e-5, "y, step 2");
        expect_close(running_mean.to_vector<float>(), mean2, 1e-6, 1e-6, "running mean, step 2");
        expect_close(running_var.to_vector<float>(), var2, 1e-6, 1e-6, "running var, step 2");
        // The same CPU kernel serves every device here: the same bits.
        const std::vector<float> got = y1.to_vector<float>();
        if (first.empty()) first = got;
        EXPECT_EQ(std::memcmp(first.data(), got.data(), got.size() * sizeof(float)), 0);
      }
    }
}

TEST(BatchNormTest, MomentumZeroTakesTheBatchStatisticsAndOneKeepsTheOldOnes) {
  const Arguments a({5, 3, 2, 2}, 3);
  const Dims d = dims_of(a.shape);
  Values mean, var;
  reference_statistics(doubles(a.x), d, mean, var);
  for (double& v : var) v *= d.per_channel() / (d.per_channel() - 1);  // unbiased
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    const NDArray x = array(a.x, a.shape, ctx);
    const NDArray g = array(a.gamma, {3}, ctx), b = array(a.beta, {3}, ctx);
    NDArray running_mean = array(a.running_mean, {3}, ctx);
    NDArray running_var = array(a.running_var, {3}, ctx);
    (void)batch_norm(x, g, b, running_mean, running_var, {.momentum = 1});
    EXPECT_EQ(running_mean.to_vector<float>(), a.running_mean);
    EXPECT_EQ(running_var.to_vector<float>(), a.running_var);
    (void)batch_norm(x, g, b, running_mean, running_var, {.momentum = 0});
    expect_close(running_mean.to_vector<float>(), mean, 1e-6, 1e-6, "running mean");
    expect_close(running_var.to_vector<float>(), var, 1e-6, 1e-6, "running var");
  }
}

TEST(BatchNormTest, InferenceUsesTheRunningStatisticsAndLeavesThemUntouched) {
  std::uint32_t seed = 200;
  for (const Shape& shape : forward_shapes()) {
    SCOPED_TRACE(shape.str());
    const Arguments a(shape, seed += 10);
    const Values expected =
        reference_batch_norm(doubles(a.x), dims_of(shape), doubles(a.gamma), doubles(a.beta),
                             doubles(a.running_mean), doubles(a.running_var), false, 1e-5);
    for (Context ctx : all_devices()) {
      SCOPED_TRACE(ctx.str());
      const NDArray running_mean = array(a.running_mean, {shape[1]}, ctx);
      const NDArray running_var = array(a.running_var, {shape[1]}, ctx);
      const NDArray y = batch_norm(array(a.x, shape, ctx), array(a.gamma, {shape[1]}, ctx),
                                   array(a.beta, {shape[1]}, ctx), running_mean, running_var,
                                   {.training = false});
      expect_close(y.to_vector<float>(), expected, 1e-5, 1e-5, "y");
      EXPECT_EQ(running_mean.to_vector<float>(), a.running_mean);
      EXPECT_EQ(running_var.to_vector<float>(), a.running_var);
    }
  }
  // A single value per channel is fine in inference.
  const NDArray y = batch_norm(full({1, 2}, 3.0), ones({2}), zeros({2}), ones({2}), full({2}, 4.0),
                               {.eps = 1e-9, .training = false});
  expect_close(y.to_vector<float>(), {1.0, 1.0}, 1e-6, 0, "one value per channel");
}

/// Checks d sum(batch_norm(x, gamma, beta) * r) / d{x, gamma, beta} against
/// central differences of the double reference (step 1e-6: exact to ~1e-9),
/// as autograd_test.cc does; the tolerance covers float32 forward and
/// backward passes.
void check_gradients(const Shape& shape, bool training, Context ctx) {
  SCOPED_TRACE(shape.str() + (training ? " training on " : " inference on ") + ctx.str());
  const Arguments a(shape, 40);
  const BatchNormOptions options{.eps = 1e-3, .momentum = 0.9, .training = training};
  const Shape channels{shape[1]};
  std::vector<NDArray> inputs = {array(a.x, shape, ctx), array(a.gamma, channels, ctx),
                                 array(a.beta, channels, ctx)};
  for (NDArray& input : inputs) input.attach_grad();
  const NDArray running_mean = array(a.running_mean, channels, ctx);
  const NDArray running_var = array(a.running_var, channels, ctx);
  const std::vector<float> r = random_floats(static_cast<std::size_t>(shape.size()), -1, 1, 7);
  {
    auto recording = autograd::record();
    const NDArray y =
        batch_norm(inputs[0], inputs[1], inputs[2], running_mean, running_var, options);
    sum(y * array(r, shape, ctx)).backward();
  }
  const Dims d = dims_of(shape);
  std::vector<Values> x = {doubles(a.x), doubles(a.gamma), doubles(a.beta)};
  testing::expect_gradients_match_finite_differences(x, inputs, [&] {
    return testing::weighted_sum(
        reference_batch_norm(x[0], d, x[1], x[2], doubles(a.running_mean), doubles(a.running_var),
                             training, options.eps),
        r);
  });
}

TEST(BatchNormTest, TrainingGradientsMatchFiniteDifferences) {
  for (const Shape& shape : {Shape{6, 4}, Shape{3, 2, 3, 4}, Shape{2, 3, 5}}) {
    for (Context ctx : all_devices()) check_gradients(shape, true, ctx);
  }
}

TEST(BatchNormTest, InferenceGradientsMatchFiniteDifferences) {
  for (const Shape& shape : {Shape{6, 4}, Shape{3, 2, 3, 4}, Shape{1, 3}}) {
    for (Context ctx : all_devices()) check_gradients(shape, false, ctx);
  }
}

TEST(BatchNormTest, InferenceGradientUsesTheStatisticsOfItsForwardPass) {
  // A training step between forward and backward changes the running
  // statistics; the gradient is that of the function the forward computed.
  const Arguments a({4, 3, 2}, 60);
  const Shape channels{3};
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    NDArray x = array(a.x, a.shape, ctx);
    NDArray gamma = array(a.gamma, channels, ctx);
    x.attach_grad();
    gamma.attach_grad();
    const NDArray beta = array(a.beta, channels, ctx);
    const NDArray running_mean = array(a.running_mean, channels, ctx);
    const NDArray running_var = array(a.running_var, channels, ctx);
    NDArray y;
    {
      auto recording = autograd::record(false);
      y = batch_norm(x, gamma, beta, running_mean, running_var, {.training = false});
    }
    (void)batch_norm(x.detach() * 5, gamma.detach(), beta, running_mean, running_var,
                     {.momentum = 0});
    y.backward();
    // d sum(y) / dx = gamma / sqrt(running_var + eps); d / dgamma = sum(x^).
    const Dims d = dims_of(a.shape);
    Values dx(a.x.size()), dgamma(3, 0.0);
    for (std::int64_t n = 0; n < d.n; ++n) {
      for (std::int64_t c = 0; c < d.c; ++c) {
        const auto k = static_cast<std::size_t>(c);
        const double inv_std = 1 / std::sqrt(double{a.running_var[k]} + 1e-5);
        for (std::int64_t i = 0; i < d.s; ++i) {
          dx[d.at(n, c, i)] = a.gamma[k] * inv_std;
          dgamma[k] += (a.x[d.at(n, c, i)] - double{a.running_mean[k]}) * inv_std;
        }
      }
    }
    expect_close(x.grad().to_vector<float>(), dx, 1e-5, 1e-6, "dx");
    expect_close(gamma.grad().to_vector<float>(), dgamma, 1e-5, 1e-5, "dgamma");
  }
}

TEST(BatchNormTest, OnlyTheNeededGradientsAreReturned) {
  const Arguments a({5, 3, 4}, 70);
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    const NDArray x = array(a.x, a.shape, ctx);  // data: no gradient wanted
    NDArray gamma = array(a.gamma, {3}, ctx);
    NDArray beta = array(a.beta, {3}, ctx);
    NDArray running_mean = array(a.running_mean, {3}, ctx);
    gamma.attach_grad();
    beta.attach_grad();
    running_mean.attach_grad();  // a statistic, not a parameter: never a gradient
    {
      auto recording = autograd::record();
      sum(square(batch_norm(x, gamma, beta, running_mean, array(a.running_var, {3}, ctx))))
          .backward();
    }
    EXPECT_THROW((void)x.grad(), Error);
    // sum(y^2) = sum((gamma x^ + beta)^2): dbeta = 2 sum(y) = 2 m beta, as sum(x^) = 0.
    expect_close(beta.grad().to_vector<float>(),
                 {40.0 * a.beta[0], 40.0 * a.beta[1], 40.0 * a.beta[2]}, 1e-4, 1e-4, "dbeta");
    EXPECT_EQ(running_mean.grad().to_vector<float>(), std::vector<float>(3, 0.f));
  }
}

TEST(BatchNormTest, ResultsDoNotDependOnTheNumberOfThreads) {
  // Large enough that the kernels cut the channels into several blocks.
  for (const Shape& shape : {Shape{64, 3000}, Shape{4, 8, 64, 64}}) {
    SCOPED_TRACE(shape.str());
    const Arguments a(shape, 80);
    const auto run = [&] {
      NDArray x = array(a.x, shape);
      NDArray gamma = array(a.gamma, {shape[1]});
      x.attach_grad();
      gamma.attach_grad();
      const NDArray running_mean = array(a.running_mean, {shape[1]});
      const NDArray running_var = array(a.running_var, {shape[1]});
      NDArray y;
      {
        auto recording = autograd::record();
        y = batch_norm(x, gamma, array(a.beta, {shape[1]}), running_mean, running_var);
        sum(square(y) * x.detach()).backward();
      }
      std::vector<float> all = y.to_vector<float>();
      for (const NDArray& v : {x.grad(), gamma.grad(), running_mean, running_var}) {
        const std::vector<float> values = v.to_vector<float>();
        all.insert(all.end(), values.begin(), values.end());
      }
      return all;
    };
    testing::expect_same_bits_on_one_and_all_threads(run);
  }
}

TEST(BatchNormTest, ALargeMeanKeepsTheVarianceAccurate) {
  // float32 values 1e4 + U(-1, 1): E[x^2] - E[x]^2 in float32 would lose
  // every digit of the variance (1/3) to cancellation.
  const Shape shape{16, 2, 8, 8};
  std::vector<float> x = random_floats(static_cast<std::size_t>(shape.size()), -1, 1, 90);
  for (float& v : x) v += 1e4f;
  const Dims d = dims_of(shape);
  Values mean, var;
  reference_statistics(doubles(x), d, mean, var);
  const Values expected =
      reference_normalize(doubles(x), d, {1.0, 1.0}, {0.0, 0.0}, mean, var, 1e-5);
  for (double& v : var) v *= d.per_channel() / (d.per_channel() - 1);
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    const NDArray running_mean = zeros({2}, DType::kFloat32, ctx);
    const NDArray running_var = zeros({2}, DType::kFloat32, ctx);
    const NDArray y =
        batch_norm(array(x, shape, ctx), ones({2}, DType::kFloat32, ctx),
                   zeros({2}, DType::kFloat32, ctx), running_mean, running_var, {.momentum = 0});
    expect_close(running_var.to_vector<float>(), var, 1e-5, 0, "running var");
    expect_close(running_mean.to_vector<float>(), mean, 1e-7, 0, "running mean");
    // x - mean itself is exact to float32's spacing at 1e4 (~1e-3), over std ~0.58.
    expect_close(y.to_vector<float>(), expected, 0, 2e-3, "y");
  }
}

TEST(BatchNormTest, EmptyBatchesInInference) {
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    NDArray x = zeros({0, 3, 2, 2}, DType::kFloat32, ctx);
    NDArray gamma = ones({3}, DType::kFloat32, ctx);
    NDArray beta = ones({3}, DType::kFloat32, ctx);
    x.attach_grad();
    gamma.attach_grad();
    beta.attach_grad();
    const NDArray stats = ones({3}, DType::kFloat32, ctx);
    {
      auto recording = autograd::record(false);
      const NDArray y = batch_norm(x, gamma, beta, stats, stats, {.training = false});
      EXPECT_EQ(y.shape(), (Shape{0, 3, 2, 2}));
      sum(y).backward();
    }
    EXPECT_EQ(gamma.grad().to_vector<float>(), std::vector<float>(3, 0.f));
    EXPECT_EQ(beta.grad().to_vector<float>(), std::vector<float>(3, 0.f));
    EXPECT_EQ(x.grad().size(), 0);
  }
}

TEST(BatchNormTest, RunningStatisticsMayBeRowsOfOneArray) {
  // Distinct views of one array share a variable but not memory: allowed.
  const Arguments a({6, 2, 3}, 100);
  const Dims d = dims_of(a.shape);
  Values mean = doubles(a.running_mean), var = doubles(a.running_var);
  reference_update(doubles(a.x), d, 0.9, /*unbiased=*/true, mean, var);
  for (Context ctx : all_devices()) {
    SCOPED_TRACE(ctx.str());
    std::vector<float> packed = a.running_mean;
    packed.insert(packed.end(), a.running_var.begin(), a.running_var.end());
    const NDArray stats = array(packed, {2, 2}, ctx);
    (void)batch_norm(array(a.x, a.shape, ctx), array(a.gamma, {2}, ctx), array(a.beta, {2}, ctx),
                     stats[0], stats[1]);
    expect_close(stats[0].to_vector<float>(), mean, 1e-6, 1e-6, "running mean");
    expect_close(stats[1].to_vector<float>(), var, 1e-6, 1e-6, "running var");
  }
}

TEST(BatchNormTest, BadInputGetsClearErrorsAndChangesNothing) {
  const NDArray x = ones({4, 3, 2, 2});
  const NDArray c3 = ones({3});
  const NDArray running_mean = array(std::vector<float>{1, 2, 3}, {3});
  const NDArray running_var = array(std::vector<float>{4, 5, 6}, {3});
  const NDArray none;
  const auto bn = [&](const NDArray& xx, const NDArray& g, const NDArray& b, const NDArray& m,
                      const NDArray& v, const BatchNormOptions& o = {}) {
    return [=] { (void)batch_norm(xx, g, b, m, v, o); };
  };
  const NDArray& rm = running_mean;
  const NDArray& rv = running_var;
  EXPECT_EQ(error_of(bn(ones({5}), ones({5}), ones({5}), ones({5}), ones({5}))),
            "batch_norm: expected the input as an (N, C) or (N, C, ...) array with the channels "
            "on axis 1, got (5)");
  EXPECT_EQ(error_of(bn(x, ones({4}), c3, rm, rv)),
            "batch_norm: expected gamma (the 2nd argument) of shape (3), one value per channel of "
            "the input (4x3x2x2), got (4)");
  EXPECT_EQ(error_of(bn(x, c3, ones({1, 3}), rm, rv)),
            "batch_norm: expected beta (the 3rd argument) of shape (3), one value per channel of "
            "the input (4x3x2x2), got (1x3)");
  EXPECT_EQ(error_of(bn(x, c3, c3, ones({2}), rv)),
            "batch_norm: expected running_mean (the 4th argument) of shape (3), one value per "
            "channel of the input (4x3x2x2), got (2)");
  EXPECT_EQ(error_of(bn(ones({4, 2}), ones({2}), ones({2}), ones({2}), rv)),
            "batch_norm: expected running_var (the 5th argument) of shape (2), one value per "
            "channel of the input (4x2), got (3)");
  EXPECT_EQ(error_of(bn(x.astype(DType::kInt32), c3, c3, rm, rv)),
            "batch_norm: expected a floating-point array (float32, float16 or bfloat16) as the "
            "first argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of(bn(x, c3.astype(DType::kFloat16), c3, rm, rv)),
            "batch_norm: expected a float32 array as the 2nd argument, got float16. Convert it "
            "with astype(DType::kFloat32)");
  EXPECT_EQ(error_of(bn(x, c3, c3, rm, rv.astype(DType::kInt64))),
            "batch_norm: expected a float32 array as the 5th argument, got int64. Convert it "
            "with astype(DType::kFloat32)");
  EXPECT_EQ(error_of(bn(x, none, c3, rm, rv)),
            "batch_norm: the 2nd argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of(bn(x, c3.copyto(gpu(0)), c3, rm, rv)),
            "batch_norm: all inputs must live on the same context, but the first argument is on "
            "cpu(0) while the 2nd argument is on gpu(0). Nothing is copied implicitly: move one "
            "with copyto() or as_in_context()");
  EXPECT_EQ(error_of(bn(x, c3, c3, rm, rv.copyto(cpu(1)))),
            "batch_norm: all inputs must live on the same context, but the first argument is on "
            "cpu(0) while the 5th argument is on cpu(1). Nothing is copied implicitly: move one "
            "with copyto() or as_in_context()");
  for (double eps : {0.0, -1e-5, std::numeric_limits<double>::quiet_NaN(),
                     std::numeric_limits<double>::infinity()}) {
    EXPECT_EQ(error_of(bn(x, c3, c3, rm, rv, {.eps = eps})),
              fmt::format("batch_norm: expected a finite eps > 0, got {}", eps));
  }
  for (double momentum : {1.5, -0.1, std::numeric_limits<double>::quiet_NaN()}) {
    EXPECT_EQ(error_of(bn(x, c3, c3, rm, rv, {.momentum = momentum})),
              fmt::format("batch_norm: expected a momentum in [0, 1], got {}", momentum));
  }
  EXPECT_EQ(error_of(bn(ones({1, 3, 1, 1}), c3, c3, rm, rv)),
            "batch_norm: training normalizes with the batch variance, which needs more than one "
            "value per channel, but the input (1x3x1x1) has 1 (batch 1 times spatial size 1); "
            "pass training = false to normalize with the running statistics");
  EXPECT_EQ(error_of(bn(zeros({0, 3}), c3, c3, rm, rv)),
            "batch_norm: training normalizes with the batch variance, which needs more than one "
            "value per channel, but the input (0x3) has 0 (batch 0 times spatial size 1); pass "
            "training = false to normalize with the running statistics");
  EXPECT_EQ(error_of(bn(x, c3, c3, rm, rm)),
            "batch_norm: running_mean (the 4th argument) shares memory with running_var (the 5th "
            "argument); training updates the running statistics in place, so they need memory of "
            "their own");
  const NDArray gamma_and_more = ones({6});
  EXPECT_EQ(error_of(bn(x, gamma_and_more.slice(0, 3), c3, rm, gamma_and_more.slice(2, 5))),
            "batch_norm: running_var (the 5th argument) shares memory with gamma (the 2nd "
            "argument); training updates the running statistics in place, so they need memory of "
            "their own");

  // Nothing was pushed: the running statistics hold their values and no error.
  EXPECT_EQ(running_mean.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(running_var.to_vector<float>(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(gamma_and_more.to_vector<float>(), std::vector<float>(6, 1.f));
  // Still usable: two images of one value per channel each, (a, b) = (1, 3),
  // normalize to -1 and 1.
  const NDArray y =
      batch_norm(array(std::vector<float>{1, 5, 3, 9}, {2, 2}), ones({2}), zeros({2}),
                 running_mean.slice(0, 2), running_var.slice(0, 2), {.eps = 1e-12, .momentum = 0});
  expect_close(y.to_vector<float>(), {-1.0, -1.0, 1.0, 1.0}, 1e-6, 0, "y");
  expect_close(running_mean.to_vector<float>(), {2.0, 7.0, 3.0}, 1e-7, 0, "running mean");
  expect_close(running_var.to_vector<float>(), {2.0, 8.0, 6.0}, 1e-7, 0, "running var");
}

}  // namespace
}  // namespace tagflow
