// SolveTriangular against a double-precision substitution over the stored
// inputs: lower / upper, unit diagonals, dtypes, batches (broadcast too) and
// layouts, on every SIMD target. The triangle torch does not read (and a unit
// diagonal) holds NaN, so reading it shows.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::ForEachTarget;
using testing::Layout;
using testing::MakeLayout;
using testing::MakeRandom;
using testing::TestTensor;

struct Case {
  std::vector<int64_t> batch;
  int64_t n, k;
  Layout a_layout, b_layout, out_layout;
};

// Row-major offset of (m, i, j) in a [batch..., rows, cols] tensor.
int64_t At(int64_t m, int64_t i, int64_t j, int64_t rows, int64_t cols) {
  return (m * rows + i) * cols + j;
}

void Check(const Case& c, DType dt, bool upper, bool unit) {
  std::vector<int64_t> as = c.batch, bs = c.batch;
  as.insert(as.end(), {c.n, c.n});
  bs.insert(bs.end(), {c.n, c.k});
  int64_t batch = 1;
  for (int64_t s : c.batch) batch *= s;
  TestTensor a = MakeLayout(dt, as, c.a_layout);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.n));
  // A broadcast a repeats its first slice: write that one only.
  const int64_t a_batch = c.a_layout == Layout::kBroadcast && !c.batch.empty() ? 1 : batch;
  uint32_t seed = 7;
  for (int64_t m = 0; m < a_batch; ++m) {
    for (int64_t i = 0; i < c.n; ++i) {
      for (int64_t j = 0; j < c.n; ++j) {
        const bool in_triangle = upper ? j > i : j < i;
        double v = std::nan("");
        seed = seed * 1103515245u + 12345u;
        const double u = static_cast<double>(seed >> 8) / (1 << 24);  // [0, 1)
        if (in_triangle) v = (2 * u - 1) * scale;
        if (i == j && !unit) v = (u < 0.5 ? -1 : 1) * (1 + u);
        a.Set(At(m, i, j, c.n, c.n), v);
      }
    }
  }
  const TestTensor b = MakeRandom(dt, bs, c.b_layout, 11);
  TestTensor out = MakeLayout(dt, bs, c.out_layout);
  ASSERT_TRUE(SolveTriangular(out.ref, a.ref, b.ref, upper, unit).ok());
  for (int64_t m = 0; m < batch; ++m) {
    const int64_t am = a_batch == 1 ? 0 : m;
    for (int64_t col = 0; col < c.k; ++col) {
      std::vector<double> x(c.n);
      double biggest = 0;
      for (int64_t step = 0; step < c.n; ++step) {
        const int64_t i = upper ? c.n - 1 - step : step;
        double s = b.At(At(m, i, col, c.n, c.k));
        for (int64_t p = 0; p < step; ++p) {
          const int64_t j = upper ? c.n - 1 - p : p;
          s -= a.At(At(am, i, j, c.n, c.n)) * x[j];
        }
        x[i] = unit ? s : s / a.At(At(am, i, i, c.n, c.n));
        biggest = std::max(biggest, std::fabs(x[i]));
      }
      for (int64_t i = 0; i < c.n; ++i) {
        const double got = out.At(At(m, i, col, c.n, c.k));
        const double tol = 2e-5 * (1 + biggest) + testing::StorageTol(dt, x[i], 0);
        ASSERT_NEAR(got, x[i], tol) << "batch " << m << " row " << i << " col " << col;
      }
    }
  }
}

TEST(SolveTriangular, MatchesSubstitution) {
  const std::vector<Case> cases = {
      {{}, 1, 1, Layout::kContiguous, Layout::kContiguous, Layout::kContiguous},
      {{}, 5, 3, Layout::kContiguous, Layout::kContiguous, Layout::kContiguous},
      {{3}, 64, 35, Layout::kContiguous, Layout::kContiguous, Layout::kContiguous},
      {{2}, 17, 9, Layout::kTransposed, Layout::kStep2, Layout::kTransposed},
      {{2, 3}, 8, 8, Layout::kContiguous, Layout::kTransposed, Layout::kMisaligned},
      {{4}, 9, 70, Layout::kBroadcast, Layout::kContiguous, Layout::kStep2},
      {{2}, 70, 1, Layout::kMisaligned, Layout::kBroadcast, Layout::kContiguous},
      // Note [Blocked triangular solve]: three row blocks, the GEMM between them
      {{}, 150, 5, Layout::kContiguous, Layout::kContiguous, Layout::kContiguous},
      {{2}, 130, 40, Layout::kTransposed, Layout::kStep2, Layout::kMisaligned},
  };
  ForEachTarget([&](const char*) {
    for (const Case& c : cases) {
      for (DType dt : testing::kFloatTypes) {
        for (bool upper : {false, true}) {
          for (bool unit : {false, true}) {
            SCOPED_TRACE(std::string(DTypeName(dt)) + " n " + std::to_string(c.n) + " k " +
                         std::to_string(c.k) + (upper ? " upper" : " lower") +
                         (unit ? " unit" : "") + " a " + testing::LayoutName(c.a_layout) +
                         " b " + testing::LayoutName(c.b_layout));
            Check(c, dt, upper, unit);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
      }
    }
  });
}

// A zero on the diagonal divides by zero, as LAPACK's trsm: inf / NaN, no error.
TEST(SolveTriangular, ZeroPivotGivesInf) {
  TestTensor a = MakeLayout(DType::kFloat32, {2, 2}, Layout::kContiguous);
  a.Set(0, 0.0), a.Set(1, 0.0), a.Set(2, 1.0), a.Set(3, 1.0);
  TestTensor b = MakeLayout(DType::kFloat32, {2, 1}, Layout::kContiguous);
  b.Set(0, 1.0), b.Set(1, 1.0);
  TestTensor out = MakeLayout(DType::kFloat32, {2, 1}, Layout::kContiguous);
  ASSERT_TRUE(SolveTriangular(out.ref, a.ref, b.ref, /*upper=*/false, false).ok());
  EXPECT_TRUE(std::isinf(out.At(0)));
  EXPECT_TRUE(std::isinf(out.At(1)));  // 1 - 1 * inf
}

}  // namespace
}  // namespace trn::kernels
