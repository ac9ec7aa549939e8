// indexing.h kernels against element-by-element references over dtypes,
// dims and layouts, plus their out-of-range errors. Pure data movement and
// scalar arithmetic without Highway code, so not repeated per SIMD target.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::Empty;
using testing::Layout;
using testing::MakeLayout;
using testing::MakeRandom;
using testing::TestTensor;

const DType kAllDTypes[] = {DType::kFloat32, DType::kFloat64, DType::kBFloat16, DType::kFloat16,
                            DType::kInt32,   DType::kInt64,   DType::kBool};
const Layout kLayouts[] = {Layout::kContiguous, Layout::kTransposed, Layout::kStep2,
                           Layout::kBroadcast, Layout::kMisaligned};

std::vector<int64_t> Unravel(int64_t i, const std::vector<int64_t>& sizes) {
  std::vector<int64_t> idx(sizes.size());
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    idx[d] = i % sizes[d];
    i /= sizes[d];
  }
  return idx;
}
int64_t Ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& sizes) {
  int64_t i = 0;
  for (size_t d = 0; d < sizes.size(); ++d) i = i * sizes[d] + idx[d];
  return i;
}

TestTensor MakeInts(DType dt, const std::vector<int64_t>& sizes, const std::vector<int64_t>& v,
                    Layout layout = Layout::kContiguous) {
  TestTensor t = MakeLayout(dt, sizes, layout);
  for (int64_t i = 0; i < t.numel(); ++i) t.Set(i, static_cast<double>(v[i]));
  return t;
}

// a + b as the accumulating kernels compute it: float32 for floating dtypes
// (float64 too), exact for ints, or for bool.
double AddRef(DType dt, double a, double b) {
  if (dt == DType::kBool) return (a != 0 || b != 0) ? 1 : 0;
  if (!IsFloating(dt)) return a + b;
  const double sum = static_cast<double>(static_cast<float>(a) + static_cast<float>(b));
  return dt == DType::kFloat64 ? sum : testing::RoundTo(dt, sum);
}

// One scatter_reduce step of `mode` on dtype dt, as the kernel stores it.
double ReduceRef(DType dt, ScatterReduce mode, double a, double b) {
  const bool logical = dt == DType::kBool;
  switch (mode) {
    case ScatterReduce::kNone: return b;
    case ScatterReduce::kAdd: return AddRef(dt, a, b);
    case ScatterReduce::kMax: return logical ? double(a != 0 || b != 0) : std::max(a, b);
    case ScatterReduce::kMin: return logical ? double(a != 0 && b != 0) : std::min(a, b);
    case ScatterReduce::kMul: break;
  }
  if (logical) return double(a != 0 && b != 0);
  if (!IsFloating(dt)) return a * b;
  const double prod = static_cast<double>(static_cast<float>(a) * static_cast<float>(b));
  return dt == DType::kFloat64 ? prod : testing::RoundTo(dt, prod);
}

std::string Name(DType dt, Layout l) { return std::string(DTypeName(dt)) + " " + LayoutName(l); }

TEST(Arange, DTypes) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kInt64}) {
    TestTensor out = MakeLayout(dt, {7}, Layout::kStep2);
    ASSERT_TRUE(Arange(out.ref, -3, 2).ok());
    for (int64_t i = 0; i < 7; ++i) EXPECT_EQ(out.At(i), -3 + 2 * i) << DTypeName(dt);
  }
  TestTensor f = Empty(DType::kFloat32, {10});
  ASSERT_TRUE(Arange(f.ref, 0, 0.1).ok());
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(f.At(i), static_cast<float>(i * 0.1));
}

TEST(Triangle, TrilTriuBatchedLayoutsInPlace) {
  const std::vector<int64_t> sizes = {2, 4, 5};
  for (DType dt : kAllDTypes) {
    for (Layout l : kLayouts) {
      for (int64_t diag : {-2, 0, 1, 6}) {
        for (bool upper : {false, true}) {
          SCOPED_TRACE(Name(dt, l) + " diag " + std::to_string(diag) + (upper ? " triu" : " tril"));
          TestTensor in = MakeRandom(dt, sizes, l, 3, -9, 9);
          TestTensor out = MakeLayout(dt, sizes, Layout::kTransposed);
          ASSERT_TRUE(Triangle(out.ref, in.ref, diag, upper).ok());
          for (int64_t i = 0; i < in.numel(); ++i) {
            const auto idx = Unravel(i, sizes);
            const int64_t k = idx[2] - idx[1];
            const bool keep = upper ? k >= diag : k <= diag;
            ASSERT_EQ(out.At(i), keep ? in.At(i) : 0.0) << i;
          }
          if (l == Layout::kBroadcast) continue;  // in-place needs distinct elements
          const std::vector<double> want = out.Values();
          ASSERT_TRUE(Triangle(in.ref, in.ref, diag, upper).ok());
          EXPECT_EQ(in.Values(), want);
        }
      }
    }
  }
}

TEST(Gather, DimsLayoutsAndRange) {
  const std::vector<int64_t> sizes = {3, 4, 5};
  for (DType dt : kAllDTypes) {
    for (Layout l : kLayouts) {
      for (int dim = 0; dim < 3; ++dim) {
        SCOPED_TRACE(Name(dt, l) + " dim " + std::to_string(dim));
        TestTensor in = MakeRandom(dt, sizes, l, 5, -50, 50);
        const std::vector<int64_t> isz = {2, 3, 4};
        std::vector<int64_t> vals(24);
        for (int64_t i = 0; i < 24; ++i) vals[i] = (i * 7 + 3) % sizes[dim];
        TestTensor index = MakeInts(DType::kInt64, isz, vals, Layout::kTransposed);
        TestTensor out = Empty(dt, isz);
        ASSERT_TRUE(Gather(out.ref, in.ref, dim, index.ref).ok());
        for (int64_t i = 0; i < 24; ++i) {
          auto idx = Unravel(i, isz);
          idx[dim] = vals[i];
          ASSERT_EQ(out.At(i), in.At(Ravel(idx, sizes))) << i;
        }
      }
    }
  }
  TestTensor in = MakeRandom(DType::kFloat32, {3, 4}, Layout::kContiguous, 1);
  TestTensor out = Empty(DType::kFloat32, {1, 2});
  TestTensor bad = MakeInts(DType::kInt64, {1, 2}, {1, 4});
  EXPECT_EQ(Gather(out.ref, in.ref, 1, bad.ref).error,
            "index 4 is out of bounds for dimension 1 with size 4");
  bad = MakeInts(DType::kInt64, {1, 2}, {-1, 0});
  EXPECT_EQ(Gather(out.ref, in.ref, 0, bad.ref).error,
            "index -1 is out of bounds for dimension 0 with size 3");
}

TEST(Scatter, SrcValueReduceAndRange) {
  const std::vector<int64_t> sizes = {4, 5};
  for (DType dt : kAllDTypes) {
    for (int dim = 0; dim < 2; ++dim) {
      for (ScatterReduce mode : {ScatterReduce::kNone, ScatterReduce::kAdd, ScatterReduce::kMul,
                                 ScatterReduce::kMax, ScatterReduce::kMin}) {
        SCOPED_TRACE(std::string(DTypeName(dt)) + " dim " + std::to_string(dim) + " mode " +
                     std::to_string(static_cast<int>(mode)));
        TestTensor out = MakeRandom(dt, sizes, Layout::kTransposed, 7, -20, 20);
        std::vector<double> want = out.Values();
        const std::vector<int64_t> isz = {3, 2};
        // Distinct targets per line, so non-add scatter has one answer.
        const std::vector<int64_t> vals = {2, 0, 0, 1, 3, 2};
        TestTensor index = MakeInts(DType::kInt32, isz, vals);
        TestTensor src = MakeRandom(dt, {3, 4}, Layout::kStep2, 9, -20, 20);
        for (int64_t i = 0; i < 6; ++i) {
          auto idx = Unravel(i, isz);
          const double s = src.At(idx[0] * 4 + idx[1]);
          idx[dim] = vals[i];
          double& w = want[Ravel(idx, sizes)];
          w = ReduceRef(dt, mode, w, s);
        }
        TestTensor src_view = src.Slice(1, 0, 1, 2);  // src larger than index on dim 1
        ASSERT_TRUE(Scatter(out.ref, dim, index.ref, src_view.ref, 0, mode).ok());
        ASSERT_EQ(out.Values(), want);
      }
    }
  }
  TestTensor out = Empty(DType::kFloat32, {2, 3});
  TestTensor index = MakeInts(DType::kInt64, {1, 2}, {0, 2});
  ASSERT_TRUE(Scatter(out.ref, 1, index.ref, TensorRef{}, 2.5, ScatterReduce::kNone).ok());
  EXPECT_EQ(out.Values(), (std::vector<double>{2.5, 0, 2.5, 0, 0, 0}));
  index = MakeInts(DType::kInt64, {1, 2}, {0, 3});
  EXPECT_EQ(Scatter(out.ref, 1, index.ref, TensorRef{}, 1, ScatterReduce::kAdd).error,
            "index 3 is out of bounds for dimension 1 with size 3");
  EXPECT_EQ(out.At(0), 2.5);  // untouched
  // Repeated targets accumulate; a NaN wins max and min whichever side holds it.
  TestTensor row = Empty(DType::kFloat32, {3});
  for (ScatterReduce mode : {ScatterReduce::kMax, ScatterReduce::kMin}) {
    row.Set(0, 1.0);
    row.Set(1, NAN);
    row.Set(2, 0.0);
    TestTensor src = Empty(DType::kFloat32, {4});
    const double sv[] = {5.0, -5.0, 2.0, NAN};
    for (int64_t i = 0; i < 4; ++i) src.Set(i, sv[i]);
    TestTensor idx = MakeInts(DType::kInt64, {4}, {0, 0, 1, 2});
    ASSERT_TRUE(Scatter(row.ref, 0, idx.ref, src.ref, 0, mode).ok());
    EXPECT_EQ(row.At(0), mode == ScatterReduce::kMax ? 5.0 : -5.0);
    EXPECT_TRUE(std::isnan(row.At(1)));
    EXPECT_TRUE(std::isnan(row.At(2)));
  }
}

// cummax / cummin against a scalar walk of torch's rule (ties move to the
// later index, NaN wins and holds until a later NaN), over dtypes, dims and
// layouts; logcumsumexp against log(sum(exp)) in double.
TEST(Scan, ExtremaAndLogSumExp) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kInt32, DType::kInt64, DType::kBool}) {
    for (Layout l : kLayouts) {
      for (int dim = 0; dim < 2; ++dim) {
        for (bool max : {true, false}) {
          SCOPED_TRACE(Name(dt, l) + " dim " + std::to_string(dim) + (max ? " max" : " min"));
          TestTensor in = MakeRandom(dt, {4, 6}, l, 21, -3, 3);  // small range: ties
          if (IsFloating(dt)) {
            in.Set(7, NAN);
            in.Set(9, NAN);
          }
          TestTensor vals = Empty(dt, {4, 6}), idx = Empty(DType::kInt64, {4, 6});
          ASSERT_TRUE(ScanExtremum(vals.ref, idx.ref, in.ref, dim, max).ok());
          const int64_t lines = dim == 0 ? 6 : 4, n = dim == 0 ? 4 : 6;
          for (int64_t line = 0; line < lines; ++line) {
            double best = 0;
            int64_t at = 0;
            for (int64_t i = 0; i < n; ++i) {
              const int64_t flat = dim == 0 ? i * 6 + line : line * 6 + i;
              const double x = in.At(flat);
              if (i == 0 || std::isnan(x) || (!std::isnan(best) && (max ? x >= best : x <= best))) {
                best = x;
                at = i;
              }
              const double got = vals.At(flat);
              EXPECT_TRUE(got == best || (std::isnan(got) && std::isnan(best))) << flat;
              EXPECT_EQ(idx.AtInt(flat), at) << flat;
            }
          }
        }
      }
    }
  }
  TestTensor in = MakeRandom(DType::kFloat32, {3, 5}, Layout::kTransposed, 22, -40, 40);
  in.Set(0, -INFINITY);
  in.Set(5, 1000.0);  // exp overflows without the shift
  TestTensor out = Empty(DType::kFloat32, {3, 5});
  ASSERT_TRUE(Scan(ScanOp::kLogSumExp, out.ref, in.ref, 1).ok());
  for (int64_t r = 0; r < 3; ++r) {
    double m = -INFINITY;
    for (int64_t i = 0; i < 5; ++i) m = std::max(m, in.At(r * 5 + i));
    double sum = 0;
    for (int64_t i = 0; i < 5; ++i) {
      sum += std::exp(in.At(r * 5 + i) - m);
      double mi = -INFINITY;  // the prefix's own max, for its exact value
      for (int64_t j = 0; j <= i; ++j) mi = std::max(mi, in.At(r * 5 + j));
      double s = 0;
      for (int64_t j = 0; j <= i; ++j) s += std::exp(in.At(r * 5 + j) - mi);
      const double want = std::isinf(mi) ? mi : mi + std::log(s);
      if (std::isinf(want)) {
        EXPECT_EQ(out.At(r * 5 + i), want) << r << "," << i;
      } else {
        EXPECT_NEAR(out.At(r * 5 + i), want, 1e-5 * std::max(1.0, std::fabs(want))) << r << "," << i;
      }
    }
  }
}

TEST(Index, IntegerIndicesBroadcastNegativeAndRest) {
  // in [4, 3, 5] indexed on dims 0 and 1 by [2, 3]-shaped (broadcast) indices.
  for (DType dt : kAllDTypes) {
    for (Layout l : kLayouts) {
      SCOPED_TRACE(Name(dt, l));
      TestTensor in = MakeRandom(dt, {4, 3, 5}, l, 11, -30, 30);
      TestTensor i0 = MakeInts(DType::kInt64, {2, 1}, {3, -4});
      TestTensor i1 = MakeInts(DType::kInt32, {3}, {2, 0, -1});
      std::vector<TensorRef> idx = {i0.Expand({2, 3}).ref, i1.Expand({2, 3}).ref};
      TestTensor out = MakeLayout(dt, {2, 3, 5}, Layout::kStep2);
      ASSERT_TRUE(Index(out.ref, in.ref, idx).ok());
      const int64_t r0[2] = {3, 0}, r1[3] = {2, 0, 2};
      for (int64_t i = 0; i < out.numel(); ++i) {
        const auto p = Unravel(i, {2, 3, 5});
        ASSERT_EQ(out.At(i), in.At(Ravel({r0[p[0]], r1[p[1]], p[2]}, {4, 3, 5}))) << i;
      }
      // index_put with the same indices (duplicates only in accumulate).
      TestTensor self = MakeRandom(dt, {4, 3, 5}, Layout::kContiguous, 12, -30, 30);
      std::vector<double> want = self.Values();
      TestTensor values = MakeRandom(dt, {3, 5}, Layout::kContiguous, 13, -30, 30);
      TestTensor j0 = MakeInts(DType::kInt64, {3}, {1, 1, 0});
      TestTensor j1 = MakeInts(DType::kInt64, {3}, {2, 2, 1});
      for (int64_t b = 0; b < 3; ++b) {
        for (int64_t r = 0; r < 5; ++r) {
          double& w = want[Ravel({j0.AtInt(b), j1.AtInt(b), r}, {4, 3, 5})];
          const double v = values.At(b * 5 + r);
          w = AddRef(dt, w, v);
        }
      }
      ASSERT_TRUE(IndexPut(self.ref, {j0.ref, j1.ref}, values.ref, /*accumulate=*/true).ok());
      ASSERT_EQ(self.Values(), want);
    }
  }
  TestTensor in = MakeRandom(DType::kFloat32, {4, 3}, Layout::kContiguous, 1);
  TestTensor out = Empty(DType::kFloat32, {2, 3});
  TestTensor bad = MakeInts(DType::kInt64, {2}, {1, -5});
  EXPECT_EQ(Index(out.ref, in.ref, {bad.ref}, {0}).error,
            "index -5 is out of bounds for dimension 0 with size 4");
  TestTensor in_t = in.Transpose(0, 1);  // [3, 4]: the caller's dim 1 seen first
  TestTensor out_t = Empty(DType::kFloat32, {2, 4});
  EXPECT_EQ(Index(out_t.ref, in_t.ref, {MakeInts(DType::kInt64, {2}, {0, 3}).ref}, {1}).error,
            "index 3 is out of bounds for dimension 1 with size 3");
  TestTensor values = Empty(DType::kFloat32, {2, 3});
  EXPECT_FALSE(IndexPut(in.ref, {bad.ref}, values.ref, false).ok());
}

TEST(Scan, CumsumCumprodDims) {
  const std::vector<int64_t> sizes = {3, 4, 5};
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt32, DType::kInt64}) {
    for (Layout l : kLayouts) {
      for (int dim = 0; dim < 3; ++dim) {
        for (ScanOp op : {ScanOp::kSum, ScanOp::kProd}) {
          SCOPED_TRACE(Name(dt, l) + " dim " + std::to_string(dim));
          TestTensor in = MakeRandom(dt, sizes, l, 17, -3, 3);
          TestTensor out = MakeLayout(dt, sizes, Layout::kTransposed);
          ASSERT_TRUE(Scan(op, out.ref, in.ref, dim).ok());
          for (int64_t i = 0; i < in.numel(); ++i) {
            auto idx = Unravel(i, sizes);
            const int64_t n = idx[dim];
            double acc = op == ScanOp::kSum ? 0 : 1;
            for (int64_t j = 0; j <= n; ++j) {
              idx[dim] = j;
              const double v = in.At(Ravel(idx, sizes));
              acc = op == ScanOp::kSum ? acc + v : acc * v;
            }
            ASSERT_EQ(out.At(i), testing::RoundTo(dt, acc)) << i;
          }
        }
      }
    }
  }
}

TEST(Sort, StableDescendingNaNAndTopK) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kInt32,
                   DType::kInt64, DType::kBool}) {
    for (Layout l : kLayouts) {
      for (int dim = 0; dim < 2; ++dim) {
        for (bool desc : {false, true}) {
          SCOPED_TRACE(Name(dt, l) + " dim " + std::to_string(dim) + (desc ? " desc" : ""));
          const std::vector<int64_t> sizes = {6, 7};
          TestTensor in = MakeRandom(dt, sizes, l, 21, -3, 3);  // many ties
          if (IsFloating(dt) && l != Layout::kBroadcast) in.Set(3, NAN);
          TestTensor values = Empty(dt, sizes), indices = Empty(DType::kInt64, sizes);
          ASSERT_TRUE(Sort(values.ref, indices.ref, in.ref, dim, desc).ok());
          const int64_t n = sizes[dim], lines = sizes[1 - dim];
          for (int64_t line = 0; line < lines; ++line) {
            auto at = [&](int64_t j) { return dim == 0 ? j * 7 + line : line * 7 + j; };
            std::vector<int64_t> order(n);
            std::iota(order.begin(), order.end(), 0);
            auto key = [&](int64_t j) {  // NaN largest
              const double v = in.At(at(j));
              return std::isnan(v) ? INFINITY : v;
            };
            auto isnan_at = [&](int64_t j) { return std::isnan(in.At(at(j))); };
            std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
              if (isnan_at(a) != isnan_at(b)) return desc ? isnan_at(a) : isnan_at(b);
              return desc ? key(a) > key(b) : key(a) < key(b);
            });
            for (int64_t j = 0; j < n; ++j) {
              ASSERT_EQ(indices.AtInt(at(j)), order[j]) << "line " << line << " pos " << j;
              const double v = values.At(at(j)), w = in.At(at(order[j]));
              ASSERT_TRUE(v == w || (std::isnan(v) && std::isnan(w)));
            }
            if (dt == DType::kBool) continue;
            std::vector<int64_t> tsz = sizes;
            tsz[dim] = 3;
            TestTensor tv = Empty(dt, tsz), ti = Empty(DType::kInt64, tsz);
            ASSERT_TRUE(TopK(tv.ref, ti.ref, in.ref, dim, 3, desc).ok());
            for (int64_t j = 0; j < 3; ++j) {
              const int64_t p = dim == 0 ? j * 7 + line : line * 3 + j;
              ASSERT_EQ(ti.AtInt(p), order[j]);
            }
          }
        }
      }
    }
  }
}

TEST(FlipRoll, DimsAndLayouts) {
  const std::vector<int64_t> sizes = {3, 4, 5};
  for (DType dt : kAllDTypes) {
    for (Layout l : kLayouts) {
      SCOPED_TRACE(Name(dt, l));
      TestTensor in = MakeRandom(dt, sizes, l, 31, -50, 50);
      for (uint32_t mask : {1u, 4u, 5u, 7u}) {
        TestTensor out = Empty(dt, sizes);
        ASSERT_TRUE(Flip(out.ref, in.ref, mask).ok());
        for (int64_t i = 0; i < in.numel(); ++i) {
          auto idx = Unravel(i, sizes);
          for (int d = 0; d < 3; ++d) {
            if ((mask >> d) & 1) idx[d] = sizes[d] - 1 - idx[d];
          }
          ASSERT_EQ(out.At(i), in.At(Ravel(idx, sizes)));
        }
      }
      const int64_t shifts[kMaxDims] = {1, -6, 12};
      TestTensor out = MakeLayout(dt, sizes, Layout::kTransposed);
      ASSERT_TRUE(Roll(out.ref, in.ref, shifts).ok());
      for (int64_t i = 0; i < in.numel(); ++i) {
        auto idx = Unravel(i, sizes);
        for (int d = 0; d < 3; ++d) idx[d] = ((idx[d] - shifts[d]) % sizes[d] + sizes[d]) % sizes[d];
        ASSERT_EQ(out.At(i), in.At(Ravel(idx, sizes)));
      }
    }
  }
}

TEST(Nonzero, CountAndIndices) {
  for (DType dt : kAllDTypes) {
    for (Layout l : kLayouts) {
      SCOPED_TRACE(Name(dt, l));
      const std::vector<int64_t> sizes = {3, 4, 5};
      TestTensor in = MakeRandom(dt, sizes, l, 41, -1, 1);
      std::vector<int64_t> want;
      for (int64_t i = 0; i < in.numel(); ++i) {
        if (in.At(i) != 0) want.push_back(i);
      }
      TestTensor count = Empty(DType::kInt64, {});
      ASSERT_TRUE(CountNonzero(count.ref, in.ref).ok());
      ASSERT_EQ(count.AtInt(0), static_cast<int64_t>(want.size()));
      TestTensor out = Empty(DType::kInt64, {static_cast<int64_t>(want.size()), 3});
      ASSERT_TRUE(Nonzero(out.ref, in.ref).ok());
      for (size_t r = 0; r < want.size(); ++r) {
        const auto idx = Unravel(want[r], sizes);
        for (int d = 0; d < 3; ++d) ASSERT_EQ(out.AtInt(r * 3 + d), idx[d]);
      }
      TestTensor wrong = Empty(DType::kInt64, {static_cast<int64_t>(want.size()) + 1, 3});
      EXPECT_FALSE(Nonzero(wrong.ref, in.ref).ok());
    }
  }
}

TEST(RepeatIndex, RepeatsAndErrors) {
  TestTensor repeats = MakeInts(DType::kInt32, {4}, {2, 0, 3, 1}, Layout::kStep2);
  TestTensor out = Empty(DType::kInt64, {6});
  ASSERT_TRUE(RepeatIndex(out.ref, repeats.ref).ok());
  EXPECT_EQ(out.Values(), (std::vector<double>{0, 0, 2, 2, 2, 3}));
  TestTensor neg = MakeInts(DType::kInt64, {2}, {1, -1});
  TestTensor out0 = Empty(DType::kInt64, {0});
  EXPECT_EQ(RepeatIndex(out0.ref, neg.ref).error,
            "repeat_interleave: repeats can not be negative, got -1 at position 1");
  TestTensor short_out = Empty(DType::kInt64, {5});
  EXPECT_FALSE(RepeatIndex(short_out.ref, repeats.ref).ok());
}

TEST(IsIn, DTypesInvertNaN) {
  for (DType dt : kAllDTypes) {
    for (Layout l : kLayouts) {
      SCOPED_TRACE(Name(dt, l));
      TestTensor elements = MakeRandom(dt, {3, 4, 5}, l, 51, -4, 4);
      TestTensor test = MakeRandom(dt, {2, 3}, Layout::kTransposed, 52, -4, 4);
      for (bool invert : {false, true}) {
        TestTensor out = Empty(DType::kBool, {3, 4, 5});
        ASSERT_TRUE(IsIn(out.ref, elements.ref, test.ref, invert).ok());
        for (int64_t i = 0; i < elements.numel(); ++i) {
          bool found = false;
          for (int64_t j = 0; j < test.numel(); ++j) found |= elements.At(i) == test.At(j);
          ASSERT_EQ(out.At(i) != 0, found != invert) << i;
        }
      }
    }
  }
  TestTensor nan = Empty(DType::kFloat32, {1});
  nan.Set(0, NAN);
  TestTensor out = Empty(DType::kBool, {1});
  ASSERT_TRUE(IsIn(out.ref, nan.ref, nan.ref, false).ok());
  EXPECT_EQ(out.At(0), 0.0);
}

TEST(Indexing, Describe) {
  TestTensor out = Empty(DType::kBFloat16, {6, 8});
  KernelInfo info = DescribeIndexing(IndexingKernel::kGather, out.ref, &out.ref, "aten::gather");
  EXPECT_STREQ(info.name, "gather_bf16");
  EXPECT_STREQ(info.op, "aten::gather");
  EXPECT_EQ(info.engine, rt::Engine::kDma);
  EXPECT_EQ(info.bytes_written, 6u * 8 * 2);
  info = DescribeIndexing(IndexingKernel::kCumsum, out.ref, nullptr, "aten::cumsum");
  EXPECT_STREQ(info.name, "cumsum_bf16");
  EXPECT_EQ(info.engine, rt::Engine::kVector);
}

// Histc against a scalar count of the same binning: floats as torch's CPU,
// integers exactly, the data's range when lo == hi, NaN never counted.
TEST(Histc, BinsEdgesIntegersAndDataRange) {
  TestTensor x = MakeLayout(DType::kFloat32, {12}, Layout::kStep2);
  const double vals[] = {-1.0, -0.5, 0.0, 0.25, 0.999, 1.0, 2.0, -3.0, NAN, 0.5, 0.5, 0.75};
  for (int64_t i = 0; i < 12; ++i) x.Set(i, vals[i]);
  TestTensor out = Empty(DType::kFloat32, {4});
  ASSERT_TRUE(Histc(out.ref, x.ref, 4, -1.0, 1.0).ok());
  // Bins of width 0.5 over [-1, 1]; 1.0 is in the last bin; -3, 2 and NaN dropped.
  const double want[] = {1, 1, 2, 5};  // 0.999, 1.0, 0.5, 0.5, 0.75 in the last
  double total = 0;
  for (int64_t i = 0; i < 4; ++i) total += out.At(i);
  EXPECT_EQ(total, 9);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(out.At(i), want[i]) << "bin " << i;

  TestTensor ids = Empty(DType::kInt32, {9});
  const int ev[] = {0, 3, 3, 1, 7, 7, 7, 2, 9};
  for (int64_t i = 0; i < 9; ++i) ids.Set(i, ev[i]);
  TestTensor counts = Empty(DType::kInt32, {8});
  ASSERT_TRUE(Histc(counts.ref, ids.ref, 8, 0, 7).ok());  // 9 is past max
  const int wc[] = {1, 1, 1, 2, 0, 0, 0, 3};
  for (int64_t i = 0; i < 8; ++i) EXPECT_EQ(counts.AtInt(i), wc[i]) << "expert " << i;
  TestTensor range = Empty(DType::kInt32, {2});
  ASSERT_TRUE(Histc(range.ref, ids.ref, 2, 0, 0).ok());  // [0, 9]: (v * 2) / 9
  EXPECT_EQ(range.AtInt(0), 5);  // 0 1 2 3 3
  EXPECT_EQ(range.AtInt(1), 4);  // 7 7 7 9
}

TEST(Histc, ConstantAndNonFiniteData) {
  TestTensor x = Empty(DType::kFloat64, {3});
  for (int64_t i = 0; i < 3; ++i) x.Set(i, 2.5);
  TestTensor out = Empty(DType::kFloat64, {2});
  ASSERT_TRUE(Histc(out.ref, x.ref, 2, 0, 0).ok());  // [1.5, 3.5]: 2.5 is the middle edge
  EXPECT_EQ(out.At(0), 0);
  EXPECT_EQ(out.At(1), 3);
  x.Set(1, NAN);
  Status s = Histc(out.ref, x.ref, 2, 0, 0);
  EXPECT_NE(s.error.find("is not finite"), std::string::npos) << s.error;
}

// Multinomial on hand-computed cases: the largest p / q (NaN above all), the n
// largest in order, the first bucket of the normalized running sum reaching u.
TEST(Multinomial, RaceBucketsAndErrors) {
  auto row = [](DType dt, const std::vector<double>& v) {
    TestTensor t = Empty(dt, {1, static_cast<int64_t>(v.size())});
    for (size_t i = 0; i < v.size(); ++i) t.Set(static_cast<int64_t>(i), v[i]);
    return t;
  };
  TestTensor p = row(DType::kFloat32, {0.1, 0.6, 0.3, 0.0});
  TestTensor one = Empty(DType::kInt64, {1, 1}), three = Empty(DType::kInt64, {1, 3});
  ASSERT_TRUE(Multinomial(one.ref, p.ref, row(DType::kFloat32, {1, 1, 1, 1}).ref, false).ok());
  EXPECT_EQ(one.AtInt(0), 1);
  // 0.1 / 0.01 = 10 beats 0.6 / 1; 0 / q stays last.
  ASSERT_TRUE(
      Multinomial(three.ref, p.ref, row(DType::kFloat32, {0.01, 1, 0.1, 1e-9}).ref, false).ok());
  EXPECT_EQ(three.AtInt(0), 0);  // 10
  EXPECT_EQ(three.AtInt(1), 2);  // 3
  EXPECT_EQ(three.AtInt(2), 1);  // 0.6
  // 0 / 0 is NaN: the maximum, as torch's argmax.
  ASSERT_TRUE(Multinomial(one.ref, p.ref, row(DType::kFloat32, {1, 1, 1, 0}).ref, false).ok());
  EXPECT_EQ(one.AtInt(0), 3);
  // bfloat16 quotients round before the race, as CPU's div: 0.5 / 0.50390625 =
  // 0.99225 beats 0.9921875 / 1 in float32 but rounds to it; the tie keeps index 0.
  TestTensor pb = row(DType::kBFloat16, {0.9921875, 0.5});
  ASSERT_TRUE(
      Multinomial(one.ref, pb.ref, row(DType::kBFloat16, {1.0, 0.50390625}).ref, false).ok());
  EXPECT_EQ(one.AtInt(0), 0);
  TestTensor pf = row(DType::kFloat32, {0.9921875, 0.5});
  ASSERT_TRUE(
      Multinomial(one.ref, pf.ref, row(DType::kFloat32, {1.0, 0.50390625}).ref, false).ok());
  EXPECT_EQ(one.AtInt(0), 1);
  // With replacement: cdf of {1, 2, 1} is {0.25, 0.75, 1}.
  TestTensor w = row(DType::kFloat32, {1, 2, 1});
  TestTensor u = Empty(DType::kFloat64, {1, 5});
  const double us[] = {0.0, 0.25, 0.2500001, 0.75, 0.9999};
  for (int64_t i = 0; i < 5; ++i) u.Set(i, us[i]);
  TestTensor five = Empty(DType::kInt64, {1, 5});
  ASSERT_TRUE(Multinomial(five.ref, w.ref, u.ref, true).ok());
  const int64_t want[] = {0, 0, 1, 1, 2};
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(five.AtInt(i), want[i]) << "u = " << us[i];
  // Errors carry CPU's messages and leave out untouched.
  for (int64_t i = 0; i < 5; ++i) five.Set(i, 7);
  Status s = Multinomial(five.ref, row(DType::kFloat32, {1, -1, 1}).ref, u.ref, true);
  EXPECT_NE(s.error.find("probability entry < 0"), std::string::npos) << s.error;
  s = Multinomial(five.ref, row(DType::kFloat32, {1, INFINITY, 1}).ref, u.ref, true);
  EXPECT_NE(s.error.find("infinity or NaN"), std::string::npos) << s.error;
  s = Multinomial(one.ref, row(DType::kFloat32, {0, 0}).ref, row(DType::kFloat32, {1, 1}).ref,
                  false);
  EXPECT_NE(s.error.find("sum of probabilities <= 0"), std::string::npos) << s.error;
  s = Multinomial(one.ref, row(DType::kFloat32, {NAN, 1}).ref, row(DType::kFloat32, {1, 1}).ref,
                  false);
  EXPECT_NE(s.error.find("`inf`, `nan` or element < 0"), std::string::npos) << s.error;
  for (int64_t i = 0; i < 5; ++i) EXPECT_EQ(five.AtInt(i), 7);
}

TEST(AssertNonzero, ZeroFailsWithTheMessage) {
  TestTensor x = Empty(DType::kBFloat16, {1});
  x.Set(0, 0.0);
  EXPECT_EQ(AssertNonzero(x.ref, "boom").error, "boom");
  x.Set(0, NAN);
  EXPECT_TRUE(AssertNonzero(x.ref, "boom").ok());
  TestTensor b = Empty(DType::kBool, {});
  b.Set(0, 1);
  EXPECT_TRUE(AssertNonzero(b.ref, "boom").ok());
}

}  // namespace
}  // namespace trn::kernels
