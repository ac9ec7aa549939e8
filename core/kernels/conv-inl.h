// Row kernels of the convolution (depthwise taps, the epilogue's activation),
// compiled once per Highway target.
// Included by conv.cc through hwy/foreach_target.h (Note [conv as GEMM]).

#if defined(TRN_KERNELS_CONV_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRN_KERNELS_CONV_INL_H_
#undef TRN_KERNELS_CONV_INL_H_
#else
#define TRN_KERNELS_CONV_INL_H_
#endif

#include <cstddef>

#include "core/kernels/elementwise-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::conv::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// dst[x] = init + sum_t wt[t] * src[t][x] for x < n rounded up to an even
// number of vectors (src rows are readable that far); the sum stays in
// registers over all taps, two independent chains per pass.
void DepthwiseRow(const float* const* src, const float* wt, size_t ntaps, size_t n, float init,
                  float* dst) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  for (size_t x = 0; x < n; x += 2 * N) {
    auto a0 = hn::Set(d, init), a1 = a0;
    for (size_t t = 0; t < ntaps; ++t) {
      const auto w = hn::Set(d, wt[t]);
      a0 = hn::MulAdd(w, hn::LoadU(d, src[t] + x), a0);
      a1 = hn::MulAdd(w, hn::LoadU(d, src[t] + x + N), a1);
    }
    hn::StoreU(a0, d, dst + x);
    hn::StoreU(a1, d, dst + x + N);
  }
}

// x[i] = min(max(x[i], lo), hi) in place for i < n: the conv epilogue's
// relu / clamp. Compares and selects, so NaN stays NaN and lo > hi gives hi.
void ClampRow(float* x, size_t n, float lo, float hi) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  const auto vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    auto v = hn::LoadU(d, x + i);
    v = hn::IfThenElse(hn::Lt(v, vlo), vlo, v);
    v = hn::IfThenElse(hn::Gt(v, vhi), vhi, v);
    hn::StoreU(v, d, x + i);
  }
  for (; i < n; ++i) {
    float v = x[i] < lo ? lo : x[i];
    x[i] = v > hi ? hi : v;
  }
}

// x[i] = gelu(x[i]) (erf form) or silu(x[i]) in place for i < n: the conv
// epilogue's smooth activations, the elementwise kernels' vector math.
void SmoothActivationRow(float* x, size_t n, bool gelu) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  namespace kx = trn::kernels::HWY_NAMESPACE;
  auto f = [&](hn::Vec<decltype(d)> v) { return gelu ? kx::GeluF(d, v) : kx::SiluF(d, v); };
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(hn::LoadU(d, x + i)), d, x + i);
  if (i == n) return;
  HWY_ALIGN float tail[hn::MaxLanes(d)] = {};
  for (size_t j = i; j < n; ++j) tail[j - i] = x[j];
  hn::Store(f(hn::Load(d, tail)), d, tail);
  for (size_t j = i; j < n; ++j) x[j] = tail[j - i];
}

// runs rows of n floats, src rows src_step apart into dst rows dst_step apart:
// im2col's row copies (Note [im2col from phase planes]), a few dozen floats
// each, without a memmove call per row.
void CopyRuns(const float* src, ptrdiff_t src_step, float* dst, ptrdiff_t dst_step, size_t runs,
              size_t n) {
  const hn::ScalableTag<float> d;
  const size_t N = hn::Lanes(d);
  for (size_t r = 0; r < runs; ++r, src += src_step, dst += dst_step) {
    size_t i = 0;
    for (; i + N <= n; i += N) hn::StoreU(hn::LoadU(d, src + i), d, dst + i);
    for (; i < n; ++i) dst[i] = src[i];
  }
}

}  // namespace trn::kernels::conv::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // TRN_KERNELS_CONV_INL_H_
