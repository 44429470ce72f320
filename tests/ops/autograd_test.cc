// Autograd: every differentiable operator's gradient against central finite
// differences of an independent double-precision reference, on a CPU device
// and a simulated GPU; and the recording rules (scopes, accumulation,
// freed graphs, in-place refusal).

#include <array>
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
  std::vector<Values> x;
  for (const auto& h : host) x.emplace_back(h.begin(), h.end());
  testing::expect_gradients_match_finite_differences(
      x, inputs, [&] { return testing::weighted_sum(c.reference(x), r); },
      fmt::format("{} on {}", c.name, ctx.str()));
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

/// C = op(A)·op(B), row-major, batched over `batch` leading matrices.
Values product_reference(const Values& a, const Values& b, std::int64_t batch, std::int64_t m,
                         std::int64_t n, std::int64_t k, bool ta, bool tb) {
  Values c(static_cast<std::size_t>(batch * m * n), 0.0);
  for (std::int64_t q = 0; q < batch; ++q) {
    for (std::int64_t i = 0; i < m; ++i) {
      for (std::int64_t j = 0; j < n; ++j) {
        double total = 0;
        for (std::int64_t p = 0; p < k; ++p) {
          total += a[static_cast<std::size_t>(q * m * k + (ta ? p * m + i : i * k + p))] *
                   b[static_cast<std::size_t>(q * k * n + (tb ? j * k + p : p * n + j))];
        }
        c[static_cast<std::size_t>(q * m * n + i * n + j)] = total;
      }
    }
  }
  return c;
}

TEST(AutogradTest, MatrixProductGradients) {
  std::vector<GradCase> cases;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      const std::int64_t m = 3, n = 4, k = 5;
      cases.push_back(
          {fmt::format("dot ta={} tb={}", ta, tb),
           {ta ? Shape{k, m} : Shape{m, k}, tb ? Shape{n, k} : Shape{k, n}},
           [ta, tb](const auto& in) { return dot(in[0], in[1], ta, tb); },
           [=](const auto& x) { return product_reference(x[0], x[1], 1, m, n, k, ta, tb); }});
      cases.push_back(
          {fmt::format("batch_dot ta={} tb={}", ta, tb),
           {ta ? Shape{2, k, m} : Shape{2, m, k}, tb ? Shape{2, n, k} : Shape{2, k, n}},
           [ta, tb](const auto& in) { return batch_dot(in[0], in[1], ta, tb); },
           [=](const auto& x) { return product_reference(x[0], x[1], 2, m, n, k, ta, tb); }});
    }
  }
  cases.push_back(
      {"dot (matrix, vector)",
       {{3, 5}, {5}},
       [](const auto& in) { return dot(in[0], in[1]); },
       [](const auto& x) { return product_reference(x[0], x[1], 1, 3, 1, 5, false, false); }});
  cases.push_back({"matmul (2,3,4) (4,2): the right side broadcast over the batch",
                   {{2, 3, 4}, {4, 2}},
                   [](const auto& in) { return matmul(in[0], in[1]); },
                   [](const auto& x) {
                     Values b2(x[1]);
                     b2.insert(b2.end(), x[1].begin(), x[1].end());  // the same matrix twice
                     return product_reference(x[0], b2, 2, 3, 2, 4, false, false);
                   }});
  for (const GradCase& c : cases) {
    for (Context ctx : grad_devices()) check_gradients(c, ctx);
  }
}

TEST(AutogradTest, TransposeViewsSoftmaxAndCopiesPassGradients) {
  std::vector<GradCase> cases;
  cases.push_back({"transpose (2,3,4) -> (4,2,3)",
                   {{2, 3, 4}},
                   [](const auto& in) {
                     return transpose(in[0], {2, 0, 1});
                   },
                   [](const auto& x) {
                     Values y(24);
                     for (int i = 0; i < 2; ++i)
                       for (int j = 0; j < 3; ++j)
                         for (int l = 0; l < 4; ++l)
                           y[static_cast<std::size_t>(l * 6 + i * 3 + j)] =
                               x[0][static_cast<std::size_t>(i * 12 + j * 4 + l)];
                     return y;
                   }});
  cases.push_back({"slice, row and reshape views",
                   {{4, 3}},
                   [](const auto& in) {
                     return in[0].slice(1, 3).reshape({-1}) *
                            in[0][3].reshape({1, 3}).reshape({-1}).expand_dims(0).squeeze(0)[0];
                   },
                   [](const auto& x) {
                     Values y(6);
                     for (int i = 0; i < 6; ++i)
                       y[static_cast<std::size_t>(i)] =
                           x[0][static_cast<std::size_t>(3 + i)] * x[0][9];
                     return y;
                   }});
  for (bool log_output : {false, true}) {
    for (int axis : {0, 1}) {
      cases.push_back({fmt::format("{} axis {}", log_output ? "log_softmax" : "softmax", axis),
                       {{3, 4}},
                       [=](const auto& in) {
                         return log_output ? log_softmax(in[0], axis) : softmax(in[0], axis);
                       },
                       [=](const auto& x) {
                         Values y(12);
                         for (int o = 0; o < (axis == 0 ? 4 : 3); ++o) {
                           auto at = [&](int e) {
                             return static_cast<std::size_t>(axis == 0 ? e * 4 + o : o * 4 + e);
                           };
                           const int extent = axis == 0 ? 3 : 4;
                           double top = -1e300, total = 0;
                           for (int e = 0; e < extent; ++e) top = std::max(top, x[0][at(e)]);
                           for (int e = 0; e < extent; ++e) total += std::exp(x[0][at(e)] - top);
                           for (int e = 0; e < extent; ++e) {
                             y[at(e)] = log_output ? x[0][at(e)] - top - std::log(total)
                                                   : std::exp(x[0][at(e)] - top) / total;
                           }
                         }
                         return y;
                       }});
    }
  }
  cases.push_back(
      {"copyto another device and back",
       {{5}},
       [](const auto& in) { return square(in[0].copyto(gpu(1))).copyto(in[0].context()); },
       [](const auto& x) { return map1(x[0], [](double v) { return v * v; }); }});
  for (const GradCase& c : cases) {
    for (Context ctx : grad_devices()) check_gradients(c, ctx);
  }
}

/// Reduces a (2,3,4) array over the flagged axes with `f` (init, combine).
Values reduce_reference(const Values& x, std::array<bool, 3> reduced, double init,
                        const std::function<double(double, double)>& combine, bool mean,
                        bool root) {
  const int dims[3] = {2, 3, 4};
  int out_dims[3];
  for (int d = 0; d < 3; ++d) out_dims[d] = reduced[static_cast<std::size_t>(d)] ? 1 : dims[d];
  Values y(static_cast<std::size_t>(out_dims[0] * out_dims[1] * out_dims[2]), init);
  std::vector<int> counts(y.size(), 0);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int l = 0; l < 4; ++l) {
        const int oi = reduced[0] ? 0 : i, oj = reduced[1] ? 0 : j, ol = reduced[2] ? 0 : l;
        const auto o = static_cast<std::size_t>((oi * out_dims[1] + oj) * out_dims[2] + ol);
        y[o] = combine(y[o], x[static_cast<std::size_t>(i * 12 + j * 4 + l)]);
        ++counts[o];
      }
  for (std::size_t o = 0; o < y.size(); ++o) {
    if (mean) y[o] /= counts[o];
    if (root) y[o] = std::sqrt(y[o]);
  }
  return y;
}

/// The inputs (row-major, shapes `shapes`) joined along `axis`, in double:
/// for stack, every shape gains an extent-1 axis there first.
Values join_reference(const std::vector<Values>& x, const std::vector<Shape>& shapes, int axis) {
  std::int64_t rows = 1;
  for (int d = 0; d < axis; ++d) rows *= shapes[0][d];
  Values y;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::size_t i = 0; i < x.size(); ++i) {
      const auto width = static_cast<std::int64_t>(x[i].size()) / rows;
      y.insert(y.end(), x[i].begin() + row * width, x[i].begin() + (row + 1) * width);
    }
  }
  return y;
}

TEST(AutogradTest, ConcatAndStackGradients) {
  std::vector<GradCase> cases;
  cases.push_back({"concat axis 0",
                   {{2, 3}, {1, 3}},
                   [](const auto& in) {
                     return concat({in[0], in[1]}, 0);
                   },
                   [](const auto& x) {
                     return join_reference(x, {{2, 3}, {1, 3}}, 0);
                   }});
  cases.push_back({"concat axis 1 of three",
                   {{2, 3}, {2, 1}, {2, 2}},
                   [](const auto& in) {
                     return concat({in[0], in[1], in[2]}, 1);
                   },
                   [](const auto& x) {
                     return join_reference(x, {{2, 3}, {2, 1}, {2, 2}}, 1);
                   }});
  cases.push_back({"concat axis -1 of (2,2,3) and (2,2,2)",
                   {{2, 2, 3}, {2, 2, 2}},
                   [](const auto& in) {
                     return concat({in[0], in[1]}, -1);
                   },
                   [](const auto& x) {
                     return join_reference(x, {{2, 2, 3}, {2, 2, 2}}, 2);
                   }});
  cases.push_back({"concat of one input twice: the gradients add up",
                   {{2, 2}},
                   [](const auto& in) {
                     return concat({in[0], in[0]}, 1);
                   },
                   [](const auto& x) {
                     return join_reference({x[0], x[0]}, {{2, 2}, {2, 2}}, 1);
                   }});
  for (int axis : {0, 1, 2}) {
    cases.push_back({fmt::format("stack axis {}", axis),
                     {{2, 3}, {2, 3}, {2, 3}},
                     [axis](const auto& in) {
                       return stack({in[0], in[1], in[2]}, axis);
                     },
                     [axis](const auto& x) {
                       return join_reference(x, {{2, 3}, {2, 3}, {2, 3}}, axis);
                     }});
  }
  for (const GradCase& c : cases) {
    for (Context ctx : grad_devices()) check_gradients(c, ctx);
  }
  cases.push_back({"astype(float32): a copy",
                   {{2, 3}},
                   [](const auto& in) { return in[0].astype(DType::kFloat32) * 3.f; },
                   [](const auto& x) {
                     Values y(x[0]);
                     for (double& v : y) v *= 3;
                     return y;
                   }});
  for (Context ctx : grad_devices()) check_gradients(cases.back(), ctx);
  // Only the inputs that need a gradient get one.
  NDArray a = array({1.f, 2.f}, cpu(0));
  NDArray b = array({3.f, 4.f}, cpu(0));
  a.attach_grad();
  {
    auto recording = autograd::record();
    NDArray joined = concat({a, b});
    sum(joined * joined).backward();
  }
  EXPECT_EQ(a.grad().to_vector<float>(), (std::vector<float>{2.f, 4.f}));
  EXPECT_THROW((void)b.grad(), Error);
}

TEST(AutogradTest, ReductionGradients) {
  auto plus = [](double a, double b) { return a + b; };
  auto squares = [](double a, double b) { return a + b * b; };
  auto bigger = [](double a, double b) { return std::max(a, b); };
  auto smaller = [](double a, double b) { return std::min(a, b); };
  const std::vector<GradCase> cases = {
      {"sum over 1",
       {{2, 3, 4}},
       [](const auto& in) { return sum(in[0], 1); },
       [=](const auto& x) {
         return reduce_reference(x[0], {false, true, false}, 0, plus, false, false);
       }},
      {"sum over all",
       {{2, 3, 4}},
       [](const auto& in) { return sum(in[0]); },
       [=](const auto& x) {
         return reduce_reference(x[0], {true, true, true}, 0, plus, false, false);
       }},
      {"mean over 0 and 2, kept",
       {{2, 3, 4}},
       [](const auto& in) {
         return mean(in[0], {0, 2}, true);
       },
       [=](const auto& x) {
         return reduce_reference(x[0], {true, false, true}, 0, plus, true, false);
       }},
      {"max over 2",
       {{2, 3, 4}},
       [](const auto& in) { return max(in[0], 2); },
       [=](const auto& x) {
         return reduce_reference(x[0], {false, false, true}, -1e300, bigger, false, false);
       }},
      {"min over 0",
       {{2, 3, 4}},
       [](const auto& in) { return min(in[0], 0); },
       [=](const auto& x) {
         return reduce_reference(x[0], {true, false, false}, 1e300, smaller, false, false);
       }},
      {"norm over 1",
       {{2, 3, 4}},
       [](const auto& in) { return norm(in[0], -2); },
       [=](const auto& x) {
         return reduce_reference(x[0], {false, true, false}, 0, squares, false, true);
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

TEST(AutogradTest, GradReturnsTheGradientsAndLeavesEveryLeafsGradAlone) {
  for (Context ctx : testing::all_devices()) {
    SCOPED_TRACE(ctx.str());
    NDArray x = array(std::vector<float>{1, 2, 3}, {3}, ctx);
    NDArray w = array(std::vector<float>{0.5f, -1, 2}, {3}, ctx);
    NDArray unused = array(std::vector<float>{7}, {1}, ctx);
    for (NDArray* a : {&x, &w, &unused}) a->attach_grad(GradReq::kAdd);
    ones_like(w).copyto(w.grad());  // w.grad() starts at a value of its own
    NDArray y;
    {
      auto recording = autograd::record();
      y = sum(x * x * w);  // dy/dx = 2 x w, dy/dw = x^2
    }
    const NDArray both[] = {x, unused};
    const std::vector<NDArray> grads =
        autograd::grad(y, both, full(y.shape(), 3, DType::kFloat32, ctx), true);
    ASSERT_EQ(grads.size(), 2u);
    EXPECT_EQ(grads[0].to_vector<float>(), (std::vector<float>{3, -12, 36}));  // 3 * 2 x w
    EXPECT_EQ(grads[1].to_vector<float>(), (std::vector<float>{0}));           // not reached: zeros
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 0, 0}));
    EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{1, 1, 1}));  // w was not asked
    // The graph was retained: backward still writes (adds to) the grads.
    y.backward();
    EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, -4, 12}));
    EXPECT_EQ(w.grad().to_vector<float>(), (std::vector<float>{2, 5, 10}));
    // A head that is itself a leaf: its head gradient, copied.
    const NDArray head_grad = array(std::vector<float>{4, 5, 6}, {3}, ctx);
    const NDArray just_x[] = {x};
    NDArray dx = autograd::grad(x, just_x, head_grad)[0];
    EXPECT_EQ(dx.to_vector<float>(), (std::vector<float>{4, 5, 6}));
    EXPECT_NE(dx.var(), head_grad.var());
    const NDArray plain = array(std::vector<float>{1}, {1}, ctx);
    const NDArray not_marked[] = {plain};
    EXPECT_NE(testing::error_of([&] {
                (void)autograd::grad(y, not_marked);
              }).find("grad: expected variable 0 to be marked by attach_grad()"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace tagflow
