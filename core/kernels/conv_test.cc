// Conv2d (and Conv3d, at the end) against a double-precision direct
// convolution on every compiled SIMD target (the GEMM under it dispatches per target): stride, asymmetric
// padding, dilation, groups (depthwise included), bias, the fused relu, the
// 1x1 direct path, NCHW / channels-last / strided operands, every floating
// dtype, with and without a caller workspace.
#include "core/kernels/conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/kernels/kernels.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::Empty;
using testing::FillRandom;
using testing::ForEachTarget;
using testing::TestTensor;

enum class Lay { kNchw, kChannelsLast, kStrided };

// [N, C, H, W] tensor stored as `lay`: channels-last stores [N, H, W, C];
// strided takes every second element of a twice-as-wide W.
TestTensor Make4d(DType dt, std::vector<int64_t> s, Lay lay, uint32_t seed) {
  TestTensor t;
  if (lay == Lay::kChannelsLast) {
    t = Empty(dt, {s[0], s[2], s[3], s[1]});
    const int64_t st[4] = {t.ref.strides[0], t.ref.strides[3], t.ref.strides[1],
                           t.ref.strides[2]};
    for (int d = 0; d < 4; ++d) {
      t.ref.sizes[d] = s[d];
      t.ref.strides[d] = st[d];
    }
  } else if (lay == Lay::kStrided) {
    t = Empty(dt, {s[0], s[1], s[2], 2 * s[3]}).Slice(3, 1, 2, s[3]);
  } else {
    t = Empty(dt, s);
  }
  if (seed != 0) FillRandom(t, seed, -1.0, 1.0);
  return t;
}

struct Case {
  std::vector<int64_t> in;  // N, C, H, W
  int64_t cout, kh, kw;
  ConvParams p;
};

ConvParams Params(int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t pb, int64_t pr,
                  int64_t dh, int64_t dw, int64_t groups) {
  ConvParams p;
  p.stride[0] = sh;
  p.stride[1] = sw;
  p.pad_begin[0] = pt;
  p.pad_begin[1] = pl;
  p.pad_end[0] = pb;
  p.pad_end[1] = pr;
  p.dilation[0] = dh;
  p.dilation[1] = dw;
  p.groups = groups;
  return p;
}

std::vector<Case> Cases() {
  return {
      {{2, 3, 9, 9}, 4, 3, 3, Params(1, 1, 0, 0, 0, 0, 1, 1, 1)},
      {{2, 3, 9, 8}, 5, 3, 3, Params(2, 2, 1, 1, 1, 1, 1, 1, 1)},
      {{1, 4, 10, 7}, 6, 3, 2, Params(2, 1, 1, 0, 2, 1, 1, 2, 1)},  // asymmetric pads
      {{2, 6, 8, 8}, 4, 3, 3, Params(1, 1, 2, 2, 2, 2, 2, 2, 2)},   // groups, dilation
      {{2, 8, 7, 7}, 8, 3, 3, Params(1, 1, 1, 1, 1, 1, 1, 1, 8)},   // depthwise
      {{2, 16, 5, 6}, 8, 1, 1, Params(1, 1, 0, 0, 0, 0, 1, 1, 1)},  // 1x1 direct
      {{1, 3, 1, 19}, 4, 1, 5, Params(1, 2, 0, 2, 0, 2, 1, 1, 1)},  // conv1d as H = 1
      {{1, 3, 16, 16}, 8, 4, 4, Params(4, 4, 0, 0, 0, 0, 1, 1, 1)}, // patch embedding
      // Phase planes (Note [im2col from phase planes]): the ResNet stem, 7x7/2 pad 3
      // with odd W; stride 3 in W with a pad wider than the stride and dilation 2.
      {{2, 3, 13, 11}, 4, 7, 7, Params(2, 2, 3, 3, 3, 3, 1, 1, 1)},
      {{1, 2, 10, 14}, 3, 3, 5, Params(1, 3, 1, 4, 0, 4, 1, 2, 1)},
      // Depthwise rows of several vectors and a tail: stride 2 and dilation 2 in W,
      // channel multiplier 2.
      {{1, 4, 6, 70}, 8, 3, 3, Params(1, 2, 1, 1, 1, 1, 1, 2, 4)},
      // K * OW * 4 bytes = 456 KiB: col covers 2 output rows, 5 bands.
      {{1, 64, 12, 200}, 8, 3, 3, Params(1, 1, 0, 0, 0, 0, 1, 1, 1)},
      // Patchify im2col (stride = kernel width) with padding and dilation in H, W
      // not a multiple of the stride, two images.
      {{2, 3, 11, 14}, 5, 4, 4, Params(3, 4, 1, 0, 2, 0, 2, 1, 1)},
      // Implicit GEMM over channels-last input (kImplicitCase): asymmetric pads,
      // dilation 2 in H, two images, 32 channels x 3 taps per row.
      {{2, 32, 9, 13}, 24, 3, 3, Params(1, 1, 2, 1, 1, 0, 2, 1, 1)},
      // Small images side by side (kMergedCase), K = 288: bfloat16 takes AMX.
      {{2, 32, 6, 6}, 20, 3, 3, Params(1, 1, 1, 1, 1, 1, 1, 1, 1)},
      // Two groups of K = 288 (kGroupedAmxCase): bfloat16 takes AMX per group.
      {{1, 64, 8, 8}, 32, 3, 3, Params(1, 1, 1, 1, 1, 1, 1, 1, 2)},
  };
}
constexpr size_t kBandsCase = 11;     // col in bands of output rows
constexpr size_t kImplicitCase = 13;  // Note [Implicit GEMM] when the input is channels-last
constexpr size_t kMergedCase = 14;
constexpr size_t kGroupedAmxCase = 15;

// Direct convolution in double over the stored (rounded) values.
std::vector<double> Reference(const Case& c, const TestTensor& in, const TestTensor& w,
                              const TestTensor* bias, ConvActivation act, int64_t oh, int64_t ow) {
  const int64_t n = c.in[0], ch = c.in[1], h = c.in[2], wd = c.in[3];
  const int64_t g = c.p.groups, cg = ch / g, og = c.cout / g;
  std::vector<double> out(static_cast<size_t>(n * c.cout * oh * ow));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t o = 0; o < c.cout; ++o)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          double acc = bias ? bias->At(o) : 0.0;
          const int64_t grp = o / og;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ky = 0; ky < c.kh; ++ky)
              for (int64_t kx = 0; kx < c.kw; ++kx) {
                const int64_t iy = y * c.p.stride[0] - c.p.pad_begin[0] + ky * c.p.dilation[0];
                const int64_t ix = x * c.p.stride[1] - c.p.pad_begin[1] + kx * c.p.dilation[1];
                if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
                acc += in.At(((b * ch + grp * cg + ci) * h + iy) * wd + ix) *
                       w.At(((o * cg + ci) * c.kh + ky) * c.kw + kx);
              }
          if (act == ConvActivation::kRelu) acc = std::max(acc, 0.0);
          if (act == ConvActivation::kGelu) acc = 0.5 * acc * (1 + std::erf(acc / std::sqrt(2.0)));
          if (act == ConvActivation::kSilu) acc = acc / (1 + std::exp(-acc));
          out[((b * c.cout + o) * oh + y) * ow + x] = acc;
        }
  return out;
}

void RunConv(const Case& c, DType dt, Lay in_lay, Lay w_lay, Lay out_lay, bool bias,
             ConvActivation act, bool workspace) {
  const int64_t oh = ConvOutputSize(c.in[2], c.kh, c.p.stride[0], c.p.pad_begin[0],
                                    c.p.pad_end[0], c.p.dilation[0]);
  const int64_t ow = ConvOutputSize(c.in[3], c.kw, c.p.stride[1], c.p.pad_begin[1],
                                    c.p.pad_end[1], c.p.dilation[1]);
  ConvParams p = c.p;
  p.activation = act;
  const TestTensor in = Make4d(dt, c.in, in_lay, 11);
  const TestTensor w = Make4d(dt, {c.cout, c.in[1] / p.groups, c.kh, c.kw}, w_lay, 12);
  TestTensor b;
  if (bias) {
    b = Empty(DType::kFloat32, {c.cout});
    FillRandom(b, 13, -1.0, 1.0);
  }
  TestTensor out = Make4d(dt, {c.in[0], c.cout, oh, ow}, out_lay, 0);
  const std::vector<double> want = Reference(c, in, w, bias ? &b : nullptr, act, oh, ow);
  ForEachTarget([&](const char*) {
    TestTensor ws;
    if (workspace) {
      const size_t bytes = ConvWorkspaceBytes(out.ref, in.ref, w.ref, p);
      ws = Empty(DType::kFloat32, {static_cast<int64_t>(bytes / 4)});
    }
    ASSERT_TRUE(Conv2d(out.ref, in.ref, w.ref, bias ? b.ref : TensorRef{}, p, ws.ref).ok());
    int failures = 0;
    const int64_t k = (c.in[1] / p.groups) * c.kh * c.kw;
    for (int64_t i = 0; i < out.numel() && failures < 5; ++i) {
      // f32 accumulation over K terms of magnitude <= 1, plus the output rounding.
      const double tol = 1e-6 * static_cast<double>(k) + 1e-6 +
                         testing::StorageTol(dt, want[i], 0.0);
      const std::string err = testing::CheckClose(out.At(i), want[i], 0.0, tol);
      if (!err.empty()) {
        ++failures;
        ADD_FAILURE() << "element " << i << ": " << err;
      }
    }
  });
}

TEST(Conv2d, GeometryF32) {
  for (const Case& c : Cases()) {
    SCOPED_TRACE("in " + std::to_string(c.in[1]) + "x" + std::to_string(c.in[2]) + "x" +
                 std::to_string(c.in[3]) + " k " + std::to_string(c.kh) + "x" +
                 std::to_string(c.kw) + " groups " + std::to_string(c.p.groups));
    for (bool bias : {false, true}) {
      RunConv(c, DType::kFloat32, Lay::kNchw, Lay::kNchw, Lay::kNchw, bias, ConvActivation::kNone,
              true);
    }
    for (ConvActivation act :
         {ConvActivation::kRelu, ConvActivation::kGelu, ConvActivation::kSilu}) {
      RunConv(c, DType::kFloat32, Lay::kNchw, Lay::kNchw, Lay::kNchw, true, act, false);
    }
  }
}

TEST(Conv2d, Layouts) {
  const std::vector<Lay> lays = {Lay::kNchw, Lay::kChannelsLast, Lay::kStrided};
  for (const Case& c :
       {Cases()[1], Cases()[3], Cases()[4], Cases()[5], Cases()[10], Cases()[kImplicitCase]}) {
    for (Lay in : lays) {
      for (Lay out : lays) {
        SCOPED_TRACE("layouts in " + std::to_string(static_cast<int>(in)) + " out " +
                     std::to_string(static_cast<int>(out)));
        RunConv(c, DType::kFloat32, in, in == Lay::kNchw ? Lay::kChannelsLast : Lay::kNchw, out,
                true, in == out ? ConvActivation::kGelu : ConvActivation::kRelu, true);
      }
    }
  }
}

// A 1-D convolution as the compiler passes it: H = 1 with stride 0 on in,
// weight and out (a size-1 dim's stride is arbitrary); the weight is still
// read in place as [Cout][K].
TEST(Conv2d, UnitHeightWithAnyStride) {
  const Case c = Cases()[6];  // {1, 3, 1, 19}, 4 x 1 x 5, stride 2, pad 2
  const int64_t ow = ConvOutputSize(c.in[3], c.kw, c.p.stride[1], c.p.pad_begin[1],
                                    c.p.pad_end[1], c.p.dilation[1]);
  TestTensor in = Make4d(DType::kFloat32, c.in, Lay::kNchw, 31);
  TestTensor w = Make4d(DType::kFloat32, {c.cout, c.in[1], c.kh, c.kw}, Lay::kNchw, 32);
  TestTensor out = Make4d(DType::kFloat32, {c.in[0], c.cout, 1, ow}, Lay::kNchw, 0);
  const std::vector<double> want = Reference(c, in, w, nullptr, ConvActivation::kNone, 1, ow);
  for (TestTensor* t : {&in, &w, &out}) t->ref.strides[2] = 0;
  ForEachTarget([&](const char*) {
    ASSERT_TRUE(Conv2d(out.ref, in.ref, w.ref, TensorRef{}, c.p, TensorRef{}).ok());
    for (int64_t i = 0; i < out.numel(); ++i) {
      EXPECT_NEAR(out.At(i), want[i], 1e-5) << "element " << i;
    }
  });
}

TEST(Conv2d, BandsOfOutputRows) {
  const Case c = Cases()[kBandsCase];
  {  // the workspace holds a band of col, less than the whole image's K x OH*OW
    const TestTensor in = Make4d(DType::kFloat32, c.in, Lay::kNchw, 0);
    const TestTensor w = Make4d(DType::kFloat32, {c.cout, c.in[1], c.kh, c.kw}, Lay::kNchw, 0);
    const TestTensor out = Make4d(DType::kFloat32, {1, c.cout, 10, 198}, Lay::kNchw, 0);
    EXPECT_LT(ConvWorkspaceBytes(out.ref, in.ref, w.ref, c.p), size_t{576} * 10 * 198 * 4 / 2);
  }
  for (Lay lay : {Lay::kNchw, Lay::kChannelsLast, Lay::kStrided}) {
    RunConv(c, DType::kFloat32, lay, Lay::kNchw, lay, true, ConvActivation::kRelu, true);
    RunConv(c, DType::kBFloat16, lay, Lay::kNchw, Lay::kChannelsLast, true, ConvActivation::kNone,
            true);
  }
}

TEST(Conv2d, SmallImagesShareOneGemm) {
  const Case c = Cases()[1];  // batch 2, 5 x 4 output pixels each
  const TestTensor in = Make4d(DType::kFloat32, c.in, Lay::kNchw, 0);
  const TestTensor w = Make4d(DType::kFloat32, {5, 3, 3, 3}, Lay::kNchw, 0);
  const TestTensor out = Make4d(DType::kFloat32, {2, 5, 5, 4}, Lay::kNchw, 0);
  // col [K][N*P] and the tile [Cout][N*P] (Note [conv as GEMM]).
  EXPECT_GE(ConvWorkspaceBytes(out.ref, in.ref, w.ref, c.p), size_t{4} * (27 + 5) * 2 * 20);
  for (Lay lay : {Lay::kNchw, Lay::kStrided}) {
    RunConv(c, DType::kFloat32, lay, Lay::kNchw, lay, true, ConvActivation::kRelu, true);
    RunConv(c, DType::kFloat16, lay, Lay::kNchw, lay, false, ConvActivation::kNone, false);
  }
}

TEST(Conv2d, Dtypes) {
  for (DType dt : {DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
    SCOPED_TRACE(DTypeName(dt));
    for (const Case& c : {Cases()[1], Cases()[3], Cases()[4], Cases()[5], Cases()[8]}) {
      RunConv(c, dt, Lay::kNchw, Lay::kNchw, Lay::kNchw, true, ConvActivation::kNone, true);
      RunConv(c, dt, Lay::kChannelsLast, Lay::kNchw, Lay::kChannelsLast, true, ConvActivation::kRelu,
              true);
    }
  }
}

// ConvBatchNorm and kClamp against the reference convolution followed by
// batch norm and min(max(x, lo), hi) in double, over every path of the
// kernel (direct, depthwise, 1x1, merged images, bands) and with no K; in
// bfloat16 too, where K >= 32 (bands, merged images) takes AMX with the
// factors on the float32 tile (Note [bf16 conv on AMX]).
TEST(Conv2d, FoldedBatchNormAndClamp) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16})
  for (size_t ci : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, kBandsCase, kImplicitCase,
                    kMergedCase, kGroupedAmxCase}) {
    const Case c = Cases()[ci];
    SCOPED_TRACE("case " + std::to_string(ci) + " " + DTypeName(dt));
    const Lay in_lay = ci == kImplicitCase ? Lay::kChannelsLast : Lay::kNchw;
    const int64_t oh = ConvOutputSize(c.in[2], c.kh, c.p.stride[0], c.p.pad_begin[0],
                                      c.p.pad_end[0], c.p.dilation[0]);
    const int64_t ow = ConvOutputSize(c.in[3], c.kw, c.p.stride[1], c.p.pad_begin[1],
                                      c.p.pad_end[1], c.p.dilation[1]);
    for (bool affine : {true, false}) {
      const TestTensor in = Make4d(dt, c.in, in_lay, 21);
      const TestTensor w = Make4d(dt, {c.cout, c.in[1] / c.p.groups, c.kh, c.kw}, Lay::kNchw, 22);
      TestTensor b = Empty(DType::kFloat32, {c.cout});
      FillRandom(b, 23, -1.0, 1.0);
      ConvBatchNorm bn;
      TestTensor mean = Empty(DType::kFloat32, {c.cout}), var = Empty(DType::kFloat32, {c.cout});
      TestTensor gamma = Empty(DType::kBFloat16, {c.cout}), beta = Empty(DType::kFloat32, {c.cout});
      FillRandom(mean, 24, -0.5, 0.5);
      FillRandom(var, 25, 0.2, 2.0);
      FillRandom(gamma, 26, -2.0, 2.0);
      FillRandom(beta, 27, -0.5, 0.5);
      bn.mean = mean.ref;
      bn.var = var.ref;
      bn.eps = 1e-3;
      if (affine) {
        bn.weight = gamma.ref;
        bn.bias = beta.ref;
      }
      ConvParams p = c.p;
      p.activation = ConvActivation::kClamp;
      p.clamp_lo = -2.5f;  // wide enough that most outputs test the batch norm
      p.clamp_hi = 3.0f;
      TestTensor out = Make4d(dt, {c.in[0], c.cout, oh, ow}, Lay::kNchw, 0);
      const std::vector<double> conv = Reference(c, in, w, &b, ConvActivation::kNone, oh, ow);
      ASSERT_TRUE(Conv2d(out.ref, in.ref, w.ref, b.ref, p, TensorRef{}, &bn).ok());
      const int64_t k = (c.in[1] / c.p.groups) * c.kh * c.kw;
      for (int64_t i = 0; i < out.numel(); ++i) {
        const int64_t o = (i / (oh * ow)) % c.cout;
        const double s = (affine ? gamma.At(o) : 1.0) / std::sqrt(var.At(o) + 1e-3);
        double v = (conv[i] - mean.At(o)) * s + (affine ? beta.At(o) : 0.0);
        v = std::min(std::max(v, -2.5), 3.0);
        ASSERT_NEAR(out.At(i), v,
                    (1e-6 * static_cast<double>(k) + 1e-6) * (1 + std::abs(s)) +
                        testing::StorageTol(dt, v, 0))
            << "element " << i;
      }
    }
  }
}

TEST(Conv2d, DescribeCountsFlops) {
  const Case c = Cases()[0];
  const TestTensor in = Make4d(DType::kFloat32, c.in, Lay::kNchw, 0);
  const TestTensor w = Make4d(DType::kFloat32, {4, 3, 3, 3}, Lay::kNchw, 0);
  const TestTensor out = Make4d(DType::kFloat32, {2, 4, 7, 7}, Lay::kNchw, 0);
  const rt::KernelInfo info = DescribeConv2d(out.ref, in.ref, w.ref, TensorRef{}, c.p, "aten::x");
  EXPECT_STREQ(info.name, "conv2d_f32");
  EXPECT_EQ(info.flops, 2u * 2 * 4 * 7 * 7 * 27);
  EXPECT_EQ(info.bytes_written, out.ref.nbytes());
}

// Conv3d (Note [conv3d]) against a double-precision direct convolution on
// every target: bands across frames and images, padding in all three dims,
// dilation, groups, bias, a strided input and a bfloat16 run.
struct Case3d {
  std::vector<int64_t> in;  // N, C, T, H, W
  int64_t cout;
  std::vector<int64_t> k;   // KT, KH, KW
  Conv3dParams p;
};

void RunConv3d(const Case3d& c, DType dt, bool strided_in, bool bias) {
  const Conv3dParams& p = c.p;
  std::vector<int64_t> o = {c.in[0], c.cout};
  for (int d = 0; d < 3; ++d) {
    o.push_back(ConvOutputSize(c.in[d + 2], c.k[d], p.stride[d], p.pad[d], p.pad[d], p.dilation[d]));
  }
  const int64_t cg = c.in[1] / p.groups, og = c.cout / p.groups;
  TestTensor in = strided_in ? Empty(dt, {c.in[0], c.in[1], c.in[2], c.in[3], 2 * c.in[4]})
                                   .Slice(4, 1, 2, c.in[4])
                             : Empty(dt, c.in);
  FillRandom(in, 21, -1.0, 1.0);
  TestTensor w = Empty(dt, {c.cout, cg, c.k[0], c.k[1], c.k[2]});
  FillRandom(w, 22, -1.0, 1.0);
  TestTensor b;
  if (bias) {
    b = Empty(dt, {c.cout});
    FillRandom(b, 23, -1.0, 1.0);
  }
  TestTensor out = Empty(dt, o);
  const auto idx = [](const std::vector<int64_t>& s, int64_t a, int64_t bb, int64_t t, int64_t y,
                      int64_t x) { return (((a * s[1] + bb) * s[2] + t) * s[3] + y) * s[4] + x; };
  std::vector<double> want(static_cast<size_t>(out.numel()));
  const std::vector<int64_t> ws = {c.cout, cg, c.k[0], c.k[1], c.k[2]};
  for (int64_t n = 0; n < o[0]; ++n)
    for (int64_t oc = 0; oc < o[1]; ++oc)
      for (int64_t t = 0; t < o[2]; ++t)
        for (int64_t y = 0; y < o[3]; ++y)
          for (int64_t x = 0; x < o[4]; ++x) {
            double acc = bias ? b.At(oc) : 0.0;
            const int64_t g = oc / og;
            for (int64_t ci = 0; ci < cg; ++ci)
              for (int64_t kt = 0; kt < c.k[0]; ++kt)
                for (int64_t ky = 0; ky < c.k[1]; ++ky)
                  for (int64_t kx = 0; kx < c.k[2]; ++kx) {
                    const int64_t it = t * p.stride[0] - p.pad[0] + kt * p.dilation[0];
                    const int64_t iy = y * p.stride[1] - p.pad[1] + ky * p.dilation[1];
                    const int64_t ix = x * p.stride[2] - p.pad[2] + kx * p.dilation[2];
                    if (it < 0 || it >= c.in[2] || iy < 0 || iy >= c.in[3] || ix < 0 ||
                        ix >= c.in[4]) {
                      continue;
                    }
                    acc += in.At(idx(c.in, n, g * cg + ci, it, iy, ix)) *
                           w.At(idx(ws, oc, ci, kt, ky, kx));
                  }
            want[static_cast<size_t>(idx(o, n, oc, t, y, x))] = acc;
          }
  ForEachTarget([&](const char*) {
    ASSERT_TRUE(Conv3d(out.ref, in.ref, w.ref, bias ? b.ref : TensorRef{}, p).ok());
    const int64_t k = cg * c.k[0] * c.k[1] * c.k[2];
    int failures = 0;
    for (int64_t i = 0; i < out.numel() && failures < 5; ++i) {
      const double tol = 1e-6 * static_cast<double>(k) + 1e-6 + testing::StorageTol(dt, want[i], 0.0);
      const std::string err = testing::CheckClose(out.At(i), want[i], 0.0, tol);
      if (!err.empty()) {
        ++failures;
        ADD_FAILURE() << "element " << i << ": " << err;
      }
    }
  });
}

Conv3dParams Params3d(std::vector<int64_t> s, std::vector<int64_t> pad, std::vector<int64_t> d,
                      int64_t groups) {
  Conv3dParams p;
  for (int i = 0; i < 3; ++i) {
    p.stride[i] = s[i];
    p.pad[i] = pad[i];
    p.dilation[i] = d[i];
  }
  p.groups = groups;
  return p;
}

TEST(Conv3d, GeometriesLayoutsAndDtypes) {
  const std::vector<Case3d> cases = {
      {{2, 3, 4, 8, 8}, 5, {2, 4, 4}, Params3d({2, 4, 4}, {0, 0, 0}, {1, 1, 1}, 1)},  // patches
      {{1, 4, 5, 7, 6}, 6, {3, 3, 3}, Params3d({1, 2, 1}, {1, 0, 2}, {2, 1, 1}, 2)},
      {{2, 4, 3, 5, 5}, 4, {1, 3, 3}, Params3d({1, 1, 1}, {0, 1, 1}, {1, 1, 1}, 4)},  // depthwise
      {{2, 6, 2, 3, 3}, 3, {1, 1, 1}, Params3d({1, 1, 1}, {0, 0, 0}, {1, 1, 1}, 1)},  // pointwise
  };
  for (const Case3d& c : cases) {
    RunConv3d(c, DType::kFloat32, false, true);
    RunConv3d(c, DType::kFloat32, true, false);
  }
  RunConv3d(cases[1], DType::kBFloat16, false, true);
}

}  // namespace
}  // namespace trn::kernels
