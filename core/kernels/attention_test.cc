// Fused attention against a scalar reference that materialises the scores
// (double precision, plain softmax) on every compiled SIMD target: sequence
// lengths across key-block and query-tile edges, head dims across vector
// widths, grouped-query heads, causal (Sq < Skv, Sq > Skv, decode Sq = 1),
// bool and additive masks broadcast with stride 0, fully masked rows, strided
// and expanded operands, every floating dtype and the lse output.
#include "core/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/kernels/amx.h"
#include "core/kernels/kernels_test_util.h"

namespace trn::kernels {
namespace {

using testing::Empty;
using testing::ForEachTarget;
using testing::Layout;
using testing::MakeRandom;
using testing::TestTensor;

enum class MaskKind { kNone, kBool, kAdditive };

struct AttnCase {
  int64_t b = 1, hq = 2, hkv = 2, sq = 5, skv = 7, d = 16, dv = 16;
  DType dtype = DType::kFloat32;
  bool causal = false;
  MaskKind mask = MaskKind::kNone;
  bool mask_broadcast = true;  // mask [1, 1, Sq, Skv] expanded to [B, Hq, Sq, Skv]
  bool mask_rows_off = false;  // the bool mask blanks query row 1 entirely
  Layout layout = Layout::kContiguous;
  double scale = 0.0;  // 0: 1/sqrt(D)
  double tol = 2e-5;   // absolute, besides the dtype's storage and bfloat16 P terms
};

std::string Describe(const AttnCase& c) {
  return std::string(DTypeName(c.dtype)) + " b" + std::to_string(c.b) + " hq" +
         std::to_string(c.hq) + " hkv" + std::to_string(c.hkv) + " sq" + std::to_string(c.sq) +
         " skv" + std::to_string(c.skv) + " d" + std::to_string(c.d) + " dv" +
         std::to_string(c.dv) + (c.causal ? " causal" : "") + " mask" +
         std::to_string(static_cast<int>(c.mask)) + " " + testing::LayoutName(c.layout);
}

// Element (i0, i1, i2, i3) of a 4-D test tensor.
double At4(const TestTensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const auto& s = t.ref.sizes;
  return t.At(((i0 * s[1] + i1) * s[2] + i2) * s[3] + i3);
}

void RunCase(const AttnCase& c) {
  SCOPED_TRACE(Describe(c));
  const TestTensor q = MakeRandom(c.dtype, {c.b, c.hq, c.sq, c.d}, c.layout, 1, -1.5, 1.5);
  const TestTensor k = MakeRandom(c.dtype, {c.b, c.hkv, c.skv, c.d}, c.layout, 2, -1.5, 1.5);
  const TestTensor v = MakeRandom(c.dtype, {c.b, c.hkv, c.skv, c.dv}, c.layout, 3, -2.0, 2.0);
  TestTensor out = Empty(c.dtype, {c.b, c.hq, c.sq, c.dv});
  TestTensor lse = Empty(DType::kFloat32, {c.b, c.hq, c.sq});
  TestTensor mask;
  const std::vector<int64_t> full = {c.b, c.hq, c.sq, c.skv};
  if (c.mask != MaskKind::kNone) {
    const std::vector<int64_t> ms =
        c.mask_broadcast ? std::vector<int64_t>{1, 1, c.sq, c.skv} : full;
    if (c.mask == MaskKind::kBool) {
      mask = MakeRandom(DType::kBool, ms, Layout::kContiguous, 4);
      // Keep key 0 attended, except in the blanked row.
      for (int64_t i = 0; i < mask.numel() / c.skv; ++i) mask.Set(i * c.skv, 1);
      if (c.mask_rows_off && c.sq > 1) {
        for (int64_t row = 1; row < mask.numel() / c.skv; row += c.sq) {
          for (int64_t j = 0; j < c.skv; ++j) mask.Set(row * c.skv + j, 0);
        }
      }
    } else {
      mask = MakeRandom(c.dtype, ms, Layout::kContiguous, 5, -3.0, 1.0);
      if (c.mask_rows_off && c.sq > 1) {
        for (int64_t row = 1; row < mask.numel() / c.skv; row += c.sq) {
          for (int64_t j = 0; j < c.skv; ++j) mask.Set(row * c.skv + j, -INFINITY);
        }
      }
    }
    if (c.mask_broadcast) mask = mask.Expand(full);
  }
  const double scale = c.scale != 0.0 ? c.scale : 1.0 / std::sqrt(static_cast<double>(c.d));
  ForEachTarget([&](const char*) {
    ASSERT_TRUE(
        Attention(out.ref, q.ref, k.ref, v.ref, mask.ref, scale, c.causal, lse.ref).ok());
    int failures = 0;
    const int64_t group = c.hq / c.hkv;
    std::vector<double> p(static_cast<size_t>(c.skv));
    for (int64_t b = 0; b < c.b; ++b) {
      for (int64_t h = 0; h < c.hq; ++h) {
        for (int64_t i = 0; i < c.sq; ++i) {
          double mx = -INFINITY;
          for (int64_t j = 0; j < c.skv; ++j) {
            double s = 0;
            for (int64_t t = 0; t < c.d; ++t) s += At4(q, b, h, i, t) * At4(k, b, h / group, j, t);
            s *= scale;
            if (c.causal && j > i) s = -INFINITY;
            if (c.mask == MaskKind::kBool && At4(mask, b, h, i, j) == 0) s = -INFINITY;
            if (c.mask == MaskKind::kAdditive) s += At4(mask, b, h, i, j);
            p[j] = s;
            mx = std::max(mx, s);
          }
          double sum = 0;
          for (int64_t j = 0; j < c.skv; ++j) {
            p[j] = mx == -INFINITY ? 0.0 : std::exp(p[j] - mx);
            sum += p[j];
          }
          const double want_lse = sum > 0 ? mx + std::log(sum) : -INFINITY;
          const double got_lse = lse.At((b * c.hq + h) * c.sq + i);
          if (auto msg = testing::CheckClose(got_lse, want_lse, 1e-5, 1e-5); !msg.empty()) {
            if (++failures <= 5) {
              ADD_FAILURE() << "lse at " << b << "," << h << "," << i << ": " << msg;
            }
          }
          for (int64_t t = 0; t < c.dv; ++t) {
            double want = 0, spread = 0;
            for (int64_t j = 0; j < c.skv; ++j) {
              want += p[j] * At4(v, b, h / group, j, t);
              spread += p[j] * std::fabs(At4(v, b, h / group, j, t));
            }
            if (sum > 0) {
              want /= sum;
              spread /= sum;
            }
            const double got = At4(out, b, h, i, t);
            // f32 accumulation over Skv terms of magnitude <= 2, plus one ulp of storage;
            // bfloat16 panels may round P to bfloat16 as the CPU does (on AMX): 2^-9 of
            // each weight (Note [AMX attention]).
            const bool amx_panels = c.dtype == DType::kBFloat16 && c.sq >= 4;
            const double tol = c.tol + testing::StorageTol(c.dtype, want, 1e-5) +
                               (IsFloating(c.dtype) && c.dtype != DType::kFloat32 &&
                                        c.dtype != DType::kFloat64
                                    ? testing::Ulp(c.dtype, want)
                                    : 0.0) +
                               (amx_panels ? spread / 512 : 0.0);
            if (auto msg = testing::CheckClose(got, want, 0, tol); !msg.empty()) {
              if (++failures <= 5) {
                ADD_FAILURE() << "out at " << b << "," << h << "," << i << "," << t << ": " << msg;
              }
            }
          }
        }
      }
    }
  });
}

TEST(AttentionTest, ShapesAcrossBlockAndVectorEdges) {
  for (int64_t d : {1, 3, 8, 16, 20, 64, 80, 128}) {
    for (auto [sq, skv] : std::vector<std::pair<int64_t, int64_t>>{
             {1, 1}, {1, 9}, {5, 7}, {33, 17}, {7, 300}, {65, 65}}) {
      AttnCase c;
      c.d = c.dv = d;
      c.sq = sq;
      c.skv = skv;
      RunCase(c);
    }
  }
}

TEST(AttentionTest, ValueDimDiffersFromKeyDim) {
  AttnCase c;
  c.d = 24;
  c.dv = 40;
  c.skv = 70;
  RunCase(c);
  c.d = 64;
  c.dv = 7;
  RunCase(c);
}

TEST(AttentionTest, GroupedQueryHeads) {
  AttnCase c;
  c.b = 2;
  c.hq = 6;
  c.hkv = 2;
  c.sq = 9;
  c.skv = 40;
  RunCase(c);
  c.hkv = 1;
  RunCase(c);
}

TEST(AttentionTest, CausalTopLeftAligned) {
  for (auto [sq, skv] : std::vector<std::pair<int64_t, int64_t>>{
           {1, 1}, {1, 50}, {40, 40}, {10, 300}, {70, 20}, {100, 100}}) {
    AttnCase c;
    c.causal = true;
    c.sq = sq;
    c.skv = skv;
    c.d = c.dv = 32;
    RunCase(c);
  }
}

TEST(AttentionTest, Masks) {
  for (MaskKind kind : {MaskKind::kBool, MaskKind::kAdditive}) {
    for (bool broadcast : {true, false}) {
      for (bool rows_off : {false, true}) {
        AttnCase c;
        c.mask = kind;
        c.mask_broadcast = broadcast;
        c.mask_rows_off = rows_off;
        c.b = 2;
        c.sq = 6;
        c.skv = 90;
        RunCase(c);
      }
    }
  }
  AttnCase c;  // a mask together with causal
  c.mask = MaskKind::kAdditive;
  c.causal = true;
  c.sq = c.skv = 50;
  RunCase(c);
}

TEST(AttentionTest, LayoutsAndDtypes) {
  for (DType dt : {DType::kFloat32, DType::kBFloat16, DType::kFloat16, DType::kFloat64}) {
    for (Layout layout : testing::AllLayouts()) {
      AttnCase c;
      c.dtype = dt;
      c.layout = layout;
      c.b = 2;
      c.hq = 4;
      c.hkv = 2;
      c.sq = 11;
      c.skv = 45;
      c.d = c.dv = 24;
      c.mask = MaskKind::kBool;
      RunCase(c);
    }
  }
}

// bfloat16 panels on AMX (where the CPU has it) take 256 keys per block: more
// keys cross blocks (the value tiles at the block's offset), causal and masked,
// with grouped heads and d, dv off the 32-element tile depth.
TEST(AttentionTest, Bfloat16PanelsAcrossKeyBlocks) {
  for (bool on_amx : {true, false}) {  // the float32 panels where there is no AMX
    amx::SetEnabled(on_amx);
    for (bool causal : {false, true}) {
      AttnCase c;
      c.dtype = DType::kBFloat16;
      c.hq = 4;
      c.hkv = 2;
      c.sq = 37;
      c.skv = 600;
      c.d = 40;
      c.dv = 24;
      c.causal = causal;
      c.mask = causal ? MaskKind::kNone : MaskKind::kAdditive;
      RunCase(c);
    }
  }
  amx::SetEnabled(true);
}

TEST(AttentionTest, HeadsExpandedWithStrideZero) {
  AttnCase c;  // b = 1: the broadcast layout expands the head dim (repeat_kv's expand)
  c.hq = c.hkv = 3;
  c.layout = Layout::kBroadcast;
  c.dtype = DType::kBFloat16;
  c.skv = 33;
  RunCase(c);
}

TEST(AttentionTest, DecodeAcrossKeyBlocks) {
  // The row path (Sq < 4) takes 8192 keys per block: more keys rescale the
  // accumulator across blocks.
  for (int64_t sq : {1, 3}) {
    AttnCase c;
    c.sq = sq;
    c.skv = 8200;
    c.d = c.dv = 4;
    c.hq = 2;
    c.hkv = 1;
    c.mask = MaskKind::kAdditive;
    c.mask_broadcast = true;
    RunCase(c);
  }
}

TEST(AttentionTest, DecodeOverACacheLargerThanL2) {
  // k and v over kStreamBytes take the prefetching dot products (Note
  // [Decode streams]); dv = 8 * 16 + 16 + 3 runs P @ V's eight-vector,
  // one-vector and scalar columns on every target.
  AttnCase c;
  c.sq = 1;
  c.skv = 1100;
  c.d = 128;
  c.dv = 147;
  c.hq = 4;
  c.hkv = 2;
  c.mask = MaskKind::kBool;
  RunCase(c);
}

TEST(AttentionTest, DecodeReadsBfloat16RowsInPlace) {
  // bfloat16 k/v with unit inner stride are widened in registers (Note
  // [Decode streams]); in cache and streamed, every layout (transposed and
  // step-2 k/v take the converting pack), head dims across vector widths.
  for (Layout layout : testing::AllLayouts()) {
    for (int64_t skv : {37, 2100}) {
      AttnCase c;
      c.dtype = DType::kBFloat16;
      c.layout = layout;
      c.sq = 1;
      c.skv = skv;
      c.d = 128;
      c.dv = 147;
      c.hq = 4;
      c.hkv = 2;
      c.mask = MaskKind::kAdditive;
      RunCase(c);
    }
  }
}

TEST(AttentionTest, GivenScale) {
  AttnCase c;
  c.scale = 0.3;
  RunCase(c);
  c.scale = -0.7;
  c.causal = true;
  RunCase(c);
}

// The softmax's 2^x (Exp2NonPositiveF: 1.9e-7 relative) over scores spread
// across float32's whole exponent range, held to 1e-6 on outputs of magnitude
// ~1 on the panel and row paths: weights down to 2^-126 and below (flushed to
// 0), keys past one block.
TEST(AttentionTest, ExponentialsAcrossTheRange) {
  for (const double scale : {3.0, 40.0}) {
    for (const int64_t sq : {1, 9}) {
      AttnCase c;
      c.sq = sq;
      c.skv = 300;
      c.scale = scale;
      c.tol = 1e-6;
      RunCase(c);
    }
  }
}

TEST(AttentionTest, EmptyKeysGiveZero) {
  AttnCase c;
  c.skv = 0;
  RunCase(c);
}

TEST(AttentionTest, DescribeCountsAttendedPairs) {
  const TestTensor q = Empty(DType::kBFloat16, {2, 4, 8, 16});
  const TestTensor k = Empty(DType::kBFloat16, {2, 1, 8, 16}).Expand({2, 2, 8, 16});
  const TestTensor v = Empty(DType::kBFloat16, {2, 2, 8, 32});
  const TestTensor out = Empty(DType::kBFloat16, {2, 4, 8, 32});
  const TestTensor m = Empty(DType::kBool, {1, 1, 8, 8}).Expand({2, 4, 8, 8});
  rt::KernelInfo full = DescribeAttention(out.ref, q.ref, k.ref, v.ref, m.ref, false, TensorRef{},
                                          "aten::x");
  EXPECT_STREQ(full.name, "sdpa_bf16");
  EXPECT_EQ(full.flops, 2ull * 4 * 64 * 2 * (16 + 32));
  EXPECT_EQ(full.bytes_read, (2ull * 4 * 8 * 16 + 2 * 1 * 8 * 16 + 2 * 2 * 8 * 32) * 2 + 64);
  EXPECT_EQ(full.bytes_written, 2ull * 4 * 8 * 32 * 2);
  rt::KernelInfo causal = DescribeAttention(out.ref, q.ref, k.ref, v.ref, TensorRef{}, true,
                                            TensorRef{}, "aten::x");
  EXPECT_EQ(causal.flops, 2ull * 4 * 36 * 2 * (16 + 32));
}

}  // namespace
}  // namespace trn::kernels
