// Fused scaled-dot-product attention: one kernel per sdpa call, the S x S
// score matrix never materialised (Note [fused attention]).
//
// Note [fused attention]
// The flash-attention idea on one core: per query row a running maximum m,
// sum l and accumulator acc; each block of keys updates them (scores s_j
// scaled and masked; m_new = max(m, max_j s_j); acc and l rescaled by
// exp(m - m_new); p_j = exp(s_j - m_new) added to l and p_j v_j to acc), and
// out = acc / l at the end. A row that attends no key keeps l = 0 and gives 0,
// as CPU PyTorch. Causal tiles stop at their last attended key and rows skip
// the masked tail of a block, so causal attention costs about half. Two paths:
// - panels (Sq >= kPanelRows): per (batch, key/value head) the keys are packed
//   once as K^T panels of block_k keys and the values as padded float32 rows,
//   shared by the query heads of the group. Query rows go in tiles of kTileQ;
//   per tile and key block the scores of the tile come from a register-tiled
//   micro-kernel (8 rows x 2 vectors of keys on AVX-512, 4 rows on AVX2; no
//   horizontal sums), the online softmax runs per row over vectors, and P @ V
//   is register-tiled the same way (rows x 2 vectors of Dv). block_k keeps a panel and its values
//   (~48 KiB) in L1/L2 while the tile's rows use them.
// - rows (decode, Sq < kPanelRows): k/v are used in place when they are
//   float32 or bfloat16 (both k and v) with unit inner stride (else converted
//   once per head, skipped for heads expanded with stride 0), scores are dot
//   products four keys at a time (SIMD over D), P @ V keeps eight vectors of
//   Dv in registers. Packing
//   K^T would cost as much as the attention itself for one query row.
//
// Note [AMX attention]
// bfloat16 q, k, v on a CPU with AMX (Note [AMX bf16 GEMM] in amx.cc) take the
// panel path's two products on tiles: per (batch, key/value head) k is packed
// once as d x skv tiles and v as skv x dv; per tile of query rows and block
// of 256 keys the scores come from q in place (unscaled, then times scale *
// log2(e) per row) and P @ V from P rounded to bfloat16, as CPU PyTorch's
// flash attention rounds it for its bfloat16 GEMM (2^-9 of each weight; the
// max errors against a float64 reference equal the CPU's). The online softmax
// between them is the float32 one of the other paths, with the scaling done
// in the max pass and the exponentials rounded straight into P's bfloat16
// buffer: two passes over each score row fewer (MaskMax<true>, ExpShift's p16).
// With an additive mask, score * scale + mask may now round once (the
// compiler fuses the two into an FMA); unmasked scores round as before.
//
// Note [Decode streams]
// Decode attention over a long cache reads K and V once from memory, so the
// row path is as fast as its access pattern. Four keys' rows read in
// interleaved vectors are short strided streams the hardware prefetchers do
// not follow: the dot products ran at 10 GB/s from DRAM against 25 GB/s for
// one row at a time (AVX-512 Zen 4). Prefetching the rows kPrefetchKeys ahead
// gives 22 GB/s and keeps the four-key register tile, whose shared q loads
// win in cache (where the prefetches cost ~20 %: only a k and v larger than
// kStreamBytes, an L2, take them). P @ V in passes of four vectors re-read every value
// row per pass (two passes at dv = 128); eight vectors halve the passes and
// doubled its bandwidth from DRAM on AVX-512 and AVX2 alike. Its value rows
// are prefetched kPrefetchKeys ahead too: (1, 32, 1, 4096, 128) float32 went
// from 8.5 to 6.1 ms (the unfused math path: 5.6-6.0 ms). A bfloat16 cache is
// read in place, widened in registers (LoadKV), instead of converted into a
// float32 copy per head first: half the bytes; 1.7 -> 0.4 ms at 1024 keys.
//
// Note [exp2 softmax]
// Scores are kept in base 2: each query row is scaled by scale * log2(e) when
// loaded, so the softmax takes 2^x (Exp2NonPositiveF in elementwise-inl.h:
// no reduction by ln 2, 11 vector ops against hwy's Exp's ~27) and the scale
// costs no multiply per score. The running maximum and its
// correction are in base 2 too; the logsumexp output is converted back
// ((m + log2 l) * ln 2). A float mask is multiplied by log2(e) as it is loaded
// and kept finite (HF's finfo.min would overflow to -inf and turn a fully
// masked row's uniform weights, CPU PyTorch's result, into 0). MaskMax only
// reads the scores of an unmasked block. Measured on Intel Sapphire Rapids,
// each step against the one before in the same process, 5 shapes from
// wav2vec2, BERT, ViT and a causal decoder: base 2 6-17 % faster, then the
// 8-row tiles another 4-11 %.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/common/tensor_ref.h"
#include "core/kernels/amx.h"
#include "core/kernels/convert.h"
#include "core/kernels/elementwise-inl.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#ifndef TRN_KERNELS_ATTENTION_ARGS_
#define TRN_KERNELS_ATTENTION_ARGS_
namespace trn::kernels::attention {

// Query rows per tile and the float scratch lanes kept past a key block.
constexpr int64_t kTileQ = 32;
constexpr int64_t kPadLanes = 64;
// Row path: keys prefetched ahead of the dot products when k and v together
// exceed an L2 (Note [Decode streams]).
constexpr int64_t kPrefetchKeys = 16;
constexpr uint64_t kStreamBytes = 1 << 20;

// One query head against its key/value head. Element strides; the scratch
// buffers are the caller's, taken once per launch.
struct HeadArgs {
  const char* q;  // row i at q + i * q_row elements of `dtype`, q_col apart
  int64_t q_row, q_col;
  DType dtype;
  const float* k;  // row path: skv rows of d floats, ldk apart
  const float* v;  // row path: skv rows of dv floats, ldv apart
  // Row path, bfloat16 k/v with unit inner stride: read in place (k/v unused).
  const uint16_t* k16 = nullptr;
  const uint16_t* v16 = nullptr;
  int64_t ldk, ldv;
  char* out;  // row i at out + i * out_row elements of `dtype`, out_col apart
  int64_t out_row, out_col;
  float* lse;  // nullable, row i at lse[i * lse_stride]
  int64_t lse_stride;
  const char* mask;  // nullable, (i, j) at mask + i * mask_row + j * mask_col elements
  DType mask_dtype;
  int64_t mask_row, mask_col;
  int64_t sq, skv, d, dv, block_k;
  float scale;
  bool causal;
  bool stream;  // row path: k and v exceed kStreamBytes
  float* qbuf;  // kTileQ * d
  float* acc;   // kTileQ * dv
  float* m;     // kTileQ
  float* l;     // kTileQ
  float* s;     // block_k + kPadLanes (panels: kTileQ * block_k)
  float* mb;    // block_k + kPadLanes
  // Panel path (AttentionHeadPanels): k is K^T in panels of block_k keys,
  // panel p at k + p * d * block_k holding (t, j) at t * block_k + j, zero
  // past skv; v rows are dv_pad floats (zero past dv); acc rows dv_pad.
  int64_t dv_pad;
  // Panel path on AMX (bfloat16 q, k, v: Note [AMX attention]): k as tiles of
  // d x skv, v of skv x dv (amx::PackB), k_block / v_block uint16 elements
  // between their 16-column blocks; q read in place; pbuf kTileQ x block_k
  // bfloat16 probabilities. block_k is a multiple of 32.
  const uint16_t* k_tiles = nullptr;
  const uint16_t* v_tiles = nullptr;
  int64_t k_block = 0, v_block = 0;
  uint16_t* pbuf = nullptr;
};

}  // namespace trn::kernels::attention
#endif  // TRN_KERNELS_ATTENTION_ARGS_

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::attention::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using trn::kernels::HWY_NAMESPACE::StoreBF16;
using trn::kernels::HWY_NAMESPACE::Exp2NonPositiveF;

HWY_INLINE float Sum(DF d, hn::Vec<DF> v) { return hn::GetLane(hn::SumOfLanes(d, v)); }

// One vector of k/v as float32: floats, or bfloat16 bits widened in registers
// (decode reads a bfloat16 cache in place: half the bytes of a float32 copy).
template <typename T>
HWY_INLINE hn::Vec<DF> LoadKV(DF df, const T* p) {
  if constexpr (std::is_same_v<T, float>) {
    return hn::LoadU(df, p);
  } else {
    const hn::Rebind<uint16_t, DF> d16;
    const hn::RebindToUnsigned<DF> d32;
    return hn::BitCast(df, hn::ShiftLeft<16>(hn::PromoteTo(d32, hn::LoadU(d16, p))));
  }
}
template <typename T>
HWY_INLINE float KV(T x) {
  if constexpr (std::is_same_v<T, float>) return x;
  else return internal::BF16ToF32(x);
}

// s[j] = q . k_j for j < n; keys are rows of d floats, ldk apart. With
// `stream` (keys out of L2) the rows kPrefetchKeys ahead are prefetched: four
// interleaved rows defeat the hardware prefetchers (Note [Decode streams]).
template <typename T>
HWY_INLINE void Dots(const float* HWY_RESTRICT q, const T* k, int64_t ldk, int64_t n,
                     int64_t d, bool stream, float* HWY_RESTRICT s) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t dvec = d - d % N;
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) {
    const T* k0 = k + j * ldk;
    const T* k1 = k0 + ldk;
    const T* k2 = k1 + ldk;
    const T* k3 = k2 + ldk;
    if (stream && j + kPrefetchKeys + 4 <= n) {
      const T* ahead = k0 + kPrefetchKeys * ldk;
      constexpr int64_t kLine = 64 / sizeof(T);
      for (int64_t r = 0; r < 4; ++r) {
        for (int64_t t = 0; t < d; t += kLine) hwy::Prefetch(ahead + r * ldk + t);
      }
    }
    auto a0 = hn::Zero(df), a1 = hn::Zero(df), a2 = hn::Zero(df), a3 = hn::Zero(df);
    for (int64_t i = 0; i < dvec; i += N) {
      const auto qv = hn::LoadU(df, q + i);
      a0 = hn::MulAdd(qv, LoadKV(df, k0 + i), a0);
      a1 = hn::MulAdd(qv, LoadKV(df, k1 + i), a1);
      a2 = hn::MulAdd(qv, LoadKV(df, k2 + i), a2);
      a3 = hn::MulAdd(qv, LoadKV(df, k3 + i), a3);
    }
    float r0 = Sum(df, a0), r1 = Sum(df, a1), r2 = Sum(df, a2), r3 = Sum(df, a3);
    for (int64_t i = dvec; i < d; ++i) {
      r0 += q[i] * KV(k0[i]);
      r1 += q[i] * KV(k1[i]);
      r2 += q[i] * KV(k2[i]);
      r3 += q[i] * KV(k3[i]);
    }
    s[j] = r0;
    s[j + 1] = r1;
    s[j + 2] = r2;
    s[j + 3] = r3;
  }
  for (; j < n; ++j) {
    const T* kj = k + j * ldk;
    auto a = hn::Zero(df);
    for (int64_t i = 0; i < dvec; i += N) {
      a = hn::MulAdd(hn::LoadU(df, q + i), LoadKV(df, kj + i), a);
    }
    float r = Sum(df, a);
    for (int64_t i = dvec; i < d; ++i) r += q[i] * KV(kj[i]);
    s[j] = r;
  }
}

// acc = acc * corr + sum_{j < n} p[j] * v_j over dv floats; values are rows
// ldv apart. V vectors of acc stay in registers across the keys: 8 (of 16 or
// 32 registers), so that dv = 128 is one pass over the values on AVX-512 and
// two on AVX2, not two and four (Note [Decode streams]).
template <int V, typename T>
HWY_INLINE int64_t AccumulatePVColumns(float* HWY_RESTRICT acc, float corr,
                                       const float* HWY_RESTRICT p, const T* v, int64_t ldv,
                                       int64_t n, int64_t i, int64_t dv, bool stream) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto c = hn::Set(df, corr);
  for (; i + V * N <= dv; i += V * N) {
    hn::Vec<DF> a[V];
    for (int r = 0; r < V; ++r) a[r] = hn::Mul(hn::LoadU(df, acc + i + r * N), c);
    const T* vr = v + i;
    for (int64_t j = 0; j < n; ++j, vr += ldv) {
      if (stream && j + kPrefetchKeys < n) {
        constexpr int64_t kLine = 64 / sizeof(T);
        for (int64_t t = 0; t < V * N; t += kLine) hwy::Prefetch(vr + kPrefetchKeys * ldv + t);
      }
      const auto pj = hn::Set(df, p[j]);
      for (int r = 0; r < V; ++r) a[r] = hn::MulAdd(pj, LoadKV(df, vr + r * N), a[r]);
    }
    for (int r = 0; r < V; ++r) hn::StoreU(a[r], df, acc + i + r * N);
  }
  return i;
}

template <typename T>
HWY_INLINE void AccumulatePV(float* HWY_RESTRICT acc, float corr, const float* HWY_RESTRICT p,
                             const T* v, int64_t ldv, int64_t n, int64_t dv, bool stream) {
  int64_t i = 0;
  i = AccumulatePVColumns<8>(acc, corr, p, v, ldv, n, i, dv, stream);
  i = AccumulatePVColumns<4>(acc, corr, p, v, ldv, n, i, dv, stream);
  i = AccumulatePVColumns<1>(acc, corr, p, v, ldv, n, i, dv, stream);
  for (; i < dv; ++i) {
    float a = acc[i] * corr;
    for (int64_t j = 0; j < n; ++j) a += p[j] * KV(v[j * ldv + i]);
    acc[i] = a;
  }
}

// ---- Softmax in base 2 (Note [exp2 softmax]) ----------------------------------------
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2 = 0.693147180559945309f;

// The natural logsumexp of a row from its base-2 maximum m and sum l.
HWY_INLINE float LogSumExp(float m, float l) {
  return l > 0.0f ? (m + std::log2(l)) * kLn2 : -std::numeric_limits<float>::infinity();
}

// Query row i as float32 scaled by scale * log2(e): its scores are in base 2.
HWY_INLINE void LoadQuery(const HeadArgs& a, int64_t i, float* HWY_RESTRICT dst) {
  const int64_t item = static_cast<int64_t>(ItemSize(a.dtype));
  internal::LoadAsF32(a.dtype, a.q + i * a.q_row * item, a.q_col, a.d, dst);
  const float k = a.scale * kLog2e;
  for (int64_t t = 0; t < a.d; ++t) dst[t] *= k;
}

// The mask of row i over keys [j0, j0 + n) as additive float32 in base 2
// (bool: 0 or -inf). A finite mask stays finite: HF's finfo.min times log2(e)
// would overflow to -inf and turn a fully masked row's uniform weights (CPU
// PyTorch) into 0.
HWY_INLINE void LoadMask(const HeadArgs& a, int64_t i, int64_t j0, int64_t n, float* mb) {
  const int64_t off = i * a.mask_row + j0 * a.mask_col;
  if (a.mask_dtype == DType::kBool) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(a.mask) + off;
    const float ninf = -std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < n; ++t) mb[t] = p[t * a.mask_col] ? 0.0f : ninf;
    return;
  }
  internal::LoadAsF32(a.mask_dtype, a.mask + off * static_cast<int64_t>(ItemSize(a.mask_dtype)),
                      a.mask_col, n, mb);
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto big = hn::Set(df, std::numeric_limits<float>::max());
  const auto l2e = hn::Set(df, kLog2e);
  for (int64_t t = 0; t < n; t += N) {
    const auto m = hn::LoadU(df, mb + t);
    const auto y = hn::Mul(m, l2e);
    hn::StoreU(hn::IfThenElse(hn::IsFinite(m), hn::Clamp(y, hn::Neg(big), big), y), df, mb + t);
  }
}

// Scores s[0, n) of one row (base 2): scaled by `scale` when kScaled (AMX's
// scores come unscaled: Note [AMX attention]), masked, padded with -inf to
// whole vectors; returns their maximum. Unmasked, unscaled whole vectors are
// only read.
template <bool kScaled = false>
HWY_INLINE float MaskMax(const HeadArgs& a, int64_t i, int64_t j0, int64_t n, float* s,
                         float scale = 1.0f) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto ninf = hn::Set(df, -std::numeric_limits<float>::infinity());
  const auto c = hn::Set(df, scale);
  auto load = [&](int64_t t) {
    const auto x = hn::LoadU(df, s + t);
    return kScaled ? hn::Mul(x, c) : x;
  };
  auto mx0 = ninf, mx1 = ninf;
  int64_t t = 0;
  if (a.mask != nullptr) {
    LoadMask(a, i, j0, n, a.mb);
    for (; t + N <= n; t += N) {
      const auto x = hn::Add(load(t), hn::LoadU(df, a.mb + t));
      hn::StoreU(x, df, s + t);
      mx0 = hn::Max(mx0, x);
    }
  } else if (kScaled) {
    for (; t + N <= n; t += N) {
      const auto x = load(t);
      hn::StoreU(x, df, s + t);
      mx0 = hn::Max(mx0, x);
    }
  } else {
    for (; t + 2 * N <= n; t += 2 * N) {
      mx0 = hn::Max(mx0, hn::LoadU(df, s + t));
      mx1 = hn::Max(mx1, hn::LoadU(df, s + t + N));
    }
    for (; t + N <= n; t += N) mx0 = hn::Max(mx0, hn::LoadU(df, s + t));
  }
  if (t < n) {
    auto x = load(t);
    if (a.mask != nullptr) x = hn::Add(x, hn::LoadU(df, a.mb + t));
    x = hn::IfThenElse(hn::FirstN(df, static_cast<size_t>(n - t)), x, ninf);
    hn::StoreU(x, df, s + t);
    mx1 = hn::Max(mx1, x);
  }
  return hn::GetLane(hn::MaxOfLanes(df, hn::Max(mx0, mx1)));
}

// p[t] = 2^(s[t] - m) in place over whole vectors (padding gives 0); returns
// the sum over the first n. Two sums: the adds do not wait on each other.
// With p16 (the AMX path), p goes to p16[0, n rounded up to whole vectors)
// rounded to bfloat16 (convert.h's rounding) instead of back into s.
HWY_INLINE float ExpShift(float* s, int64_t n, float m, uint16_t* p16 = nullptr) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vm = hn::Set(df, m);
  auto store = [&](decltype(vm) e, int64_t t) {
    if (p16 != nullptr) return StoreBF16(df, e, p16 + t);
    hn::StoreU(e, df, s + t);
  };
  auto sum0 = hn::Zero(df), sum1 = hn::Zero(df);
  int64_t t = 0;
  for (; t + N < n; t += 2 * N) {
    const auto e0 = Exp2NonPositiveF(df, hn::Sub(hn::LoadU(df, s + t), vm));
    const auto e1 = Exp2NonPositiveF(df, hn::Sub(hn::LoadU(df, s + t + N), vm));
    store(e0, t);
    store(e1, t + N);
    sum0 = hn::Add(sum0, e0);
    sum1 = hn::Add(sum1, e1);
  }
  if (t < n) {
    const auto e = Exp2NonPositiveF(df, hn::Sub(hn::LoadU(df, s + t), vm));
    store(e, t);
    sum0 = hn::Add(sum0, e);
  }
  return Sum(df, hn::Add(sum0, sum1));
}

// One query head on the row path (Note [fused attention]), k/v rows of T.
// Not inlined: both instantiations inlined into AttentionHead made the float32
// decode of a 4096-token cache 15-25 % slower (6.8-7.5 against 5.8-6.0 ms).
template <typename T>
HWY_NOINLINE void RowPath(const HeadArgs& a, const T* k, const T* v) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t item = static_cast<int64_t>(ItemSize(a.dtype));
  for (int64_t i0 = 0; i0 < a.sq; i0 += kTileQ) {
    const int64_t rows = std::min(kTileQ, a.sq - i0);
    for (int64_t r = 0; r < rows; ++r) {
      LoadQuery(a, i0 + r, a.qbuf + r * a.d);
      a.m[r] = ninf;
      a.l[r] = 0.0f;
    }
    std::fill(a.acc, a.acc + rows * a.dv, 0.0f);
    const int64_t kv_end = a.causal ? std::min(a.skv, i0 + rows) : a.skv;
    for (int64_t j0 = 0; j0 < kv_end; j0 += a.block_k) {
      const int64_t jn = std::min(a.block_k, kv_end - j0);
      const T* kb = k + j0 * a.ldk;
      const T* vb = v + j0 * a.ldv;
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const int64_t n = a.causal ? std::min(jn, std::max<int64_t>(0, i + 1 - j0)) : jn;
        if (n == 0) continue;
        Dots(a.qbuf + r * a.d, kb, a.ldk, n, a.d, a.stream, a.s);
        const float bm = MaskMax(a, i, j0, n, a.s);
        if (bm == ninf) continue;  // every key of this block masked
        const float m_new = std::max(a.m[r], bm);
        const float corr = std::exp2(a.m[r] - m_new);  // 0 on the first block
        a.l[r] = a.l[r] * corr + ExpShift(a.s, n, m_new);
        AccumulatePV(a.acc + r * a.dv, corr, a.s, vb, a.ldv, n, a.dv, a.stream);
        a.m[r] = m_new;
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* o = a.acc + r * a.dv;
      const float l = a.l[r];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t t = 0; t < a.dv; ++t) o[t] *= inv;
      internal::StoreFromF32(a.dtype, a.out + (i0 + r) * a.out_row * item, a.out_col, a.dv, o);
      if (a.lse != nullptr) a.lse[(i0 + r) * a.lse_stride] = LogSumExp(a.m[r], l);
    }
  }
}

void AttentionHead(const HeadArgs& a) {
  if (a.k16 != nullptr) return RowPath(a, a.k16, a.v16);
  RowPath(a, a.k, a.v);
}

// ---- Panel path (Note [fused attention]) -------------------------------------------
// Scores of R query rows (q: R rows of d floats) against the ncols keys of
// a K^T panel (d rows of ldk floats; ncols a multiple of the lane count):
// s[r * lds + j]. Register tile R rows x 2 vectors of keys, no horizontal sums.
template <int R>
HWY_INLINE void PanelScores(const float* HWY_RESTRICT q, int64_t d, const float* kt, int64_t ldk,
                            int64_t ncols, float* HWY_RESTRICT s, int64_t lds) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t j = 0;
  for (; j + 2 * N <= ncols; j += 2 * N) {
    hn::Vec<DF> a0[R], a1[R];
    for (int r = 0; r < R; ++r) a0[r] = a1[r] = hn::Zero(df);
    const float* kp = kt + j;
    for (int64_t t = 0; t < d; ++t, kp += ldk) {
      const auto k0 = hn::LoadU(df, kp);
      const auto k1 = hn::LoadU(df, kp + N);
      for (int r = 0; r < R; ++r) {
        const auto qb = hn::Set(df, q[r * d + t]);
        a0[r] = hn::MulAdd(qb, k0, a0[r]);
        a1[r] = hn::MulAdd(qb, k1, a1[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      hn::StoreU(a0[r], df, s + r * lds + j);
      hn::StoreU(a1[r], df, s + r * lds + j + N);
    }
  }
  for (; j < ncols; j += N) {
    hn::Vec<DF> a0[R];
    for (int r = 0; r < R; ++r) a0[r] = hn::Zero(df);
    const float* kp = kt + j;
    for (int64_t t = 0; t < d; ++t, kp += ldk) {
      const auto k0 = hn::LoadU(df, kp);
      for (int r = 0; r < R; ++r) a0[r] = hn::MulAdd(hn::Set(df, q[r * d + t]), k0, a0[r]);
    }
    for (int r = 0; r < R; ++r) hn::StoreU(a0[r], df, s + r * lds + j);
  }
}

// acc[r * lda + i] += sum_{j < n} p[r * ldp + j] * v[j * ldv + i] for R rows,
// i < dv_pad (a multiple of the lane count). Register tile R rows x 2 vectors.
template <int R>
HWY_INLINE void PanelAccumulate(const float* HWY_RESTRICT p, int64_t ldp, const float* v,
                                int64_t ldv, int64_t n, float* HWY_RESTRICT acc, int64_t lda,
                                int64_t dv_pad) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + 2 * N <= dv_pad; i += 2 * N) {
    hn::Vec<DF> a0[R], a1[R];
    for (int r = 0; r < R; ++r) {
      a0[r] = hn::LoadU(df, acc + r * lda + i);
      a1[r] = hn::LoadU(df, acc + r * lda + i + N);
    }
    const float* vp = v + i;
    for (int64_t j = 0; j < n; ++j, vp += ldv) {
      const auto v0 = hn::LoadU(df, vp);
      const auto v1 = hn::LoadU(df, vp + N);
      for (int r = 0; r < R; ++r) {
        const auto pb = hn::Set(df, p[r * ldp + j]);
        a0[r] = hn::MulAdd(pb, v0, a0[r]);
        a1[r] = hn::MulAdd(pb, v1, a1[r]);
      }
    }
    for (int r = 0; r < R; ++r) {
      hn::StoreU(a0[r], df, acc + r * lda + i);
      hn::StoreU(a1[r], df, acc + r * lda + i + N);
    }
  }
  for (; i < dv_pad; i += N) {
    hn::Vec<DF> a0[R];
    for (int r = 0; r < R; ++r) a0[r] = hn::LoadU(df, acc + r * lda + i);
    const float* vp = v + i;
    for (int64_t j = 0; j < n; ++j, vp += ldv) {
      const auto v0 = hn::LoadU(df, vp);
      for (int r = 0; r < R; ++r) a0[r] = hn::MulAdd(hn::Set(df, p[r * ldp + j]), v0, a0[r]);
    }
    for (int r = 0; r < R; ++r) hn::StoreU(a0[r], df, acc + r * lda + i);
  }
}

// Runs body.template operator()<R>(r0) over rows [0, rows) in groups of <= G.
template <int G = 4, class Body>
HWY_INLINE void ForRowGroups(int64_t rows, const Body& body) {
  int64_t r0 = 0;
  for (; r0 + G <= rows; r0 += G) body(std::integral_constant<int, G>(), r0);
  if constexpr (G == 8) {
    if (r0 + 4 <= rows) {
      body(std::integral_constant<int, 4>(), r0);
      r0 += 4;
    }
  }
  switch (rows - r0) {
    case 3: body(std::integral_constant<int, 3>(), r0); break;
    case 2: body(std::integral_constant<int, 2>(), r0); break;
    case 1: body(std::integral_constant<int, 1>(), r0); break;
    default: break;
  }
}

// One query head, tiles of kTileQ rows against panels of block_k keys: the
// scores of the whole tile in one register-blocked pass, the online softmax
// per row, then P @ V register-blocked (Note [fused attention]).
template <int G>
void Panels(const HeadArgs& a) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t item = static_cast<int64_t>(ItemSize(a.dtype));
  const int64_t bk = a.block_k, lds = a.block_k, lda = a.dv_pad;
  const bool on_amx = a.k_tiles != nullptr;
  const float score_scale = a.scale * kLog2e;  // AMX: scores come unscaled
  for (int64_t i0 = 0; i0 < a.sq; i0 += kTileQ) {
    const int64_t rows = std::min(kTileQ, a.sq - i0);
    for (int64_t r = 0; r < rows; ++r) {
      if (!on_amx) LoadQuery(a, i0 + r, a.qbuf + r * a.d);
      a.m[r] = ninf;
      a.l[r] = 0.0f;
    }
    std::fill(a.acc, a.acc + rows * lda, 0.0f);
    const int64_t kv_end = a.causal ? std::min(a.skv, i0 + rows) : a.skv;
    for (int64_t j0 = 0; j0 < kv_end; j0 += bk) {
      const int64_t jn = std::min(bk, kv_end - j0);
      const int64_t jn_pad = (jn + N - 1) / N * N;
      if (on_amx) {
        amx::Gemm(rows, jn, a.d, reinterpret_cast<const uint16_t*>(a.q) + i0 * a.q_row, a.q_row,
                  a.q_col, a.k_tiles + j0 / 16 * a.k_block, amx::Out::F32(a.s, lds), false, {},
                  a.k_block);
      } else {
        const float* kt = a.k + (j0 / bk) * a.d * bk;
        ForRowGroups<G>(rows, [&](auto R, int64_t r0) {
          PanelScores<decltype(R)::value>(a.qbuf + r0 * a.d, a.d, kt, bk, jn_pad,
                                          a.s + r0 * lds, lds);
        });
      }
      for (int64_t r = 0; r < rows; ++r) {
        const int64_t i = i0 + r;
        const int64_t n = a.causal ? std::min(jn, std::max<int64_t>(0, i + 1 - j0)) : jn;
        float* sr = a.s + r * lds;
        // AMX: P straight into pbuf, rounded, zero past n (Note [AMX attention]).
        uint16_t* pr = on_amx ? a.pbuf + r * bk : nullptr;
        const int64_t npad = (n + N - 1) / N * N;
        float bm = ninf;
        if (n > 0 && on_amx) bm = MaskMax<true>(a, i, j0, n, sr, score_scale);
        if (n > 0 && !on_amx) bm = MaskMax(a, i, j0, n, sr);
        if (bm == ninf) {  // nothing attended in this block: P row 0, state kept
          if (on_amx) std::fill(pr, pr + jn, uint16_t{0});
          else std::fill(sr, sr + jn_pad, 0.0f);
          continue;
        }
        const float m_new = std::max(a.m[r], bm);
        const float corr = a.m[r] == m_new ? 1.0f : std::exp2(a.m[r] - m_new);  // most blocks: 1
        a.l[r] = a.l[r] * corr + ExpShift(sr, n, m_new, pr);
        if (on_amx) std::fill(pr + npad, pr + std::max(npad, jn), uint16_t{0});
        else std::fill(sr + npad, sr + jn_pad, 0.0f);
        if (corr != 1.0f) {
          float* ar = a.acc + r * lda;
          const auto c = hn::Set(df, corr);
          for (int64_t t = 0; t < lda; t += N) {
            hn::StoreU(hn::Mul(hn::LoadU(df, ar + t), c), df, ar + t);
          }
        }
        a.m[r] = m_new;
      }
      if (on_amx) {  // P rounded to bfloat16, as CPU PyTorch's flash attention does
        amx::Gemm(rows, a.dv, jn, a.pbuf, bk, 1, a.v_tiles + j0 / 32 * 512,
                  amx::Out::F32(a.acc, lda), true, {}, a.v_block);
        continue;
      }
      const float* vb = a.v + j0 * a.ldv;
      ForRowGroups<G>(rows, [&](auto R, int64_t r0) {
        PanelAccumulate<decltype(R)::value>(a.s + r0 * lds, lds, vb, a.ldv, jn, a.acc + r0 * lda,
                                            lda, a.dv_pad);
      });
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* o = a.acc + r * lda;
      const float l = a.l[r];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      for (int64_t t = 0; t < a.dv; ++t) o[t] *= inv;
      internal::StoreFromF32(a.dtype, a.out + (i0 + r) * a.out_row * item, a.out_col, a.dv, o);
      if (a.lse != nullptr) a.lse[(i0 + r) * a.lse_stride] = LogSumExp(a.m[r], l);
    }
  }
}

// Rows per register tile: 8 x 2 vectors of accumulators need 32 registers
// (AVX-512); 16 (AVX2) take 4.
void AttentionHeadPanels(const HeadArgs& a) { Panels<(hn::MaxLanes(DF()) >= 16 ? 8 : 4)>(a); }
}  // namespace trn::kernels::attention::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <algorithm>
#include <vector>

#include "core/common/assert.h"
#include "core/kernels/attention.h"

namespace trn::kernels {
namespace attention {
HWY_EXPORT(AttentionHead);
HWY_EXPORT(AttentionHeadPanels);
}  // namespace attention

namespace {

// Bytes of the distinct elements of t (a stride-0 dim counts once).
uint64_t DistinctBytes(const TensorRef& t) {
  if (t.data == nullptr) return 0;
  uint64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.strides[d] != 0 || t.sizes[d] == 0) n *= static_cast<uint64_t>(t.sizes[d]);
  }
  return n * ItemSize(t.dtype);
}

// Rows of one (batch, head) of k or v as float32: in place when already
// float32 with unit inner stride, else converted into `pack` (skipped when
// the same rows were packed last: heads expanded with stride 0).
struct KvRows {
  std::vector<float> pack;
  const char* packed_from = nullptr;
  const float* rows = nullptr;
  const uint16_t* rows16 = nullptr;  // bfloat16 rows read in place (rows unused)
  int64_t ld = 0;

  void Prepare(const TensorRef& t, int64_t b, int64_t h, bool bf16_in_place) {
    const int64_t item = static_cast<int64_t>(ItemSize(t.dtype));
    const char* base =
        static_cast<const char*>(t.data) + (b * t.strides[0] + h * t.strides[1]) * item;
    const int64_t n = t.sizes[2], d = t.sizes[3];
    rows16 = nullptr;
    if (t.dtype == DType::kFloat32 && (t.strides[3] == 1 || d <= 1)) {
      rows = reinterpret_cast<const float*>(base);
      ld = t.strides[2];
      return;
    }
    if (bf16_in_place) {  // Note [Decode streams]
      rows16 = reinterpret_cast<const uint16_t*>(base);
      ld = t.strides[2];
      return;
    }
    ld = d;
    rows = pack.data();
    if (base == packed_from) return;
    for (int64_t j = 0; j < n; ++j) {
      internal::LoadAsF32(t.dtype, base + j * t.strides[2] * item, t.strides[3], d,
                          pack.data() + j * d);
    }
    packed_from = base;
  }
};

// Keys of one (batch, head) as K^T panels of block_k keys and values as rows
// of dv_pad floats, for AttentionHeadPanels (layout in HeadArgs). Padding
// stays zero: every head writes the same positions.
struct KvPanels {
  std::vector<float> kt, v, row;
  const char* k_from = nullptr;
  const char* v_from = nullptr;

  void Prepare(const TensorRef& k, const TensorRef& vt, int64_t b, int64_t h, int64_t bk,
               int64_t dv_pad) {
    const int64_t item = static_cast<int64_t>(ItemSize(k.dtype));
    const int64_t skv = k.sizes[2], d = k.sizes[3], dv = vt.sizes[3];
    const int64_t nblocks = (skv + bk - 1) / bk;
    if (kt.empty()) {
      kt.assign(static_cast<size_t>(std::max<int64_t>(1, nblocks * d * bk)), 0.0f);
      v.assign(static_cast<size_t>(std::max<int64_t>(1, skv * dv_pad)), 0.0f);
      row.resize(static_cast<size_t>(std::max<int64_t>(1, d)));
    }
    const char* kb =
        static_cast<const char*>(k.data) + (b * k.strides[0] + h * k.strides[1]) * item;
    if (kb != k_from) {
      for (int64_t j = 0; j < skv; ++j) {
        internal::LoadAsF32(k.dtype, kb + j * k.strides[2] * item, k.strides[3], d, row.data());
        float* dst = kt.data() + (j / bk) * d * bk + j % bk;
        for (int64_t t = 0; t < d; ++t) dst[t * bk] = row[t];
      }
      k_from = kb;
    }
    const char* vb =
        static_cast<const char*>(vt.data) + (b * vt.strides[0] + h * vt.strides[1]) * item;
    if (vb != v_from) {
      for (int64_t j = 0; j < skv; ++j) {
        internal::LoadAsF32(vt.dtype, vb + j * vt.strides[2] * item, vt.strides[3], dv,
                            v.data() + j * dv_pad);
      }
      v_from = vb;
    }
  }
};

// Keys and values of one (batch, head) as AMX tiles (Note [AMX attention]):
// k as d x skv (its transpose), v as skv x dv; kept for heads expanded with
// stride 0.
struct KvTiles {
  std::vector<uint16_t> k, v;
  const char* k_from = nullptr;
  const char* v_from = nullptr;

  void Prepare(const TensorRef& kt, const TensorRef& vt, int64_t b, int64_t h) {
    const int64_t skv = kt.sizes[2], d = kt.sizes[3], dv = vt.sizes[3];
    if (k.empty()) {
      k.resize(static_cast<size_t>(amx::PackedBElems(d, skv)));
      v.resize(static_cast<size_t>(amx::PackedBElems(skv, dv)));
    }
    const char* kb = static_cast<const char*>(kt.data) + (b * kt.strides[0] + h * kt.strides[1]) * 2;
    if (kb != k_from) {
      amx::PackB(reinterpret_cast<const uint16_t*>(kb), kt.strides[3], kt.strides[2], d, skv,
                 k.data());
      k_from = kb;
    }
    const char* vb = static_cast<const char*>(vt.data) + (b * vt.strides[0] + h * vt.strides[1]) * 2;
    if (vb != v_from) {
      amx::PackB(reinterpret_cast<const uint16_t*>(vb), vt.strides[2], vt.strides[3], skv, dv,
                 v.data());
      v_from = vb;
    }
  }
};

const char* AttentionName(DType dt) {
  switch (dt) {
    case DType::kFloat32: return "sdpa_f32";
    case DType::kFloat64: return "sdpa_f64";
    case DType::kBFloat16: return "sdpa_bf16";
    default: return "sdpa_f16";
  }
}

// Attended (query, key) pairs of one head.
uint64_t AttendedPairs(int64_t sq, int64_t skv, bool causal) {
  const uint64_t q = static_cast<uint64_t>(sq), k = static_cast<uint64_t>(skv);
  if (!causal) return q * k;
  if (q <= k) return q * (q + 1) / 2;
  return k * (k + 1) / 2 + (q - k) * k;
}

}  // namespace

Status Attention(const TensorRef& out, const TensorRef& q, const TensorRef& k,
                 const TensorRef& v, const TensorRef& mask, double scale, bool causal,
                 const TensorRef& lse) {
  TRN_ASSERT(q.ndim == 4 && k.ndim == 4 && v.ndim == 4 && out.ndim == 4,
             "attention operands must be 4-D");
  TRN_ASSERT(IsFloating(q.dtype) && k.dtype == q.dtype && v.dtype == q.dtype &&
                 out.dtype == q.dtype,
             "attention operands must share one floating dtype");
  const int64_t B = q.sizes[0], hq = q.sizes[1], sq = q.sizes[2], d = q.sizes[3];
  const int64_t hkv = k.sizes[1], skv = k.sizes[2], dv = v.sizes[3];
  TRN_ASSERT(hkv > 0 && hq % hkv == 0, "query heads must be a multiple of key heads");
  TRN_ASSERT(k.sizes[0] == B && k.sizes[3] == d && v.sizes[0] == B && v.sizes[1] == hkv &&
                 v.sizes[2] == skv,
             "key/value shapes must match the query");
  TRN_ASSERT(out.sizes[0] == B && out.sizes[1] == hq && out.sizes[2] == sq && out.sizes[3] == dv,
             "out must be [B, Hq, Sq, Dv]");
  if (mask.data != nullptr) {
    TRN_ASSERT(mask.ndim == 4 && mask.sizes[0] == B && mask.sizes[1] == hq &&
                   mask.sizes[2] == sq && mask.sizes[3] == skv,
               "mask must be broadcast to [B, Hq, Sq, Skv]");
    TRN_ASSERT(mask.dtype == DType::kBool || IsFloating(mask.dtype),
               "mask must be bool or floating");
  }
  if (lse.data != nullptr) {
    TRN_ASSERT(lse.ndim == 3 && lse.dtype == DType::kFloat32 && lse.sizes[0] == B &&
                   lse.sizes[1] == hq && lse.sizes[2] == sq,
               "lse must be float32 [B, Hq, Sq]");
  }
  if (B == 0 || hq == 0 || sq == 0) return Status::Ok();

  // Queries per head decide the path: the panel path's register tiles pay
  // for its K^T packing from a few rows up; decode (Sq < kPanelRows) runs
  // the row path on k/v in place (Note [fused attention]).
  constexpr int64_t kPanelRows = 4;
  const bool panels = sq >= kPanelRows;
  const int64_t dv_pad = (dv + 15) / 16 * 16;
  // Keys per block: on the panel path a panel and its values fill about
  // 48 KiB of L1/L2 (16-key multiples); the row path takes up to 8192 keys at
  // once, so that k and then v stream through memory in long runs (decode is
  // bandwidth-bound) instead of alternating every few KiB.
  const int64_t row_bytes = std::max<int64_t>(1, (d + dv_pad) * 4);
  // bfloat16 panels on AMX: blocks of up to 256 keys, whole 32-key tiles.
  const bool on_amx = panels && q.dtype == DType::kBFloat16 && d > 0 && dv > 0 &&
                      amx::Available();
  const int64_t block_k =
      on_amx   ? std::min<int64_t>(256, (skv + 31) / 32 * 32)
      : panels ? std::clamp<int64_t>(49152 / row_bytes / 16 * 16, 16, 256)
               : std::clamp<int64_t>((skv + 3) / 4 * 4, 16, 8192);
  std::vector<float> qbuf(attention::kTileQ * std::max<int64_t>(d, 1));
  std::vector<float> acc(attention::kTileQ * std::max<int64_t>(panels ? dv_pad : dv, 1));
  std::vector<float> m(attention::kTileQ), l(attention::kTileQ);
  std::vector<float> s((panels ? attention::kTileQ : 1) * block_k + attention::kPadLanes);
  std::vector<float> mb(block_k + attention::kPadLanes);
  KvRows krows, vrows;
  KvPanels kvp;
  KvTiles kvt;
  std::vector<uint16_t> pbuf(on_amx ? static_cast<size_t>(attention::kTileQ * block_k) : 0);
  // Row path: float32 rows with unit inner stride are read in place, and
  // bfloat16 ones when both k and v are (RowPath reads both as one type).
  const bool bf16_rows = !panels && k.dtype == DType::kBFloat16 && v.dtype == DType::kBFloat16 &&
                         k.strides[3] == 1 && v.strides[3] == 1;
  if (!panels && !bf16_rows && !(k.dtype == DType::kFloat32 && k.strides[3] == 1)) {
    krows.pack.resize(skv * d);
  }
  if (!panels && !bf16_rows && !(v.dtype == DType::kFloat32 && v.strides[3] == 1)) {
    vrows.pack.resize(skv * dv);
  }

  attention::HeadArgs a;
  a.dtype = q.dtype;
  a.q_row = q.strides[2];
  a.q_col = q.strides[3];
  a.out_row = out.strides[2];
  a.out_col = out.strides[3];
  a.lse_stride = lse.data != nullptr ? lse.strides[2] : 0;
  a.mask_dtype = mask.dtype;
  a.mask_row = mask.data != nullptr ? mask.strides[2] : 0;
  a.mask_col = mask.data != nullptr ? mask.strides[3] : 0;
  a.sq = sq;
  a.skv = skv;
  a.d = d;
  a.dv = dv;
  a.block_k = block_k;
  a.scale = static_cast<float>(scale);
  a.causal = causal;
  a.stream = DistinctBytes(k) + DistinctBytes(v) > attention::kStreamBytes;
  a.qbuf = qbuf.data();
  a.acc = acc.data();
  a.m = m.data();
  a.l = l.data();
  a.s = s.data();
  a.mb = mb.data();
  a.dv_pad = dv_pad;
  const auto head_fn = panels ? HWY_DYNAMIC_DISPATCH(attention::AttentionHeadPanels)
                              : HWY_DYNAMIC_DISPATCH(attention::AttentionHead);
  const int64_t group = hq / hkv;
  const int64_t item = static_cast<int64_t>(ItemSize(q.dtype));
  const int64_t mask_item = static_cast<int64_t>(ItemSize(mask.dtype));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t hk = 0; hk < hkv; ++hk) {
      if (on_amx) {
        kvt.Prepare(k, v, b, hk);
        a.k_tiles = kvt.k.data();
        a.v_tiles = kvt.v.data();
        a.k_block = amx::PackedBElems(d, 16);
        a.v_block = amx::PackedBElems(skv, 16);
        a.pbuf = pbuf.data();
      } else if (panels) {
        kvp.Prepare(k, v, b, hk, block_k, dv_pad);
        a.k = kvp.kt.data();
        a.ldk = block_k;
        a.v = kvp.v.data();
        a.ldv = dv_pad;
      } else {
        krows.Prepare(k, b, hk, bf16_rows);
        vrows.Prepare(v, b, hk, bf16_rows);
        a.k = krows.rows;
        a.ldk = krows.ld;
        a.v = vrows.rows;
        a.ldv = vrows.ld;
        a.k16 = krows.rows16;
        a.v16 = vrows.rows16;
      }
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        a.q = static_cast<const char*>(q.data) + (b * q.strides[0] + h * q.strides[1]) * item;
        a.out = static_cast<char*>(out.data) + (b * out.strides[0] + h * out.strides[1]) * item;
        a.lse = lse.data != nullptr
                    ? lse.ptr<float>() + b * lse.strides[0] + h * lse.strides[1]
                    : nullptr;
        a.mask = mask.data != nullptr ? static_cast<const char*>(mask.data) +
                                            (b * mask.strides[0] + h * mask.strides[1]) * mask_item
                                      : nullptr;
        head_fn(a);
      }
    }
  }
  return Status::Ok();
}

rt::KernelInfo DescribeAttention(const TensorRef& out, const TensorRef& q, const TensorRef& k,
                                 const TensorRef& v, const TensorRef& mask, bool causal,
                                 const TensorRef& lse, const char* aten_op) {
  rt::KernelInfo info;
  info.name = AttentionName(q.dtype);
  info.op = aten_op;
  info.engine = rt::Engine::kTensor;
  if (q.ndim == 4 && k.ndim == 4 && v.ndim == 4) {
    const uint64_t heads = static_cast<uint64_t>(q.sizes[0] * q.sizes[1]);
    info.flops = heads * AttendedPairs(q.sizes[2], k.sizes[2], causal) * 2 *
                 static_cast<uint64_t>(q.sizes[3] + v.sizes[3]);
  }
  info.bytes_read = DistinctBytes(q) + DistinctBytes(k) + DistinctBytes(v) + DistinctBytes(mask);
  info.bytes_written = DistinctBytes(out) + DistinctBytes(lse);
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
