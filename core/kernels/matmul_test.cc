// Matmul against a double-precision triple loop on every compiled SIMD target:
// sizes around the micro-tile and block edges, transposed / misaligned /
// strided operands, batches (with a shared 2-D operand), broadcast bias,
// alpha/beta and every floating dtype.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <utility>
#include <string>
#include <thread>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"
#include "core/runtime/runtime.h"

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
  bool cached = false;  // b through the packed-weight cache (2-D b only)
  bool a_window = false;  // a: the first k columns of an m x (k + 9) matrix (rs > k)
  // b: the first n columns of a k x ldb matrix, ldb a multiple of 16 past n
  // (64-byte aligned rows: Note [B in place])
  bool b_window = false;
};

int64_t BWindowStride(int64_t n) { return (n + 15) / 16 * 16 + 16; }

std::string Describe(const Case& c) {
  return std::string(DTypeName(c.dtype)) + " B" + std::to_string(c.batch) + " " +
         std::to_string(c.m) + "x" + std::to_string(c.n) + "x" + std::to_string(c.k) +
         " a:" + testing::LayoutName(c.a_layout) + " b:" + testing::LayoutName(c.b_layout) +
         " out:" + testing::LayoutName(c.out_layout) + " bias:" +
         std::to_string(static_cast<int>(c.bias)) + " alpha " + std::to_string(c.alpha) +
         " beta " + std::to_string(c.beta) + (c.cached ? " cached" : "") +
         (c.a_window ? " a-window" : "") + (c.b_window ? " b-window" : "");
}

std::vector<int64_t> Shape(int64_t batch, bool two_d, int64_t r, int64_t c) {
  if (batch == 0 || two_d) return {r, c};
  return {batch, r, c};
}

void RunCase(const Case& c) {
  SCOPED_TRACE(Describe(c));
  const int64_t nb = c.batch == 0 ? 1 : c.batch;
  TestTensor a = MakeRandom(c.dtype, Shape(c.batch, c.a_2d, c.m, c.k + (c.a_window ? 9 : 0)),
                            c.a_layout, 1);
  if (c.a_window) a.ref.sizes[a.ref.ndim - 1] = c.k;
  TestTensor b = MakeRandom(
      c.dtype, Shape(c.batch, c.b_2d, c.k, c.b_window ? BWindowStride(c.n) : c.n), c.b_layout, 2);
  if (c.b_window) b.ref.sizes[b.ref.ndim - 1] = c.n;
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
  const auto run = [&] {
    testing::FillRandom(out, 99);  // garbage the kernel must overwrite
    // Cached: the first call of each target packs (the entry is admitted on
    // its second sighting, the test's first), the second reuses the pack.
    std::shared_ptr<PackedB> packed;
    if (c.cached) {
      AcquirePackedB(b.ref, b.storage.get(), 0);
      packed = AcquirePackedB(b.ref, b.storage.get(), 0);
      EXPECT_NE(packed, nullptr);
    }
    const Status st = Matmul(out.ref, a.ref, b.ref, bias.ref, c.alpha, c.beta, packed.get());
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
  };
  ForEachTarget([&](const char*) {
    run();
    if (c.cached) run();
  });
  if (c.cached) ForgetPackedB(b.storage.get());
}

TEST(Matmul, SizesAcrossTileAndBlockEdges) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 1, 1}, {7, 13, 5}, {65, 33, 129}, {200, 300, 70}, {6, 16, 257}, {150, 40, 300}}) {
    Case c;
    c.m = m, c.n = n, c.k = k;
    RunCase(c);
  }
}

// Runs c at sizes that reach every path of the GEMM: the one-row panels
// (m = 1), several k slices with partial column tiles and 12-row tiles, the
// GEMV path (few rows), k = 0; B row- and column-major, cached when large enough.
void RunAcrossGemmPaths(Case c) {
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {1, 200, 40}, {100, 70, 530}, {13, 256, 1030}, {3, 37, 133}, {6, 33, 5}, {4, 20, 0}}) {
    for (Layout lb : {Layout::kContiguous, Layout::kTransposed}) {
      for (bool cached : {false, true}) {
        if (cached && k * n < 4096) continue;  // too small for the cache
        c.m = m, c.n = n, c.k = k;
        c.b_layout = lb;
        c.cached = cached;
        RunCase(c);
      }
    }
  }
}

TEST(Matmul, AReadInPlaceWithARowStride) {
  // Note [A in place]: float32 A with unit column stride is not packed; its
  // rows are lda = k + 9 apart here.
  Case c;
  c.a_window = true;
  RunAcrossGemmPaths(c);
}

TEST(Matmul, BReadInPlaceWithARowStride) {
  // Note [B in place]: float32 B with 64-byte aligned rows is read in place
  // (its partial last micro-panel packed) when not cached; both A layouts.
  for (bool a_window : {false, true}) {
    Case c;
    c.b_window = true;
    c.a_window = a_window;
    c.bias = a_window ? Bias::kRow : Bias::kNone;
    RunAcrossGemmPaths(c);
  }
  Case c;  // batched: each batch's B read in place
  c.batch = 3, c.m = 20, c.n = 70, c.k = 48;
  c.b_window = true;
  RunCase(c);
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

TEST(Matmul, MatrixTimesVectorRunsTransposed) {
  // n == 1 runs as out^T = b^T a^T on the GEMV path: every layout of a and
  // out, batched (transformers' bmm(W, x[..., None])), with bias and alpha/beta,
  // and a bf16 product that takes the packed path after the swap.
  for (Layout la : {Layout::kContiguous, Layout::kTransposed, Layout::kStep2}) {
    for (Layout lo : {Layout::kContiguous, Layout::kStep2}) {
      Case c;
      c.m = 77, c.n = 1, c.k = 45;
      c.a_layout = la;
      c.out_layout = lo;
      RunCase(c);
    }
  }
  Case c;
  c.batch = 4, c.m = 50, c.n = 1, c.k = 33;
  RunCase(c);
  c.a_2d = true;  // a shared matrix against a batch of vectors
  RunCase(c);
  c.a_2d = false;
  c.bias = Bias::kFull, c.alpha = 0.5, c.beta = -2;
  RunCase(c);
  Case h;
  h.m = 40, h.n = 1, h.k = 70, h.dtype = DType::kBFloat16;
  RunCase(h);
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

TEST(Matmul, RowBiasInTheEpilogue) {
  // Note [Bias in the epilogue]: a float32 bias over N with beta 1 is added
  // by the first k slice's stores (k = 0: out = bias); alpha scales only the
  // product.
  for (double alpha : {1.0, 0.5}) {
    Case c;
    c.bias = Bias::kRow;
    c.alpha = alpha;
    RunAcrossGemmPaths(c);
  }
  Case c;  // batches folded into rows against a shared B: one bias row for all
  c.batch = 3, c.m = 7, c.n = 45, c.k = 600;
  c.b_2d = true;
  c.bias = Bias::kRow;
  RunCase(c);
}

TEST(Matmul, BiasRowInsideOutIsReadBeforeItIsOverwritten) {
  // c.addmm_(a, b) with c's first row expanded as the bias: the fused bias
  // epilogue would read row 0 after a tile wrote it; the fill path must run.
  const int64_t m = 30, n = 70, k = 40;
  TestTensor a = MakeRandom(DType::kFloat32, {m, k}, Layout::kContiguous, 1);
  TestTensor b = MakeRandom(DType::kFloat32, {k, n}, Layout::kContiguous, 2);
  ForEachTarget([&](const char*) {
    TestTensor out = MakeRandom(DType::kFloat32, {m, n}, Layout::kContiguous, 3);
    std::vector<double> row0(n);
    for (int64_t j = 0; j < n; ++j) row0[j] = out.At(j);
    TensorRef bias = out.ref;  // out's row 0 as a [n] bias
    bias.ndim = 1;
    bias.sizes[0] = n;
    bias.strides[0] = 1;
    ASSERT_TRUE(Matmul(out.ref, a.ref, b.ref, bias, 1.0, 1.0, nullptr).ok());
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double dot = row0[j];
        for (int64_t p = 0; p < k; ++p) dot += a.At(i * k + p) * b.At(p * n + j);
        ASSERT_NEAR(out.At(i * n + j), dot, 1e-4 * (1 + std::fabs(dot))) << i << "," << j;
      }
    }
  });
}

TEST(Matmul, BiasThatIsOutAccumulates) {
  // out += alpha * a @ b with out as its own bias (c.addmm_(a, b)): the GEMM
  // accumulates onto out in place; beta != 1 takes the fill path. Every GEMM
  // path: one row, GEMV rows, two k slices, k = 0; and a batch.
  for (auto [batch, m, n, k] : std::vector<std::array<int64_t, 4>>{
           {0, 1, 200, 40}, {0, 3, 37, 133}, {0, 30, 70, 530}, {0, 13, 256, 1030},
           {0, 5, 9, 0}, {2, 7, 45, 60}}) {
    for (double beta : {1.0, 2.0}) {
      SCOPED_TRACE(std::to_string(batch) + " " + std::to_string(m) + "x" + std::to_string(n) +
                   "x" + std::to_string(k) + " beta " + std::to_string(beta));
      const std::vector<int64_t> a_shape = Shape(batch, false, m, k);
      TestTensor a = MakeRandom(DType::kFloat32, a_shape, Layout::kContiguous, 1);
      TestTensor b = MakeRandom(DType::kFloat32, Shape(batch, false, k, n), Layout::kContiguous, 2);
      ForEachTarget([&](const char*) {
        TestTensor out = MakeRandom(DType::kFloat32, Shape(batch, false, m, n),
                                    Layout::kContiguous, 3);
        const int64_t nb = batch == 0 ? 1 : batch;
        std::vector<double> before(static_cast<size_t>(nb * m * n));
        for (size_t i = 0; i < before.size(); ++i) before[i] = out.At(static_cast<int64_t>(i));
        ASSERT_TRUE(Matmul(out.ref, a.ref, b.ref, out.ref, 0.5, beta, nullptr).ok());
        for (int64_t bi = 0; bi < nb; ++bi) {
          for (int64_t i = 0; i < m; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              double dot = 0;
              for (int64_t p = 0; p < k; ++p) {
                dot += a.At((bi * m + i) * k + p) * b.At((bi * k + p) * n + j);
              }
              const int64_t at = (bi * m + i) * n + j;
              const double want = beta * before[static_cast<size_t>(at)] + 0.5 * dot;
              ASSERT_NEAR(out.At(at), want, 1e-4 * (1 + std::fabs(want))) << bi << "," << i << ","
                                                                             << j;
            }
          }
        }
      });
    }
  }
}

TEST(Matmul, OutSharingAnOperandGetsTheProduct) {
  // mm(a, b, out=a) and out=b with k in two slices: the GEMM computes into
  // scratch, since it reads A in place and packs B slice by slice.
  const int64_t n = 600;
  TestTensor a0 = MakeRandom(DType::kFloat32, {n, n}, Layout::kContiguous, 1);
  TestTensor b0 = MakeRandom(DType::kFloat32, {n, n}, Layout::kContiguous, 2);
  std::vector<double> want(n * n, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < n; ++p) {
      const double x = a0.At(i * n + p);
      for (int64_t j = 0; j < n; ++j) want[i * n + j] += x * b0.At(p * n + j);
    }
  }
  for (bool into_a : {true, false}) {
    TestTensor a = MakeRandom(DType::kFloat32, {n, n}, Layout::kContiguous, 1);
    TestTensor b = MakeRandom(DType::kFloat32, {n, n}, Layout::kContiguous, 2);
    const TensorRef out = into_a ? a.ref : b.ref;
    ASSERT_TRUE(Matmul(out, a.ref, b.ref, TensorRef{}, 1.0, 1.0, nullptr).ok());
    const TestTensor& got = into_a ? a : b;
    for (int64_t i = 0; i < n * n; ++i) {
      ASSERT_NEAR(got.At(i), want[i], 1e-3 * (1 + std::fabs(want[i])))
          << (into_a ? "a " : "b ") << i;
    }
  }
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


// ---- Packed-weight cache (Note [Packed weight cache]) ------------------------------

TEST(PackCache, PackedBMatchesTheReferenceAcrossBlockEdges) {
  // k past KC (256 / 512) and n past NC (3072): several slices of the pack.
  for (auto [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {33, 70, 129}, {1, 3100, 40}, {7, 64, 600}, {17, 37, 133}}) {
    for (Layout lb : {Layout::kTransposed, Layout::kContiguous, Layout::kStep2}) {
      Case c;
      c.m = m, c.n = n, c.k = k;
      c.b_layout = lb;
      c.cached = true;
      c.bias = m == 7 ? Bias::kRow : Bias::kNone;
      RunCase(c);
    }
  }
  for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
    Case c;
    c.dtype = dt;
    c.m = 20, c.n = 65, c.k = 80;
    c.b_layout = Layout::kTransposed;
    c.cached = true;
    RunCase(c);
  }
  Case c;  // a batched product with a shared 2-D weight (linear on [B, S, K])
  c.batch = 3, c.m = 5, c.n = 72, c.k = 64;
  c.b_2d = true;
  c.b_layout = Layout::kTransposed;
  c.cached = true;
  RunCase(c);
}

// Bitwise equality with the uncached GEMM of the same target and a product
// computed from b's current contents.
void ExpectSameBits(const TestTensor& x, const TestTensor& y) {
  ASSERT_EQ(x.numel(), y.numel());
  int failures = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.At(i) != y.At(i) && ++failures <= 5) {
      ADD_FAILURE() << "element " << i << ": " << x.At(i) << " vs " << y.At(i);
    }
  }
}

struct Problem {
  TestTensor a, b, out, expected;
  explicit Problem(uint32_t seed, int64_t m = 24, int64_t n = 96, int64_t k = 80)
      : a(MakeRandom(DType::kFloat32, {m, k}, Layout::kContiguous, seed)),
        b(MakeRandom(DType::kFloat32, {k, n}, Layout::kTransposed, seed + 1)),
        out(Empty(DType::kFloat32, {m, n})),
        expected(Empty(DType::kFloat32, {m, n})) {
    Recompute();
  }
  void Recompute() {  // expected = a @ b without the cache
    ASSERT_TRUE(Matmul(expected.ref, a.ref, b.ref, TensorRef{}).ok());
  }
  void Run(PackedB* packed) {
    testing::FillRandom(out, 7);
    ASSERT_TRUE(Matmul(out.ref, a.ref, b.ref, TensorRef{}, 1.0, 1.0, packed).ok());
  }
};

TEST(PackCache, AdmitsOnlyA2DOr3DFloatingBSeenTwice) {
  ClearPackCache();
  Problem p(1);
  const void* storage = p.b.storage.get();
  EXPECT_EQ(AcquirePackedB(p.b.ref, storage, 0), nullptr);  // first sighting
  EXPECT_NE(AcquirePackedB(p.b.ref, storage, 0), nullptr);
  // 3-D: grouped_mm's experts, one pack per slice.
  TestTensor experts = MakeRandom(DType::kFloat32, {2, 64, 64}, Layout::kContiguous, 3);
  EXPECT_EQ(AcquirePackedB(experts.ref, experts.storage.get(), 0), nullptr);
  EXPECT_NE(AcquirePackedB(experts.ref, experts.storage.get(), 0), nullptr);
  TestTensor small = MakeRandom(DType::kFloat32, {16, 16}, Layout::kContiguous, 3);
  TestTensor four_d = MakeRandom(DType::kFloat32, {2, 2, 64, 64}, Layout::kContiguous, 3);
  TestTensor ints = MakeRandom(DType::kInt32, {64, 128}, Layout::kContiguous, 3);
  for (const TestTensor* t : {&small, &four_d, &ints}) {
    for (int i = 0; i < 3; ++i) EXPECT_EQ(AcquirePackedB(t->ref, t->storage.get(), 0), nullptr);
  }
  EXPECT_EQ(AcquirePackedB(p.b.ref, nullptr, 0), nullptr);  // no storage: never
  EXPECT_EQ(GetPackCacheStats().entries, 2u);
  ClearPackCache();
}

TEST(PackCache, ViewsOfOneStorageAreBounded) {
  // Growing slices of one buffer (a KV cache): each a new view, seen once.
  ClearPackCache();
  TestTensor buffer = MakeRandom(DType::kFloat32, {64, 512}, Layout::kContiguous, 61);
  for (int64_t cols = 64; cols <= 512; cols += 8) {
    TensorRef view = buffer.ref;
    view.sizes[1] = cols;
    AcquirePackedB(view, buffer.storage.get(), 0);
  }
  EXPECT_EQ(GetPackCacheStats().entries, 8u);
  ForgetPackedB(buffer.storage.get());
  EXPECT_EQ(GetPackCacheStats().entries, 0u);
}

TEST(PackCache, HitGivesIdenticalResults) {
  ForEachTarget([&](const char*) {
    ClearPackCache();
    Problem p(11);
    const void* storage = p.b.storage.get();
    AcquirePackedB(p.b.ref, storage, 0);
    for (int call = 0; call < 3; ++call) {
      auto packed = AcquirePackedB(p.b.ref, storage, 0);
      ASSERT_NE(packed, nullptr);
      p.Run(packed.get());
      ExpectSameBits(p.out, p.expected);
    }
    const PackCacheStats stats = GetPackCacheStats();
    EXPECT_EQ(stats.packs, 1u);
    EXPECT_EQ(stats.hits, 2u);
    EXPECT_GT(stats.bytes, 0u);
    ForgetPackedB(storage);
    EXPECT_EQ(GetPackCacheStats().entries, 0u);
    EXPECT_EQ(GetPackCacheStats().bytes, 0u);
  });
}

TEST(PackCache, NewVersionIsPackedAgain) {
  ForEachTarget([&](const char*) {
    ClearPackCache();
    Problem p(21);
    const void* storage = p.b.storage.get();
    AcquirePackedB(p.b.ref, storage, 0);
    auto old_pack = AcquirePackedB(p.b.ref, storage, 0);
    p.Run(old_pack.get());
    // An in-place write: new contents, version 1.
    testing::FillRandom(p.b, 22);
    p.Recompute();
    auto fresh = AcquirePackedB(p.b.ref, storage, 1);
    EXPECT_EQ(fresh, nullptr);  // the count starts over for the new version
    p.Run(fresh.get());
    ExpectSameBits(p.out, p.expected);
    fresh = AcquirePackedB(p.b.ref, storage, 1);
    ASSERT_NE(fresh, nullptr);
    EXPECT_NE(fresh, old_pack);
    p.Run(fresh.get());
    ExpectSameBits(p.out, p.expected);
    EXPECT_EQ(GetPackCacheStats().entries, 1u);  // version 0 was dropped
    EXPECT_EQ(GetPackCacheStats().packs, 2u);
    // An in-flight holder of the old version still computes with its own pack.
    testing::FillRandom(p.out, 5);
    ASSERT_TRUE(Matmul(p.out.ref, p.a.ref, p.b.ref, TensorRef{}, 1.0, 1.0, old_pack.get()).ok());
    ClearPackCache();
  });
}

TEST(PackCache, FreedAndReallocatedAtTheSameAddressIsPackedAgain) {
  // The runtime's caching allocator hands the freed block back for the same
  // size and stream; its free observer must drop the pack first.
  rt::Allocator alloc(0, uint64_t{1} << 30);
  rt::SetFreeObserver(&ForgetPackedB);
  ForEachTarget([&](const char*) {
    ClearPackCache();
    const int64_t k = 80, n = 96;
    Problem p(31, 24, n, k);
    const size_t bytes = static_cast<size_t>(k * n) * sizeof(float);
    const auto place_b = [&](void* block, uint32_t seed) {
      TestTensor src = MakeRandom(DType::kFloat32, {n, k}, Layout::kContiguous, seed);
      std::memcpy(block, src.ref.data, bytes);
      p.b.ref.data = block;  // a transposed [k, n] view of the [n, k] block
      p.Recompute();
    };
    void* block = alloc.Allocate(bytes, 0);
    place_b(block, 32);
    AcquirePackedB(p.b.ref, block, 0);
    auto packed = AcquirePackedB(p.b.ref, block, 0);
    p.Run(packed.get());
    ExpectSameBits(p.out, p.expected);
    packed.reset();
    alloc.Free(block);
    EXPECT_EQ(GetPackCacheStats().entries, 0u);
    void* again = alloc.Allocate(bytes, 0);
    ASSERT_EQ(again, block);
    place_b(again, 33);  // a new tensor, same address, layout and version 0
    for (int call = 0; call < 3; ++call) {
      packed = AcquirePackedB(p.b.ref, again, 0);
      p.Run(packed.get());
      ExpectSameBits(p.out, p.expected);
    }
    packed.reset();
    alloc.Free(again);
    p.b.ref.data = nullptr;
  });
  rt::SetFreeObserver(nullptr);
  ClearPackCache();
}

TEST(PackCache, ByteCapEvictsLeastRecentlyUsed) {
  ClearPackCache();
  Problem p1(41), p2(43), p3(45);
  const auto use = [](Problem& p) {
    auto packed = AcquirePackedB(p.b.ref, p.b.storage.get(), 0);
    p.Run(packed.get());
    ExpectSameBits(p.out, p.expected);
  };
  for (Problem* p : {&p1, &p2, &p3}) use(*p);  // seen once each
  use(p1);
  const uint64_t one = GetPackCacheStats().bytes;
  ASSERT_GT(one, 0u);
  SetPackCacheCapacity(2 * one);
  use(p2);
  use(p1);
  use(p3);  // over the cap: p2 is the least recently used
  PackCacheStats stats = GetPackCacheStats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.bytes, 2 * one);
  use(p1);  // still cached: a hit, no new pack
  EXPECT_EQ(GetPackCacheStats().packs, stats.packs);
  use(p2);  // evicted: seen again, counted as a fresh entry
  use(p2);
  EXPECT_LE(GetPackCacheStats().bytes, 2 * one);
  SetPackCacheCapacity(kDefaultPackCacheBytes);
  ClearPackCache();
}

TEST(PackCache, ConcurrentUseFromTwoThreads) {
  // Two core workers multiply with the same weight (and each with its own)
  // while a third thread writes versions and frees storages under them.
  ClearPackCache();
  Problem shared(51), own0(53), own1(55);
  std::atomic<uint64_t> version{0};
  std::atomic<bool> stop{false};
  std::vector<std::string> errors(2);
  const auto worker = [&](int id, Problem& own) {
    Problem mine_of_shared = shared;  // same a, b storage; own output
    mine_of_shared.out = Empty(DType::kFloat32, shared.out.sizes());
    for (int it = 0; it < 200 && errors[id].empty(); ++it) {
      for (Problem* p : {&mine_of_shared, &own}) {
        auto packed = AcquirePackedB(p->b.ref, p->b.storage.get(), version.load());
        p->Run(packed.get());
        for (int64_t i = 0; i < p->out.numel(); ++i) {
          if (p->out.At(i) != p->expected.At(i)) {
            errors[id] = "mismatch at " + std::to_string(i);
            break;
          }
        }
      }
    }
  };
  std::thread churn([&] {
    while (!stop.load()) {
      version.fetch_add(1);  // contents unchanged: any version must match
      ForgetPackedB(own0.b.storage.get());
      std::this_thread::yield();
    }
  });
  std::thread t0(worker, 0, std::ref(own0)), t1(worker, 1, std::ref(own1));
  t0.join();
  t1.join();
  stop.store(true);
  churn.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_GT(GetPackCacheStats().packs, 0u);
  ClearPackCache();
}

// GroupedMatmul against the triple loop per group: offsets read from an
// int32 tensor, groups of 0 rows, rows no group covers (zero), strided
// operands, and bad offsets refused before anything is written.
double Dot(const TestTensor& a, int64_t arow, const TestTensor& b, int64_t bcol, int64_t k0,
           int64_t k1, int64_t a_base = 0, int64_t b_base = 0) {
  // a's row `arow` (a_base: a's flat offset of its group) times b's column.
  const int64_t ka = a.sizes().back(), nb = b.sizes().back();
  double acc = 0;
  for (int64_t k = k0; k < k1; ++k) acc += a.At(a_base + arow * ka + k) * b.At(b_base + k * nb + bcol);
  return acc;
}

TestTensor Offsets(const std::vector<int64_t>& ends) {
  TestTensor t = Empty(DType::kInt32, {static_cast<int64_t>(ends.size())});
  for (size_t i = 0; i < ends.size(); ++i) t.Set(static_cast<int64_t>(i), static_cast<double>(ends[i]));
  return t;
}

TEST(GroupedMatmul, RowsPerExpert2Dx3D) {
  ForEachTarget([](const char*) {
    const int64_t s = 29, k = 19, n = 13, g = 4;
    for (Layout bl : {Layout::kContiguous, Layout::kTransposed}) {
      TestTensor a = MakeRandom(DType::kFloat32, {s, k}, Layout::kStep2, 1);
      TestTensor b = MakeRandom(DType::kFloat32, {g, k, n}, bl, 2);
      TestTensor offs = Offsets({5, 5, 20, 26});  // an empty group; rows 26.. uncovered
      TestTensor out = MakeRandom(DType::kFloat32, {s, n}, Layout::kContiguous, 3);
      ASSERT_TRUE(GroupedMatmul(out.ref, a.ref, b.ref, offs.ref).ok());
      const int64_t ends[] = {5, 5, 20, 26};
      int64_t start = 0;
      for (int64_t grp = 0; grp < g; ++grp) {
        for (int64_t r = start; r < ends[grp]; ++r) {
          for (int64_t c = 0; c < n; ++c) {
            EXPECT_NEAR(out.At(r * n + c), Dot(a, r, b, c, 0, k, 0, grp * k * n), 1e-4)
                << "group " << grp << " row " << r;
          }
        }
        start = ends[grp];
      }
      for (int64_t i = 26 * n; i < s * n; ++i) EXPECT_EQ(out.At(i), 0.0);
    }
  });
}

// The experts' weights packed once (a 3-D pack: one 2-D pack per expert) give
// the unpacked result, and the pack is reused on the next call.
TEST(GroupedMatmul, PackedExpertsEqualUnpacked) {
  ForEachTarget([](const char*) {
    const int64_t s = 70, k = 40, n = 150, g = 3;  // n spans several NR panels and an edge
    for (Layout bl : {Layout::kContiguous, Layout::kTransposed}) {
      TestTensor a = MakeRandom(DType::kFloat32, {s, k}, Layout::kContiguous, 11);
      TestTensor b = MakeRandom(DType::kFloat32, {g, k, n}, bl, 12);
      TestTensor offs = Offsets({30, 31, 66});
      TestTensor plain = MakeRandom(DType::kFloat32, {s, n}, Layout::kContiguous, 13);
      ASSERT_TRUE(GroupedMatmul(plain.ref, a.ref, b.ref, offs.ref).ok());
      ClearPackCache();
      AcquirePackedB(b.ref, b.ref.data, 0);
      std::shared_ptr<PackedB> packed = AcquirePackedB(b.ref, b.ref.data, 0);
      ASSERT_NE(packed, nullptr);
      for (int call = 0; call < 2; ++call) {
        TestTensor out = MakeRandom(DType::kFloat32, {s, n}, Layout::kContiguous, 14);
        ASSERT_TRUE(GroupedMatmul(out.ref, a.ref, b.ref, offs.ref, packed.get()).ok());
        for (int64_t i = 0; i < s * n; ++i) {
          ASSERT_NEAR(out.At(i), plain.At(i), 1e-5) << "element " << i << " call " << call;
        }
      }
      const PackCacheStats st = GetPackCacheStats();
      EXPECT_EQ(st.packs, 1u);
      EXPECT_EQ(st.hits, 1u);
      packed.reset();
      ClearPackCache();
    }
  });
}

TEST(GroupedMatmul, KAndColumnGroupsAndBatched) {
  const int64_t m = 6, k = 17, n = 9, g = 3;
  {  // 2-D x 2-D: K split; an empty group is all zeros
    TestTensor a = MakeRandom(DType::kFloat32, {m, k}, Layout::kContiguous, 4);
    TestTensor b = MakeRandom(DType::kFloat32, {k, n}, Layout::kContiguous, 5);
    TestTensor out = MakeRandom(DType::kFloat32, {g, m, n}, Layout::kContiguous, 6);
    ASSERT_TRUE(GroupedMatmul(out.ref, a.ref, b.ref, Offsets({7, 7, 17}).ref).ok());
    const int64_t k0[] = {0, 7, 7}, k1[] = {7, 7, 17};
    for (int64_t grp = 0; grp < g; ++grp) {
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          EXPECT_NEAR(out.At((grp * m + r) * n + c), Dot(a, r, b, c, k0[grp], k1[grp]), 1e-4);
        }
      }
    }
  }
  {  // 3-D x 2-D: columns of b and out split, a[g] per group
    TestTensor a = MakeRandom(DType::kFloat32, {g, m, k}, Layout::kContiguous, 7);
    TestTensor b = MakeRandom(DType::kFloat32, {k, 12}, Layout::kContiguous, 8);
    TestTensor out = MakeRandom(DType::kFloat32, {m, 12}, Layout::kContiguous, 9);
    ASSERT_TRUE(GroupedMatmul(out.ref, a.ref, b.ref, Offsets({4, 4, 10}).ref).ok());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < 12; ++c) {
        const int64_t grp = c < 4 ? 0 : 2;
        const double want = c < 10 ? Dot(a, r, b, c, 0, k, grp * m * k) : 0.0;
        EXPECT_NEAR(out.At(r * 12 + c), want, 1e-4) << "col " << c;
      }
    }
  }
  {  // 3-D x 3-D without offsets: bmm, bfloat16
    TestTensor a = MakeRandom(DType::kBFloat16, {g, m, k}, Layout::kContiguous, 10);
    TestTensor b = MakeRandom(DType::kBFloat16, {g, k, n}, Layout::kContiguous, 11);
    TestTensor out = Empty(DType::kBFloat16, {g, m, n});
    ASSERT_TRUE(GroupedMatmul(out.ref, a.ref, b.ref, TensorRef{}).ok());
    for (int64_t grp = 0; grp < g; ++grp) {
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          const double want = Dot(a, r, b, c, 0, k, grp * m * k, grp * k * n);
          EXPECT_NEAR(out.At((grp * m + r) * n + c), want, 2e-2 * (1 + std::abs(want)));
        }
      }
    }
  }
}

TEST(GroupedMatmul, BadOffsetsWriteNothing) {
  TestTensor a = MakeRandom(DType::kFloat32, {8, 4}, Layout::kContiguous, 12);
  TestTensor b = MakeRandom(DType::kFloat32, {3, 4, 5}, Layout::kContiguous, 13);
  TestTensor out = Empty(DType::kFloat32, {8, 5});
  for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, 7.0);
  Status dec = GroupedMatmul(out.ref, a.ref, b.ref, Offsets({3, 2, 8}).ref);
  EXPECT_NE(dec.error.find("offs[1] = 2 is less than the previous offset 3"), std::string::npos)
      << dec.error;
  Status past = GroupedMatmul(out.ref, a.ref, b.ref, Offsets({3, 4, 9}).ref);
  EXPECT_NE(past.error.find("offs[2] = 9 exceeds the grouped size 8"), std::string::npos)
      << past.error;
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.At(i), 7.0);
  const KernelInfo info = DescribeGroupedMatmul(out.ref, a.ref, b.ref, "aten::_grouped_mm");
  EXPECT_STREQ(info.name, "grouped_matmul_f32");
  EXPECT_EQ(info.flops, 2u * 8 * 5 * 4);
}

TEST(GatheredMatmul, BothOrdersNegativeIdsAndRange) {
  const int64_t e = 3, b = 4, n = 7, k = 5;
  TestTensor w = MakeRandom(DType::kFloat32, {e, n, k}, Layout::kContiguous, 31);
  TestTensor x = MakeRandom(DType::kFloat32, {b, k, 2}, Layout::kStep2, 32);
  TestTensor ids = Empty(DType::kInt64, {b});
  const int64_t id[] = {2, 0, -1, 2};  // -1 is matrix 2
  for (int64_t i = 0; i < b; ++i) ids.Set(i, static_cast<double>(id[i]));
  TestTensor out = Empty(DType::kFloat32, {b, n, 2});
  ASSERT_TRUE(GatheredMatmul(out.ref, w.ref, ids.ref, x.ref, true).ok());
  for (int64_t i = 0; i < b; ++i) {
    const int64_t m = (id[i] + e) % e;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < 2; ++c) {
        double acc = 0;
        for (int64_t j = 0; j < k; ++j) acc += w.At((m * n + r) * k + j) * x.At((i * k + j) * 2 + c);
        EXPECT_NEAR(out.At((i * n + r) * 2 + c), acc, 1e-5) << "batch " << i;
      }
    }
  }
  TestTensor xt = MakeRandom(DType::kFloat32, {b, 1, n}, Layout::kContiguous, 33);
  TestTensor o2 = Empty(DType::kFloat32, {b, 1, k});
  ASSERT_TRUE(GatheredMatmul(o2.ref, w.ref, ids.ref, xt.ref, false).ok());  // x[b] @ w[ids[b]]
  for (int64_t i = 0; i < b; ++i) {
    const int64_t m = (id[i] + e) % e;
    for (int64_t c = 0; c < k; ++c) {
      double acc = 0;
      for (int64_t j = 0; j < n; ++j) acc += xt.At(i * n + j) * w.At((m * n + j) * k + c);
      EXPECT_NEAR(o2.At(i * k + c), acc, 1e-5);
    }
  }
  ids.Set(3, 3.0);
  for (int64_t i = 0; i < out.numel(); ++i) out.Set(i, 9.0);
  const Status s = GatheredMatmul(out.ref, w.ref, ids.ref, x.ref, true);
  EXPECT_NE(s.error.find("index 3 at position 3 is out of range for 3"), std::string::npos) << s.error;
  for (int64_t i = 0; i < out.numel(); ++i) EXPECT_EQ(out.At(i), 9.0);
}

}  // namespace
}  // namespace trn::kernels
