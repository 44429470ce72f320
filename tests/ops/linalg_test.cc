// Matrix products against a triple loop in double precision, on every
// device: dot with each transpose and with vectors, batch_dot, matmul with
// broadcast batches, empty inner dimensions, and the errors.

#include <vector>

#include <gtest/gtest.h>

#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using testing::error_of;

using testing::all_devices;
using testing::expect_close;
using testing::random_floats;

/// C = op(A)·op(B) for row-major A (stored rows_a x cols_a) and B.
std::vector<double> reference_product(const std::vector<float>& a, const std::vector<float>& b,
                                      std::int64_t m, std::int64_t n, std::int64_t k, bool ta,
                                      bool tb) {
  std::vector<double> c(static_cast<std::size_t>(m * n), 0.0);
  for (std::int64_t i = 0; i < m; ++i) {
    for (std::int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (std::int64_t p = 0; p < k; ++p) {
        const double x = a[static_cast<std::size_t>(ta ? p * m + i : i * k + p)];
        const double y = b[static_cast<std::size_t>(tb ? j * k + p : p * n + j)];
        s += x * y;
      }
      c[static_cast<std::size_t>(i * n + j)] = s;
    }
  }
  return c;
}

// float32 products of k terms in [-1, 1): the error grows like k * eps;
// 1e-5 relative plus k * 1e-6 absolute bounds it with margin.
void expect_product(const NDArray& c, const std::vector<double>& expected, std::int64_t k,
                    const std::string& what) {
  expect_close(c.to_vector<float>(), expected, 1e-5, 1e-6 * static_cast<double>(k + 1), what);
}

TEST(LinalgTest, DotWithEveryTransposeOnEveryDevice) {
  struct Case {
    std::int64_t m, n, k;
  };
  const Case cases[] = {{1, 1, 1}, {3, 5, 7}, {64, 10, 784}, {257, 129, 65}, {300, 200, 250}};
  std::uint32_t seed = 1;
  for (const Case& s : cases) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        const auto a = random_floats(static_cast<std::size_t>(s.m * s.k), -1, 1, ++seed);
        const auto b = random_floats(static_cast<std::size_t>(s.k * s.n), -1, 1, ++seed);
        const auto expected = reference_product(a, b, s.m, s.n, s.k, ta, tb);
        const Shape as = ta ? Shape{s.k, s.m} : Shape{s.m, s.k};
        const Shape bs = tb ? Shape{s.n, s.k} : Shape{s.k, s.n};
        for (Context ctx : all_devices()) {
          NDArray c = dot(array(a, as, ctx), array(b, bs, ctx), ta, tb);
          ASSERT_EQ(c.shape(), (Shape{s.m, s.n}));
          expect_product(
              c, expected, s.k,
              fmt::format("dot {}x{}x{} ta={} tb={} on {}", s.m, s.n, s.k, ta, tb, ctx.str()));
        }
      }
    }
  }
}

TEST(LinalgTest, DotOfVectorsFollowsNumpy) {
  for (Context ctx : all_devices()) {
    NDArray v = array({1, 2, 3}, ctx);
    NDArray w = array({4, 5, 6}, ctx);
    NDArray m = arange(0, 6, 1, DType::kFloat32, ctx).reshape({2, 3});
    EXPECT_EQ(dot(v, w).shape(), (Shape{1}));
    EXPECT_EQ(dot(v, w).asscalar<float>(), 32.f);
    EXPECT_EQ(dot(m, v).to_vector<float>(), (std::vector<float>{8, 26}));
    EXPECT_EQ(dot(array({1, 1}, ctx), m).to_vector<float>(), (std::vector<float>{3, 5, 7}));
    EXPECT_EQ(dot(m, m, false, true).to_vector<float>(), (std::vector<float>{5, 14, 14, 50}));
  }
}

TEST(LinalgTest, BatchDotAndMatmulBroadcastBatches) {
  const std::int64_t m = 4, n = 3, k = 5;
  const auto a = random_floats(2 * 1 * m * k, -1, 1, 7);  // (2, 1, m, k)
  const auto b = random_floats(3 * k * n, -1, 1, 8);      // (3, k, n)
  for (Context ctx : all_devices()) {
    NDArray c = matmul(array(a, {2, 1, m, k}, ctx), array(b, {3, k, n}, ctx));
    ASSERT_EQ(c.shape(), (Shape{2, 3, m, n}));
    const auto values = c.to_vector<float>();
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        const std::vector<float> ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
        const std::vector<float> bj(b.begin() + j * k * n, b.begin() + (j + 1) * k * n);
        const auto expected = reference_product(ai, bj, m, n, k, false, false);
        const std::vector<float> got(values.begin() + (i * 3 + j) * m * n,
                                     values.begin() + (i * 3 + j + 1) * m * n);
        expect_close(got, expected, 1e-5, 1e-5,
                     fmt::format("matmul [{}, {}] on {}", i, j, ctx.str()));
      }
    }
    // batch_dot with transposes, against dot of each member.
    NDArray x = array(random_floats(3 * k * m, -1, 1, 9), {3, k, m}, ctx);
    NDArray y = array(random_floats(3 * n * k, -1, 1, 10), {3, n, k}, ctx);
    NDArray z = batch_dot(x, y, true, true);
    ASSERT_EQ(z.shape(), (Shape{3, m, n}));
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(z[i].to_vector<float>(), dot(x[i], y[i], true, true).to_vector<float>()) << ctx;
    }
    // matmul with a vector on either side, and a 2-D right operand for a batch.
    EXPECT_EQ(matmul(array({1, 2}, ctx), arange(0, 4, 1, DType::kFloat32, ctx).reshape({2, 2}))
                  .to_vector<float>(),
              (std::vector<float>{4, 7}));
    EXPECT_EQ(
        matmul(ones({2, 3, 4}, DType::kFloat32, ctx), ones({4}, DType::kFloat32, ctx)).shape(),
        (Shape{2, 3}));
    EXPECT_EQ(matmul(ones({2, 3, 4}, DType::kFloat32, ctx), ones({4, 5}, DType::kFloat32, ctx))
                  .to_vector<float>(),
              std::vector<float>(30, 4.f));
  }
}

TEST(LinalgTest, AnEmptyInnerDimensionGivesZeros) {
  for (Context ctx : all_devices()) {
    NDArray c = dot(empty({3, 0}, DType::kFloat32, ctx), empty({0, 2}, DType::kFloat32, ctx));
    EXPECT_EQ(c.to_vector<float>(), std::vector<float>(6, 0.f)) << ctx;
    EXPECT_EQ(dot(empty({0, 4}, DType::kFloat32, ctx), ones({4, 2}, DType::kFloat32, ctx)).shape(),
              (Shape{0, 2}));
  }
}

TEST(LinalgTest, BadOperandsAreRejected) {
  NDArray a = zeros({2, 3});
  EXPECT_EQ(error_of([&] {
              (void)dot(a, zeros({2, 3}));
            }),
            "dot: inner dimensions differ: the first operand (2x3) has 3 columns, the second "
            "(2x3) has 2 rows");
  EXPECT_EQ(error_of([&] { (void)dot(a, zeros({2, 3}), false, true); }), "(no error)");
  EXPECT_EQ(error_of([&] {
              (void)dot(a, zeros({3, 2}, DType::kInt32));
            }),
            "dot: expected a floating-point array (float32, float16 or bfloat16) as the 2nd "
            "argument, got int32. Convert it with astype(DType::kFloat32)");
  EXPECT_EQ(error_of([&] {
              (void)dot(a, zeros({3, 2}, DType::kFloat16));
            }),
            "dot: all inputs must have the same dtype, but the first argument is float32 while "
            "the 2nd argument is float16. Convert one with astype()");
  EXPECT_EQ(error_of([&] {
              (void)dot(zeros({2, 2, 2}), a);
            }),
            "dot: expected 1-D or 2-D operands, got (2x2x2) and (2x3); batch_dot and matmul take "
            "batches");
  EXPECT_EQ(error_of([&] {
              (void)batch_dot(zeros({2, 2, 3}), zeros({3, 3, 2}));
            }),
            "batch_dot: expected two 3-D operands with the same batch size, got (2x2x3) and "
            "(3x3x2)");
  EXPECT_EQ(error_of([&] {
              (void)matmul(zeros({2, 2, 3}), zeros({3, 3, 2}));
            }),
            "matmul: shapes (2) and (3) do not broadcast: axis 0 has 2 against 3");
  EXPECT_EQ(error_of([&] {
              (void)dot(a, zeros({3, 2}, DType::kFloat32, gpu(0)));
            }),
            "dot: all inputs must live on the same context, but the first argument is on cpu(0) "
            "while the 2nd argument is on gpu(0). Nothing is copied implicitly: move one with "
            "copyto() or as_in_context()");
}

}  // namespace
}  // namespace tagflow
