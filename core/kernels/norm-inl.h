// Row kernels of rms_norm, layer_norm and group_norm on contiguous f32 rows, compiled once
// per Highway target. Included by norm.cc through hwy/foreach_target.h.
//
// Note [fused rms_norm]
// A row is read twice and written once: the sum pass accumulates squares in
// f32 lanes (independent accumulators hide the FMA latency), the scale pass
// multiplies by rstd * weight. Rows are a few KiB to a few tens of KiB, so the
// scale pass reads the row from L1/L2 and DRAM sees one read and one write per
// element, like a copy. Two refinements keep it near copy bandwidth:
// - the scale pass of row r runs fused with the sum pass of row r+1, so DRAM
//   reads of the next row overlap the writes of this one (no read-only and
//   write-only phases taking turns);
// - outputs far larger than the last-level cache use non-temporal stores: a
//   normal store first reads the destination line (read-for-ownership), a
//   third memory stream a copy does not pay.

#if defined(TRN_KERNELS_NORM_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRN_KERNELS_NORM_INL_H_
#undef TRN_KERNELS_NORM_INL_H_
#else
#define TRN_KERNELS_NORM_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/cache_control.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::norm::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Sum of in[i] (or in[i] - shift, squared when kSquare) over n elements.
template <bool kSquare>
HWY_INLINE float RowSum(const float* HWY_RESTRICT in, size_t n, float shift) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, shift);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  const auto term = [&](const float* p, decltype(s0) acc) {
    const auto x = hn::Sub(hn::LoadU(d, p), vs);
    return kSquare ? hn::MulAdd(x, x, acc) : hn::Add(x, acc);
  };
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = term(in + i, s0);
    s1 = term(in + i + N, s1);
    s2 = term(in + i + 2 * N, s2);
    s3 = term(in + i + 3 * N, s3);
  }
  for (; i + N <= n; i += N) s0 = term(in + i, s0);
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) {
    const float x = in[i] - shift;
    sum += kSquare ? x * x : x;
  }
  return sum;
}

// out[i] = (in[i] - shift) * scale * (w ? w[i] : 1) + (b ? b[i] : 0).
// stream: non-temporal stores (Note [fused rms_norm]); no effect unless out is
// vector-aligned after a scalar head.
HWY_INLINE void RowScale(const float* HWY_RESTRICT in, const float* HWY_RESTRICT w,
                         const float* HWY_RESTRICT b, float* out, size_t n, float shift,
                         float scale, bool stream) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto vs = hn::Set(d, shift);
  const auto vr = hn::Set(d, scale);
  const auto one = [&](size_t i) {
    auto y = hn::Mul(hn::Sub(hn::LoadU(d, in + i), vs), vr);
    if (w) y = hn::Mul(y, hn::LoadU(d, w + i));
    if (b) y = hn::Add(y, hn::LoadU(d, b + i));
    return y;
  };
  const auto scalar = [&](size_t i) {
    float y = (in[i] - shift) * scale;
    if (w) y *= w[i];
    if (b) y += b[i];
    out[i] = y;
  };
  size_t i = 0;
  if (stream) {
    const size_t align = N * sizeof(float);
    for (; i < n && reinterpret_cast<uintptr_t>(out + i) % align != 0; ++i) scalar(i);
    for (; i + N <= n; i += N) hn::Stream(one(i), d, out + i);
  } else {
    for (; i + 2 * N <= n; i += 2 * N) {
      const auto y0 = one(i);
      const auto y1 = one(i + N);
      hn::StoreU(y0, d, out + i);
      hn::StoreU(y1, d, out + i + N);
    }
    for (; i + N <= n; i += N) hn::StoreU(one(i), d, out + i);
  }
  for (; i < n; ++i) scalar(i);
}

// Writes out = in * scale * w (w optional) and returns sum(next^2) (0 without
// next): the scale pass of one row fused with the sum pass of the following
// one, so DRAM reads of row r+1 overlap the writes of row r
// (Note [fused rms_norm]). Rows are n elements; out may alias in.
HWY_INLINE float ScaleRowSumNext(const float* in, const float* HWY_RESTRICT w, float* out,
                                 size_t n, float scale, bool stream,
                                 const float* HWY_RESTRICT next) {
  if (next == nullptr) {
    RowScale(in, w, nullptr, out, n, 0.0f, scale, stream);
    return 0.0f;
  }
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto vr = hn::Set(d, scale);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d);
  float tail_sum = 0.0f;
  const auto scalar = [&](size_t i) {
    tail_sum += next[i] * next[i];
    out[i] = w ? in[i] * scale * w[i] : in[i] * scale;
  };
  const auto vec = [&](size_t i, decltype(s0)& acc) {
    const auto x = hn::LoadU(d, next + i);
    acc = hn::MulAdd(x, x, acc);
    auto y = hn::Mul(hn::LoadU(d, in + i), vr);
    return w ? hn::Mul(y, hn::LoadU(d, w + i)) : y;
  };
  size_t i = 0;
  if (stream) {
    const size_t align = N * sizeof(float);
    for (; i < n && reinterpret_cast<uintptr_t>(out + i) % align != 0; ++i) scalar(i);
    for (; i + 2 * N <= n; i += 2 * N) {
      hn::Stream(vec(i, s0), d, out + i);
      hn::Stream(vec(i + N, s1), d, out + i + N);
    }
    for (; i + N <= n; i += N) hn::Stream(vec(i, s0), d, out + i);
  } else {
    for (; i + 2 * N <= n; i += 2 * N) {
      hn::StoreU(vec(i, s0), d, out + i);
      hn::StoreU(vec(i + N, s1), d, out + i + N);
    }
    for (; i + N <= n; i += N) hn::StoreU(vec(i, s0), d, out + i);
  }
  for (; i < n; ++i) scalar(i);
  return hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1))) + tail_sum;
}

// rms_norm of `count` rows of n contiguous f32 (in[r] -> out[r]); rstd[r]
// receives each row's rsqrt(mean(x^2) + eps). w (optional) has n elements.
void RmsNormRows(const float* const* in, float* const* out, size_t count, const float* w,
                 size_t n, float eps, bool stream, float* rstd) {
  if (count == 0) return;
  float sum_sq = RowSum<true>(in[0], n, 0.0f);
  for (size_t r = 0; r < count; ++r) {
    rstd[r] = 1.0f / std::sqrt(sum_sq / static_cast<float>(n) + eps);
    sum_sq = ScaleRowSumNext(in[r], w, out[r], n, rstd[r], stream,
                             r + 1 < count ? in[r + 1] : nullptr);
  }
}

// One row of layer_norm (two-pass mean / biased variance in f32); writes the
// row's mean and rstd. out may alias in.
void LayerNormRow(const float* in, const float* w, const float* b, float* out, size_t n,
                  float eps, float* mean_rstd) {
  const float mean = RowSum<false>(in, n, 0.0f) / static_cast<float>(n);
  const float var = RowSum<true>(in, n, mean) / static_cast<float>(n);
  const float rstd = 1.0f / std::sqrt(var + eps);
  RowScale(in, w, b, out, n, mean, rstd, false);
  mean_rstd[0] = mean;
  mean_rstd[1] = rstd;
}

// group_norm over one group of `channels` contiguous planes of hw floats:
// out = (in - mean) * rstd * w[c] + b[c] as one multiply-add per element with
// per-channel scale and shift (w, b may be null). mean_rstd receives both.
// out may be in (a converted half-precision group).
void GroupNormGroup(const float* in, float* out, size_t channels, size_t hw, const float* w,
                    const float* b, float eps, float* mean_rstd) {
  const size_t n = channels * hw;
  const float mean = RowSum<false>(in, n, 0.0f) / static_cast<float>(n);
  const float var = RowSum<true>(in, n, mean) / static_cast<float>(n);
  const float rstd = 1.0f / std::sqrt(var + eps);
  const DF d;
  const size_t N = hn::Lanes(d);
  for (size_t c = 0; c < channels; ++c) {
    const float sc = rstd * (w ? w[c] : 1.0f);
    const float sh = (b ? b[c] : 0.0f) - mean * sc;
    const float* x = in + c * hw;
    float* y = out + c * hw;
    const auto vsc = hn::Set(d, sc), vsh = hn::Set(d, sh);
    size_t j = 0;
    for (; j + N <= hw; j += N) hn::StoreU(hn::MulAdd(hn::LoadU(d, x + j), vsc, vsh), d, y + j);
    for (; j < hw; ++j) y[j] = x[j] * sc + sh;
  }
  mean_rstd[0] = mean;
  mean_rstd[1] = rstd;
}

// Orders the streamed stores of a kernel before it returns.
void StreamFence() { hwy::FlushStream(); }

// Note [Weight norm in chunks] (norm.cc): float32 squares summed in float64,
// VectorNorm's kSumSqF32 (acc[i] += x[i]^2, and the sum of all x[i]^2).
HWY_NOINLINE void AddSquaresF64(const float* HWY_RESTRICT x, double* HWY_RESTRICT acc,
                                size_t n) {
  size_t i = 0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t N = hn::Lanes(dd);
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(df, x + i);
    hn::StoreU(hn::Add(hn::LoadU(dd, acc + i), hn::PromoteTo(dd, hn::Mul(v, v))), dd, acc + i);
  }
#endif
  for (; i < n; ++i) acc[i] += static_cast<double>(x[i] * x[i]);
}

HWY_NOINLINE double SumSquaresF64(const float* HWY_RESTRICT x, size_t n) {
  size_t i = 0;
  double s = 0.0;
#if HWY_HAVE_FLOAT64
  const hn::ScalableTag<double> dd;
  const hn::Rebind<float, decltype(dd)> df;
  const size_t N = hn::Lanes(dd);
  auto a0 = hn::Zero(dd), a1 = hn::Zero(dd);
  for (; i + 2 * N <= n; i += 2 * N) {
    const auto v0 = hn::LoadU(df, x + i), v1 = hn::LoadU(df, x + i + N);
    a0 = hn::Add(a0, hn::PromoteTo(dd, hn::Mul(v0, v0)));
    a1 = hn::Add(a1, hn::PromoteTo(dd, hn::Mul(v1, v1)));
  }
  s = hn::GetLane(hn::SumOfLanes(dd, hn::Add(a0, a1)));
#endif
  for (; i < n; ++i) s += static_cast<double>(x[i] * x[i]);
  return s;
}

}  // namespace trn::kernels::norm::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TRN_KERNELS_NORM_INL_H_
