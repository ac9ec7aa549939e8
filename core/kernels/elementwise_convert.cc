// Contiguous float16/bfloat16 <-> float32 conversion runs for convert.h's
// chunk loaders (every 16-bit float elementwise kernel goes through them).
// bfloat16 is integer arithmetic (a shift; round-to-nearest-even with a
// quiet NaN, as F32ToBF16) and vectorized on every target.
//
// Note [float16 conversion targets] (elementwise-inl.h) picks the float16 paths.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/elementwise_convert.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/kernels/convert.h"
#include "core/kernels/elementwise-inl.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;


void F16ToF32Run(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  if constexpr (kHardwareF16) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    const hwy::float16_t* s = reinterpret_cast<const hwy::float16_t*>(src);
    for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, s + i)), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = internal::F16ToF32(src[i]);
}

void F32ToF16Run(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  if constexpr (kHardwareF16) {
    const hn::ScalableTag<float> df;
    const hn::Rebind<hwy::float16_t, decltype(df)> dh;
    const int64_t N = static_cast<int64_t>(hn::Lanes(df));
    hwy::float16_t* d = reinterpret_cast<hwy::float16_t*>(dst);
    for (; i + N <= n; i += N) hn::StoreU(hn::DemoteTo(dh, hn::LoadU(df, src + i)), dh, d + i);
  }
  for (; i < n; ++i) dst[i] = internal::F32ToF16(src[i]);
}

void BF16ToF32Run(const uint16_t* src, float* dst, int64_t n) {
  const hn::ScalableTag<float> df;
  const hn::RebindToUnsigned<decltype(df)> du;
  const hn::Rebind<uint16_t, decltype(df)> du16;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    const auto bits = hn::ShiftLeft<16>(hn::PromoteTo(du, hn::LoadU(du16, src + i)));
    hn::StoreU(hn::BitCast(df, bits), df, dst + i);
  }
  for (; i < n; ++i) dst[i] = internal::BF16ToF32(src[i]);
}

void F32ToBF16Run(const float* src, uint16_t* dst, int64_t n) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) StoreBF16(df, hn::LoadU(df, src + i), dst + i);
  for (; i < n; ++i) dst[i] = internal::F32ToBF16(src[i]);
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace trn::kernels {

HWY_EXPORT(F16ToF32Run);
HWY_EXPORT(F32ToF16Run);
HWY_EXPORT(BF16ToF32Run);
HWY_EXPORT(F32ToBF16Run);

namespace internal {

void F16ToF32Contiguous(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(F16ToF32Run)(src, dst, n);
}
void F32ToF16Contiguous(const float* src, uint16_t* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToF16Run)(src, dst, n);
}

void BF16ToF32Contiguous(const uint16_t* src, float* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(BF16ToF32Run)(src, dst, n);
}
void F32ToBF16Contiguous(const float* src, uint16_t* dst, int64_t n) {
  HWY_DYNAMIC_DISPATCH(F32ToBF16Run)(src, dst, n);
}

}  // namespace internal
}  // namespace trn::kernels
#endif  // HWY_ONCE
