// rms_norm, layer_norm and weight_norm against double-precision references
// on every compiled SIMD target: row lengths across vector/unroll edges,
// strided and misaligned rows, optional weight/bias/statistics, every
// floating dtype, and the non-temporal store path for outputs past
// kStreamBytes. weight_norm: norm 1e-6 relative, w 1e-6 plus a storage ulp.
#include <gtest/gtest.h>

#include <cmath>
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

struct NormCase {
  std::vector<int64_t> sizes;
  int norm_dims = 1;
  DType dtype = DType::kFloat32;
  Layout in_layout = Layout::kContiguous;
  Layout out_layout = Layout::kContiguous;
  bool weight = true;
  bool bias = true;   // layer_norm only
  bool stats = true;  // rstd_out (and mean_out)
  DType param_dtype = DType::kFloat32;
};

std::string Describe(const NormCase& c) {
  std::string s = DTypeName(c.dtype);
  for (int64_t v : c.sizes) s += " " + std::to_string(v);
  return s + " norm_dims " + std::to_string(c.norm_dims) + " in:" +
         testing::LayoutName(c.in_layout) + " out:" + testing::LayoutName(c.out_layout) +
         (c.weight ? " weight" : "") + (c.bias ? " bias" : "");
}

struct Prepared {
  TestTensor in, out, weight, bias, mean, rstd;
  int64_t rows = 0, n = 0;
};

Prepared Prepare(const NormCase& c, bool layer) {
  Prepared p;
  p.in = MakeRandom(c.dtype, c.sizes, c.in_layout, 7, -3.0, 3.0);
  p.out = MakeLayout(c.dtype, c.sizes, c.out_layout);
  const std::vector<int64_t> row_shape(c.sizes.end() - c.norm_dims, c.sizes.end());
  std::vector<int64_t> stat_shape(c.sizes.begin(), c.sizes.end() - c.norm_dims);
  for (int d = 0; d < c.norm_dims; ++d) stat_shape.push_back(1);  // keepdim layout
  p.n = 1;
  for (int64_t v : row_shape) p.n *= v;
  p.rows = p.n == 0 ? 0 : p.in.numel() / p.n;
  // Parameters strided (step 2) when not float32, to cover the gather path.
  const Layout pl = c.param_dtype == DType::kFloat32 ? Layout::kContiguous : Layout::kStep2;
  if (c.weight) p.weight = MakeRandom(c.param_dtype, row_shape, pl, 8, 0.5, 1.5);
  if (layer && c.bias) p.bias = MakeRandom(c.param_dtype, row_shape, pl, 9, -1.0, 1.0);
  if (c.stats) {
    p.rstd = Empty(DType::kFloat32, stat_shape);
    if (layer) p.mean = Empty(DType::kFloat32, stat_shape);
  }
  return p;
}

// Checks out (and stats) against references computed in double from the
// stored inputs. f32 math over a row gives a few ulp of relative error.
void CheckRows(const NormCase& c, const Prepared& p, bool layer, double eps) {
  int failures = 0;
  const auto fail = [&](const std::string& what) {
    if (++failures <= 5) ADD_FAILURE() << what;
  };
  for (int64_t r = 0; r < p.rows; ++r) {
    double sum = 0, sq = 0;
    for (int64_t i = 0; i < p.n; ++i) sum += p.in.At(r * p.n + i);
    const double mean = layer ? sum / p.n : 0.0;
    for (int64_t i = 0; i < p.n; ++i) {
      const double x = p.in.At(r * p.n + i) - mean;
      sq += x * x;
    }
    const double rstd = 1.0 / std::sqrt(sq / p.n + eps);
    for (int64_t i = 0; i < p.n; ++i) {
      double y = (p.in.At(r * p.n + i) - mean) * rstd;
      if (c.weight) y *= p.weight.At(i);
      if (layer && c.bias) y += p.bias.At(i);
      const double actual = p.out.At(r * p.n + i);
      const double tol = testing::StorageTol(c.dtype, y, 2e-5) + 2e-5;
      if (std::fabs(actual - y) > tol) {
        fail("row " + std::to_string(r) + " col " + std::to_string(i) + ": actual " +
             std::to_string(actual) + " expected " + std::to_string(y));
      }
    }
    if (c.stats) {
      const std::string m = testing::CheckClose(p.rstd.At(r), rstd, 2e-5);
      if (!m.empty()) fail("rstd row " + std::to_string(r) + ": " + m);
      if (layer) {
        const std::string mm = testing::CheckClose(p.mean.At(r), mean, 1e-5, 1e-6);
        if (!mm.empty()) fail("mean row " + std::to_string(r) + ": " + mm);
      }
    }
  }
}

void RunRms(const NormCase& c) {
  SCOPED_TRACE("rms_norm " + Describe(c));
  Prepared p = Prepare(c, false);
  const double eps = 1e-6;
  ForEachTarget([&](const char*) {
    const Status st = RmsNorm(p.out.ref, p.in.ref, p.weight.ref, c.norm_dims, eps, p.rstd.ref);
    ASSERT_TRUE(st.ok()) << st.error;
    CheckRows(c, p, false, eps);
  });
}

void RunLayer(const NormCase& c) {
  SCOPED_TRACE("layer_norm " + Describe(c));
  Prepared p = Prepare(c, true);
  const double eps = 1e-5;
  ForEachTarget([&](const char*) {
    const Status st = LayerNorm(p.out.ref, p.in.ref, p.weight.ref, p.bias.ref, c.norm_dims, eps,
                                p.mean.ref, p.rstd.ref);
    ASSERT_TRUE(st.ok()) << st.error;
    CheckRows(c, p, true, eps);
  });
}

const std::vector<std::vector<int64_t>>& Shapes() {
  // Row lengths around the vector width and the 4-vector unroll of each target.
  static const std::vector<std::vector<int64_t>> shapes = {
      {1, 1}, {3, 7}, {5, 33}, {4, 64}, {2, 1000}, {2, 4099}, {3, 2, 129}};
  return shapes;
}

TEST(RmsNorm, SizesAndLayouts) {
  for (const auto& sizes : Shapes()) {
    for (Layout in : {Layout::kContiguous, Layout::kMisaligned, Layout::kTransposed,
                      Layout::kStep2, Layout::kBroadcast}) {
      NormCase c;
      c.sizes = sizes;
      c.in_layout = in;
      c.out_layout = in == Layout::kMisaligned ? Layout::kStep2 : Layout::kContiguous;
      RunRms(c);
    }
  }
}

TEST(RmsNorm, WithoutWeightAndStats) {
  NormCase c;
  c.sizes = {6, 77};
  c.weight = false;
  c.stats = false;
  RunRms(c);
}

TEST(RmsNorm, TwoNormDims) {
  NormCase c;
  c.sizes = {3, 4, 9};
  c.norm_dims = 2;
  RunRms(c);
  c.in_layout = Layout::kTransposed;  // row dims are not one run: element gather
  RunRms(c);
}

TEST(RmsNorm, Dtypes) {
  for (DType dt : {DType::kFloat64, DType::kBFloat16, DType::kFloat16}) {
    NormCase c;
    c.sizes = {5, 129};
    c.dtype = dt;
    c.param_dtype = dt;
    RunRms(c);
    c.in_layout = Layout::kStep2;
    c.out_layout = Layout::kMisaligned;
    RunRms(c);
  }
}

TEST(RmsNorm, StreamingStoresForHugeOutputs) {
  // 4100 x 4097 f32 = 64.1 MiB output: above kStreamBytes; odd row length and
  // a misaligned output exercise the scalar head and tail of streamed rows.
  NormCase c;
  c.sizes = {4100, 4097};
  c.out_layout = Layout::kMisaligned;
  c.stats = false;
  Prepared p = Prepare(c, false);
  ForEachTarget([&](const char*) {
    ASSERT_TRUE(RmsNorm(p.out.ref, p.in.ref, p.weight.ref, 1, 1e-6, p.rstd.ref).ok());
    // Spot-check rows spread over the tensor (a full check is slow and adds nothing).
    for (int64_t r : {int64_t{0}, int64_t{1}, int64_t{2049}, int64_t{4099}}) {
      double sq = 0;
      for (int64_t i = 0; i < p.n; ++i) sq += p.in.At(r * p.n + i) * p.in.At(r * p.n + i);
      const double rstd = 1.0 / std::sqrt(sq / p.n + 1e-6);
      for (int64_t i = 0; i < p.n; ++i) {
        const double y = p.in.At(r * p.n + i) * rstd * p.weight.At(i);
        ASSERT_NEAR(p.out.At(r * p.n + i), y, 2e-5 * std::fabs(y) + 2e-5)
            << "row " << r << " col " << i;
      }
    }
  });
}

TEST(LayerNorm, SizesAndLayouts) {
  for (const auto& sizes : Shapes()) {
    for (Layout in : {Layout::kContiguous, Layout::kMisaligned, Layout::kTransposed,
                      Layout::kStep2}) {
      NormCase c;
      c.sizes = sizes;
      c.in_layout = in;
      c.out_layout = in == Layout::kContiguous ? Layout::kContiguous : Layout::kStep2;
      RunLayer(c);
    }
  }
}

TEST(LayerNorm, OptionalParams) {
  NormCase c;
  c.sizes = {4, 50};
  c.weight = false;
  c.bias = false;
  RunLayer(c);
  c.weight = true;
  c.stats = false;
  RunLayer(c);
  c.sizes = {2, 3, 20};
  c.norm_dims = 2;
  RunLayer(c);
}

TEST(LayerNorm, Dtypes) {
  for (DType dt : {DType::kFloat64, DType::kBFloat16, DType::kFloat16}) {
    NormCase c;
    c.sizes = {5, 129};
    c.dtype = dt;
    c.param_dtype = dt;
    RunLayer(c);
  }
}

// ---- weight_norm ------------------------------------------------------------------
// v of `sizes`, g and norm of v.size(dim) elements in keepdim layout; the
// reference norm is a double sum of float32 squares.
void RunWeightNorm(const std::vector<int64_t>& sizes, int dim, DType dt, Layout layout) {
  SCOPED_TRACE(std::string(DTypeName(dt)) + " dim " + std::to_string(dim) + " " +
               testing::LayoutName(layout));
  TestTensor v = MakeRandom(dt, sizes, layout, 3, -2, 2);
  std::vector<int64_t> keep(sizes.size(), 1);
  keep[dim] = sizes[dim];
  const DType norm_dt = dt == DType::kFloat64 ? dt : DType::kFloat32;
  TestTensor g = MakeRandom(dt, keep, Layout::kContiguous, 4, 0.5, 3);
  TestTensor norm = Empty(norm_dt, keep);
  TestTensor w = Empty(dt, sizes);
  ASSERT_TRUE(WeightNorm(w.ref, norm.ref, v.ref, g.ref, dim).ok());
  int64_t inner = 1;
  for (size_t d = dim + 1; d < sizes.size(); ++d) inner *= sizes[d];
  std::vector<double> sq(sizes[dim], 0);
  auto slice = [&](int64_t i) { return (i / inner) % sizes[dim]; };
  for (int64_t i = 0; i < v.numel(); ++i) {
    const double x = static_cast<float>(v.At(i));
    sq[slice(i)] += static_cast<float>(x * x);
  }
  for (int64_t k = 0; k < sizes[dim]; ++k) {
    const double e = std::sqrt(sq[k]);
    ASSERT_EQ(testing::CheckClose(norm.At(k), static_cast<float>(e), 1e-6), "") << "norm " << k;
  }
  for (int64_t i = 0; i < v.numel(); ++i) {
    const int64_t k = slice(i);
    const double e = v.At(i) * g.At(k) / std::sqrt(sq[k]);
    ASSERT_EQ(testing::CheckClose(w.At(i), testing::RoundTo(dt, e), 0,
                                  testing::StorageTol(dt, e, 1e-6)), "")
        << "w at " << i;
  }
}

// native_group_norm against a double-precision reference on every target:
// groups of several channels, planes that are not whole vectors, no weight,
// half dtypes (widened to f32 and rounded once).
TEST(GroupNorm, GroupsDtypesAndParams) {
  ForEachTarget([](const char*) {
    struct Case {
      std::vector<int64_t> sizes;
      int64_t groups;
    };
    for (const Case& c : {Case{{2, 6, 37}, 3}, Case{{3, 4, 5, 7}, 4}, Case{{2, 8}, 2}}) {
      for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
        for (bool params : {true, false}) {
          SCOPED_TRACE(std::to_string(c.groups) + " " + DTypeName(dt) + (params ? " w/b" : ""));
          const int64_t n = c.sizes[0], ch = c.sizes[1];
          TestTensor in = MakeRandom(dt, c.sizes, Layout::kContiguous, 31, -3.0, 5.0);
          TestTensor w = MakeRandom(DType::kFloat32, {ch}, Layout::kContiguous, 32);
          TestTensor b = MakeRandom(DType::kFloat32, {ch}, Layout::kContiguous, 33);
          TestTensor out = Empty(dt, c.sizes);
          TestTensor mean = Empty(DType::kFloat32, {n, c.groups});
          TestTensor rstd = Empty(DType::kFloat32, {n, c.groups});
          const TensorRef none{};
          ASSERT_TRUE(GroupNorm(out.ref, in.ref, params ? w.ref : none, params ? b.ref : none,
                                c.groups, 1e-5, mean.ref, rstd.ref)
                          .ok());
          const int64_t len = in.numel() / (n * c.groups), hw = len / (ch / c.groups);
          for (int64_t r = 0; r < n * c.groups; ++r) {
            double m = 0, v = 0;
            for (int64_t j = 0; j < len; ++j) m += in.At(r * len + j);
            m /= static_cast<double>(len);
            for (int64_t j = 0; j < len; ++j) v += (in.At(r * len + j) - m) * (in.At(r * len + j) - m);
            const double rs = 1.0 / std::sqrt(v / static_cast<double>(len) + 1e-5);
            EXPECT_NEAR(mean.At(r), m, 1e-5);
            EXPECT_NEAR(rstd.At(r), rs, 1e-5 * rs);
            for (int64_t j = 0; j < len; ++j) {
              const int64_t cc = (r % c.groups) * (ch / c.groups) + j / hw;
              const double y = (in.At(r * len + j) - m) * rs * (params ? w.At(cc) : 1.0) +
                               (params ? b.At(cc) : 0.0);
              ASSERT_NEAR(out.At(r * len + j), y, dt == DType::kFloat32 ? 1e-5 * (1 + std::fabs(y)) : 1e-2 * (1 + std::fabs(y)))
                  << r << " " << j;
            }
          }
        }
      }
    }
  });
}

TEST(WeightNorm, FirstAndLastDimDtypesAndLayouts) {
  ForEachTarget([](const char*) {
    for (DType dt : testing::kFloatTypes) {
      for (Layout l : testing::AllLayouts()) {
        RunWeightNorm({6, 3, 5}, 0, dt, l);
        RunWeightNorm({6, 3, 5}, 2, dt, l);
        RunWeightNorm({4, 33}, 1, dt, l);
        RunWeightNorm({7}, 0, dt, l);  // 1-D: the norm of each element is |v|
        // Note [Weight norm in chunks]: blocks of >= 64 (past one chunk), rows
        // of r = d * inner floats batched per chunk, and rows longer than one.
        RunWeightNorm({3, 200}, 0, dt, l);
        RunWeightNorm({2, 5000}, 0, dt, l);
        RunWeightNorm({3000, 2, 3}, 1, dt, l);
        RunWeightNorm({3, 5000}, 1, dt, l);
        if (::testing::Test::HasFatalFailure()) return;
      }
    }
  });
}

TEST(WeightNorm, ZeroSliceGivesNaNAsTorch) {
  TestTensor v = Empty(DType::kFloat32, {2, 3});
  for (int64_t i = 3; i < 6; ++i) v.Set(i, 1.0);
  TestTensor g = Empty(DType::kFloat32, {2, 1}), norm = Empty(DType::kFloat32, {2, 1});
  g.Set(0, 1.0), g.Set(1, 2.0);
  TestTensor w = Empty(DType::kFloat32, {2, 3});
  ASSERT_TRUE(WeightNorm(w.ref, norm.ref, v.ref, g.ref, 0).ok());
  EXPECT_EQ(norm.At(0), 0.0);
  EXPECT_TRUE(std::isnan(w.At(0)));  // 0 * (1 / 0)
  EXPECT_EQ(testing::CheckClose(w.At(3), 2 / std::sqrt(3.0), 1e-6), "");
}

TEST(Norm, Describe) {
  TestTensor in = Empty(DType::kBFloat16, {8, 64});
  TestTensor w = Empty(DType::kBFloat16, {64});
  KernelInfo info = DescribeRmsNorm(in.ref, in.ref, w.ref, "aten::rms_norm");
  EXPECT_STREQ(info.name, "rms_norm_bf16");
  EXPECT_STREQ(info.op, "aten::rms_norm");
  EXPECT_EQ(info.bytes_read, (8u * 64 + 64) * 2);
  EXPECT_EQ(info.bytes_written, 8u * 64 * 2);
  EXPECT_GE(info.flops, 3u * 8 * 64);
  info = DescribeLayerNorm(in.ref, in.ref, TensorRef{}, "aten::native_layer_norm");
  EXPECT_STREQ(info.name, "layer_norm_bf16");
  EXPECT_EQ(info.flops, 5u * 8 * 64);
  info = DescribeWeightNorm(in.ref, in.ref, "aten::_weight_norm_interface");
  EXPECT_STREQ(info.name, "weight_norm_bf16");
  EXPECT_STREQ(info.op, "aten::_weight_norm_interface");
  EXPECT_EQ(info.bytes_read, 2u * 8 * 64 * 2);  // the norm pass and the scaling pass
  EXPECT_EQ(info.bytes_written, 8u * 64 * 2);
}

}  // namespace
}  // namespace trn::kernels
