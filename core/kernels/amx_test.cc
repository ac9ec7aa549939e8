// amx.h against scalar references: the tile layout of PackB on any CPU, and
// Gemm (where the CPU has AMX) over edge shapes, strides, accumulation, a
// bias row and more rows than one packed chunk of A.
#include "core/kernels/amx.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/kernels/convert.h"

namespace trn::kernels::amx {
namespace {

std::vector<uint16_t> RandomBf16(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = internal::F32ToBF16(dist(gen));
  return v;
}

float Bf(uint16_t h) { return internal::BF16ToF32(h); }

// Tile (jb, pb) row r holds the k pair (32 pb + 2r, 32 pb + 2r + 1) of column
// 16 jb + j at 2j and 2j + 1; zero past k and n.
TEST(AmxPackB, TilesOfKPairs) {
  const int64_t k = 37, n = 20;  // two k tiles, two column tiles, both partial
  const std::vector<uint16_t> b = RandomBf16(static_cast<size_t>(k * n), 1);
  std::vector<uint16_t> packed(static_cast<size_t>(PackedBElems(k, n)), 0xffff);
  ASSERT_EQ(PackedBElems(k, n), 2 * 2 * 512);
  PackB(b.data(), 1, k, k, n, packed.data());  // b stored transposed: (p, j) at j * k + p
  for (int64_t jb = 0; jb < 2; ++jb) {
    for (int64_t pb = 0; pb < 2; ++pb) {
      for (int64_t r = 0; r < 16; ++r) {
        for (int64_t j = 0; j < 16; ++j) {
          for (int64_t e = 0; e < 2; ++e) {
            const int64_t p = 32 * pb + 2 * r + e, col = 16 * jb + j;
            const uint16_t want = p < k && col < n ? b[col * k + p] : 0;
            EXPECT_EQ(packed[(jb * 2 + pb) * 512 + r * 32 + j * 2 + e], want)
                << "p " << p << " col " << col;
          }
        }
      }
    }
  }
}

// Rows [32, 70) packed alone into their place in a taller pack (dst_block_stride)
// give the tiles of the whole pack: an implicit conv's taps, packed one by one.
TEST(AmxPackB, RowsIntoATallerPack) {
  const int64_t k = 70, n = 20;
  const std::vector<uint16_t> b = RandomBf16(static_cast<size_t>(k * n), 4);
  std::vector<uint16_t> whole(static_cast<size_t>(PackedBElems(k, n)));
  std::vector<uint16_t> parts(whole.size(), 0x7777);
  PackB(b.data(), n, 1, k, n, whole.data());
  const int64_t block = PackedBElems(k, 16);
  PackB(b.data(), n, 1, 32, n, parts.data(), block);
  PackB(b.data() + 32 * n, n, 1, k - 32, n, parts.data() + 512, block);
  EXPECT_EQ(parts, whole);
}

TEST(AmxGemm, MatchesScalarReference) {
  if (!Available()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or the OS refused the tiles)";
  enum BiasKind { kNone, kCol, kRow };
  struct Case {
    int64_t m, n, k;
    bool a_transposed, accumulate;
    BiasKind bias;
  };
  // A with unit column stride is read in place in whole 16 x 32 tiles (Note [AMX
  // A in place]): k multiples of 32 or not, partial last row tiles, more rows
  // than a packed chunk; transposed A is packed. Biases per column (linear's)
  // and per row (a convolution's).
  const Case cases[] = {{1, 1, 1, false, false, kNone},    {5, 33, 70, false, false, kCol},
                        {16, 16, 32, false, true, kNone},  {17, 18, 33, true, false, kRow},
                        {40, 48, 64, false, true, kNone},  {300, 40, 100, true, false, kCol},
                        {1, 4096, 64, false, false, kNone}, {300, 40, 96, false, false, kRow},
                        {37, 50, 70, false, true, kNone},  {64, 32, 16, false, false, kCol}};
  for (const Case& c : cases) {
    const std::vector<uint16_t> a = RandomBf16(static_cast<size_t>(c.m * c.k), 2);
    const std::vector<uint16_t> b = RandomBf16(static_cast<size_t>(c.k * c.n), 3);
    const int64_t a_rs = c.a_transposed ? 1 : c.k, a_cs = c.a_transposed ? c.m : 1;
    std::vector<uint16_t> tiles(static_cast<size_t>(PackedBElems(c.k, c.n)));
    PackB(b.data(), c.n, 1, c.k, c.n, tiles.data());
    const int64_t ldc = c.n + 3;  // C rows apart by more than n: the padding stays put
    std::vector<float> out(static_cast<size_t>(c.m * ldc), 0.5f);
    std::vector<float> bias(static_cast<size_t>(std::max(c.m, c.n)));
    for (size_t j = 0; j < bias.size(); ++j) bias[j] = 0.25f * static_cast<float>(j % 7) - 0.5f;
    const Bias bias_arg{c.bias != kNone ? bias.data() : nullptr, c.bias == kRow};
    Gemm(c.m, c.n, c.k, a.data(), a_rs, a_cs, tiles.data(), Out::F32(out.data(), ldc),
         c.accumulate, bias_arg);
    // bfloat16 C: the same sums, each rounded once.
    std::vector<uint16_t> out16(static_cast<size_t>(c.m * ldc), 0x1234);
    if (!c.accumulate) {
      Gemm(c.m, c.n, c.k, a.data(), a_rs, a_cs, tiles.data(), Out::BF16(out16.data(), ldc),
           false, bias_arg);
    }
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < ldc; ++j) {
        const float got = out[i * ldc + j];
        if (j >= c.n) {
          ASSERT_EQ(got, 0.5f) << "wrote past n at " << i << ", " << j;
          if (!c.accumulate) ASSERT_EQ(out16[i * ldc + j], 0x1234) << "bfloat16 C past n";
          continue;
        }
        const double bias_ij = c.bias == kCol ? bias[j] : c.bias == kRow ? bias[i] : 0.0;
        double want = (c.accumulate ? 0.5 : 0.0) + bias_ij, mag = 0.0;
        for (int64_t p = 0; p < c.k; ++p) {
          const double t = double(Bf(a[i * a_rs + p * a_cs])) * Bf(b[p * c.n + j]);
          want += t;
          mag += std::fabs(t);
        }
        ASSERT_NEAR(got, want, 1e-5 * mag + 1e-6)
            << c.m << "x" << c.n << "x" << c.k << " at " << i << ", " << j;
        if (!c.accumulate) {
          ASSERT_EQ(out16[i * ldc + j], internal::F32ToBF16(got))
              << "bfloat16 C " << c.m << "x" << c.n << "x" << c.k << " at " << i << ", " << j;
        }
      }
    }
  }
}

// k tiles of A anywhere (a_k_offsets, Note [AMX implicit conv] in conv.cc):
// logical A(i, p) at a[i * rs + offsets[p / 32] + p % 32], overlapping and out
// of order, with a partial last row tile (packed through the same offsets).
TEST(AmxGemm, KTileOffsets) {
  if (!Available()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or the OS refused the tiles)";
  const int64_t m = 37, n = 20, k = 96, rs = 200;
  const int64_t offsets[] = {100, 7, 20};
  const std::vector<uint16_t> a = RandomBf16(static_cast<size_t>(m * rs), 5);
  const std::vector<uint16_t> b = RandomBf16(static_cast<size_t>(k * n), 6);
  std::vector<uint16_t> tiles(static_cast<size_t>(PackedBElems(k, n)));
  PackB(b.data(), n, 1, k, n, tiles.data());
  std::vector<float> out(static_cast<size_t>(m * n));
  Gemm(m, n, k, a.data(), rs, 1, tiles.data(), Out::F32(out.data(), n), false, {}, 0, offsets);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0, mag = 0;
      for (int64_t p = 0; p < k; ++p) {
        const double t =
            double(Bf(a[i * rs + offsets[p / 32] + p % 32])) * Bf(b[p * n + j]);
        want += t;
        mag += std::fabs(t);
      }
      ASSERT_NEAR(out[i * n + j], want, 1e-5 * mag + 1e-6) << i << ", " << j;
    }
  }
}

// An empty C (m or n 0) is left alone, even without any data.
TEST(AmxGemm, EmptyProducts) {
  if (!Available()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or the OS refused the tiles)";
  const std::vector<uint16_t> a = RandomBf16(64, 7);
  const std::vector<uint16_t> tiles(static_cast<size_t>(PackedBElems(64, 16)));
  Gemm(0, 16, 64, a.data(), 64, 1, tiles.data(), Out::BF16(nullptr, 16), false);
  Gemm(1, 0, 64, a.data(), 64, 1, tiles.data(), Out::F32(nullptr, 0), true);
}

// The bfloat16 epilogue rounds as convert.h: C = (1 * 0 = +0) + bias[j] with
// bias values at rounding ties (to even both ways), just off them, signed
// zeros, infinities, the largest float and signalling NaNs (quieted, sign
// kept); once with subnormals among them (VCVTNEPS2BF16 would flush those:
// Note [AMX epilogue]), once without (where the instruction is used).
TEST(AmxGemm, Bfloat16EpilogueRoundsLikeF32ToBF16) {
  if (!Available()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or the OS refused the tiles)";
  const std::vector<uint32_t> with_subnormals = {
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu, 0x80000000u, 0x00000000u,
      0x7f800000u, 0xff800000u, 0x00008000u, 0x00018000u, 0x7f800001u, 0xff800001u,
      0x7f7fffffu, 0xbf7fc000u, 0x3fffffffu, 0x807fffffu};
  const std::vector<uint32_t> normal = {
      0x3f808000u, 0x3f818000u, 0x3f808001u, 0x3f817fffu, 0x80000000u, 0x00000000u,
      0x7f800000u, 0xff800000u, 0x00808000u, 0x80818000u, 0x7f800001u, 0xff800001u,
      0x7f7fffffu, 0xbf7fc000u, 0x3fffffffu, 0x477fe000u};
  for (const auto& bits : {with_subnormals, normal}) {
    const int64_t n = 16, k = 32, m = 3;
    std::vector<float> bias(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) std::memcpy(&bias[j], &bits[j], sizeof(float));
    std::vector<uint16_t> a(static_cast<size_t>(m * k), 0), b(static_cast<size_t>(k * n), 0);
    for (int64_t i = 0; i < m; ++i) a[i * k] = internal::F32ToBF16(1.0f);
    std::vector<uint16_t> tiles(static_cast<size_t>(PackedBElems(k, n)));
    PackB(b.data(), n, 1, k, n, tiles.data());
    std::vector<uint16_t> out(static_cast<size_t>(m * n));
    Gemm(m, n, k, a.data(), k, 1, tiles.data(), Out::BF16(out.data(), n), false, Bias{bias.data()});
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        EXPECT_EQ(out[i * n + j], internal::F32ToBF16(0.0f + bias[j])) << std::hex << bits[j];
      }
    }
  }
}

// PackBFromF32 equals PackB of the operand rounded by F32ToBF16: ties both
// ways, NaN, infinities and subnormals among normal values, k odd (the last
// pair's second row zero), partial column tiles, rows apart by more than n.
TEST(AmxPackB, FromFloat32RoundsLikeF32ToBF16) {
  if (!Available()) GTEST_SKIP() << "this CPU has no AMX-BF16 (or the OS refused the tiles)";
  for (const auto& [k, n] : {std::pair<int64_t, int64_t>{37, 20}, {70, 33}, {1, 1}, {64, 16}}) {
    const int64_t rs = n + 5;
    std::mt19937 gen(static_cast<uint32_t>(k * n));
    std::normal_distribution<float> dist;
    const uint32_t special[] = {0x3f808000u, 0x3f818000u, 0x7f800001u, 0xff800000u,
                                0x00008000u, 0x80018000u, 0x7f7fffffu, 0x80000000u};
    std::vector<float> b(static_cast<size_t>(k * rs));
    for (size_t i = 0; i < b.size(); ++i) {
      b[i] = dist(gen);
      if (i % 11 == 0) std::memcpy(&b[i], &special[(i / 11) % 8], sizeof(float));
    }
    std::vector<uint16_t> rounded(static_cast<size_t>(k * n));
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < n; ++j) rounded[p * n + j] = internal::F32ToBF16(b[p * rs + j]);
    }
    std::vector<uint16_t> want(static_cast<size_t>(PackedBElems(k, n)));
    std::vector<uint16_t> got(want.size(), 0x5555);
    PackB(rounded.data(), n, 1, k, n, want.data());
    PackBFromF32(b.data(), rs, k, n, got.data());
    ASSERT_EQ(got, want) << k << " x " << n;
  }
}

}  // namespace
}  // namespace trn::kernels::amx
