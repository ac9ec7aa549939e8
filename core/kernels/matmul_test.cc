// Matmul against a double-precision triple loop on every compiled SIMD target:
// sizes around the micro-tile and block edges, transposed / misaligned /
// strided operands, batches (with a shared 2-D operand), broadcast bias,
// alpha/beta and every floating dtype.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <utility>
#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::Empty;
using testing::ForEachTarget;
using testing::Layout;
using testing::MakeLayout;
using testing::MakeRandom;
using testing::TestTensor;

enum class Bias { kNone, kRow, kCol, kFull };

struct Case {
  int64_t batch = 0;  // 0: plain 2-D mm
  int64_t m, n, k;
  DType dtype = DType::kFloat32;
  Layout a_layout = Layout::kContiguous;
  Layout b_layout = Layout::kContiguous;
  Layout out_layout = Layout::kContiguous;
  bool a_2d = false, b_2d = false;  // shared operand in a batched product
  Bias bias = Bias::kNone;
  double alpha = 1.0, beta = 1.0;
};

std::string Describe(const Case& c) {
  return std::string(DTypeName(c.dtype)) + " B" + std::to_string(c.batch) + " " +
         std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         " a:" + testing::LayoutName(c.a_layout) + " b:" + testing::LayoutName(c.b_layout) +
         " out:" + testing::LayoutName(c.out_layout) + " bias:" +
         std::to_string(static_cast<int>(c.bias)) + " alpha " + std::to_string(c.alpha) +
         " beta " + std::to_string(c.beta);
}

std::vector<int64_t> Shape(int64_t batch, bool two_d, int64_t r, int64_t c) {
  if (batch == 0 || two_d) return {r, c};
  return {batch, r, c};
}

void RunCase(const Case& c) {
  SCOPED_TRACE(Describe(c));
  const int64_t nb = c.batch == 0 ? 1 : c.batch;
  TestTensor a = MakeRandom(c.dtype, Shape(c.batch, c.a_2d, c.m, c.k), c.a_layout, 1);
  TestTensor b = MakeRandom(c.dtype, Shape(c.batch, c.b_2d, c.k, c.n), c.b_layout, 2);
  TestTensor out = MakeLayout(c.dtype, Shape(c.batch, false, c.m, c.n), c.out_layout);
  TestTensor bias;
  switch (c.bias) {
    case Bias::kNone: break;
    case Bias::kRow: bias = MakeRandom(c.dtype, {c.n}, Layout::kContiguous, 3); break;
    case Bias::kCol: bias = MakeRandom(c.dtype, {c.m, 1}, Layout::kContiguous, 3); break;
    case Bias::kFull:
      bias = MakeRandom(c.dtype, Shape(c.batch, false, c.m, c.n), Layout::kStep2, 3);
      break;
  }
  const auto a_at = [&](int64_t bi, int64_t i, int64_t p) {
    return a.At(((c.a_2d ? 0 : bi) * c.m + i) * c.k + p);
  };
  const auto b_at = [&](int64_t bi, int64_t p, int64_t j) {
    return b.At(((c.b_2d ? 0 : bi) * c.k + p) * c.n + j);
  };
  const auto bias_at = [&](int64_t bi, int64_t i, int64_t j) {
    switch (c.bias) {
      case Bias::kNone: return 0.0;
      case Bias::kRow: return bias.At(j);
      case Bias::kCol: return bias.At(i);
      case Bias::kFull: return bias.At((bi * c.m + i) * c.n + j);
    }
    return 0.0;
  };
  ForEachTarget([&](const char*) {
    testing::FillRandom(out, 99);  // garbage the kernel must overwrite
    const Status st = Matmul(out.ref, a.ref, b.ref, bias.ref, c.alpha, c.beta);
    ASSERT_TRUE(st.ok()) << st.error;
    int failures = 0;
    for (int64_t bi = 0; bi < nb; ++bi) {
      for (int64_t i = 0; i < c.m; ++i) {
        for (int64_t j = 0; j < c.n; ++j) {
          double dot = 0, mag = 0;
          for (int64_t p = 0; p < c.k; ++p) {
            const double x = a_at(bi, i, p) * b_at(bi, p, j);
            dot += x;
            mag += std::fabs(x);
          }
          const double bv = bias_at(bi, i, j);
          const double expected = c.alpha * dot + c.beta * bv;
          // f32 accumulation relative to sum|a||b| (f64 inputs also round to
          // f32 first), plus one storage ulp for bf16/f16 outputs.
          const double tol = 1e-5 * (std::fabs(c.alpha) * mag + std::fabs(c.beta * bv)) +
                             testing::StorageTol(c.dtype, expected, 0.0) + 1e-30;
          const double actual = out.At((bi * c.m + i) * c.n + j);
          if (std::fabs(actual - expected) > tol && ++failures <= 5) {
            ADD_FAILURE() << "at [" << bi << "," << i << "," << j << "] actual " << actual
                          << " expected " << expected << " tol " << tol;
          }
        }
      }
    }
  });
}

TEST(Matmul, SizesAcrossTileAndBlockEdges) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {7, 13, 5}, {65, 33, 129}, {200, 300, 70}, {6, 16, 257}, {150, 40, 300}}) {
    Case c;
    c.m = m, c.n = n, c.k = k;
    RunCase(c);
  }
}

TEST(Matmul, TransposedMisalignedAndStridedOperands) {
  for (Layout la : {Layout::kTransposed, Layout::kMisaligned, Layout::kStep2}) {
    for (Layout lb : {Layout::kTransposed, Layout::kMisaligned, Layout::kStep2}) {
      Case c;
      c.m = 33, c.n = 37, c.k = 29;
      c.a_layout = la;
      c.b_layout = lb;
      RunCase(c);
    }
  }
  Case c;  // linear: x @ w.t() with w [N, K]
  c.m = 65, c.n = 33, c.k = 129;
  c.b_layout = Layout::kTransposed;
  RunCase(c);
}

TEST(Matmul, FewRowsStreamB) {
  // Note [GEMV path]: dot products (B columns contiguous) up to 16 rows,
  // row updates (B rows contiguous) up to 4 rows; both with k and n tails.
  for (int64_t m : {1, 3, 4, 5, 16, 17}) {
    for (Layout lb : {Layout::kTransposed, Layout::kContiguous}) {
      Case c;
      c.m = m, c.n = 37, c.k = 133;
      c.b_layout = lb;
      c.a_layout = m == 5 ? Layout::kStep2 : Layout::kContiguous;
      c.bias = m == 3 ? Bias::kRow : Bias::kNone;
      c.alpha = m == 3 ? 0.5 : 1.0;
      RunCase(c);
    }
  }
  Case c;  // a bf16 B is packed (converted) even with few rows
  c.m = 2, c.n = 9, c.k = 40;
  c.dtype = DType::kBFloat16;
  c.b_layout = Layout::kTransposed;
  RunCase(c);
}

TEST(Matmul, NonContiguousOutput) {
  for (Layout lo : {Layout::kTransposed, Layout::kStep2, Layout::kMisaligned}) {
    Case c;
    c.m = 19, c.n = 21, c.k = 17;
    c.out_layout = lo;
    c.bias = Bias::kRow;
    RunCase(c);
  }
}

TEST(Matmul, Batched) {
  Case c;
  c.batch = 3, c.m = 7, c.n = 13, c.k = 5;
  RunCase(c);
  c.b_2d = true;  // shared weight: batches fold into one tall GEMM
  RunCase(c);
  c.m = 1;  // decode-style rows
  RunCase(c);
  c.b_2d = false;
  c.a_2d = true;
  c.m = 9;
  RunCase(c);
  c.a_2d = false;
  c.batch = 2, c.m = 65, c.n = 33, c.k = 40;
  c.a_layout = Layout::kTransposed;
  c.b_layout = Layout::kBroadcast;  // stride-0 batch dim
  RunCase(c);
}

TEST(Matmul, BiasAlphaBeta) {
  for (Bias bias : {Bias::kRow, Bias::kCol, Bias::kFull}) {
    for (auto [alpha, beta] : std::vector<std::pair<double, double>>{{1, 1}, {0.5, -2}, {2, 0}}) {
      Case c;
      c.m = 23, c.n = 19, c.k = 31;
      c.bias = bias, c.alpha = alpha, c.beta = beta;
      RunCase(c);
    }
  }
  Case c;  // batched, bias broadcast over batch and rows, shared weight
  c.batch = 2, c.m = 5, c.n = 20, c.k = 9;
  c.b_2d = true;
  c.bias = Bias::kRow;
  c.beta = 0.25;
  RunCase(c);
}

TEST(Matmul, Dtypes) {
  for (DType dt : {DType::kFloat64, DType::kBFloat16, DType::kFloat16}) {
    Case c;
    c.dtype = dt;
    c.m = 37, c.n = 41, c.k = 70;
    c.bias = Bias::kRow;
    c.b_layout = Layout::kTransposed;
    RunCase(c);
    c.batch = 2, c.m = 7, c.n = 13, c.k = 5;
    c.bias = Bias::kNone;
    RunCase(c);
  }
}

TEST(Matmul, EmptyK) {
  Case c;
  c.m = 4, c.n = 5, c.k = 0;
  RunCase(c);
  c.bias = Bias::kRow;
  RunCase(c);
}

TEST(Matmul, Describe) {
  TestTensor a = Empty(DType::kBFloat16, {2, 8, 16});
  TestTensor b = Empty(DType::kBFloat16, {16, 4});
  TestTensor out = Empty(DType::kBFloat16, {2, 8, 4});
  const KernelInfo info = DescribeMatmul(out.ref, a.ref, b.ref, TensorRef{}, "aten::matmul");
  EXPECT_STREQ(info.name, "matmul_bf16");
  EXPECT_STREQ(info.op, "aten::matmul");
  EXPECT_EQ(info.engine, rt::Engine::kTensor);
  EXPECT_EQ(info.flops, 2u * 2 * 8 * 4 * 16);
  EXPECT_EQ(info.bytes_read, (2u * 8 * 16 + 16 * 4) * 2);
  EXPECT_EQ(info.bytes_written, 2u * 8 * 4 * 2);
}

}  // namespace
}  // namespace trn::kernels
