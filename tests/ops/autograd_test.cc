// Autograd: every differentiable operator's gradient against central finite
// differences of an independent double-precision reference, on a CPU device
// and a simulated GPU; and the recording rules (scopes, accumulation,
// freed graphs, in-place refusal).

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using Values = std::vector<double>;

/// An operator under test: the tagflow computation and a double reference
/// of the same function (row-major values in, row-major values out).
struct GradCase {
  std::string name;
  std::vector<Shape> input_shapes;
  std::function<NDArray(const std::vector<NDArray>&)> forward;
  std::function<Values(const std::vector<Values>&)> reference;
  float low = -2, high = 2;  ///< where the inputs are drawn
};

/// Checks d sum(f(x) * r) / dx_i, for a random projection r, against
/// central differences of the reference (step 1e-6 in double, so the
/// difference is exact to ~1e-9; the tolerance covers the float32 forward
/// and backward passes).
void check_gradients(const GradCase& c, Context ctx) {
  std::vector<std::vector<float>> host;
  std::vector<NDArray> inputs;
  std::uint32_t seed = 100;
  for (const Shape& s : c.input_shapes) {
    host.push_back(
        testing::random_floats(static_cast<std::size_t>(s.size()), c.low, c.high, ++seed));
    inputs.push_back(array(host.back(), s, ctx));
    inputs.back().attach_grad();
  }
  NDArray out;
  NDArray projected;
  std::vector<float> r;
  {
    auto recording = autograd::record();
    out = c.forward(inputs);
    r = testing::random_floats(static_cast<std::size_t>(out.size()), -1, 1, 7);
    projected = sum(out * array(r, out.shape(), ctx));
  }
  projected.backward();
  auto loss = [&](const std::vector<Values>& x) {
    const Values y = c.reference(x);
    double total = 0;
    for (std::size_t k = 0; k < y.size(); ++k) total += y[k] * r[k];
    return total;
  };
  std::vector<Values> x;
  for (const auto& h : host) x.emplace_back(h.begin(), h.end());
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const std::vector<float> grad = inputs[i].grad().to_vector<float>();
    const std::size_t n = grad.size();
    const std::size_t stride = std::max<std::size_t>(1, n / 40);  // at most ~40 elements each
    for (std::size_t j = 0; j < n; j += stride) {
      const double saved = x[i][j];
      const double step = 1e-6 * std::max(1.0, std::abs(saved));
      x[i][j] = saved + step;
      const double up = loss(x);
      x[i][j] = saved - step;
      const double down = loss(x);
      x[i][j] = saved;
      const double numeric = (up - down) / (2 * step);
      EXPECT_NEAR(grad[j], numeric, 2e-3 * std::max(1.0, std::abs(numeric)))
          << c.name << " on " << ctx << ": input " << i << ", element " << j;
    }
  }
}

Values map1(const Values& x, double (*f)(double)) {
  Values y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = f(x[i]);
  return y;
}

/// out[i] = f(a[ai], b[bi]) with NumPy broadcasting of `as` and `bs`.
Values map2(const Values& a, const Shape& as, const Values& b, const Shape& bs,
            const std::function<double(double, double)>& f) {
  const Shape out = broadcast_shapes(as, bs, "reference");
  Values y(static_cast<std::size_t>(out.size()));
  for (std::int64_t flat = 0; flat < out.size(); ++flat) {
    std::int64_t rest = flat;
    std::int64_t ia = 0, ib = 0, ma = 1, mb = 1;
    for (int d = out.ndim() - 1; d >= 0; --d) {
      const std::int64_t index = rest % out[d];
      rest /= out[d];
      const int da = d - (out.ndim() - as.ndim());
      const int db = d - (out.ndim() - bs.ndim());
      if (da >= 0) {
        ia += (as[da] == 1 ? 0 : index) * ma;
        ma *= as[da];
      }
      if (db >= 0) {
        ib += (bs[db] == 1 ? 0 : index) * mb;
        mb *= bs[db];
      }
    }
    y[static_cast<std::size_t>(flat)] =
        f(a[static_cast<std::size_t>(ia)], b[static_cast<std::size_t>(ib)]);
  }
  return y;
}

std::vector<Context> grad_devices() { return {cpu(0), gpu(0)}; }

TEST(AutogradTest, UnaryGradientsMatchFiniteDifferences) {
  struct U {
    const char* name;
    NDArray (*op)(const NDArray&);
    double (*ref)(double);
    float low, high;
  };
  const U cases[] = {
      {"exp", &exp, [](double v) { return std::exp(v); }, -2, 2},
      {"log", &log, [](double v) { return std::log(v); }, 0.5f, 3},
      {"sqrt", &sqrt, [](double v) { return std::sqrt(v); }, 0.5f, 3},
      {"square", &square, [](double v) { return v * v; }, -2, 2},
      {"abs", &abs, [](double v) { return std::abs(v); }, -2, 2},
      {"negative", &negative, [](double v) { return -v; }, -2, 2},
      {"relu", &relu, [](double v) { return v > 0 ? v : 0; }, -2, 2},
      {"sigmoid", &sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, -3, 3},
      {"tanh", &tanh, [](double v) { return std::tanh(v); }, -2, 2},
  };
  for (const U& u : cases) {
    GradCase c{u.name,
               {{3, 5}},
               [op = u.op](const auto& in) { return op(in[0]); },
               [ref = u.ref](const auto& x) { return map1(x[0], ref); },
               u.low,
               u.high};
    for (Context ctx : grad_devices()) check_gradients(c, ctx);
  }
}

TEST(AutogradTest, BinaryGradientsSumOverBroadcastAxes) {
  struct B {
    const char* name;
    NDArray (*op)(const NDArray&, const NDArray&);
    std::function<double(double, double)> ref;
  };
  const B cases[] = {
      {"add", [](const NDArray& a, const NDArray& b) { return a + b; }, std::plus<double>()},
      {"sub", [](const NDArray& a, const NDArray& b) { return a - b; }, std::minus<double>()},
      {"mul", [](const NDArray& a, const NDArray& b) { return a * b; }, std::multiplies<double>()},
      {"div", [](const NDArray& a, const NDArray& b) { return a / b; }, std::divides<double>()},
      {"power", [](const NDArray& a, const NDArray& b) { return power(a, b); },
       [](double a, double b) { return std::pow(a, b); }},
      {"maximum", [](const NDArray& a, const NDArray& b) { return maximum(a, b); },
       [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const NDArray& a, const NDArray& b) { return minimum(a, b); },
       [](double a, double b) { return std::min(a, b); }},
  };
  const std::pair<Shape, Shape> shapes[] = {{{3, 4}, {3, 4}}, {{3, 4}, {4}}, {{2, 1, 4}, {3, 1}}};
  for (const B& b : cases) {
    for (const auto& [as, bs] : shapes) {
      GradCase c{
          std::string(b.name) + " (" + as.str() + ") (" + bs.str() + ")",
          {as, bs},
          [op = b.op](const auto& in) { return op(in[0], in[1]); },
          [ref = b.ref, as = as, bs = bs](const auto& x) { return map2(x[0], as, x[1], bs, ref); },
          0.5f,
          2};  // positive, for power and div
      for (Context ctx : grad_devices()) check_gradients(c, ctx);
    }
  }
}

TEST(AutogradTest, ScalarClipAndWhereGradients) {
  const std::vector<GradCase> cases = {
      {"3 - a / 2",
       {{4, 3}},
       [](const auto& in) { return 3 - in[0] / 2; },
       [](const auto& x) { return map1(x[0], [](double v) { return 3 - v / 2; }); }},
      {"2 / a",
       {{4, 3}},
       [](const auto& in) { return 2 / in[0]; },
       [](const auto& x) { return map1(x[0], [](double v) { return 2 / v; }); },
       0.5f,
       2},
      {"power(a, 3)",
       {{4, 3}},
       [](const auto& in) { return power(in[0], 3); },
       [](const auto& x) { return map1(x[0], [](double v) { return v * v * v; }); }},
      {"power(2, a)",
       {{4, 3}},
       [](const auto& in) { return power(2, in[0]); },
       [](const auto& x) { return map1(x[0], [](double v) { return std::pow(2, v); }); }},
      {"maximum(a, 0.3)",
       {{4, 3}},
       [](const auto& in) { return maximum(in[0], 0.3); },
       [](const auto& x) { return map1(x[0], [](double v) { return std::max(v, 0.3); }); }},
      {"clip",
       {{4, 3}},
       [](const auto& in) { return clip(in[0], -1, 1); },
       [](const auto& x) {
         return map1(x[0], [](double v) { return std::min(1.0, std::max(-1.0, v)); });
       }},
      {"where",
       {{4, 3}, {4, 3}},
       [](const auto& in) { return where(greater(in[0], 0), in[0] * in[1], in[1]); },
       [](const auto& x) {
         Values y(x[0].size());
         for (std::size_t i = 0; i < y.size(); ++i)
           y[i] = x[0][i] > 0 ? x[0][i] * x[1][i] : x[1][i];
         return y;
       }},
  };
  for (const GradCase& c : cases) {
    for (Context ctx : grad_devices()) check_gradients(c, ctx);
  }
}

TEST(AutogradTest, AddAccumulatesWriteOverwritesAndUnrecordedWorkHasNoGraph) {
  NDArray x = array({1, 2, 3});
  x.attach_grad(GradReq::kAdd);
  for (int i = 0; i < 3; ++i) {
    NDArray y;
    {
      auto recording = autograd::record();
      y = sum(x * x);
    }
    y.backward();
  }
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{6, 12, 18}));  // 3 x 2x
  NDArray w = array({1, 2, 3});
  w.attach_grad();
  for (int i = 0; i < 2; ++i) {
    auto recording = autograd::record();
    NDArray y = sum(w * 3);
    y.backward();
  }
  EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{3, 3, 3}));
  NDArray unrecorded = sum(w * 3);
  EXPECT_THROW(unrecorded.backward(), Error);
  {
    auto recording = autograd::record();
    NDArray paused;
    {
      auto stop = autograd::pause();
      EXPECT_FALSE(autograd::is_recording());
      paused = w * 2;
    }
    EXPECT_TRUE(autograd::is_recording());
    EXPECT_EQ(paused.grad_node(), nullptr);
  }
  EXPECT_FALSE(autograd::is_recording());
}

TEST(AutogradTest, FreedGraphsAndInPlaceOperatorsAreRefused) {
  NDArray x = array({1, 2});
  x.attach_grad();
  NDArray y;
  {
    auto recording = autograd::record();
    y = sum(exp(x));
  }
  y.backward(ones({1}), /*retain_graph=*/true);
  y.backward();  // the graph was retained once
  try {
    y.backward();
    FAIL() << "the graph was freed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("freed by an earlier backward"), std::string::npos);
  }
  auto recording = autograd::record();
  NDArray z = x * 2;
  try {
    z += 1;
    FAIL() << "in-place on an array needing a gradient";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot be recorded"), std::string::npos) << e.what();
  }
  EXPECT_THROW(z.backward(zeros({3})), Error);  // wrong head gradient shape
}

}  // namespace
}  // namespace tagflow
