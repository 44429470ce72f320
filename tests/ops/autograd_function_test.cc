// autograd::Function (ops/autograd_function.h): a function of existing
// operators with a gradient written by hand, checked against central finite
// differences of a double-precision reference; several outputs; the rules
// (shared ownership while recording, one object per call, gradients of the
// wrong shape).

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;
using testing::random_floats;

/// sigmoid from exp, with the gradient written from its saved output.
struct StableSigmoid : autograd::Function {
  std::vector<NDArray> forward(const std::vector<NDArray>& in) override {
    NDArray y = 1.f / (1.f + exp(-in[0]));
    save_for_backward({y});
    return {y};
  }
  std::vector<NDArray> backward(const std::vector<NDArray>& out_grads) override {
    const NDArray& y = saved()[0];
    return {out_grads[0] * y * (1.f - y)};
  }
  const char* name() const override { return "StableSigmoid"; }
};

/// (a * b, a - b), gradients by hand.
struct ProductAndDifference : autograd::Function {
  std::vector<NDArray> forward(const std::vector<NDArray>& in) override {
    save_for_backward({in[0], in[1]});
    return {in[0] * in[1], in[0] - in[1]};
  }
  std::vector<NDArray> backward(const std::vector<NDArray>& g) override {
    const NDArray& a = saved()[0];
    const NDArray& b = saved()[1];
    return {g[0] * b + g[1], g[0] * a - g[1]};
  }
};

TEST(AutogradFunctionTest, GradientMatchesFiniteDifferences) {
  for (Context ctx : {cpu(0), cpu(1), gpu(0)}) {
    const std::vector<float> host = random_floats(12, -4, 4, 5);
    NDArray x = array(host, {3, 4}, ctx);
    x.attach_grad();
    const std::vector<float> r = random_floats(12, -1, 1, 6);
    NDArray y;
    {
      auto recording = autograd::record();
      y = (*std::make_shared<StableSigmoid>())(x);
      NDArray loss = sum(y * array(r, {3, 4}, ctx));
      loss.backward();
    }
    std::vector<double> expected;
    for (float v : host) expected.push_back(1 / (1 + std::exp(-double(v))));
    testing::expect_close(y.to_vector<float>(), expected, 1e-6, 1e-7, "forward");
    std::vector<std::vector<double>> xs{{host.begin(), host.end()}};
    testing::expect_gradients_match_finite_differences(
        xs, {x},
        [&] {
          std::vector<double> s;
          for (double v : xs[0]) s.push_back(1 / (1 + std::exp(-v)));
          return testing::weighted_sum(s, r);
        },
        "StableSigmoid on " + ctx.str());
  }
}

TEST(AutogradFunctionTest, SeveralOutputsSumTheirGradients) {
  const std::vector<float> ha = random_floats(5, -2, 2, 31);
  const std::vector<float> hb = random_floats(5, -2, 2, 32);
  NDArray a = array(ha, {5}, cpu(1));
  NDArray b = array(hb, {5}, cpu(1));
  a.attach_grad();
  b.attach_grad();
  const std::vector<float> r1 = random_floats(5, -1, 1, 33);
  const std::vector<float> r2 = random_floats(5, -1, 1, 34);
  {
    auto recording = autograd::record();
    std::vector<NDArray> out = (*std::make_shared<ProductAndDifference>())({a, b});
    NDArray loss = sum(out[0] * array(r1, {5}, cpu(1))) + sum(out[1] * array(r2, {5}, cpu(1)));
    loss.backward();
  }
  std::vector<std::vector<double>> xs{{ha.begin(), ha.end()}, {hb.begin(), hb.end()}};
  testing::expect_gradients_match_finite_differences(xs, {a, b}, [&] {
    std::vector<double> p, d;
    for (std::size_t i = 0; i < 5; ++i) {
      p.push_back(xs[0][i] * xs[1][i]);
      d.push_back(xs[0][i] - xs[1][i]);
    }
    return testing::weighted_sum(p, r1) + testing::weighted_sum(d, r2);
  });
}

TEST(AutogradFunctionTest, OnlyTheFunctionsNodeIsRecorded) {
  NDArray x = array({0.5f});
  x.attach_grad();
  auto recording = autograd::record();
  NDArray y = (*std::make_shared<StableSigmoid>())(x);
  ASSERT_NE(y.grad_node(), nullptr);
  EXPECT_STREQ(y.grad_node()->op, "StableSigmoid");
  ASSERT_EQ(y.grad_node()->inputs.size(), 1u);
  EXPECT_EQ(y.grad_node()->inputs[0], x.grad_node());  // forward's own operators left no trace
}

TEST(AutogradFunctionTest, RulesAreExplained) {
  NDArray x = array({0.5f, -1.f});
  // Not recording: any object will do, no node is made.
  StableSigmoid on_stack;
  EXPECT_EQ(on_stack(x).grad_node(), nullptr);
  x.attach_grad();
  {
    auto recording = autograd::record();
    StableSigmoid not_shared;
    EXPECT_EQ(error_of([&] { not_shared(x); }),
              "StableSigmoid: called while recording, so backward must keep it alive: create it "
              "with std::make_shared");
    auto twice = std::make_shared<StableSigmoid>();
    (*twice)(x);
    const std::string again =
        "StableSigmoid: called again after a call that autograd recorded; make one object per "
        "call";
    EXPECT_EQ(error_of([&] { (*twice)(x); }), again);
    // Not even outside recording, or on an input without a gradient: it would
    // replace what the recorded call saved for its backward.
    const auto paused = autograd::pause();
    EXPECT_EQ(error_of([&] { (*twice)(array({3.f})); }), again);
  }
  struct WrongShape : StableSigmoid {
    std::vector<NDArray> backward(const std::vector<NDArray>& g) override { return {sum(g[0])}; }
  };
  EXPECT_EQ(error_of([&] {
              auto recording = autograd::record();
              NDArray loss = sum((*std::make_shared<WrongShape>())(x));
              loss.backward();
            }),
            "StableSigmoid: its backward gave the gradient of the first input as (1) float32 on "
            "cpu(0), expected the input's (2) float32 on cpu(0)");
}

}  // namespace
}  // namespace tagflow
