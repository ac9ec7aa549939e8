// Per-target vector math and map loops for the elementwise kernels (Highway
// skeleton-inl.h pattern: re-included once per target by foreach_target).
// Only inline code lives here so any kernel family may include it.
//
// Note [Vector math ranges]: Highway 1.0.3's Exp is valid up to +104 and its
// Log on (0, FLT_MAX]; ExpF/LogF add torch's results outside those ranges
// (NaN in -> NaN, exp(+big) = inf, log(0) = -inf, log(<0) = NaN). Its Log1p
// is valid on [0, FLT_MAX] (Goldberg's log(1+x)*x/((1+x)-1), which also holds
// on (-1, 0)) and Expm1 up to +104; Log1pF/Expm1F add the same edges
// (log1p(-1) = -inf, log1p(+inf) = inf, expm1(-0) = -0).

#if defined(TRN_KERNELS_ELEMENTWISE_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef TRN_KERNELS_ELEMENTWISE_INL_H_
#undef TRN_KERNELS_ELEMENTWISE_INL_H_
#else
#define TRN_KERNELS_ELEMENTWISE_INL_H_
#endif

#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;
// Lanes of the widest float vector of any target: size of tail buffers.
constexpr size_t kMaxLanesF32 = HWY_MAX_BYTES / sizeof(float);

// Note [float16 conversion targets]: Highway's PromoteTo/DemoteTo for float16
// are the F16C instructions on AVX2 and AVX-512 (round to nearest even,
// infinities and NaN kept). On SSE4 and older targets Highway emulates them,
// and that emulation truncates instead of rounding and maps inf/NaN to finite
// values, so those targets keep convert.h's exact scalar functions.
#if HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C) && HWY_ARCH_X86
constexpr bool kHardwareF16 = true;
#else
constexpr bool kHardwareF16 = false;
#endif

// x rounded to bfloat16 (to nearest even; NaN quieted), as float32 bits whose
// low 16 bits are 0: convert.h's F32ToBF16 bit for bit, in the high half.
HWY_INLINE hn::Vec<hn::RebindToUnsigned<DF>> BF16HighBits(DF d, VF x) {
  const hn::RebindToUnsigned<DF> du;
  const auto u = hn::BitCast(du, x);
  const auto high = hn::Set(du, 0xffff0000u);
  const auto lsb = hn::And(hn::ShiftRight<16>(u), hn::Set(du, 1));
  const auto rounded = hn::And(hn::Add(hn::Add(u, hn::Set(du, 0x7fff)), lsb), high);
  const auto quiet = hn::Or(hn::And(u, high), hn::Set(du, 0x00400000u));
  return hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), quiet, rounded);
}

// x rounded to bfloat16 (BF16HighBits) into dst[0, Lanes(d)).
HWY_INLINE void StoreBF16(DF d, VF x, uint16_t* HWY_RESTRICT dst) {
  const hn::RebindToSigned<DF> di;
  const hn::Rebind<uint16_t, DF> du16;
  const auto bits = hn::ShiftRight<16>(BF16HighBits(d, x));
  hn::StoreU(hn::DemoteTo(du16, hn::BitCast(di, bits)), du16, dst);  // bits < 2^16
}

// 1/x for normal x to ~1e-7 relative (not 0 or inf): the hardware estimate
// and one Newton step, in place of a division (Intel's 512-bit divide issues
// once per ~8 cycles).
template <class D, class V>
HWY_INLINE V ReciprocalF(D d, V x) {
  const V r = hn::ApproximateReciprocal(x);
  return hn::Mul(r, hn::NegMulAdd(x, r, hn::Set(d, 2.0f)));
}

// Note [Fast exp]: e^x where the result is a normal float (softmax's x - max,
// sigmoid's -|x|, erfc's -z^2 + p, tanh's -2|x|, and torch.exp on every
// vector whose lanes all lie there) needs neither hwy's Exp's second scaling
// step (for subnormal results and its range up to +104) nor its edge checks.
// ExpCoreF: n = round(x log2 e) by the magic-number rounding of
// Exp2NonPositiveF (t's low mantissa bits hold n + 127, so t's bits << 23 are
// 2^n), r = x - n ln2 in two FMAs (Cody-Waite), e^r from a degree-6 fit on
// |r| <= ln2/2 (8.6e-8 relative in float32 Horner, as exp's ~1 ulp). 12 vector
// ops against hwy's Exp's ~27: on Intel, whose 512-bit ops issue on two
// ports, the activations are bound by them. With ReciprocalF in place of
// divisions, gelu, erf, silu, sigmoid and softmax over (2, 799, 688) float32
// took 25-35 % less (session 16); exp and tanh on their own: see ExpF, TanhF.
constexpr float kExpLo = -87.33654475f;  // ln(FLT_MIN)
constexpr float kExpHi = 88.37626266f;   // ln(2^127.5): n <= 127
template <class D, class V>
HWY_INLINE V ExpCoreF(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V magic = hn::Set(d, 12582912.0f + 127.0f);
  const V t = hn::MulAdd(x, hn::Set(d, 1.44269504088896341f), magic);
  const V n = hn::Sub(t, magic);
  V r = hn::NegMulAdd(n, hn::Set(d, 0.693145751953125f), x);
  r = hn::NegMulAdd(n, hn::Set(d, 1.428606765330187e-6f), r);
  V p = hn::Set(d, 0.0013752977829426527f);
  p = hn::MulAdd(p, r, hn::Set(d, 0.008366136811673641f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.04166920855641365f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.16666541993618011f));
  p = hn::MulAdd(p, r, hn::Set(d, 0.49999991059303284f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  p = hn::MulAdd(p, r, hn::Set(d, 1.0f));
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, t))));
}

// e^x for x <= 0 (also right up to kExpHi); 0 below ln(FLT_MIN) and for -inf.
template <class D, class V>
HWY_INLINE V ExpNonPositiveF(D d, V x) {
  const V lo = hn::Set(d, kExpLo);
  return hn::IfThenZeroElse(hn::Lt(x, lo), ExpCoreF(d, hn::Max(x, lo)));
}

// torch.exp: ExpCoreF on the lanes in its range (NaN is not), hwy's Exp on
// the others (subnormal results, overflow to inf), computed only for the
// vectors that have such lanes. Each lane's result depends on its x alone,
// so eager and a fused kernel's chunks agree bit for bit whatever the
// vectors' alignment.
template <class D, class V>
HWY_INLINE V ExpF(D d, V x) {
  const V lo = hn::Set(d, kExpLo), hi = hn::Set(d, kExpHi);
  const auto ok = hn::And(hn::Ge(x, lo), hn::Le(x, hi));
  const V core = ExpCoreF(d, hn::Min(hn::Max(x, lo), hi));
  if (HWY_LIKELY(hn::AllTrue(d, ok))) return core;
  const V y = hn::Exp(d, hn::Min(x, hn::Set(d, 100.0f)));  // exp(100) is already inf
  return hn::IfThenElse(ok, core, hn::IfThenElse(hn::IsNaN(x), x, y));
}

// tanh: x + x^3 P(x^2) below |x| = 0.75 (degree-5 fit, 0.8 ulp in float32
// Horner), else sign(x) (1 - 2e/(1 + e)) with e = e^-2|x| (little
// cancellation there: the quotient is < 0.37); 1 exactly once 2e rounds away. Both on |x|,
// x's sign copied last. No division (hwy's Tanh divides expm1's).
template <class D, class V>
HWY_INLINE V TanhF(D d, V x) {
  const V ax = hn::Abs(x);
  const V s = hn::Mul(x, x);
  V p = hn::Set(d, 0.0019096244359388947f);
  p = hn::MulAdd(p, s, hn::Set(d, -0.00793397892266512f));
  p = hn::MulAdd(p, s, hn::Set(d, 0.02161540277302265f));
  p = hn::MulAdd(p, s, hn::Set(d, -0.05393587052822113f));
  p = hn::MulAdd(p, s, hn::Set(d, 0.1333317905664444f));
  p = hn::MulAdd(p, s, hn::Set(d, -0.3333333134651184f));
  const V small = hn::MulAdd(hn::Mul(ax, s), p, ax);
  const V e = ExpCoreF(d, hn::Mul(hn::Min(ax, hn::Set(d, 20.0f)), hn::Set(d, -2.0f)));
  const V q = hn::Mul(hn::Add(e, e), ReciprocalF(d, hn::Add(hn::Set(d, 1.0f), e)));
  const V big = hn::Sub(hn::Set(d, 1.0f), q);
  // NaN fails the comparison and takes the polynomial, which keeps it; -0
  // keeps its sign through CopySign.
  return hn::CopySign(hn::IfThenElse(hn::Ge(ax, hn::Set(d, 0.75f)), big, small), x);
}

template <class D, class V>
HWY_INLINE V ExpNonPositiveNaNF(D d, V x) {
  return hn::IfThenElse(hn::IsNaN(x), x, ExpNonPositiveF(d, x));
}

// 2^x for x <= 0 (attention's base-2 scores, Note [exp2 softmax]); 0 below
// -126.5 (n = -127 is an exponent field of 0) and for -inf. t = x + 1.5 *
// 2^23 + 127 rounds x to an integer n held in t's low mantissa bits, biased by
// 127, so (t's bits << 23) is 2^n itself and t - magic is n; 2^(x - n) comes
// from a degree-5 fit on [-1/2, 1/2] (1.9e-7 relative in float32 Horner). 11
// vector ops (16 through the natural exponential's Cody-Waite route then):
// the exponentials are most of a bfloat16 attention's softmax at head dim 32.
template <class D, class V>
HWY_INLINE V Exp2NonPositiveF(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V magic = hn::Set(d, 12582912.0f + 127.0f);
  const V xc = hn::Max(x, hn::Set(d, -127.0f));
  const V t = hn::Add(xc, magic);
  const V f = hn::Sub(xc, hn::Sub(t, magic));
  V p = hn::Set(d, 0.0013264568988233805f);
  p = hn::MulAdd(p, f, hn::Set(d, 0.009671458974480629f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.05550733581185341f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.24022242426872253f));
  p = hn::MulAdd(p, f, hn::Set(d, 0.6931470036506653f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  return hn::Mul(p, hn::BitCast(d, hn::ShiftLeft<23>(hn::BitCast(di, t))));
}

// y = a logarithm of x with its pole at x == pole: -inf there, inf at +inf,
// NaN below the pole and for NaN.
template <class D, class V>
HWY_INLINE V LogEdges(D d, V x, V pole, V y) {
  const V inf = hn::Set(d, std::numeric_limits<float>::infinity());
  y = hn::IfThenElse(hn::Eq(x, pole), hn::Neg(inf), y);
  y = hn::IfThenElse(hn::Eq(x, inf), inf, y);
  const auto invalid = hn::Or(hn::Lt(x, pole), hn::IsNaN(x));
  return hn::IfThenElse(invalid, hn::Set(d, std::numeric_limits<float>::quiet_NaN()), y);
}

template <class D, class V>
HWY_INLINE V LogF(D d, V x) {
  return LogEdges(d, x, hn::Zero(d), hn::Log(d, x));
}

template <class D, class V>
HWY_INLINE V Log1pF(D d, V x) {
  return LogEdges(d, x, hn::Set(d, -1.0f), hn::Log1p(d, x));
}

// expm1 has x's sign everywhere, so CopySign keeps -0 (and tiny negatives).
template <class D, class V>
HWY_INLINE V Expm1F(D d, V x) {
  const V y = hn::CopySign(hn::Expm1(d, hn::Min(x, hn::Set(d, 100.0f))), x);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

// sigmoid(x) from e = e^-|x| (no overflow): q = 1/(1+e) for x >= 0, e/(1+e)
// below, from ReciprocalF and one correction of the quotient (q += (num -
// q den) / den): 2 more ops, 4 ulp -> 2 on AVX2's 12-bit estimate.
template <class D, class V>
HWY_INLINE V SigmoidF(D d, V x) {
  const V e = ExpNonPositiveF(d, hn::Neg(hn::Abs(x)));
  const V den = hn::Add(hn::Set(d, 1.0f), e);
  const V s = ReciprocalF(d, den);
  const V num = hn::IfThenElse(hn::Ge(x, hn::Zero(d)), hn::Set(d, 1.0f), e);
  const V q = hn::Mul(num, s);
  const V y = hn::MulAdd(hn::NegMulAdd(q, den, num), s, q);
  return hn::IfThenElse(hn::IsNaN(x), x, y);
}

template <class D, class V>
HWY_INLINE V SiluF(D d, V x) {
  return hn::Mul(x, SigmoidF(d, x));
}

// erfc(|z|) with relative error < 1.2e-7 (Chebyshev fit, Numerical Recipes
// erfcc); relative accuracy in the tail keeps gelu(x) accurate for x << 0.
// The polynomial in t runs in Estrin's order: four dependent multiply-adds,
// not Horner's nine (GELU was latency-bound on them).
template <class D, class V>
HWY_INLINE V ErfcAbsF(D d, V z) {
  // erfc is 0 in float32 from |z| = 11: the clamp keeps 1 + |z|/2 finite for ReciprocalF.
  const V az = hn::Min(hn::Abs(z), hn::Set(d, 64.0f));
  const V t = ReciprocalF(d, hn::MulAdd(hn::Set(d, 0.5f), az, hn::Set(d, 1.0f)));
  const V t2 = hn::Mul(t, t);
  const V t4 = hn::Mul(t2, t2);
  const V q01 = hn::MulAdd(hn::Set(d, 1.00002368f), t, hn::Set(d, -1.26551223f));
  const V q23 = hn::MulAdd(hn::Set(d, 0.09678418f), t, hn::Set(d, 0.37409196f));
  const V q45 = hn::MulAdd(hn::Set(d, 0.27886807f), t, hn::Set(d, -0.18628806f));
  const V q67 = hn::MulAdd(hn::Set(d, 1.48851587f), t, hn::Set(d, -1.13520398f));
  const V q89 = hn::MulAdd(hn::Set(d, 0.17087277f), t, hn::Set(d, -0.82215223f));
  const V r0 = hn::MulAdd(q23, t2, q01);
  const V r1 = hn::MulAdd(q67, t2, q45);
  const V p = hn::MulAdd(hn::Mul(t4, t4), q89, hn::MulAdd(r1, t4, r0));
  const V y = hn::Mul(t, ExpNonPositiveF(d, hn::NegMulAdd(az, az, p)));
  return hn::IfThenElse(hn::IsNaN(z), z, y);  // the clamp dropped NaN
}

// erf(z) = sign(z) * (1 - erfc(|z|)).
template <class D, class V>
HWY_INLINE V ErfF(D d, V z) {
  const V r = hn::Sub(hn::Set(d, 1.0f), ErfcAbsF(d, z));
  return hn::CopySign(r, z);
}

// erf(z) accurate in relative terms near 0 too: the Taylor series of erf for
// |z| < 0.5 (7 terms, truncation < 3e-8 relative), ErfF above that (where
// 1 - erfc does not cancel).
template <class D, class V>
HWY_INLINE V ErfPreciseF(D d, V z) {
  const V t = hn::Mul(z, z);
  V p = hn::Set(d, 0.00012055332981789664f);
  p = hn::MulAdd(p, t, hn::Set(d, -0.0008548327023450853f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.005223977625442188f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.026866170645131252f));
  p = hn::MulAdd(p, t, hn::Set(d, 0.11283791670955126f));
  p = hn::MulAdd(p, t, hn::Set(d, -0.37612638903183754f));
  p = hn::MulAdd(p, t, hn::Set(d, 1.1283791670955126f));
  const V small = hn::Mul(p, z);
  return hn::IfThenElse(hn::Lt(hn::Abs(z), hn::Set(d, 0.5f)), small, ErfF(d, z));
}

// gelu(x) = x/2 * (1 + erf(x/sqrt2)) = x/2 * erfc(-x/sqrt2), evaluated so that
// neither tail cancels.
template <class D, class V>
HWY_INLINE V GeluF(D d, V x) {
  const V e = ErfcAbsF(d, hn::Mul(x, hn::Set(d, 0.70710678118654752f)));
  const V factor = hn::IfThenElse(hn::Ge(x, hn::Zero(d)), hn::Sub(hn::Set(d, 2.0f), e), e);
  return hn::Mul(hn::Mul(hn::Set(d, 0.5f), x), factor);
}

// gelu(approximate="tanh"): x/2 * (1 + tanh(u)) = x * sigmoid(2u).
template <class D, class V>
HWY_INLINE V GeluTanhF(D d, V x) {
  const V x3 = hn::Mul(hn::Mul(x, x), x);
  const V u2 = hn::Mul(hn::Set(d, 1.5957691216057308f), hn::MulAdd(hn::Set(d, 0.044715f), x3, x));
  return hn::Mul(x, SigmoidF(d, u2));
}

template <class D, class V>
HWY_INLINE V MaxNaNF(D, V a, V b) {  // torch.maximum: NaN wins
  return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::Add(a, b), hn::Max(a, b));
}
template <class D, class V>
HWY_INLINE V MinNaNF(D, V a, V b) {
  return hn::IfThenElse(hn::Or(hn::IsNaN(a), hn::IsNaN(b)), hn::Add(a, b), hn::Min(a, b));
}

// out[i] = f(d, in[i]) for i < n; the tail runs through a full-width buffer.
template <class F>
HWY_INLINE void MapUnary(const float* in, float* out, size_t n, const F& f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, in + i)), d, out + i);
  if (i == n) return;
  HWY_ALIGN float buf[kMaxLanesF32] = {};
  for (size_t j = 0; i + j < n; ++j) buf[j] = in[i + j];
  hn::Store(f(d, hn::Load(d, buf)), d, buf);
  for (size_t j = 0; i + j < n; ++j) out[i + j] = buf[j];
}

// out[i] = f(d, a[i], b[i]); an operand flagged scalar is a[0] for every i.
// out may alias an input (in-place ops).
template <class F>
HWY_INLINE void MapBinary(const float* a, bool a_scalar, const float* b, bool b_scalar,
                          float* out, size_t n, const F& f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (!a_scalar && !b_scalar) {
    for (; i + N <= n; i += N) {
      hn::StoreU(f(d, hn::LoadU(d, a + i), hn::LoadU(d, b + i)), d, out + i);
    }
  } else if (a_scalar && !b_scalar) {
    const VF va = hn::Set(d, a[0]);
    for (; i + N <= n; i += N) hn::StoreU(f(d, va, hn::LoadU(d, b + i)), d, out + i);
  } else if (!a_scalar && b_scalar) {
    const VF vb = hn::Set(d, b[0]);
    for (; i + N <= n; i += N) hn::StoreU(f(d, hn::LoadU(d, a + i), vb), d, out + i);
  } else {  // both broadcast: one value for the whole run
    const float v = hn::GetLane(f(d, hn::Set(d, a[0]), hn::Set(d, b[0])));
    for (; i < n; ++i) out[i] = v;
    return;
  }
  if (i == n) return;
  HWY_ALIGN float ba[kMaxLanesF32] = {};
  HWY_ALIGN float bb[kMaxLanesF32] = {};
  for (size_t j = 0; i + j < n; ++j) {
    ba[j] = a_scalar ? a[0] : a[i + j];
    bb[j] = b_scalar ? b[0] : b[i + j];
  }
  hn::Store(f(d, hn::Load(d, ba), hn::Load(d, bb)), d, ba);
  for (size_t j = 0; i + j < n; ++j) out[i + j] = ba[j];
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // include guard toggle
