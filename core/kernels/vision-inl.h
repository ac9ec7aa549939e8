// Row kernels of the pools, compiled once per Highway target. Included by
// vision.cc through hwy/foreach_target.h (Note [max pool layout] there).

#if defined(TRN_KERNELS_VISION_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRN_KERNELS_VISION_INL_H_
#undef TRN_KERNELS_VISION_INL_H_
#else
#define TRN_KERNELS_VISION_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::vision::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// One output row of a max pool: best[x] = max over i < nwin of src[i][x] for
// x < n rounded up to an even number of vectors (src rows are readable
// that far). A later
// value wins when strictly greater or NaN (torch's rule); slot[x] (if
// non-null) gets win[i] of the winner, or -1 when nothing beat -inf.
void MaxPoolRow(const float* const* src, const int32_t* win, size_t nwin, size_t n, float* best,
                int32_t* slot) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  // Two vectors per pass: each compare-select chain waits on the previous
  // cell's result, so a second independent chain fills the latency.
  for (size_t x = 0; x < n; x += 2 * N) {
    auto b0 = hn::Set(d, -std::numeric_limits<float>::infinity()), b1 = b0;
    if (slot == nullptr) {
      for (size_t i = 0; i < nwin; ++i) {
        const auto v0 = hn::LoadU(d, src[i] + x), v1 = hn::LoadU(d, src[i] + x + N);
        b0 = hn::IfThenElse(hn::Or(hn::Gt(v0, b0), hn::IsNaN(v0)), v0, b0);
        b1 = hn::IfThenElse(hn::Or(hn::Gt(v1, b1), hn::IsNaN(v1)), v1, b1);
      }
    } else {
      auto k0 = hn::Set(di, -1), k1 = k0;
      for (size_t i = 0; i < nwin; ++i) {
        const auto v0 = hn::LoadU(d, src[i] + x), v1 = hn::LoadU(d, src[i] + x + N);
        const auto t0 = hn::Or(hn::Gt(v0, b0), hn::IsNaN(v0));
        const auto t1 = hn::Or(hn::Gt(v1, b1), hn::IsNaN(v1));
        b0 = hn::IfThenElse(t0, v0, b0);
        b1 = hn::IfThenElse(t1, v1, b1);
        const auto ki = hn::Set(di, win[i]);
        k0 = hn::IfThenElse(hn::RebindMask(di, t0), ki, k0);
        k1 = hn::IfThenElse(hn::RebindMask(di, t1), ki, k1);
      }
      hn::StoreU(k0, di, slot + x);
      hn::StoreU(k1, di, slot + x + N);
    }
    hn::StoreU(b0, d, best + x);
    hn::StoreU(b1, d, best + x + N);
  }
}

// dst[x] = src[idx[x]] for x < n (nearest upsampling along W).
void GatherRow(const float* HWY_RESTRICT src, const int32_t* HWY_RESTRICT idx, size_t n,
               float* HWY_RESTRICT dst) {
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const size_t N = hn::Lanes(d);
  size_t x = 0;
  for (; x + N <= n; x += N) {
    hn::StoreU(hn::GatherIndex(d, src, hn::LoadU(di, idx + x)), d, dst + x);
  }
  for (; x < n; ++x) dst[x] = src[idx[x]];
}

// even[j] = src[2j], odd[j] = src[2j + 1] for j < n (stride-2 pools).
void Deinterleave2(const float* HWY_RESTRICT src, size_t n, float* HWY_RESTRICT even,
                   float* HWY_RESTRICT odd) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  size_t j = 0;
  for (; j + N <= n; j += N) {
    hn::Vec<decltype(d)> a, b;
    hn::LoadInterleaved2(d, src + 2 * j, a, b);
    hn::StoreU(a, d, even + j);
    hn::StoreU(b, d, odd + j);
  }
  for (; j < n; ++j) {
    even[j] = src[2 * j];
    odd[j] = src[2 * j + 1];
  }
}

}  // namespace trn::kernels::vision::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TRN_KERNELS_VISION_INL_H_
