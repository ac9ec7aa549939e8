// Batch norm, pooling and upsampling against double-precision references
// written from torch's definitions, over window geometries, NCHW /
// channels-last / strided operands and every floating dtype, on every
// compiled target (the kernels are target-independent today; the sweep keeps
// them honest if they get SIMD paths).
#include "core/kernels/vision.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
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
using testing::kFloatTypes;

// [N, C, H, W]: 0 = NCHW, 1 = channels-last storage, 2 = W strided by 2.
TestTensor Make4d(DType dt, std::vector<int64_t> s, int lay, uint32_t seed) {
  TestTensor t;
  if (lay == 1) {
    t = Empty(dt, {s[0], s[2], s[3], s[1]});
    const int64_t st[4] = {t.ref.strides[0], t.ref.strides[3], t.ref.strides[1],
                           t.ref.strides[2]};
    for (int d = 0; d < 4; ++d) {
      t.ref.sizes[d] = s[d];
      t.ref.strides[d] = st[d];
    }
  } else if (lay == 2) {
    t = Empty(dt, {s[0], s[1], s[2], 2 * s[3]}).Slice(3, 1, 2, s[3]);
  } else {
    t = Empty(dt, s);
  }
  if (seed != 0) FillRandom(t, seed, -2.0, 2.0);
  return t;
}

void ExpectClose(const TestTensor& got, const std::vector<double>& want, double rel) {
  ASSERT_EQ(static_cast<size_t>(got.numel()), want.size());
  int failures = 0;
  for (int64_t i = 0; i < got.numel() && failures < 5; ++i) {
    const double tol = 1e-6 + testing::StorageTol(got.dtype(), want[i], rel);
    const std::string err = testing::CheckClose(got.At(i), want[i], 0.0, tol);
    if (!err.empty()) {
      ++failures;
      ADD_FAILURE() << "element " << i << ": " << err;
    }
  }
}

int64_t PoolOut(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dil, bool ceil) {
  const int64_t eff = dil * (k - 1) + 1;
  int64_t o = (in + 2 * pad - eff + (ceil ? stride - 1 : 0)) / stride + 1;
  if (ceil && (o - 1) * stride >= in + pad) --o;  // the last window must start inside
  return o;
}


TEST(BatchNorm, AgainstReference) {
  for (DType dt : kFloatTypes) {
    for (int lay : {0, 1, 2}) {
      for (bool affine : {false, true}) {
        SCOPED_TRACE(std::string(DTypeName(dt)) + " layout " + std::to_string(lay));
        const TestTensor in = Make4d(dt, {2, 5, 3, 4}, lay, 1);
        TestTensor out = Make4d(dt, {2, 5, 3, 4}, lay, 0);
        TestTensor mean = Empty(DType::kFloat32, {5}), var = Empty(DType::kFloat32, {5});
        TestTensor w = Empty(DType::kFloat32, {5}), b = Empty(DType::kFloat32, {5});
        FillRandom(mean, 2);
        FillRandom(var, 3, 0.5, 2.0);
        FillRandom(w, 4);
        FillRandom(b, 5);
        std::vector<double> want(static_cast<size_t>(in.numel()));
        for (int64_t i = 0; i < in.numel(); ++i) {
          const int64_t c = (i / 12) % 5;
          double v = (in.At(i) - mean.At(c)) / std::sqrt(var.At(c) + 1e-5);
          if (affine) v = v * w.At(c) + b.At(c);
          want[i] = v;
        }
        ForEachTarget([&](const char*) {
          ASSERT_TRUE(BatchNormInference(out.ref, in.ref, mean.ref, var.ref,
                                         affine ? w.ref : TensorRef{},
                                         affine ? b.ref : TensorRef{}, 1e-5)
                          .ok());
          ExpectClose(out, want, 1e-5);
        });
      }
    }
  }
}

struct PoolCase {
  int64_t k[2], s[2], pad[2], dil[2];
  bool ceil;
};
const std::vector<PoolCase> kPools = {
    {{2, 2}, {2, 2}, {0, 0}, {1, 1}, false},
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}, false},
    {{3, 2}, {2, 1}, {1, 0}, {1, 2}, false},
    {{3, 3}, {2, 2}, {0, 0}, {1, 1}, true},
    {{3, 3}, {2, 2}, {1, 1}, {1, 1}, true},
};

PoolParams ParamsOf(const PoolCase& pc) {
  PoolParams p;
  for (int i = 0; i < 2; ++i) {
    p.kernel[i] = pc.k[i];
    p.stride[i] = pc.s[i];
    p.padding[i] = pc.pad[i];
    p.dilation[i] = pc.dil[i];
  }
  return p;
}

TEST(MaxPool2d, AgainstReference) {
  for (const PoolCase& pc : kPools) {
    for (int lay : {0, 1, 2}) {
      // 10 columns fit one vector; 37 take several, stride 2 reaches the shuffle split.
      for (const auto [h, w] : {std::pair<int64_t, int64_t>{9, 10}, {5, 37}})
      for (DType dt : kFloatTypes) {
        const int64_t oh = PoolOut(h, pc.k[0], pc.pad[0], pc.s[0], pc.dil[0], pc.ceil);
        const int64_t ow = PoolOut(w, pc.k[1], pc.pad[1], pc.s[1], pc.dil[1], pc.ceil);
        TestTensor in = Make4d(dt, {2, 3, h, w}, lay, 7);
        in.Set(5, std::numeric_limits<double>::quiet_NaN());
        TestTensor out = Make4d(dt, {2, 3, oh, ow}, lay, 0);
        TestTensor idx = Empty(DType::kInt64, {2, 3, oh, ow});
        std::vector<double> want;
        std::vector<int64_t> want_idx;
        for (int64_t pl = 0; pl < 6; ++pl)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x) {
              double best = -INFINITY;
              int64_t arg = -1;
              for (int64_t ky = 0; ky < pc.k[0]; ++ky)
                for (int64_t kx = 0; kx < pc.k[1]; ++kx) {
                  const int64_t iy = y * pc.s[0] - pc.pad[0] + ky * pc.dil[0];
                  const int64_t ix = x * pc.s[1] - pc.pad[1] + kx * pc.dil[1];
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  const double v = in.At(pl * h * w + iy * w + ix);
                  if (arg < 0 || v > best || std::isnan(v)) {
                    best = v;
                    arg = iy * w + ix;
                  }
                }
              want.push_back(best);
              want_idx.push_back(arg);
            }
        PoolParams p = ParamsOf(pc);
        ForEachTarget([&](const char*) {
          ASSERT_TRUE(MaxPool2d(out.ref, TensorRef{}, in.ref, p).ok());  // values only
          ExpectClose(out, want, 0.0);
          FillRandom(out, 9);
          ASSERT_TRUE(MaxPool2d(out.ref, idx.ref, in.ref, p).ok());
          ExpectClose(out, want, 0.0);
          for (int64_t i = 0; i < idx.numel(); ++i) ASSERT_EQ(idx.AtInt(i), want_idx[i]) << i;
        });
      }
    }
  }
}

TEST(AvgPool2d, AgainstReference) {
  for (const PoolCase& pc : kPools) {
    if (pc.dil[0] != 1 || pc.dil[1] != 1) continue;
    for (int mode = 0; mode < 3; ++mode) {  // include pad, exclude pad, divisor 5
      for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
        const int64_t h = 9, w = 10;
        const int64_t oh = PoolOut(h, pc.k[0], pc.pad[0], pc.s[0], 1, pc.ceil);
        const int64_t ow = PoolOut(w, pc.k[1], pc.pad[1], pc.s[1], 1, pc.ceil);
        const TestTensor in = Make4d(dt, {1, 3, h, w}, mode, 8);
        TestTensor out = Make4d(dt, {1, 3, oh, ow}, 2 - mode, 0);
        std::vector<double> want;
        for (int64_t pl = 0; pl < 3; ++pl)
          for (int64_t y = 0; y < oh; ++y)
            for (int64_t x = 0; x < ow; ++x) {
              double sum = 0;
              int64_t inside = 0, padded = 0;
              for (int64_t ky = 0; ky < pc.k[0]; ++ky)
                for (int64_t kx = 0; kx < pc.k[1]; ++kx) {
                  const int64_t iy = y * pc.s[0] - pc.pad[0] + ky;
                  const int64_t ix = x * pc.s[1] - pc.pad[1] + kx;
                  // torch counts window cells inside input + padding.
                  if (iy < h + pc.pad[0] && ix < w + pc.pad[1]) ++padded;
                  if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                  sum += in.At(pl * h * w + iy * w + ix);
                  ++inside;
                }
              const int64_t div = mode == 2 ? 5 : mode == 0 ? padded : inside;
              want.push_back(inside == 0 ? 0.0 : sum / div);
            }
        PoolParams p;
        for (int i = 0; i < 2; ++i) {
          p.kernel[i] = pc.k[i];
          p.stride[i] = pc.s[i];
          p.padding[i] = pc.pad[i];
        }
        p.count_include_pad = mode == 0;
        p.divisor_override = mode == 2 ? 5 : 0;
        ForEachTarget([&](const char*) {
          ASSERT_TRUE(AvgPool2d(out.ref, in.ref, p).ok());
          ExpectClose(out, want, 1e-6);
        });
      }
    }
  }
}

TEST(AdaptiveAvgPool2d, AnyOutputSize) {
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {3, 4}, {7, 2}, {9, 10}, {12, 13}}) {
    for (int lay : {0, 1}) {
      const TestTensor in = Make4d(DType::kFloat32, {2, 3, 9, 10}, lay, 9);
      TestTensor out = Make4d(DType::kFloat32, {2, 3, oh, ow}, lay, 0);
      std::vector<double> want;
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t y0 = static_cast<int64_t>(std::floor(double(y) * 9 / oh));
            const int64_t y1 = static_cast<int64_t>(std::ceil(double(y + 1) * 9 / oh));
            const int64_t x0 = static_cast<int64_t>(std::floor(double(x) * 10 / ow));
            const int64_t x1 = static_cast<int64_t>(std::ceil(double(x + 1) * 10 / ow));
            double sum = 0;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) sum += in.At(pl * 90 + iy * 10 + ix);
            want.push_back(sum / ((y1 - y0) * (x1 - x0)));
          }
      ForEachTarget([&](const char*) {
        ASSERT_TRUE(AdaptiveAvgPool2d(out.ref, in.ref).ok());
        ExpectClose(out, want, 1e-6);
      });
    }
  }
}

// The pool backwards against the adjoint of the forward written out in
// double: each grad_out element added to the cells its window read (max: the
// cell its index names), over the pool cases, layouts and dtypes.
TEST(PoolBackward, MaxAvgAndAdaptiveAgainstReference) {
  for (const PoolCase& pc : kPools) {
    for (int lay : {0, 1, 2}) {
      for (DType dt : kFloatTypes) {
        SCOPED_TRACE(std::string(DTypeName(dt)) + " layout " + std::to_string(lay));
        const int64_t h = 9, w = 10;
        const int64_t oh = PoolOut(h, pc.k[0], pc.pad[0], pc.s[0], pc.dil[0], pc.ceil);
        const int64_t ow = PoolOut(w, pc.k[1], pc.pad[1], pc.s[1], pc.dil[1], pc.ceil);
        const TestTensor in = Make4d(dt, {2, 3, h, w}, lay, 11);
        const TestTensor go = Make4d(dt, {2, 3, oh, ow}, 2 - lay, 12);
        TestTensor out = Make4d(dt, {2, 3, oh, ow}, 0, 0);
        TestTensor idx = Empty(DType::kInt64, {2, 3, oh, ow});
        TestTensor gi = Make4d(dt, {2, 3, h, w}, lay, 13);  // overwritten whole
        PoolParams p = ParamsOf(pc);
        ASSERT_TRUE(MaxPool2d(out.ref, idx.ref, in.ref, p).ok());
        std::vector<double> want(static_cast<size_t>(in.numel()), 0.0);
        for (int64_t i = 0; i < go.numel(); ++i) {
          want[(i / (oh * ow)) * h * w + idx.AtInt(i)] += go.At(i);
        }
        ForEachTarget([&](const char*) {
          ASSERT_TRUE(MaxPool2dBackward(gi.ref, go.ref, idx.ref).ok());
          ExpectClose(gi, want, 1e-6);
        });
        if (pc.dil[0] != 1 || pc.dil[1] != 1) continue;
        for (int mode = 0; mode < 3; ++mode) {  // include pad, exclude pad, divisor 5
          p.count_include_pad = mode == 0;
          p.divisor_override = mode == 2 ? 5 : 0;
          std::fill(want.begin(), want.end(), 0.0);
          for (int64_t pl = 0; pl < 6; ++pl)
            for (int64_t y = 0; y < oh; ++y)
              for (int64_t x = 0; x < ow; ++x) {
                std::vector<int64_t> cells;
                int64_t padded = 0;
                for (int64_t ky = 0; ky < pc.k[0]; ++ky)
                  for (int64_t kx = 0; kx < pc.k[1]; ++kx) {
                    const int64_t iy = y * pc.s[0] - pc.pad[0] + ky;
                    const int64_t ix = x * pc.s[1] - pc.pad[1] + kx;
                    if (iy < h + pc.pad[0] && ix < w + pc.pad[1]) ++padded;
                    if (iy >= 0 && iy < h && ix >= 0 && ix < w) cells.push_back(iy * w + ix);
                  }
                const double div = mode == 2 ? 5.0 : mode == 0 ? double(padded) : cells.size();
                for (int64_t cell : cells) {
                  want[pl * h * w + cell] += go.At((pl * oh + y) * ow + x) / div;
                }
              }
          ForEachTarget([&](const char*) {
            ASSERT_TRUE(AvgPool2dBackward(gi.ref, go.ref, p).ok());
            ExpectClose(gi, want, 1e-6);
          });
        }
      }
    }
  }
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {4, 3}, {9, 10}, {13, 12}}) {
    const TestTensor go = Make4d(DType::kFloat32, {2, 3, oh, ow}, 2, 14);
    TestTensor gi = Make4d(DType::kFloat32, {2, 3, 9, 10}, 1, 15);
    std::vector<double> want(static_cast<size_t>(gi.numel()), 0.0);
    for (int64_t pl = 0; pl < 6; ++pl)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          const int64_t y0 = y * 9 / oh, y1 = ((y + 1) * 9 + oh - 1) / oh;
          const int64_t x0 = x * 10 / ow, x1 = ((x + 1) * 10 + ow - 1) / ow;
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = x0; ix < x1; ++ix)
              want[pl * 90 + iy * 10 + ix] +=
                  go.At((pl * oh + y) * ow + x) / double((y1 - y0) * (x1 - x0));
        }
    ForEachTarget([&](const char*) {
      ASSERT_TRUE(AdaptiveAvgPool2dBackward(gi.ref, go.ref).ok());
      ExpectClose(gi, want, 1e-6);
    });
  }
}

TEST(PoolBackward, MaxIndexOutsideThePlaneIsAnError) {
  const TestTensor go = Make4d(DType::kFloat32, {1, 1, 2, 2}, 0, 16);
  TestTensor gi = Make4d(DType::kFloat32, {1, 1, 3, 3}, 0, 0);
  TestTensor idx = Empty(DType::kInt64, {1, 1, 2, 2});
  for (int64_t bad : {int64_t{9}, int64_t{-1}}) {
    for (int64_t i = 0; i < 4; ++i) idx.Set(i, static_cast<double>(i == 2 ? bad : i));
    const Status s = MaxPool2dBackward(gi.ref, go.ref, idx.ref);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.error.find("index " + std::to_string(bad)), std::string::npos) << s.error;
  }
}

// Source coordinate of torch's linear interpolation (a dim of unchanged size
// is copied whatever the scale, as torch's compute_source_index_and_lambda).
double LinearSource(int64_t o, int64_t in, int64_t out, bool align, double scale) {
  if (in == out) return static_cast<double>(o);
  if (align) return out > 1 ? double(in - 1) / (out - 1) * o : 0.0;
  const double s = scale > 0 ? 1.0 / scale : double(in) / out;
  return std::max(s * (o + 0.5) - 0.5, 0.0);
}

TEST(Upsample2d, NearestAndBilinear) {
  struct U {
    int64_t oh, ow;
    double sh, sw;
  };
  for (const U& u : {U{12, 10, 2.0, 2.0}, U{9, 12, 1.5, 2.5}, U{7, 5, 0, 0}, U{3, 2, 0.5, 0.5},
                     U{13, 3, 0, 0},
                     // Sizes of scale 2 and 1 from scales 2.2 and 1.1: 2-D nearest maps by
                     // size, nearest-exact by the scale.
                     U{12, 5, 2.2, 1.1},
                     // Rows of several vectors plus a tail (nearest gathers whole vectors).
                     U{12, 40, 2.0, 8.0}, U{13, 37, 0, 0}}) {
    for (int mode = 0; mode < 4; ++mode) {  // nearest, bilinear, bilinear align_corners, nearest-exact
      for (DType dt : {DType::kFloat32, DType::kFloat16}) {
        const int64_t h = 6, w = 5;
        const TestTensor in = Make4d(dt, {1, 2, h, w}, mode % 2 == 0 ? 2 : 1, 10);  // odd layouts too
        TestTensor out = Make4d(dt, {1, 2, u.oh, u.ow}, 0, 0);
        std::vector<double> want;
        for (int64_t pl = 0; pl < 2; ++pl)
          for (int64_t y = 0; y < u.oh; ++y)
            for (int64_t x = 0; x < u.ow; ++x) {
              const auto at = [&](int64_t iy, int64_t ix) { return in.At(pl * h * w + iy * w + ix); };
              if (mode == 0 || mode == 3) {
                const double sy = u.sh > 0 ? 1.0 / u.sh : double(h) / u.oh;
                const double sx = u.sw > 0 ? 1.0 / u.sw : double(w) / u.ow;
                const double off = mode == 3 ? 0.5 : 0.0;
                const auto src = [&](int64_t o, int64_t n, int64_t on, double s) -> int64_t {
                  if (mode == 0 && on == n) return o;
                  if (mode == 0 && on == 2 * n) return o / 2;
                  return std::min<int64_t>(std::floor((o + off) * s), n - 1);
                };
                want.push_back(at(src(y, h, u.oh, sy), src(x, w, u.ow, sx)));
                continue;
              }
              const double ry = LinearSource(y, h, u.oh, mode == 2, u.sh);
              const double rx = LinearSource(x, w, u.ow, mode == 2, u.sw);
              const int64_t y0 = std::min<int64_t>(std::floor(ry), h - 1);
              const int64_t x0 = std::min<int64_t>(std::floor(rx), w - 1);
              const int64_t y1 = std::min(y0 + 1, h - 1), x1 = std::min(x0 + 1, w - 1);
              const double ly = ry - y0, lx = rx - x0;
              want.push_back((1 - ly) * ((1 - lx) * at(y0, x0) + lx * at(y0, x1)) +
                             ly * ((1 - lx) * at(y1, x0) + lx * at(y1, x1)));
            }
        ForEachTarget([&](const char*) {
          SCOPED_TRACE("mode " + std::to_string(mode) + " oh " + std::to_string(u.oh) + " ow " +
                       std::to_string(u.ow));
          const UpsampleMode m = mode == 0   ? UpsampleMode::kNearest
                                 : mode == 3 ? UpsampleMode::kNearestExact
                                             : UpsampleMode::kBilinear;
          ASSERT_TRUE(Upsample2d(out.ref, in.ref, m, mode == 2, u.sh, u.sw).ok());
          ExpectClose(out, want, 1e-5);
        });
      }
    }
  }
}

// Adaptive max and 3-D max pooling against scalar walks of torch's rule: the
// window's cells in order, v > best or NaN takes over (so a later NaN
// replaces an earlier one), the first in-input cell when nothing beats -inf.
TEST(MaxPool, AdaptiveAnd3dAgainstReference) {
  for (auto [oh, ow] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {3, 4}, {9, 10}, {12, 7}}) {
    for (int lay : {0, 1}) {
      TestTensor in = Make4d(DType::kFloat32, {2, 3, 9, 10}, lay, 31);
      in.Set(11, NAN);
      in.Set(13, NAN);
      TestTensor out = Make4d(DType::kFloat32, {2, 3, oh, ow}, lay, 0);
      TestTensor idx = Empty(DType::kInt64, {2, 3, oh, ow});
      ASSERT_TRUE(AdaptiveMaxPool2d(out.ref, idx.ref, in.ref).ok());
      for (int64_t pl = 0; pl < 6; ++pl)
        for (int64_t y = 0; y < oh; ++y)
          for (int64_t x = 0; x < ow; ++x) {
            const int64_t y0 = y * 9 / oh, y1 = ((y + 1) * 9 + oh - 1) / oh;
            const int64_t x0 = x * 10 / ow, x1 = ((x + 1) * 10 + ow - 1) / ow;
            double best = -INFINITY;
            int64_t at = y0 * 10 + x0;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) {
                const double v = in.At(pl * 90 + iy * 10 + ix);
                if (v > best || std::isnan(v)) {
                  best = v;
                  at = iy * 10 + ix;
                }
              }
            const int64_t o = (pl * oh + y) * ow + x;
            EXPECT_TRUE(out.At(o) == best || (std::isnan(best) && std::isnan(out.At(o)))) << o;
            EXPECT_EQ(idx.AtInt(o), at) << o;
          }
    }
  }
  struct C3 {
    int64_t k[3], s[3], pad[3], dil[3];
    bool ceil;
  };
  for (const C3& c : {C3{{2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {1, 1, 1}, false},
                      C3{{3, 3, 2}, {2, 1, 2}, {1, 1, 0}, {1, 2, 1}, false},
                      C3{{3, 3, 3}, {2, 2, 2}, {1, 0, 1}, {1, 1, 1}, true}}) {
    for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
      const int64_t dd = 5, h = 6, w = 7;
      int64_t os[3];
      const int64_t lim[3] = {dd, h, w};
      for (int k = 0; k < 3; ++k) os[k] = PoolOut(lim[k], c.k[k], c.pad[k], c.s[k], c.dil[k], c.ceil);
      TestTensor in = Empty(dt, {2, 2, dd, h, w});
      FillRandom(in, 32, -2.0, 2.0);
      in.Set(40, NAN);
      for (int64_t i = 100; i < 140; ++i) in.Set(i, -INFINITY);
      TestTensor out = Empty(dt, {2, 2, os[0], os[1], os[2]});
      TestTensor idx = Empty(DType::kInt64, {2, 2, os[0], os[1], os[2]});
      Pool3dParams p;
      for (int k = 0; k < 3; ++k) {
        p.kernel[k] = c.k[k];
        p.stride[k] = c.s[k];
        p.padding[k] = c.pad[k];
        p.dilation[k] = c.dil[k];
      }
      ASSERT_TRUE(MaxPool3d(out.ref, idx.ref, in.ref, p).ok());
      int64_t o = 0;
      for (int64_t pl = 0; pl < 4; ++pl)
        for (int64_t z = 0; z < os[0]; ++z)
          for (int64_t y = 0; y < os[1]; ++y)
            for (int64_t x = 0; x < os[2]; ++x, ++o) {
              const int64_t at0[3] = {z, y, x};
              int64_t start[3];
              for (int k = 0; k < 3; ++k) {
                start[k] = at0[k] * c.s[k] - c.pad[k];
                while (start[k] < 0) start[k] += c.dil[k];
              }
              double best = -INFINITY;
              int64_t at = (start[0] * h + start[1]) * w + start[2];
              for (int64_t a = 0; a < c.k[0]; ++a)
                for (int64_t b = 0; b < c.k[1]; ++b)
                  for (int64_t e = 0; e < c.k[2]; ++e) {
                    const int64_t iz = z * c.s[0] - c.pad[0] + a * c.dil[0];
                    const int64_t iy = y * c.s[1] - c.pad[1] + b * c.dil[1];
                    const int64_t ix = x * c.s[2] - c.pad[2] + e * c.dil[2];
                    if (iz < 0 || iz >= dd || iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                    const int64_t cell = (iz * h + iy) * w + ix;
                    const double v = in.At(pl * dd * h * w + cell);
                    if (v > best || std::isnan(v)) {
                      best = v;
                      at = cell;
                    }
                  }
              EXPECT_TRUE(out.At(o) == best || (std::isnan(best) && std::isnan(out.At(o)))) << o;
              EXPECT_EQ(idx.AtInt(o), at) << o;
            }
    }
  }
}

// col2im is im2col's adjoint: <Im2Col(x), c> == <x, Col2Im(c)> in double for
// random x and c, over strides, padding and dilation (every tap, in and out of
// the input), and Col2Im writes its whole output.
TEST(Col2Im, IsTheAdjointOfIm2Col) {
  struct G {
    int64_t k[2], d[2], pad[2], s[2];
  };
  for (const G& g : {G{{3, 3}, {1, 1}, {1, 1}, {1, 1}}, G{{2, 3}, {2, 1}, {1, 2}, {2, 3}},
                     G{{4, 4}, {1, 1}, {0, 0}, {4, 4}}, G{{1, 1}, {1, 1}, {0, 0}, {1, 1}}}) {
    const int64_t h = 9, w = 12;
    Im2ColParams p{};
    for (int i = 0; i < 2; ++i) {
      p.kernel[i] = g.k[i];
      p.dilation[i] = g.d[i];
      p.padding[i] = g.pad[i];
      p.stride[i] = g.s[i];
    }
    const int64_t oh = (h + 2 * g.pad[0] - g.d[0] * (g.k[0] - 1) - 1) / g.s[0] + 1;
    const int64_t ow = (w + 2 * g.pad[1] - g.d[1] * (g.k[1] - 1) - 1) / g.s[1] + 1;
    const int64_t rows = 3 * g.k[0] * g.k[1];
    TestTensor x = Make4d(DType::kFloat64, {2, 3, h, w}, 0, 41);
    TestTensor cols = Empty(DType::kFloat64, {2, rows, oh * ow});
    TestTensor c = Empty(DType::kFloat64, {2, rows, oh * ow});
    FillRandom(c, 42, -1.0, 1.0);
    TestTensor back = Make4d(DType::kFloat64, {2, 3, h, w}, 1, 43);  // overwritten whole
    ASSERT_TRUE(Im2Col(cols.ref, x.ref, p).ok());
    ASSERT_TRUE(Col2Im(back.ref, c.ref, p).ok());
    double lhs = 0, rhs = 0;
    for (int64_t i = 0; i < cols.numel(); ++i) lhs += cols.At(i) * c.At(i);
    for (int64_t i = 0; i < x.numel(); ++i) rhs += x.At(i) * back.At(i);
    EXPECT_NEAR(lhs, rhs, 1e-4 * std::max(1.0, std::fabs(lhs)));
  }
}

// The backward is the forward's adjoint: the forward's matrix A is read off
// by upsampling each unit impulse of the input (float64, exact taps), and
// grad_in must be A^T grad_out, for every mode, sizes up and down and both
// corner rules.
TEST(Upsample2d, BackwardIsTheForwardsAdjoint) {
  struct U {
    int64_t oh, ow;
    double sh, sw;
  };
  const int64_t h = 5, w = 4;
  for (const U& u : {U{10, 8, 2.0, 2.0}, U{9, 7, 0, 0}, U{3, 2, 0, 0}, U{11, 5, 2.2, 1.1},
                     U{5, 4, 0, 0}}) {
    for (UpsampleMode m : {UpsampleMode::kNearest, UpsampleMode::kNearestExact,
                           UpsampleMode::kBilinear, UpsampleMode::kBicubic}) {
      for (bool align : {false, true}) {
        if (align && (m == UpsampleMode::kNearest || m == UpsampleMode::kNearestExact)) continue;
        SCOPED_TRACE("mode " + std::to_string(static_cast<int>(m)) + " align " +
                     std::to_string(align) + " out " + std::to_string(u.oh) + "x" +
                     std::to_string(u.ow));
        TestTensor impulse = Empty(DType::kFloat64, {1, 1, h, w});
        TestTensor column = Empty(DType::kFloat64, {1, 1, u.oh, u.ow});
        std::vector<double> a(static_cast<size_t>(h * w * u.oh * u.ow));  // A^T, [h*w][oh*ow]
        for (int64_t i = 0; i < h * w; ++i) {
          for (int64_t j = 0; j < h * w; ++j) impulse.Set(j, i == j ? 1.0 : 0.0);
          ASSERT_TRUE(Upsample2d(column.ref, impulse.ref, m, align, u.sh, u.sw).ok());
          for (int64_t o = 0; o < u.oh * u.ow; ++o) a[i * u.oh * u.ow + o] = column.At(o);
        }
        for (DType dt : {DType::kFloat32, DType::kBFloat16}) {
          const TestTensor go = Make4d(dt, {2, 3, u.oh, u.ow}, 2, 17);
          TestTensor gi = Make4d(dt, {2, 3, h, w}, 1, 18);  // overwritten whole
          std::vector<double> want(static_cast<size_t>(gi.numel()), 0.0);
          for (int64_t pl = 0; pl < 6; ++pl)
            for (int64_t i = 0; i < h * w; ++i)
              for (int64_t o = 0; o < u.oh * u.ow; ++o)
                want[pl * h * w + i] += a[i * u.oh * u.ow + o] * go.At(pl * u.oh * u.ow + o);
          ForEachTarget([&](const char*) {
            ASSERT_TRUE(Upsample2dBackward(gi.ref, go.ref, m, align, u.sh, u.sw).ok());
            ExpectClose(gi, want, 1e-5);
          });
        }
      }
    }
  }
}

}  // namespace
}  // namespace trn::kernels
