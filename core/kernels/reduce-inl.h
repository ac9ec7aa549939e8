// Per-target reductions of contiguous float32 runs (Highway skeleton-inl.h
// pattern): horizontal (a run into one value) and vertical (a run into a row
// of accumulators). Sums keep four vector accumulators, which also bounds the
// rounding error growth like a short pairwise sum. Max/min propagate NaN.

#if defined(TRN_KERNELS_REDUCE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRN_KERNELS_REDUCE_INL_H_
#undef TRN_KERNELS_REDUCE_INL_H_
#else
#define TRN_KERNELS_REDUCE_INL_H_
#endif

#include <cmath>
#include <cstddef>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

HWY_INLINE float SumRun(const float* p, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  auto s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    s0 = hn::Add(s0, hn::LoadU(d, p + i));
    s1 = hn::Add(s1, hn::LoadU(d, p + i + N));
    s2 = hn::Add(s2, hn::LoadU(d, p + i + 2 * N));
    s3 = hn::Add(s3, hn::LoadU(d, p + i + 3 * N));
  }
  for (; i + N <= n; i += N) s0 = hn::Add(s0, hn::LoadU(d, p + i));
  float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
  for (; i < n; ++i) sum += p[i];
  return sum;
}

// Max (kMax) or min of a run; NaN if any element is NaN. n > 0.
template <bool kMax>
HWY_INLINE float ExtremumRun(const float* p, size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  float r = p[0];
  size_t i = 0;
  if (n >= N) {
    auto acc = hn::LoadU(d, p);
    auto nan = hn::IsNaN(acc);
    for (i = N; i + N <= n; i += N) {
      const auto v = hn::LoadU(d, p + i);
      acc = kMax ? hn::Max(acc, v) : hn::Min(acc, v);
      nan = hn::Or(nan, hn::IsNaN(v));
    }
    if (!hn::AllFalse(d, nan)) return NAN;
    r = hn::GetLane(kMax ? hn::MaxOfLanes(d, acc) : hn::MinOfLanes(d, acc));
  }
  for (; i < n; ++i) {
    if (std::isnan(p[i])) return NAN;
    r = kMax ? (p[i] > r ? p[i] : r) : (p[i] < r ? p[i] : r);
  }
  return r;
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
