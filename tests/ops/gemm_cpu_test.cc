// The CPU matrix product (ops/kernels/gemm_cpu.cc) with each library it can
// call: every transpose, shapes cut into tiles and not, C accumulated,
// against a double-precision loop within the bound of a float32 sum of k
// products in any order; the tiles; and the same bits whatever the number
// of threads and whatever multiplies beside it (Note [The CPU BLAS]).

#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <tbb/global_control.h>

#include "ops/kernels/gemm_kernels.h"
#include "tagflow/tagflow.h"
#include "tests/ops/test_util.h"

namespace tagflow {
namespace {

using detail::GemmTiles;
using detail::cpu_kernels::gemm_tiles;
using detail::cpu_kernels::sgemm;
using testing::random_floats;

struct Product {
  std::int64_t m, n, k;
  bool ta, tb;
};

std::string str(const Product& p) {
  return fmt::format("{}x{}x{}{}{}", p.m, p.n, p.k, p.ta ? " A^T" : "", p.tb ? " B^T" : "");
}

/// beta * c0 + op(A)·op(B) in double, and beside it the sum of the terms'
/// magnitudes, which bounds a float32 sum's error.
void reference(const Product& p, const std::vector<float>& a, const std::vector<float>& b,
               float beta, const std::vector<float>& c0, std::vector<double>& c,
               std::vector<double>& magnitude) {
  c.assign(static_cast<std::size_t>(p.m * p.n), 0.0);
  magnitude.assign(c.size(), 0.0);
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.n; ++j) {
      const auto at = static_cast<std::size_t>(i * p.n + j);
      double s = beta * static_cast<double>(c0[at]);
      double mag = std::abs(s);
      for (std::int64_t q = 0; q < p.k; ++q) {
        const double x = a[static_cast<std::size_t>(p.ta ? q * p.m + i : i * p.k + q)];
        const double y = b[static_cast<std::size_t>(p.tb ? j * p.k + q : q * p.n + j)];
        s += x * y;
        mag += std::abs(x * y);
      }
      c[at] = s;
      magnitude[at] = mag;
    }
  }
}

/// C computed by sgemm with the library under test.
std::vector<float> product(const Product& p, const std::vector<float>& a,
                           const std::vector<float>& b, float beta, std::vector<float> c) {
  sgemm(p.ta, p.tb, p.m, p.n, p.k, a.data(), b.data(), beta, c.data());
  return c;
}

class CpuGemmTest : public ::testing::TestWithParam<CpuGemm> {
 protected:
  void SetUp() override { detail::cpu_kernels::override_cpu_gemm(GetParam()); }
  void TearDown() override { detail::cpu_kernels::override_cpu_gemm(std::nullopt); }
};

TEST_P(CpuGemmTest, EveryTransposeWithinTheFloat32BoundTiledOrNot) {
  // Small (one call), tall, wide, a matrix-vector product, a long sum, and
  // extents that leave partial tiles on both sides.
  const Product shapes[] = {{1, 1, 1, false, false},       {3, 5, 7, false, false},
                            {1, 3000, 700, false, false},  {2000, 3, 700, false, false},
                            {300, 517, 129, false, false}, {513, 257, 64, false, false},
                            {64, 64, 2048, false, false}};
  std::uint32_t seed = 10;
  for (Product p : shapes) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        p.ta = ta;
        p.tb = tb;
        const auto a = random_floats(static_cast<std::size_t>(p.m * p.k), -1, 1, ++seed);
        const auto b = random_floats(static_cast<std::size_t>(p.k * p.n), -1, 1, ++seed);
        const auto c0 = random_floats(static_cast<std::size_t>(p.m * p.n), -1, 1, ++seed);
        for (float beta : {0.f, 1.f}) {
          std::vector<double> expected;
          std::vector<double> magnitude;
          reference(p, a, b, beta, c0, expected, magnitude);
          // k products and the term of C summed in float32 in any order:
          // within gamma_(k+1) = (k+1)u / (1 - (k+1)u) of the magnitudes'
          // sum, u = 2^-24, plus the rounding of the inputs (exact here).
          const double u = std::ldexp(1.0, -24);
          const double terms = static_cast<double>(p.k + 1);
          const double gamma = terms * u / (1 - terms * u);
          const std::vector<float> got =
              product(p, a, b, beta, beta == 0.f ? std::vector<float>(c0.size(), NAN) : c0);
          int reported = 0;
          for (std::size_t i = 0; i < got.size(); ++i) {
            const double error = std::abs(static_cast<double>(got[i]) - expected[i]);
            if (!(error <= gamma * magnitude[i]) && reported++ < 3) {
              ADD_FAILURE() << str(p) << " beta " << beta << ": element " << i << " is " << got[i]
                            << ", expected " << expected[i] << " within " << gamma * magnitude[i];
            }
          }
        }
      }
    }
  }
}

TEST_P(CpuGemmTest, TheBitsDependNeitherOnTheThreadsNorOnWhatMultipliesBeside) {
  const Product p{600, 700, 500, false, true};
  const auto a = random_floats(static_cast<std::size_t>(p.m * p.k), -1, 1, 1);
  const auto b = random_floats(static_cast<std::size_t>(p.k * p.n), -1, 1, 2);
  const std::vector<float> zeros(static_cast<std::size_t>(p.m * p.n), 0.f);
  const std::vector<float> all_threads = product(p, a, b, 0.f, zeros);
  std::vector<float> one_thread;
  {
    const tbb::global_control single(tbb::global_control::max_allowed_parallelism, 1);
    one_thread = product(p, a, b, 0.f, zeros);
  }
  EXPECT_EQ(std::memcmp(all_threads.data(), one_thread.data(), zeros.size() * sizeof(float)), 0);
  // Four threads multiplying at once, as four devices' workers do.
  std::vector<std::vector<float>> beside(4);
  std::vector<std::thread> threads;
  for (auto& c : beside) threads.emplace_back([&] { c = product(p, a, b, 0.f, zeros); });
  for (auto& t : threads) t.join();
  for (const auto& c : beside) {
    EXPECT_EQ(std::memcmp(all_threads.data(), c.data(), zeros.size() * sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Libraries, CpuGemmTest,
                         ::testing::Values(CpuGemm::kOneDnn, CpuGemm::kOpenBlas),
                         [](const ::testing::TestParamInfo<CpuGemm>& library) {
                           return std::string(to_string(library.param));
                         });

TEST(CpuGemmTilesTest, SmallProductsAreOneTileLargeOnesEnoughToShareTheCores) {
  const GemmTiles small = gemm_tiles(100, 100, 100);
  EXPECT_EQ(small.rows, 100);
  EXPECT_EQ(small.columns, 100);
  EXPECT_EQ(small.count(100, 100), 1);
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{{2048, 2048, 2048},
                                                                        {256, 784, 256},
                                                                        {1, 5000, 5000},
                                                                        {5000, 1, 5000},
                                                                        {300, 517, 129}}) {
    const GemmTiles t = gemm_tiles(m, n, k);
    const std::string what = fmt::format("{}x{}x{}: {}x{} tiles", m, n, k, t.rows, t.columns);
    EXPECT_GE(t.rows, 1) << what;
    EXPECT_LE(t.rows, std::max<std::int64_t>(m, 1)) << what;
    EXPECT_LE(t.rows, 512) << what;
    EXPECT_LE(t.columns, 512) << what;
    EXPECT_GE(t.count(m, n), 2) << what;  // at least two cores share it
    // A function of the extents alone.
    if (m == 2048) {
      EXPECT_GE(t.count(m, n), 8) << what;
    }
    const GemmTiles again = gemm_tiles(m, n, k);
    EXPECT_EQ(again.rows, t.rows) << what;
    EXPECT_EQ(again.columns, t.columns) << what;
  }
}

}  // namespace
}  // namespace tagflow
