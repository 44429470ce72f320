// softmax_cross_entropy against a double-precision loop on every device, for
// short and long rows and every label dtype; large logits; the gradient
// against central differences and against the composed log_softmax path;
// labels outside [0, classes) (an error at the wait on CPU devices, NaN on
// GPUs); and the errors raised before anything is pushed.

#include <algorithm>
#include <cmath>
#include <cstdint>
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
using testing::random_ints;
using Values = std::vector<double>;

/// logsumexp(x_i) - x_i[label_i] per row, in double.
Values reference_loss(const Values& x, const std::vector<std::int64_t>& labels,
                      std::int64_t classes) {
  Values loss(labels.size());
  for (std::size_t i = 0; i < labels.size(); ++i) {
    const double* row = x.data() + static_cast<std::int64_t>(i) * classes;
    const double m = *std::max_element(row, row + classes);
    double s = 0;
    for (std::int64_t j = 0; j < classes; ++j) s += std::exp(row[j] - m);
    loss[i] = m + std::log(s) - row[labels[i]];
  }
  return loss;
}

Values to_double(const std::vector<float>& v) { return Values(v.begin(), v.end()); }

/// The labels as an array of `dtype` on `ctx`.
NDArray label_array(const std::vector<std::int64_t>& labels, DType dtype, Context ctx) {
  return array(labels, {static_cast<std::int64_t>(labels.size())}, ctx).astype(dtype);
}

// The loss is (m - x_label) + log(sum), the sum of float exps (each within an
// ulp or two) accumulated in double: about 2e-7 absolute in log(sum), then
// one rounding to float.
constexpr double kRel = 1e-6;
constexpr double kAbs = 1e-6;

TEST(SoftmaxCrossEntropyTest, MatchesDoubleLoopsOnEveryDevice) {
  std::uint32_t seed = 0;
  for (const Shape& shape :
       {Shape{4, 10}, Shape{37, 3}, Shape{5, 2000}, Shape{1, 1}, Shape{300, 33}, Shape{0, 5}}) {
    SCOPED_TRACE("shape (" + shape.str() + ")");
    const std::vector<float> x =
        random_floats(static_cast<std::size_t>(shape.size()), -5, 5, ++seed);
    const std::vector<std::int64_t> labels =
        random_ints<std::int64_t>(static_cast<std::size_t>(shape[0]), 0, shape[1] - 1, ++seed);
    const Values expected = reference_loss(to_double(x), labels, shape[1]);
    std::vector<float> first;
    for (Context ctx : all_devices()) {
      const NDArray loss =
          softmax_cross_entropy(array(x, shape, ctx), label_array(labels, DType::kInt32, ctx));
      ASSERT_EQ(loss.shape(), Shape({shape[0]}));
      ASSERT_EQ(loss.context(), ctx);
      ASSERT_EQ(loss.dtype(), DType::kFloat32);
      const std::vector<float> got = loss.to_vector<float>();
      expect_close(got, expected, kRel, kAbs, "on " + ctx.str());
      // The same CPU kernel runs on every device here: the same bits.
      if (ctx == cpu(0)) first = got;
      EXPECT_EQ(got, first) << ctx;
    }
  }
}

TEST(SoftmaxCrossEntropyTest, EveryLabelDtypeGivesTheSameLoss) {
  const Shape shape{6, 7};
  const std::vector<float> x = random_floats(42, -3, 3, 20);
  const std::vector<std::int64_t> labels = {0, 6, 3, 3, 1, 5};
  const Values expected = reference_loss(to_double(x), labels, 7);
  for (Context ctx : all_devices()) {
    for (DType dtype : {DType::kInt32, DType::kInt64, DType::kFloat32, DType::kUInt8}) {
      expect_close(softmax_cross_entropy(array(x, shape, ctx), label_array(labels, dtype, ctx))
                       .to_vector<float>(),
                   expected, kRel, kAbs,
                   std::string(dtype_name(dtype)) + " labels on " + ctx.str());
    }
    // A float label is truncated toward zero, as one_hot does.
    const NDArray fractional =
        array(std::vector<float>{0.5f, 6.9f, 3.2f, 3, 1.99f, 5.5f}, {6}, ctx);
    expect_close(softmax_cross_entropy(array(x, shape, ctx), fractional).to_vector<float>(),
                 expected, kRel, kAbs, "fractional labels on " + ctx.str());
  }
}

TEST(SoftmaxCrossEntropyTest, LargeLogitsStayFiniteAndAccurate) {
  const std::vector<float> x = {1000,  -1000, 0,      //
                                -1000, -1000, -1000,  //
                                1000,  1000,  999,    //
                                -1000, 1000,  -999.5f};
  const std::vector<std::int64_t> labels = {0, 1, 2, 0};
  // 0 + log(1 + e^-1000 + e^-2000) ~ e^-1000; log 3; 1 + log(2 + e^-1); 2000.
  const Values expected = {0, std::log(3.0), 1 + std::log(2 + std::exp(-1.0)), 2000};
  for (Context ctx : all_devices()) {
    const std::vector<float> got =
        softmax_cross_entropy(array(x, {4, 3}, ctx), label_array(labels, DType::kInt64, ctx))
            .to_vector<float>();
    for (float v : got) EXPECT_TRUE(std::isfinite(v)) << ctx;
    expect_close(got, expected, kRel, kAbs, "large logits on " + ctx.str());
  }
}

/// d sum(loss * r) / d pred against central differences of the double
/// reference (step 1e-6: exact to ~1e-9), as autograd_test.cc checks every
/// operator; the tolerance covers the float32 passes.
TEST(SoftmaxCrossEntropyTest, GradientMatchesFiniteDifferences) {
  for (const Shape& shape : {Shape{5, 4}, Shape{3, 40}, Shape{2, 1500}}) {
    const std::vector<float> x = random_floats(static_cast<std::size_t>(shape.size()), -3, 3, 30);
    const std::vector<std::int64_t> labels =
        random_ints<std::int64_t>(static_cast<std::size_t>(shape[0]), 0, shape[1] - 1, 31);
    const std::vector<float> r = random_floats(static_cast<std::size_t>(shape[0]), -1, 1, 32);
    for (Context ctx : {cpu(0), gpu(0)}) {
      SCOPED_TRACE("shape (" + shape.str() + ") on " + ctx.str());
      NDArray pred = array(x, shape, ctx);
      pred.attach_grad();
      NDArray label = label_array(labels, DType::kFloat32, ctx);
      label.attach_grad();  // even when asked for, labels get no gradient
      {
        auto recording = autograd::record();
        const NDArray loss = softmax_cross_entropy(pred, label);
        sum(loss * array(r, {shape[0]}, ctx)).backward();
      }
      Values xd = to_double(x);
      const auto objective = [&] {
        return testing::weighted_sum(reference_loss(xd, labels, shape[1]), r);
      };
      const std::vector<float> grad = pred.grad().to_vector<float>();
      testing::expect_gradient_matches_finite_differences(xd, grad, objective, "pred",
                                                          /*samples=*/60);
      // The label element of each row, where onehot enters, checked exactly.
      for (std::size_t i = 0; i < labels.size(); ++i) {
        const std::size_t j =
            i * static_cast<std::size_t>(shape[1]) + static_cast<std::size_t>(labels[i]);
        const double saved = xd[j];
        xd[j] = saved + 1e-6;
        const double up = objective();
        xd[j] = saved - 1e-6;
        const double down = objective();
        xd[j] = saved;
        EXPECT_NEAR(grad[j], (up - down) / 2e-6, 2e-3) << "label of row " << i;
      }
      EXPECT_EQ(label.grad().to_vector<float>(), std::vector<float>(labels.size(), 0.f));
    }
  }
}

TEST(SoftmaxCrossEntropyTest, GradientMatchesTheComposedPath) {
  const Shape shape{64, 10};
  const std::vector<float> x = random_floats(640, -4, 4, 40);
  const std::vector<std::int64_t> labels = random_ints<std::int64_t>(64, 0, 9, 41);
  for (Context ctx : all_devices()) {
    NDArray fused = array(x, shape, ctx);
    NDArray composed = array(x, shape, ctx);
    fused.attach_grad();
    composed.attach_grad();
    const NDArray label = label_array(labels, DType::kUInt8, ctx);
    {
      auto recording = autograd::record();
      mean(softmax_cross_entropy(fused, label)).backward();
      mean(-sum(log_softmax(composed, 1) * one_hot(label, 10), 1)).backward();
    }
    expect_close(fused.grad().to_vector<float>(), to_double(composed.grad().to_vector<float>()),
                 1e-5, 1e-8, "fused against composed on " + ctx.str());
  }
}

TEST(SoftmaxCrossEntropyTest, AnOutOfRangeLabelFailsAtTheWaitOnCpuDevices) {
  const std::vector<float> x = random_floats(40, -1, 1, 50);
  for (Context ctx : {cpu(0), cpu(1)}) {
    const NDArray pred = array(x, {4, 10}, ctx);
    const auto failure = [&](const NDArray& label) -> std::string {
      const NDArray loss = softmax_cross_entropy(pred, label);  // returns at once
      const NDArray later = loss * 2.f;                         // inherits the error
      try {
        later.wait_to_read();
        return "(no error)";
      } catch (const OperationError& e) {
        EXPECT_EQ(e.op_name(), "softmax_cross_entropy");
        try {
          std::rethrow_exception(e.cause());
        } catch (const LabelOutOfRangeError& cause) {
          return cause.what();
        }
      }
      return "(an error of another type)";
    };
    EXPECT_EQ(failure(array(std::vector<std::int32_t>{0, 1, 2, 12}, {4}, ctx)),
              "softmax_cross_entropy: label 12 of sample 3 is outside [0, 10)");
    EXPECT_EQ(failure(array(std::vector<std::int64_t>{-1, 1, 2, 3}, {4}, ctx)),
              "softmax_cross_entropy: label -1 of sample 0 is outside [0, 10)");
    EXPECT_EQ(failure(array(std::vector<float>{0, 10.5f, 2, 3}, {4}, ctx)),
              "softmax_cross_entropy: label 10.5 of sample 1 is outside [0, 10)");
    EXPECT_EQ(failure(array(std::vector<float>{0, 1, NAN, 3}, {4}, ctx)),
              "softmax_cross_entropy: label nan of sample 2 is outside [0, 10)");
    EXPECT_EQ(failure(array(std::vector<std::uint8_t>{0, 1, 2, 255}, {4}, ctx)),
              "softmax_cross_entropy: label 255 of sample 3 is outside [0, 10)");
    // Recorded: the backward pass inherits the failure.
    NDArray p = pred.copyto(ctx);
    p.attach_grad();
    {
      auto recording = autograd::record();
      softmax_cross_entropy(p, array(std::vector<std::int32_t>{0, 1, 10, 3}, {4}, ctx)).backward();
    }
    EXPECT_THROW(p.grad().wait_to_read(), OperationError) << ctx;
    try {
      Engine::get().wait_for_all();
    } catch (const OperationError&) {  // the first failure above, reported once
    }
    // The engine and the device carry on.
    const NDArray good = array(std::vector<std::int32_t>{0, 1, 2, 9}, {4}, ctx);
    EXPECT_EQ(softmax_cross_entropy(pred, good).to_vector<float>().size(), 4u) << ctx;
  }
}

TEST(SoftmaxCrossEntropyTest, AnOutOfRangeLabelGivesNanOnGpus) {
  const Shape shape{4, 10};
  const std::vector<float> x = random_floats(40, -1, 1, 51);
  const std::vector<std::int64_t> good = {0, 1, 2, 3};
  const Values expected = reference_loss(to_double(x), good, 10);
  for (Context ctx : {gpu(0), gpu(1)}) {
    NDArray pred = array(x, shape, ctx);
    pred.attach_grad();
    NDArray loss;
    {
      auto recording = autograd::record();
      loss = softmax_cross_entropy(pred, array(std::vector<std::int32_t>{0, 1, 12, 3}, {4}, ctx));
      loss.backward();
    }
    const std::vector<float> l = loss.to_vector<float>();
    EXPECT_TRUE(std::isnan(l[2])) << ctx;
    expect_close({l[0], l[1], l[3]}, {expected[0], expected[1], expected[3]}, kRel, kAbs,
                 "the other samples on " + ctx.str());
    const std::vector<float> grad = pred.grad().to_vector<float>();
    for (std::size_t j = 0; j < 40; ++j) {
      EXPECT_EQ(std::isnan(grad[j]), j / 10 == 2) << "element " << j << " on " << ctx;
    }
  }
}

TEST(SoftmaxCrossEntropyTest, BadInputIsRefusedBeforeAnythingIsPushed) {
  const NDArray pred = zeros({4, 3});
  const NDArray label = zeros({4}, DType::kInt32);
  EXPECT_EQ(error_of([&] { (void)softmax_cross_entropy(pred, zeros({5}, DType::kInt32)); }),
            "softmax_cross_entropy: expected labels of shape (4), one class index per row of the "
            "predictions (4x3), got (5)");
  EXPECT_EQ(error_of([&] {
              (void)softmax_cross_entropy(pred, zeros({4, 1}, DType::kInt32));
            }),
            "softmax_cross_entropy: expected labels of shape (4), one class index per row of the "
            "predictions (4x3), got (4x1)");
  EXPECT_EQ(error_of([&] { (void)softmax_cross_entropy(zeros({12}), label); }),
            "softmax_cross_entropy: expected the predictions as a 2-D (batch, classes) array, "
            "got (12)");
  EXPECT_EQ(error_of([&] {
              (void)softmax_cross_entropy(zeros({4, 3}, DType::kInt32), label);
            }),
            "softmax_cross_entropy: expected a floating-point array (float32, float16 or "
            "bfloat16) as the first argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] {
              (void)softmax_cross_entropy(zeros({4, 0}), label);
            }),
            "softmax_cross_entropy: expected at least one class, got predictions of shape (4x0)");
  EXPECT_EQ(error_of([&] { (void)softmax_cross_entropy(pred, zeros({4}, DType::kInt32, gpu(0))); }),
            "softmax_cross_entropy: all inputs must live on the same context, but the first "
            "argument is on cpu(0) while the 2nd argument is on gpu(0). Nothing is copied "
            "implicitly: move one with copyto() or as_in_context()");
  EXPECT_EQ(error_of([&] { (void)softmax_cross_entropy(NDArray(), label); }),
            "softmax_cross_entropy: the first argument is an empty array (default-constructed)");
  EXPECT_EQ(error_of([&] { (void)softmax_cross_entropy(pred, NDArray()); }),
            "softmax_cross_entropy: the 2nd argument is an empty array (default-constructed)");
  // Nothing was pushed: no error waits for wait_for_all.
  EXPECT_NO_THROW(Engine::get().wait_for_all());
  EXPECT_EQ(softmax_cross_entropy(pred, label).to_vector<float>(),
            std::vector<float>(4, static_cast<float>(std::log(3.0))));
}

}  // namespace
}  // namespace tagflow
