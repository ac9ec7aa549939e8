// Packed, cache-blocked f32 GEMM (Goto/BLIS structure), compiled once per
// Highway target. Included by matmul.cc through hwy/foreach_target.h.
//
// Note [GEMM blocking]
// C[m,n] += alpha * A[m,k] B[k,n] is cut into NC-wide column blocks of B, KC-deep
// slices of k and MC-tall row blocks of A. Each KC x NC slice of B is packed once
// into NR-wide micro-panels (stays in L3), each MC x KC block of A into MR-tall
// micro-panels (stays in L2); the micro-kernel streams one A micro-panel and
// one B micro-panel (L1) and keeps an MR x NR tile of C in registers:
// MR = 6 rows x NR = 2 vectors = 12 FMA accumulators (AVX2: 6 x 16 floats),
// plus 2 B vectors and one broadcast A value = 15 of 16 registers.
// Packing converts any dtype and any strides to contiguous f32, so the
// micro-kernel sees one layout whatever the operands were (w.t() included).

// ---- Target-independent part (normal include guard) -----------------------------
#ifndef TRN_KERNELS_GEMM_ARGS_H_
#define TRN_KERNELS_GEMM_ARGS_H_

#include <cstdint>

#include "core/common/tensor_ref.h"
#include "core/kernels/kernels.h"

namespace trn::kernels::gemm {

// One operand as the packers read it: element (r, c) is at data[r*rs + c*cs].
struct Operand {
  const void* data = nullptr;
  DType dtype = DType::kFloat32;
  int64_t rs = 0;
  int64_t cs = 0;
};

// One 2-D problem: c[i*ldc + j] (+)= alpha * sum_p a(i,p) * b(p,j).
// accumulate = false overwrites c (it may hold garbage); true adds to it.
struct Args {
  int64_t m = 0, n = 0, k = 0;
  Operand a, b;  // a: m x k, b: k x n
  float* c = nullptr;
  int64_t ldc = 0;
  float alpha = 1.0f;
  bool accumulate = false;
  // n floats added to every row of c (linear's bias; accumulate must be false):
  // the first k slice's tiles add it as they store (Note [Bias in the epilogue]).
  const float* row_bias = nullptr;
  // b already packed whole by PackWholeB of the running target (Note [Packed
  // weight cache]); null: the GEMM packs b slice by slice itself.
  const float* b_packed = nullptr;
};

// Note [B in place]: the row strides (in floats) at which B is read in place:
// 64-byte aligned rows, not a multiple of 2 KiB apart.
constexpr int64_t kInPlaceBAlign = 16;
constexpr int64_t kInPlaceBAliasing = 512;
inline bool InPlaceBRowStride(int64_t rs) {
  return rs % kInPlaceBAlign == 0 && rs % kInPlaceBAliasing != 0;
}

}  // namespace trn::kernels::gemm

#endif  // TRN_KERNELS_GEMM_ARGS_H_

// ---- Per-target part (re-included once per target) ------------------------------
#if defined(TRN_KERNELS_GEMM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRN_KERNELS_GEMM_INL_H_
#undef TRN_KERNELS_GEMM_INL_H_
#else
#define TRN_KERNELS_GEMM_INL_H_
#endif

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "core/kernels/convert.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::gemm::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
constexpr size_t kMR = 6;
constexpr size_t kNR = 2 * hn::MaxLanes(DF());
// Rows of a tile on A in place when the k slice is deep (Note [A in place]):
// 12 x 2 accumulators on AVX-512's 32 registers.
constexpr size_t kDirectMR = kNR >= 32 ? 12 : kMR;
constexpr size_t kDirectDeepK = 256;
// Note [GEMM blocking]: sizes follow BLIS's Zen configurations. AVX2 (NR 16):
// A block 144 x 256 f32 = 144 KiB in L2, B micro-panel 256 x 16 = 16 KiB in L1.
// AVX-512 (NR 32) streams B micro-panels of kc x 32 from L2 and measured faster
// with deeper k slices: 512 against 256 on Zen 4 (1 MiB L2); 1024 against 512
// on Emerald Rapids (2 MiB L2; alternating runs of trn_core_bench, cached
// weights): 1024^3 +1.7 %, M = 128, K = N = 1024 +2-3.5 %, M = 16, K = N = 4096
// +2.5 %, no other linear slower (1024 on Zen 4 is unmeasured: a 128 KiB B
// panel and a 384 KiB packed A block fit its L2). B slice KC x NC stays in L3.
constexpr size_t kKC = kNR >= 32 ? 1024 : 256;
constexpr size_t kMC = kNR >= 32 ? 96 : 144;
constexpr size_t kNC = (3072 / kNR) * kNR;
static_assert(kMC % kMR == 0 && kMC % kDirectMR == 0, "MC must hold whole micro-panels");
// Note [GEMM prefetch]: the micro-kernel prefetches its B and A micro-panels
// kPrefetchSteps k-steps (8 KiB of B at NR 32) ahead. B micro-panels stream
// from L2 (AVX-512: 64 KiB, more than L1) or, for decode-time linears on a
// packed weight, from memory, and the hardware prefetchers did not keep up:
// Intel Sapphire Rapids, in-process A/B against no prefetch, 1024^3 7-11 %
// and M = 2..16, K = N = 4096 16-28 % faster; 16 and 128 steps measured
// worse on one or the other. Past a panel's end it fetches the next panel,
// which the next tile of a decode-time linear reads.
constexpr size_t kPrefetchSteps = 64;
// Note [A in place]: a float32 A with unit column stride is not packed: the
// micro-kernel broadcasts from its MR rows where they are (lda apart, six
// sequential streams the hardware prefetchers follow). Packing cost about one
// store per element of A against N/32 cycles of FMAs for it: 3-12 % of a
// GEMM with N = 256 (the linears of the small models) and a few % at 1024.
// Measured in-process against packing (Sapphire Rapids, 4 runs): N = 256
// 3-12 % faster, 1024^3 0-5 %, no shape more than 2 % slower. With a deep k
// slice (kc >= kDirectDeepK) a tile takes 12 rows on AVX-512: half the B
// loads per FMA; 1024^3 2 %, M = 128 with K = 768 / 1024 3-8 % faster, in
// the same way. k slices of 256 gained nothing then; since Note [A rows by
// quads] they do (M = 128 and 64, K = 256, N = 128..1376, cached weights,
// alternating runs on Emerald Rapids: 1.5-5 % faster), so kDirectDeepK is 256.
// Note [B in place]: packing B costs about a load and a store per element
// against M/32 FMAs for it, a large share of a GEMM with few rows of A that
// does not cache B's pack: a convolution's im2col matrix or its NCHW input,
// M = its output channels. A float32 B with unit column stride is then read
// where it is, kc rows ldb apart per micro-panel (only a partial last panel
// is packed), with 12-row tiles on AVX-512 whatever the k slice, since each
// k-step of a tile now loads two lines of its own. Rows must be 64-byte
// aligned (a load across three lines measured up to 26 % slower) and not a
// multiple of 2 KiB apart (rows sharing L1 sets: 128 x 1024 x 1024 14 %,
// 1024^3 34 % slower). In-process A/B against packing, Emerald Rapids:
// M = 32, K = 147, N = 2304 (a ResNet stem's im2col) 36 % faster,
// 64 x 576 x 3136 27 %, 128 x 256 x 784 11 %, M = 256..512 3-7 %. Each block
// of kMC rows re-reads the strided panels, so the gain shrinks with M
// (2048 x 576 x 784: 4 %); it is kept to the rows measured with a clear gain
// (kInPlaceBMaxRows, kernels.h).
// Rows ahead the micro-kernel prefetches from B in place: 8 and 32 measured
// 0-6 % slower, none 17-26 % slower.
constexpr int64_t kDirectBPrefetchRows = 16;

inline bool BInPlace(const Args& args) {
  const Operand& b = args.b;
  return b.dtype == DType::kFloat32 && b.cs == 1 && args.b_packed == nullptr &&
         args.m <= kInPlaceBMaxRows && InPlaceBRowStride(b.rs) &&
         reinterpret_cast<uintptr_t>(b.data) % (kInPlaceBAlign * sizeof(float)) == 0;
}

// Packs the mc x kc block of A at (i0, p0) into MR-row micro-panels:
// ap[panel][p][i], rows past mc are zero.
inline void PackA(const Operand& a, int64_t i0, int64_t p0, size_t mc, size_t kc,
                  float* HWY_RESTRICT ap) {
  for (size_t ir = 0; ir < mc; ir += kMR) {
    const size_t mr = std::min(kMR, mc - ir);
    float* HWY_RESTRICT dst = ap + ir * kc;
    const int64_t row0 = i0 + static_cast<int64_t>(ir);
    if (a.dtype == DType::kFloat32) {
      const float* src = static_cast<const float*>(a.data);
      for (size_t i = 0; i < mr; ++i) {
        const float* s = src + (row0 + static_cast<int64_t>(i)) * a.rs + p0 * a.cs;
        if (a.cs == 1) {
          for (size_t p = 0; p < kc; ++p) dst[p * kMR + i] = s[p];
        } else {
          for (size_t p = 0; p < kc; ++p) dst[p * kMR + i] = s[static_cast<int64_t>(p) * a.cs];
        }
      }
    } else {
      internal::VisitDType(a.dtype, [&](auto tag) {
        using T = decltype(tag);
        const T* src = static_cast<const T*>(a.data);
        for (size_t i = 0; i < mr; ++i) {
          const T* s = src + (row0 + static_cast<int64_t>(i)) * a.rs + p0 * a.cs;
          for (size_t p = 0; p < kc; ++p) {
            dst[p * kMR + i] = internal::ToF32(s[static_cast<int64_t>(p) * a.cs]);
          }
        }
      });
    }
    for (size_t i = mr; i < kMR; ++i) {
      for (size_t p = 0; p < kc; ++p) dst[p * kMR + i] = 0.0f;
    }
  }
}

// Packs the kc x nc block of B at (p0, j0) into NR-column micro-panels:
// bp[panel][p][j], columns past nc are zero.
inline void PackB(const Operand& b, int64_t p0, int64_t j0, size_t kc, size_t nc,
                  float* HWY_RESTRICT bp) {
  const DF d;
  const size_t N = hn::Lanes(d);
  for (size_t jr = 0; jr < nc; jr += kNR) {
    const size_t nr = std::min(kNR, nc - jr);
    float* HWY_RESTRICT dst = bp + jr * kc;
    const int64_t col0 = j0 + static_cast<int64_t>(jr);
    if (b.dtype == DType::kFloat32 && b.cs == 1 && nr == kNR) {
      // Row-major B: each k row of the panel is two contiguous vectors.
      const float* s = static_cast<const float*>(b.data) + p0 * b.rs + col0;
      for (size_t p = 0; p < kc; ++p) {
        hn::Store(hn::LoadU(d, s), d, dst + p * kNR);
        hn::Store(hn::LoadU(d, s + N), d, dst + p * kNR + N);
        s += b.rs;
      }
      continue;
    }
    // Transposed or strided B (linear's w.t()), or another dtype: a blocked
    // transpose, 16 k at a time, so each column's cache line is consumed whole
    // and the 16 panel rows being written stay in L1. (Walking all NR columns
    // per k thrashes L1: columns K elements apart fall into the same sets.)
    internal::VisitDType(b.dtype, [&](auto tag) {
      using T = decltype(tag);
      constexpr size_t kKBlock = 16;
      const T* src = static_cast<const T*>(b.data) + p0 * b.rs + col0 * b.cs;
      for (size_t pb = 0; pb < kc; pb += kKBlock) {
        const size_t pe = std::min(kc, pb + kKBlock);
        for (size_t j = 0; j < nr; ++j) {
          const T* s = src + static_cast<int64_t>(j) * b.cs;
          for (size_t p = pb; p < pe; ++p) {
            dst[p * kNR + j] = internal::ToF32(s[static_cast<int64_t>(p) * b.rs]);
          }
        }
      }
    });
    for (size_t j = nr; j < kNR; ++j) {
      for (size_t p = 0; p < kc; ++p) dst[p * kNR + j] = 0.0f;
    }
  }
}

// Note [Packed weight cache]: the whole k x n B in the layout GemmF32 walks:
// column blocks of NC, in each the KC slices one after the other, each slice
// the NR micro-panels of PackB. Slice (jc, pc) starts at jc * k + pc * ncp,
// ncp = the block's width rounded up to NR.
size_t PackedBSize(int64_t k, int64_t n) {  // in floats
  const size_t ku = static_cast<size_t>(k), nu = static_cast<size_t>(n);
  return ku * ((nu + kNR - 1) / kNR * kNR);
}
inline size_t PackedSliceOffset(size_t k, size_t jc, size_t pc, size_t nc) {
  return jc * k + pc * ((nc + kNR - 1) / kNR * kNR);
}

void PackWholeB(const Operand& b, int64_t k, int64_t n, float* HWY_RESTRICT dst) {
  const size_t ku = static_cast<size_t>(k), nu = static_cast<size_t>(n);
  for (size_t jc = 0; jc < nu; jc += kNC) {
    const size_t nc = std::min(kNC, nu - jc);
    for (size_t pc = 0; pc < ku; pc += kKC) {
      const size_t kc = std::min(kKC, ku - pc);
      PackB(b, static_cast<int64_t>(pc), static_cast<int64_t>(jc), kc, nc,
            dst + PackedSliceOffset(ku, jc, pc, nc));
    }
  }
}

// C tile of R rows (R <= MR) x nr valid columns (+)= alpha * Ap-panel *
// Bp-panel, with R x 2 accumulators in registers. R = MR is the micro-kernel;
// a tile of fewer rows (the last rows of C, decode-time linears on a packed B,
// Note [Packed weight cache]) does only its own rows' FMAs and streams B at
// memory speed. A's rows are lda apart in place (Note [A in place]), B's
// micro-panel rows ldb apart in place (Note [B in place]).
template <size_t R, bool kDirectA, bool kDirectB>
HWY_NOINLINE void TileKernel(size_t kc, const float* HWY_RESTRICT ap, int64_t lda,
                             const float* HWY_RESTRICT bp, int64_t ldb, float* HWY_RESTRICT c,
                             int64_t ldc, size_t nr, float alpha, bool accumulate,
                             const float* bias) {
  const DF d;
  const size_t N = hn::Lanes(d);
  decltype(hn::Zero(d)) acc0[R], acc1[R];
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) acc0[r] = acc1[r] = hn::Zero(d);
  // Note [A rows by quads]: A's rows in place are read through three base
  // pointers (rows 0, 4, 8) plus 0..3 row strides, so a 12-row tile needs six
  // registers for A's addresses; twelve row pointers left GCC short of
  // registers (a reload from the stack and a vmovq per k-step). Emerald
  // Rapids, alternating runs of trn_core_bench: 1024^3 +3.6 %, M = 128 with
  // K = 688 +3 %; bench_gemm.py --same-core 1: mm 1024^3 0.96x -> 1.00x CPU.
  const float* HWY_RESTRICT aq[3] = {ap, ap + 4 * lda, ap + 8 * lda};
  const int64_t l1 = lda, l2 = 2 * lda, l3 = 3 * lda;
  for (size_t p = 0; p < kc; ++p) {
    // Note [GEMM prefetch]
#pragma GCC unroll 2
    for (size_t line = 0; line < kNR; line += 64 / sizeof(float)) {
      hwy::Prefetch(bp + (kDirectB ? kDirectBPrefetchRows * ldb
                                   : static_cast<int64_t>(kPrefetchSteps * kNR)) +
                    line);
    }
    if constexpr (!kDirectA) hwy::Prefetch(ap + kPrefetchSteps * kMR);
    const auto b0 = hn::Load(d, bp);
    const auto b1 = hn::Load(d, bp + N);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      const int64_t quad = r % 4 == 0 ? 0 : r % 4 == 1 ? l1 : r % 4 == 2 ? l2 : l3;
      const auto a = hn::Set(d, kDirectA ? aq[r / 4][quad] : ap[r]);
      acc0[r] = hn::MulAdd(a, b0, acc0[r]);
      acc1[r] = hn::MulAdd(a, b1, acc1[r]);
    }
    if constexpr (kDirectA) {
      for (auto& q : aq) ++q;
    }
    ap += kDirectA ? 1 : kMR;
    bp += kDirectB ? ldb : static_cast<int64_t>(kNR);
  }
  const auto va = hn::Set(d, alpha);
  HWY_ALIGN float tile[kNR];
  if (nr == kNR && !accumulate && bias != nullptr) {
    const auto bias0 = hn::LoadU(d, bias), bias1 = hn::LoadU(d, bias + N);
#pragma GCC unroll 16
    for (size_t r = 0; r < R; ++r) {
      float* row = c + static_cast<int64_t>(r) * ldc;
      hn::StoreU(hn::MulAdd(va, acc0[r], bias0), d, row);
      hn::StoreU(hn::MulAdd(va, acc1[r], bias1), d, row + N);
    }
    return;
  }
#pragma GCC unroll 16
  for (size_t r = 0; r < R; ++r) {
    float* row = c + static_cast<int64_t>(r) * ldc;
    if (nr == kNR) {
      if (accumulate) {
        hn::StoreU(hn::MulAdd(va, acc0[r], hn::LoadU(d, row)), d, row);
        hn::StoreU(hn::MulAdd(va, acc1[r], hn::LoadU(d, row + N)), d, row + N);
      } else {
        hn::StoreU(hn::Mul(va, acc0[r]), d, row);
        hn::StoreU(hn::Mul(va, acc1[r]), d, row + N);
      }
      continue;
    }
    hn::Store(hn::Mul(va, acc0[r]), d, tile);
    hn::Store(hn::Mul(va, acc1[r]), d, tile + N);
    for (size_t j = 0; j < nr; ++j) {
      row[j] = accumulate ? row[j] + tile[j] : bias != nullptr ? tile[j] + bias[j] : tile[j];
    }
  }
}

// One row of C against P consecutive full micro-panels: P independent
// memory streams, where one panel at a time leaves a single row (decode
// with M = 1) short of the memory bandwidth a few streams reach.
template <size_t P>
HWY_NOINLINE void OneRowPanels(size_t kc, const float* HWY_RESTRICT ap, size_t astep,
                               const float* HWY_RESTRICT bp, float* HWY_RESTRICT c, float alpha,
                               bool accumulate, const float* bias) {
  const DF d;
  const size_t N = hn::Lanes(d);
  decltype(hn::Zero(d)) acc0[P], acc1[P];
  for (size_t q = 0; q < P; ++q) acc0[q] = acc1[q] = hn::Zero(d);
  const size_t panel = kc * kNR;
  for (size_t p = 0; p < kc; ++p) {
    const auto a = hn::Set(d, ap[p * astep]);
    for (size_t q = 0; q < P; ++q) {
      const float* b = bp + q * panel + p * kNR;
      acc0[q] = hn::MulAdd(a, hn::Load(d, b), acc0[q]);
      acc1[q] = hn::MulAdd(a, hn::Load(d, b + N), acc1[q]);
    }
  }
  const auto va = hn::Set(d, alpha);
  for (size_t q = 0; q < P; ++q) {
    float* out = c + q * kNR;
    if (accumulate) {
      hn::StoreU(hn::MulAdd(va, acc0[q], hn::LoadU(d, out)), d, out);
      hn::StoreU(hn::MulAdd(va, acc1[q], hn::LoadU(d, out + N)), d, out + N);
    } else if (bias != nullptr) {
      hn::StoreU(hn::MulAdd(va, acc0[q], hn::LoadU(d, bias + q * kNR)), d, out);
      hn::StoreU(hn::MulAdd(va, acc1[q], hn::LoadU(d, bias + q * kNR + N)), d, out + N);
    } else {
      hn::StoreU(hn::Mul(va, acc0[q]), d, out);
      hn::StoreU(hn::Mul(va, acc1[q]), d, out + N);
    }
  }
}
constexpr size_t kOneRowPanels = 4;

// C tile of mr rows: TileKernel<mr> on a packed A micro-panel or on A's rows
// in place (direct, lda apart: Note [A in place]), on a packed B micro-panel
// (ldb 0) or on B's rows in place (ldb apart: Note [B in place]).
using TileFn = void (*)(size_t, const float*, int64_t, const float*, int64_t, float*, int64_t,
                        size_t, float, bool, const float*);
template <bool kDirectA, bool kDirectB, size_t... I>
constexpr std::array<TileFn, sizeof...(I)> TileKernels(std::index_sequence<I...>) {
  return {&TileKernel<I + 1, kDirectA, kDirectB>...};
}
inline void Tile(size_t kc, const float* HWY_RESTRICT ap, int64_t lda, bool direct,
                 const float* HWY_RESTRICT bp, int64_t ldb, float* HWY_RESTRICT c, int64_t ldc,
                 size_t mr, size_t nr, float alpha, bool accumulate, const float* bias) {
  static constexpr std::array<TileFn, kMR> kPacked[2] = {
      TileKernels<false, false>(std::make_index_sequence<kMR>()),
      TileKernels<false, true>(std::make_index_sequence<kMR>())};
  static constexpr std::array<TileFn, kDirectMR> kDirect[2] = {
      TileKernels<true, false>(std::make_index_sequence<kDirectMR>()),
      TileKernels<true, true>(std::make_index_sequence<kDirectMR>())};
  const TileFn fn = direct ? kDirect[ldb != 0][mr - 1] : kPacked[ldb != 0][mr - 1];
  fn(kc, ap, lda, bp, ldb, c, ldc, nr, alpha, accumulate, bias);
}

// Note [GEMV path]: with few rows, packing B (the whole weight of a
// decode-time linear) costs more than the product itself. B is instead
// streamed once in its own layout: dot products along k when B's columns are
// contiguous (linear's w.t(); the column stays in L1 while every row of A
// meets it), row updates (axpy) when its rows are (C rows stay in cache).
// A B whose pack is cached (Note [Packed weight cache]) takes the packed GEMM
// instead: it streams the pack once, and its few-row tiles do no wasted FMAs.
constexpr int64_t kDotRows = 16;
constexpr int64_t kAxpyRows = 4;

inline bool UseGemv(const Args& args) {
  if (args.b.dtype != DType::kFloat32) return false;
  return (args.b.cs == 1 && args.m <= kAxpyRows) || (args.b.rs == 1 && args.m <= kDotRows);
}

// sum_p a_r[p] * col[p] for R rows of A (k floats each, lda apart), sharing
// each load of the column between the rows.
template <size_t R>
HWY_INLINE void Dots(const float* HWY_RESTRICT a, size_t lda, const float* HWY_RESTRICT col,
                     size_t k, float* HWY_RESTRICT out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  decltype(hn::Zero(d)) acc[R];
  for (size_t r = 0; r < R; ++r) acc[r] = hn::Zero(d);
  size_t p = 0;
  for (; p + N <= k; p += N) {
    const auto b = hn::LoadU(d, col + p);
    for (size_t r = 0; r < R; ++r) acc[r] = hn::MulAdd(hn::LoadU(d, a + r * lda + p), b, acc[r]);
  }
  for (size_t r = 0; r < R; ++r) {
    float dot = hn::GetLane(hn::SumOfLanes(d, acc[r]));
    for (size_t q = p; q < k; ++q) dot += a[r * lda + q] * col[q];
    out[r] = dot;
  }
}

void Gemv(const Args& args) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const size_t m = static_cast<size_t>(args.m), n = static_cast<size_t>(args.n);
  const size_t k = static_cast<size_t>(args.k);
  thread_local std::vector<float> a_rows;
  a_rows.resize(m * k);
  const size_t a_item = ItemSize(args.a.dtype);
  for (size_t i = 0; i < m; ++i) {
    const char* row = static_cast<const char*>(args.a.data) +
                      static_cast<int64_t>(i) * args.a.rs * static_cast<int64_t>(a_item);
    internal::LoadAsF32(args.a.dtype, row, args.a.cs, args.k, a_rows.data() + i * k);
  }
  const float* b = static_cast<const float*>(args.b.data);
  const auto c_row = [&](size_t i) { return args.c + static_cast<int64_t>(i) * args.ldc; };
  if (args.b.cs == 1) {
    // Row-major B: c[i, :] += (alpha * a[i, p]) * b[p, :], each B row read once.
    for (size_t i = 0; i < m; ++i) {
      if (!args.accumulate) std::fill_n(c_row(i), n, 0.0f);
    }
    for (size_t p = 0; p < k; ++p) {
      const float* brow = b + static_cast<int64_t>(p) * args.b.rs;
      for (size_t i = 0; i < m; ++i) {
        const float coef = args.alpha * a_rows[i * k + p];
        const auto vc = hn::Set(d, coef);
        float* c = c_row(i);
        size_t j = 0;
        for (; j + N <= n; j += N) {
          hn::StoreU(hn::MulAdd(vc, hn::LoadU(d, brow + j), hn::LoadU(d, c + j)), d, c + j);
        }
        for (; j < n; ++j) c[j] += coef * brow[j];
      }
    }
    return;
  }
  // Column-contiguous B: dot products, each column read once from memory.
  float dots[4];
  for (size_t j = 0; j < n; ++j) {
    const float* bcol = b + static_cast<int64_t>(j) * args.b.cs;
    for (size_t i0 = 0; i0 < m; i0 += 4) {
      const size_t rows = std::min<size_t>(4, m - i0);
      const float* a = a_rows.data() + i0 * k;
      if (rows == 4) {
        Dots<4>(a, k, bcol, k, dots);
      } else {
        for (size_t r = 0; r < rows; ++r) Dots<1>(a + r * k, k, bcol, k, dots + r);
      }
      for (size_t r = 0; r < rows; ++r) {
        float& c = c_row(i0 + r)[j];
        c = args.accumulate ? c + args.alpha * dots[r] : args.alpha * dots[r];
      }
    }
  }
}

// Pack buffers per worker thread, allocated on first use and kept: a core runs
// one kernel at a time, and GEMMs are frequent enough not to pay malloc each time.
struct PackBuffers {
  hwy::AlignedFreeUniquePtr<float[]> a = hwy::AllocateAligned<float>(kMC * kKC);
  hwy::AlignedFreeUniquePtr<float[]> b = hwy::AllocateAligned<float>(kKC * kNC);
};

// Note [Bias in the epilogue]: linear's bias (one row broadcast over C) is
// added by the first k slice's tiles as they store C, instead of C being
// filled with it first and then accumulated onto: that pass wrote and re-read
// all of C. In-process A/B on Sapphire Rapids: M = 1598 linears (wav2vec2's)
// 3-12 % faster (K = 128 most), M = 128 2-5 %, decode shapes unchanged.
// The bias of the tile at column col; the kernels ignore it when accumulating
// (every k slice after the first).
inline const float* TileBias(const Args& args, size_t col) {
  return args.row_bias == nullptr ? nullptr : args.row_bias + col;
}

void GemmF32(const Args& args) {
  const size_t m = static_cast<size_t>(args.m);
  const size_t n = static_cast<size_t>(args.n);
  const size_t k = static_cast<size_t>(args.k);
  if (m == 0 || n == 0) return;
  if (args.row_bias != nullptr && (k == 0 || (args.b_packed == nullptr && UseGemv(args)))) {
    // Paths without the bias epilogue: C starts as the bias and accumulates.
    for (size_t i = 0; i < m; ++i) {
      std::copy_n(args.row_bias, n, args.c + static_cast<int64_t>(i) * args.ldc);
    }
    Args rest = args;
    rest.row_bias = nullptr;
    rest.accumulate = true;
    return GemmF32(rest);
  }
  if (k == 0) {
    if (!args.accumulate) {
      for (size_t i = 0; i < m; ++i) {
        std::fill_n(args.c + static_cast<int64_t>(i) * args.ldc, n, 0.0f);
      }
    }
    return;
  }
  if (args.b_packed == nullptr && UseGemv(args)) return Gemv(args);
  thread_local PackBuffers buffers;
  // Note [A in place]
  const bool direct = args.a.dtype == DType::kFloat32 && args.a.cs == 1;
  const float* a_rows = static_cast<const float*>(args.a.data);
  // Note [B in place]: full micro-panels read B's rows; a partial last one is packed.
  const bool b_in_place = BInPlace(args);
  const float* b_rows = static_cast<const float*>(args.b.data);
  for (size_t jc = 0; jc < n; jc += kNC) {
    const size_t nc = std::min(kNC, n - jc);
    const size_t full = b_in_place ? nc / kNR * kNR : 0;
    for (size_t pc = 0; pc < k; pc += kKC) {
      const size_t kc = std::min(kKC, k - pc);
      const bool accumulate = args.accumulate || pc > 0;
      // Packed micro-panels from column jc + full on: panel jr at bp + (jr - full) * kc.
      const float* HWY_RESTRICT bp = buffers.b.get();
      if (args.b_packed != nullptr) {
        bp = args.b_packed + PackedSliceOffset(k, jc, pc, nc);
      } else if (full < nc) {
        PackB(args.b, static_cast<int64_t>(pc), static_cast<int64_t>(jc + full), kc, nc - full,
              buffers.b.get());
      }
      for (size_t ic = 0; ic < m; ic += kMC) {
        const size_t mc = std::min(kMC, m - ic);
        // The A block: packed MR-row micro-panels, or A's rows in place.
        const float* ap = buffers.a.get();
        int64_t lda = 0;
        if (direct) {
          lda = args.a.rs;
          ap = a_rows + static_cast<int64_t>(ic) * lda + static_cast<int64_t>(pc);
        } else {
          PackA(args.a, static_cast<int64_t>(ic), static_cast<int64_t>(pc), mc, kc,
                buffers.a.get());
        }
        for (size_t jr = 0; jr < nc; jr += kNR) {
          const bool b_direct = jr < full;
          if (mc == 1 && !b_in_place && jr + kOneRowPanels * kNR <= nc) {
            OneRowPanels<kOneRowPanels>(kc, ap, direct ? 1 : kMR, bp + (jr - full) * kc,
                                        args.c + static_cast<int64_t>(ic) * args.ldc +
                                            static_cast<int64_t>(jc + jr),
                                        args.alpha, accumulate, TileBias(args, jc + jr));
            jr += (kOneRowPanels - 1) * kNR;
            continue;
          }
          const size_t nr = std::min(kNR, nc - jr);
          const float* b_panel =
              b_direct ? b_rows + static_cast<int64_t>(pc) * args.b.rs +
                             static_cast<int64_t>(jc + jr)
                       : bp + (jr - full) * kc;
          const size_t tile_rows = direct && (kc >= kDirectDeepK || b_direct) ? kDirectMR : kMR;
          for (size_t ir = 0; ir < mc; ir += tile_rows) {
            const size_t mr = std::min(tile_rows, mc - ir);
            float* c = args.c + static_cast<int64_t>(ic + ir) * args.ldc +
                       static_cast<int64_t>(jc + jr);
            const float* a_tile = direct ? ap + static_cast<int64_t>(ir) * lda : ap + ir * kc;
            Tile(kc, a_tile, lda, direct, b_panel, b_direct ? args.b.rs : 0, c, args.ldc, mr,
                 nr, args.alpha, accumulate, TileBias(args, jc + jr));
          }
        }
      }
    }
  }
}

}  // namespace trn::kernels::gemm::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TRN_KERNELS_GEMM_INL_H_
