// Elementwise kernels: Binary, BinaryScalar, Unary, Where, Fill, Copy and
// their Describe* functions. Floating dtypes run in float32 chunks through the
// Highway loops below (runtime-dispatched per target); int32/int64/bool run
// exact templated loops.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/elementwise.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/common/assert.h"
#include "core/kernels/elementwise-inl.h"
#include "core/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {

void BinaryF32(BinaryOp op, const float* a, bool a_scalar, const float* b, bool b_scalar,
               float* out, size_t n, float alpha) {
  auto map = [&](const auto& f) { MapBinary(a, a_scalar, b, b_scalar, out, n, f); };
  // Comparisons produce 1.0f / 0.0f; the store to kBool keeps nonzero = true.
  auto flag_if = [](auto d, auto mask) { return hn::IfThenElseZero(mask, hn::Set(d, 1.0f)); };
  auto flag_unless = [](auto d, auto mask) { return hn::IfThenZeroElse(mask, hn::Set(d, 1.0f)); };
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub: {
      const float s = op == BinaryOp::kSub ? -alpha : alpha;
      if (s == 1.0f) {
        map([](auto, auto x, auto y) { return hn::Add(x, y); });
      } else if (s == -1.0f) {
        map([](auto, auto x, auto y) { return hn::Sub(x, y); });
      } else {
        map([s](auto d, auto x, auto y) { return hn::MulAdd(hn::Set(d, s), y, x); });
      }
      return;
    }
    case BinaryOp::kMul: return map([](auto, auto x, auto y) { return hn::Mul(x, y); });
    case BinaryOp::kDiv: return map([](auto, auto x, auto y) { return hn::Div(x, y); });
    case BinaryOp::kMaximum: return map([](auto d, auto x, auto y) { return MaxNaNF(d, x, y); });
    case BinaryOp::kMinimum: return map([](auto d, auto x, auto y) { return MinNaNF(d, x, y); });
    case BinaryOp::kGlu:
      return map([](auto d, auto x, auto y) { return hn::Mul(x, SigmoidF(d, y)); });
    // NaN fails x > 0 and stays NaN through x * y, as torch's.
    case BinaryOp::kPrelu:
      return map([](auto d, auto x, auto y) {
        return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), x, hn::Mul(x, y));
      });
    case BinaryOp::kEq: return map([&](auto d, auto x, auto y) { return flag_if(d, hn::Eq(x, y)); });
    // Not(Eq) so that NaN != NaN is true (x86 NEQ_OQ would say false).
    case BinaryOp::kNe:
      return map([&](auto d, auto x, auto y) { return flag_unless(d, hn::Eq(x, y)); });
    case BinaryOp::kLt: return map([&](auto d, auto x, auto y) { return flag_if(d, hn::Lt(x, y)); });
    case BinaryOp::kLe: return map([&](auto d, auto x, auto y) { return flag_if(d, hn::Le(x, y)); });
    case BinaryOp::kGt: return map([&](auto d, auto x, auto y) { return flag_if(d, hn::Gt(x, y)); });
    case BinaryOp::kGe: return map([&](auto d, auto x, auto y) { return flag_if(d, hn::Ge(x, y)); });
    case BinaryOp::kLogicalAnd:
      return map([&](auto d, auto x, auto y) {
        const auto z = hn::Zero(d);
        return flag_unless(d, hn::Or(hn::Eq(x, z), hn::Eq(y, z)));
      });
    case BinaryOp::kLogicalOr:
      return map([&](auto d, auto x, auto y) {
        const auto z = hn::Zero(d);
        return flag_unless(d, hn::And(hn::Eq(x, z), hn::Eq(y, z)));
      });
    case BinaryOp::kLogicalXor:
      return map([&](auto d, auto x, auto y) {
        const auto z = hn::Zero(d);
        return flag_if(d, hn::Xor(hn::Eq(x, z), hn::Eq(y, z)));
      });
    case BinaryOp::kPow:  // scalar std::pow, see BinaryImpl
    case BinaryOp::kDivTrunc:
    case BinaryOp::kDivFloor:
    case BinaryOp::kRemainder:
    case BinaryOp::kFmod:
    case BinaryOp::kAtan2:
    case BinaryOp::kHypot:
    case BinaryOp::kLogAddExp:
    case BinaryOp::kLogAddExp2:
    case BinaryOp::kCopysign:
    case BinaryOp::kXlogy:
    case BinaryOp::kFmax:
    case BinaryOp::kFmin:
    case BinaryOp::kHeaviside:
    case BinaryOp::kBitwiseAnd:
    case BinaryOp::kBitwiseOr:
    case BinaryOp::kBitwiseXor:
    case BinaryOp::kShiftLeft:
    case BinaryOp::kShiftRight:
      break;  // elementwise_math.cc
  }
  TRN_ASSERT(false, "BinaryF32: op has no vector loop");
}

void UnaryF32(UnaryOp op, const float* in, float* out, size_t n) {
  auto map = [&](const auto& f) { MapUnary(in, out, n, f); };
  switch (op) {
    case UnaryOp::kNeg: return map([](auto, auto x) { return hn::Neg(x); });
    case UnaryOp::kAbs: return map([](auto, auto x) { return hn::Abs(x); });
    // x < 0 ? 0 : x keeps NaN (Max(x, 0) would drop it on x86).
    case UnaryOp::kRelu:
      return map([](auto d, auto x) { return hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x); });
    case UnaryOp::kExp: return map([](auto d, auto x) { return ExpF(d, x); });
    case UnaryOp::kLog: return map([](auto d, auto x) { return LogF(d, x); });
    case UnaryOp::kSqrt: return map([](auto, auto x) { return hn::Sqrt(x); });
    case UnaryOp::kRsqrt:
      return map([](auto d, auto x) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x)); });
    case UnaryOp::kReciprocal:
      return map([](auto d, auto x) { return hn::Div(hn::Set(d, 1.0f), x); });
    case UnaryOp::kSigmoid: return map([](auto d, auto x) { return SigmoidF(d, x); });
    case UnaryOp::kTanh: return map([](auto d, auto x) { return TanhF(d, x); });
    case UnaryOp::kSilu: return map([](auto d, auto x) { return SiluF(d, x); });
    case UnaryOp::kGelu: return map([](auto d, auto x) { return GeluF(d, x); });
    case UnaryOp::kGeluTanh: return map([](auto d, auto x) { return GeluTanhF(d, x); });
    case UnaryOp::kSin: return map([](auto d, auto x) { return hn::Sin(d, x); });
    case UnaryOp::kCos: return map([](auto d, auto x) { return hn::Cos(d, x); });
    case UnaryOp::kLogicalNot:
      return map([](auto d, auto x) {
        return hn::IfThenElseZero(hn::Eq(x, hn::Zero(d)), hn::Set(d, 1.0f));
      });
    case UnaryOp::kErf: return map([](auto d, auto x) { return ErfPreciseF(d, x); });
    case UnaryOp::kLog1p: return map([](auto d, auto x) { return Log1pF(d, x); });
    case UnaryOp::kExpm1: return map([](auto d, auto x) { return Expm1F(d, x); });
    // CopySign: a zero result keeps x's sign (ceil(-0.5) is -0), which
    // Highway's SSSE3 emulation of these ops drops.
    case UnaryOp::kFloor: return map([](auto, auto x) { return hn::CopySign(hn::Floor(x), x); });
    case UnaryOp::kCeil: return map([](auto, auto x) { return hn::CopySign(hn::Ceil(x), x); });
    case UnaryOp::kTrunc: return map([](auto, auto x) { return hn::CopySign(hn::Trunc(x), x); });
    case UnaryOp::kRound:  // half to even
      return map([](auto, auto x) { return hn::CopySign(hn::Round(x), x); });
    case UnaryOp::kSign:  // NaN compares false both ways: 0, as torch
      return map([](auto d, auto x) {
        const auto z = hn::Zero(d);
        const auto pos = hn::IfThenElseZero(hn::Gt(x, z), hn::Set(d, 1.0f));
        return hn::IfThenElse(hn::Lt(x, z), hn::Set(d, -1.0f), pos);
      });
    case UnaryOp::kIsNan:
      return map([](auto d, auto x) { return hn::IfThenElseZero(hn::IsNaN(x), hn::Set(d, 1.0f)); });
    case UnaryOp::kIsInf:
      return map([](auto d, auto x) { return hn::IfThenElseZero(hn::IsInf(x), hn::Set(d, 1.0f)); });
    case UnaryOp::kIsPosInf:
      return map([](auto d, auto x) {
        const auto inf = hn::Set(d, std::numeric_limits<float>::infinity());
        return hn::IfThenElseZero(hn::Eq(x, inf), hn::Set(d, 1.0f));
      });
    case UnaryOp::kIsNegInf:
      return map([](auto d, auto x) {
        const auto inf = hn::Set(d, -std::numeric_limits<float>::infinity());
        return hn::IfThenElseZero(hn::Eq(x, inf), hn::Set(d, 1.0f));
      });
    case UnaryOp::kIsFinite:
      return map([](auto d, auto x) { return hn::IfThenElseZero(hn::IsFinite(x), hn::Set(d, 1.0f)); });
    case UnaryOp::kBitwiseNot: break;  // integers only
    case UnaryOp::kTan:
    case UnaryOp::kAsin:
    case UnaryOp::kAcos:
    case UnaryOp::kAtan:
    case UnaryOp::kSinh:
    case UnaryOp::kCosh:
    case UnaryOp::kAsinh:
    case UnaryOp::kAcosh:
    case UnaryOp::kAtanh:
    case UnaryOp::kLog2:
    case UnaryOp::kLog10:
    case UnaryOp::kExp2:
    case UnaryOp::kErfc:
    case UnaryOp::kLgamma:
    case UnaryOp::kFrac:
    case UnaryOp::kSinc:
    case UnaryOp::kSignbit: break;  // elementwise_math.cc
  }
  TRN_ASSERT(false, "UnaryF32: op has no float loop");
}

// out = cond ? a : b on 4-byte elements (float32 / int32 bits); a or b may be
// a broadcast scalar.
void WhereU32(const uint8_t* cond, const uint32_t* a, bool a_scalar, const uint32_t* b,
              bool b_scalar, uint32_t* out, size_t n) {
  const hn::ScalableTag<uint32_t> d;
  const hn::Rebind<uint8_t, decltype(d)> d8;
  const size_t N = hn::Lanes(d);
  const auto zero = hn::Zero(d);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto c = hn::PromoteTo(d, hn::LoadU(d8, cond + i));
    const auto va = a_scalar ? hn::Set(d, a[0]) : hn::LoadU(d, a + i);
    const auto vb = b_scalar ? hn::Set(d, b[0]) : hn::LoadU(d, b + i);
    hn::StoreU(hn::IfThenElse(hn::Ne(c, zero), va, vb), d, out + i);
  }
  for (; i < n; ++i) out[i] = cond[i] ? a[a_scalar ? 0 : i] : b[b_scalar ? 0 : i];
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <cmath>
#include <iterator>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/kernels/convert.h"
#include "core/kernels/elementwise_run.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(BinaryF32);
HWY_EXPORT(UnaryF32);
HWY_EXPORT(WhereU32);

namespace {

using internal::DistinctBytes;
using internal::Cast;
using internal::ForEachRun;
using internal::kChunk;
using internal::ScratchF32;
using internal::VisitDType;
using internal::ComputeType;
using internal::MapExact;
using internal::RunF32;
using internal::WrapAdd;
using internal::WrapMul;

// ---- Exact integer / bool loops ----------------------------------------------------
// torch's integer pow: negative exponents give 0 except for bases 1 and -1.
template <typename C>
C IntPow(C base, C exp) {
  if (exp < 0) {
    if (base == 1) return 1;
    if (base == -1) return (exp & 1) ? -1 : 1;
    return 0;
  }
  C result = 1;
  while (exp) {
    if (exp & 1) result = WrapMul(result, base);
    base = WrapMul(base, base);
    exp >>= 1;
  }
  return result;
}

template <typename T>
void BinaryExact(BinaryOp op, const TensorRef& out, const TensorRef& a, const TensorRef& b,
                 double alpha_d) {
  using C = ComputeType<T>;
  const C alpha = Cast<C>(alpha_d);
  switch (op) {
    case BinaryOp::kAdd:
      return MapExact<T, T>(out, a, b, [=](C x, C y) { return WrapAdd(x, WrapMul(alpha, y)); });
    case BinaryOp::kSub:
      return MapExact<T, T>(out, a, b, [=](C x, C y) { return WrapAdd(x, WrapMul(C(-alpha), y)); });
    case BinaryOp::kMul: return MapExact<T, T>(out, a, b, [](C x, C y) { return WrapMul(x, y); });
    case BinaryOp::kPow: return MapExact<T, T>(out, a, b, [](C x, C y) { return IntPow(x, y); });
    case BinaryOp::kMaximum: return MapExact<T, T>(out, a, b, [](C x, C y) { return std::max(x, y); });
    case BinaryOp::kMinimum: return MapExact<T, T>(out, a, b, [](C x, C y) { return std::min(x, y); });
    case BinaryOp::kEq: return MapExact<T, bool>(out, a, b, [](C x, C y) { return x == y; });
    case BinaryOp::kNe: return MapExact<T, bool>(out, a, b, [](C x, C y) { return x != y; });
    case BinaryOp::kLt: return MapExact<T, bool>(out, a, b, [](C x, C y) { return x < y; });
    case BinaryOp::kLe: return MapExact<T, bool>(out, a, b, [](C x, C y) { return x <= y; });
    case BinaryOp::kGt: return MapExact<T, bool>(out, a, b, [](C x, C y) { return x > y; });
    case BinaryOp::kGe: return MapExact<T, bool>(out, a, b, [](C x, C y) { return x >= y; });
    case BinaryOp::kLogicalAnd:
      return MapExact<T, bool>(out, a, b, [](C x, C y) { return x != 0 && y != 0; });
    case BinaryOp::kLogicalOr:
      return MapExact<T, bool>(out, a, b, [](C x, C y) { return x != 0 || y != 0; });
    case BinaryOp::kLogicalXor:
      return MapExact<T, bool>(out, a, b, [](C x, C y) { return (x != 0) != (y != 0); });
    case BinaryOp::kDiv: break;  // the caller makes integer true division floating
    default: break;              // kDivTrunc .. kShiftRight: elementwise_math.cc
  }
  TRN_ASSERT(false, "BinaryExact: op has no integer loop here");
}

// Binary over possibly different operand dtypes (a scalar operand is float32
// for floating tensors).
// `dtype` is the tensors' dtype.
Status BinaryImpl(BinaryOp op, DType dtype, const TensorRef& out, const TensorRef& a,
                  const TensorRef& b, double alpha) {
  TRN_ASSERT(out.dtype == (IsComparison(op) ? DType::kBool : dtype),
             "Binary: out dtype must be the inputs' dtype (kBool for comparisons)");
  if (op >= BinaryOp::kDivTrunc && op <= BinaryOp::kShiftRight) {  // elementwise_math.cc
    return internal::BinaryMath(op, dtype, out, a, b);
  }
  if (IsFloating(dtype)) {
    if (op == BinaryOp::kPow) {  // std::pow: torch's semantics for every sign and special value
      RunF32<2>(out, {&a, &b}, [](auto in, auto sc, float* o, size_t n) {
        for (size_t i = 0; i < n; ++i) o[i] = std::pow(in[0][sc[0] ? 0 : i], in[1][sc[1] ? 0 : i]);
      });
      return Status::Ok();
    }
    const auto fn = HWY_DYNAMIC_DISPATCH(BinaryF32);
    const float alpha_f = static_cast<float>(alpha);
    RunF32<2>(out, {&a, &b}, [&](auto in, auto sc, float* o, size_t n) {
      fn(op, in[0], sc[0], in[1], sc[1], o, n, alpha_f);
    });
    return Status::Ok();
  }
  VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) BinaryExact<T>(op, out, a, b, alpha);
  });
  return Status::Ok();
}

template <typename T>
void UnaryExact(UnaryOp op, const TensorRef& out, const TensorRef& in) {
  using C = ComputeType<T>;
  auto map = [&](auto f) { MapExact<T, T>(out, in, in, [&](C x, C) { return f(x); }); };
  switch (op) {
    case UnaryOp::kNeg: return map([](C x) { return WrapMul(x, C(-1)); });
    case UnaryOp::kAbs: return map([](C x) { return x < 0 ? WrapMul(x, C(-1)) : x; });
    case UnaryOp::kRelu: return map([](C x) { return x < 0 ? C(0) : x; });
    case UnaryOp::kLogicalNot:
      return MapExact<T, bool>(out, in, in, [](C x, C) { return x == 0; });
    case UnaryOp::kFloor:
    case UnaryOp::kCeil:
    case UnaryOp::kTrunc:
    case UnaryOp::kRound: return map([](C x) { return x; });
    case UnaryOp::kSign: return map([](C x) { return C((x > 0) - (x < 0)); });
    case UnaryOp::kBitwiseNot:
      if constexpr (std::is_same_v<T, bool>) {
        return MapExact<T, bool>(out, in, in, [](C x, C) { return x == 0; });
      } else {
        return map([](C x) { return C(~x); });
      }
    case UnaryOp::kIsNan:
    case UnaryOp::kIsInf:
    case UnaryOp::kIsPosInf:
    case UnaryOp::kIsNegInf:
      return MapExact<T, bool>(out, in, in, [](C, C) { return false; });
    case UnaryOp::kIsFinite: return MapExact<T, bool>(out, in, in, [](C, C) { return true; });
    case UnaryOp::kSignbit: return MapExact<T, bool>(out, in, in, [](C x, C) { return x < 0; });
    default: break;
  }
  TRN_ASSERT(false, "Unary: transcendental ops need a floating dtype");
}

constexpr const char* kBinaryNames[][7] = {
    TRN_DTYPE_NAMES("add"),     TRN_DTYPE_NAMES("sub"),     TRN_DTYPE_NAMES("mul"),
    TRN_DTYPE_NAMES("div"),     TRN_DTYPE_NAMES("pow"),     TRN_DTYPE_NAMES("maximum"),
    TRN_DTYPE_NAMES("minimum"), TRN_DTYPE_NAMES("glu"),     TRN_DTYPE_NAMES("prelu"),
    TRN_DTYPE_NAMES("div_trunc"),
    TRN_DTYPE_NAMES("div_floor"),
    TRN_DTYPE_NAMES("remainder"), TRN_DTYPE_NAMES("fmod"), TRN_DTYPE_NAMES("atan2"),
    TRN_DTYPE_NAMES("hypot"),   TRN_DTYPE_NAMES("logaddexp"), TRN_DTYPE_NAMES("logaddexp2"),
    TRN_DTYPE_NAMES("copysign"), TRN_DTYPE_NAMES("xlogy"), TRN_DTYPE_NAMES("fmax"),
    TRN_DTYPE_NAMES("fmin"),    TRN_DTYPE_NAMES("heaviside"),
    TRN_DTYPE_NAMES("bitwise_and"),
    TRN_DTYPE_NAMES("bitwise_or"), TRN_DTYPE_NAMES("bitwise_xor"), TRN_DTYPE_NAMES("shift_left"),
    TRN_DTYPE_NAMES("shift_right"), TRN_DTYPE_NAMES("eq"),      TRN_DTYPE_NAMES("ne"),
    TRN_DTYPE_NAMES("lt"),      TRN_DTYPE_NAMES("le"),      TRN_DTYPE_NAMES("gt"),
    TRN_DTYPE_NAMES("ge"),      TRN_DTYPE_NAMES("logical_and"), TRN_DTYPE_NAMES("logical_or"),
    TRN_DTYPE_NAMES("logical_xor"),
};
constexpr const char* kUnaryNames[][7] = {
    TRN_DTYPE_NAMES("neg"),     TRN_DTYPE_NAMES("abs"),     TRN_DTYPE_NAMES("relu"),
    TRN_DTYPE_NAMES("exp"),     TRN_DTYPE_NAMES("log"),     TRN_DTYPE_NAMES("sqrt"),
    TRN_DTYPE_NAMES("rsqrt"),   TRN_DTYPE_NAMES("reciprocal"), TRN_DTYPE_NAMES("sigmoid"),
    TRN_DTYPE_NAMES("tanh"),    TRN_DTYPE_NAMES("silu"),    TRN_DTYPE_NAMES("gelu"),
    TRN_DTYPE_NAMES("gelu_tanh"), TRN_DTYPE_NAMES("sin"),   TRN_DTYPE_NAMES("cos"),
    TRN_DTYPE_NAMES("logical_not"), TRN_DTYPE_NAMES("erf"), TRN_DTYPE_NAMES("floor"),
    TRN_DTYPE_NAMES("ceil"),    TRN_DTYPE_NAMES("trunc"),   TRN_DTYPE_NAMES("round"),
    TRN_DTYPE_NAMES("sign"),    TRN_DTYPE_NAMES("bitwise_not"), TRN_DTYPE_NAMES("log1p"),
    TRN_DTYPE_NAMES("expm1"),
    TRN_DTYPE_NAMES("tan"),     TRN_DTYPE_NAMES("asin"),    TRN_DTYPE_NAMES("acos"),
    TRN_DTYPE_NAMES("atan"),    TRN_DTYPE_NAMES("sinh"),    TRN_DTYPE_NAMES("cosh"),
    TRN_DTYPE_NAMES("asinh"),   TRN_DTYPE_NAMES("acosh"),   TRN_DTYPE_NAMES("atanh"),
    TRN_DTYPE_NAMES("log2"),    TRN_DTYPE_NAMES("log10"),   TRN_DTYPE_NAMES("exp2"),
    TRN_DTYPE_NAMES("erfc"),    TRN_DTYPE_NAMES("lgamma"),  TRN_DTYPE_NAMES("frac"),
    TRN_DTYPE_NAMES("sinc"),    TRN_DTYPE_NAMES("isnan"),
    TRN_DTYPE_NAMES("isinf"),   TRN_DTYPE_NAMES("isposinf"), TRN_DTYPE_NAMES("isneginf"),
    TRN_DTYPE_NAMES("isfinite"), TRN_DTYPE_NAMES("signbit"),
};
static_assert(std::size(kBinaryNames) == static_cast<size_t>(BinaryOp::kLogicalXor) + 1);
static_assert(std::size(kUnaryNames) == static_cast<size_t>(UnaryOp::kSignbit) + 1);
// Estimated vector instructions per element (Note [Describe flops]): 1 for
// plain arithmetic, the polynomial length for transcendental functions.
// The libm functions (tan .. sinc) count as 20.
constexpr uint64_t kUnaryFlops[] = {1,  1,  1,  10, 12, 1,  2,  1,  12, 14, 13, 22, 16, 16,
                                    16, 1,  24, 1,  1,  1,  1,  3,  1,  16, 12, 20, 20, 20,
                                    20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 20, 2,  20, 1,
                                    1,  1,  1,  1,  1};
static_assert(std::size(kUnaryFlops) == static_cast<size_t>(UnaryOp::kSignbit) + 1);
constexpr const char* kWhereNames[7] = TRN_DTYPE_NAMES("where");
constexpr const char* kFillNames[7] = TRN_DTYPE_NAMES("fill");
constexpr const char* kCopyNames[7] = TRN_DTYPE_NAMES("copy");
constexpr const char* kPadNames[7] = TRN_DTYPE_NAMES("constant_pad");
#define TRN_CAST_NAMES(from)                                                              \
  {                                                                                      \
    "cast_" from "_f32", "cast_" from "_f64", "cast_" from "_bf16", "cast_" from "_f16", \
        "cast_" from "_i32", "cast_" from "_i64", "cast_" from "_bool"                    \
  }
constexpr const char* kCastNames[7][7] = {  // [from][to]
    TRN_CAST_NAMES("f32"), TRN_CAST_NAMES("f64"), TRN_CAST_NAMES("bf16"), TRN_CAST_NAMES("f16"),
    TRN_CAST_NAMES("i32"), TRN_CAST_NAMES("i64"), TRN_CAST_NAMES("bool"),
};

int D(DType d) { return static_cast<int>(d); }

// Calls f(U{}) with U the unsigned integer of `item` bytes (1, 2, 4 or 8), for
// the kernels that move raw bits whatever the dtype: copies, selects, fills.
template <typename F>
void VisitBits(size_t item, F&& f) {
  switch (item) {
    case 1: return f(uint8_t{});
    case 2: return f(uint16_t{});
    case 4: return f(uint32_t{});
    default: return f(uint64_t{});
  }
}

// o[i * so] = x[i * sx] for i < n, elements of `item` bytes.
void CopyRun(char* o, const char* x, int64_t n, int64_t so, int64_t sx, size_t item) {
  if (so == 1 && sx == 1) {
    std::memmove(o, x, static_cast<size_t>(n) * item);
    return;
  }
  VisitBits(item, [&](auto tag) {
    using U = decltype(tag);
    U* ou = reinterpret_cast<U*>(o);
    const U* xu = reinterpret_cast<const U*>(x);
    for (int64_t i = 0; i < n; ++i) ou[i * so] = xu[i * sx];
  });
}

// Writes n elements of `item` bytes `stride` elements apart: the bytes at v.
void FillRun(char* o, int64_t n, int64_t stride, const unsigned char* v, size_t item) {
  VisitBits(item, [&](auto tag) {
    using U = decltype(tag);
    U u;
    std::memcpy(&u, v, sizeof(U));
    U* p = reinterpret_cast<U*>(o);
    for (int64_t i = 0; i < n; ++i) p[i * stride] = u;
  });
}

}  // namespace

bool IsComparison(BinaryOp op) { return op >= BinaryOp::kEq; }
bool IsBitwise(BinaryOp op) { return op >= BinaryOp::kBitwiseAnd && op <= BinaryOp::kShiftRight; }
bool UnaryOutIsBool(UnaryOp op) { return op == UnaryOp::kLogicalNot || op >= UnaryOp::kIsNan; }

Status Binary(BinaryOp op, const TensorRef& out, const TensorRef& a, const TensorRef& b,
              double alpha) {
  TRN_ASSERT(a.dtype == b.dtype, "Binary: a and b must share one dtype");
  return BinaryImpl(op, a.dtype, out, a, b, alpha);
}

Status BinaryScalar(BinaryOp op, const TensorRef& out, const TensorRef& a, double s,
                    bool scalar_first) {
  if (op == BinaryOp::kPow && !scalar_first && IsFloating(a.dtype)) {
    // torch's fast paths for common exponents (x**2 in RMSNorm written by hand).
    if (s == 2.0) return Binary(BinaryOp::kMul, out, a, a);
    if (s == 1.0) return Copy(out, a);
    if (s == 0.5) return Unary(UnaryOp::kSqrt, out, a);
    if (s == -0.5) return Unary(UnaryOp::kRsqrt, out, a);
    if (s == -1.0) return Unary(UnaryOp::kReciprocal, out, a);
    if (s == 3.0 || s == -2.0) {  // torch computes these as x*x*x and 1/(x*x): match it
      const bool cube = s == 3.0;
      RunF32<1>(out, {&a}, [cube](auto in, auto scalar, float* o, size_t n) {
        const float* x = in[0];
        if (scalar[0]) {
          std::fill_n(o, n, cube ? x[0] * x[0] * x[0] : 1.0f / (x[0] * x[0]));
        } else if (cube) {
          for (size_t i = 0; i < n; ++i) o[i] = x[i] * x[i] * x[i];
        } else {
          for (size_t i = 0; i < n; ++i) o[i] = 1.0f / (x[i] * x[i]);
        }
      });
      return Status::Ok();
    }
  }
  // The scalar becomes a stride-0 operand: float32 for floating tensors (the
  // compute type), a's own type otherwise.
  alignas(8) unsigned char value[8];
  TensorRef sref = out;
  for (int d = 0; d < sref.ndim; ++d) sref.strides[d] = 0;
  sref.data = value;
  if (IsFloating(a.dtype)) {
    sref.dtype = DType::kFloat32;
    const float f = static_cast<float>(s);
    std::memcpy(value, &f, sizeof(f));
  } else {
    sref.dtype = a.dtype;
    VisitDType(a.dtype, [&](auto tag) {
      using T = decltype(tag);
      const T v = Cast<T>(s);
      std::memcpy(value, &v, sizeof(v));
    });
  }
  return scalar_first ? BinaryImpl(op, a.dtype, out, sref, a, 1.0)
                      : BinaryImpl(op, a.dtype, out, a, sref, 1.0);
}

Status Unary(UnaryOp op, const TensorRef& out, const TensorRef& in) {
  TRN_ASSERT(out.dtype == (UnaryOutIsBool(op) ? DType::kBool : in.dtype),
             "Unary: out dtype must be in's dtype (kBool for predicates and logical_not)");
  if (IsFloating(in.dtype) && internal::IsLibmUnary(op)) {
    return internal::UnaryMath(op, out, in);
  }
  if (IsFloating(in.dtype)) {
    const auto fn = HWY_DYNAMIC_DISPATCH(UnaryF32);
    internal::MapF32(out, in, [&](const float* x, float* o, size_t n) { fn(op, x, o, n); });
    return Status::Ok();
  }
  VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) UnaryExact<T>(op, out, in);
  });
  return Status::Ok();
}

Status Where(const TensorRef& out, const TensorRef& cond, const TensorRef& a,
             const TensorRef& b) {
  TRN_ASSERT(cond.dtype == DType::kBool && a.dtype == out.dtype && b.dtype == out.dtype,
             "Where: cond must be kBool and a, b, out share one dtype");
  const size_t item = ItemSize(out.dtype);
  const auto simd = HWY_DYNAMIC_DISPATCH(WhereU32);
  ForEachRun<4>({&out, &cond, &a, &b}, [&](const std::array<char*, 4>& p, int64_t n,
                                           const std::array<int64_t, 4>& s) {
    const uint8_t* c = reinterpret_cast<const uint8_t*>(p[1]);
    if (item == 4 && s[0] == 1 && s[1] == 1 && s[2] <= 1 && s[3] <= 1) {
      simd(c, reinterpret_cast<const uint32_t*>(p[2]), s[2] == 0,
           reinterpret_cast<const uint32_t*>(p[3]), s[3] == 0, reinterpret_cast<uint32_t*>(p[0]),
           static_cast<size_t>(n));
      return;
    }
    VisitBits(item, [&](auto tag) {  // moves raw bits: no dtype semantics needed
      using U = decltype(tag);
      U* o = reinterpret_cast<U*>(p[0]);
      const U* x = reinterpret_cast<const U*>(p[2]);
      const U* y = reinterpret_cast<const U*>(p[3]);
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = c[i * s[1]] ? x[i * s[2]] : y[i * s[3]];
    });
  });
  return Status::Ok();
}

Status Fill(const TensorRef& out, double value) {
  VisitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T v = Cast<T>(value);
    ForEachRun<1>({&out}, [&](const std::array<char*, 1>& p, int64_t n,
                              const std::array<int64_t, 1>& s) {
      T* o = reinterpret_cast<T*>(p[0]);
      if (s[0] == 1) {
        std::fill_n(o, n, v);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * s[0]] = v;
      }
    });
  });
  return Status::Ok();
}

namespace {

// Note [Tiled transpose]: a same-dtype copy whose input is contiguous along a
// dim that is not out's (x.t().contiguous(), NCHW <-> NHWC) read the input one
// element per cache line, following out's runs; at 1024 x 1024 float32 the
// 4 KiB row stride also maps every read to one L1 set (2.5x CPU PyTorch's
// time). It goes in tiles of kTile x kTile elements (internal::TransposeTiles),
// whose input lines stay in L1 while the tile is read. In one process against
// the run-by-run copy (Emerald Rapids): 0.29-0.32x its time at 1024^2,
// 0.25-0.44x at 2048^2 and 4096^2, 0.57-0.83x at [64, 3136], [256, 784],
// [512, 1598], [2, 512, 399]; tiles of 16 and 64 were slower than 32 on all but 1024^2.
using internal::kTile;
using internal::TransposeTiles;

// The tiled path of Copy (same dtype), or false when the copy is not a
// transpose of two dims of at least kTile elements.
bool CopyTransposed(const TensorRef& out, const TensorRef& in) {
  const internal::StridedShape<2> s = internal::MakeShape<2>({&out, &in}, 0);
  if (s.ndim < 2) return false;
  const int last = s.ndim - 1;
  int d = -1;  // in's unit-stride dim
  for (int k = 0; k < last; ++k) {
    if (s.strides[1][k] == 1) d = k;
  }
  if (d < 0 || s.strides[0][last] != 1 || s.strides[1][last] == 0 || s.sizes[last] < kTile ||
      s.sizes[d] < kTile) {
    return false;
  }
  const internal::StridedShape<2> rest = internal::WithoutDims(s, d, last);
  const size_t item = ItemSize(out.dtype);
  const int64_t rows = s.sizes[last], cols = s.sizes[d];
  const int64_t o_col = s.strides[0][d], x_row = s.strides[1][last];
  auto tile = [&](char* o, const char* x) {
    VisitBits(item, [&](auto tag) {
      using U = decltype(tag);
      TransposeTiles(reinterpret_cast<U*>(o), reinterpret_cast<const U*>(x), rows, cols, o_col,
                     x_row);
    });
  };
  const auto walk = [&](const std::array<char*, 2>& p, int64_t n,
                        const std::array<int64_t, 2>& st) {
    for (int64_t i = 0; i < n; ++i) {
      tile(p[0] + i * st[0] * static_cast<int64_t>(item),
           p[1] + i * st[1] * static_cast<int64_t>(item));
    }
  };
  internal::ForEachRun<2>(rest, {static_cast<char*>(out.data), static_cast<char*>(in.data)},
                          {item, item}, walk);
  return true;
}

}  // namespace

Status Copy(const TensorRef& out, const TensorRef& in) {
  // Note [Tiled transpose]
  if (out.dtype == in.dtype && CopyTransposed(out, in)) return Status::Ok();
  if (out.dtype == in.dtype) {
    const size_t item = ItemSize(out.dtype);
    ForEachRun<2>({&out, &in}, [&](const std::array<char*, 2>& p, int64_t n,
                                   const std::array<int64_t, 2>& s) {
      CopyRun(p[0], p[1], n, s[0], s[1], item);
    });
    return Status::Ok();
  }
  VisitDType(out.dtype, [&](auto out_tag) {
    using To = decltype(out_tag);
    VisitDType(in.dtype, [&](auto in_tag) {
      using From = decltype(in_tag);
      ForEachRun<2>({&out, &in}, [&](const std::array<char*, 2>& p, int64_t n,
                                     const std::array<int64_t, 2>& s) {
        To* o = reinterpret_cast<To*>(p[0]);
        const From* x = reinterpret_cast<const From*>(p[1]);
        // 16-bit floats to and from float32 (a bfloat16 model's upcasts around
        // its norms and softmaxes) in SIMD; scalar casts took 19 us for 32K floats.
        if constexpr (std::is_same_v<To, float> && internal::kIsHalf<From>) {
          if (s[0] == 1) return internal::LoadAsF32(in.dtype, x, s[1], n, o);
        } else if constexpr (std::is_same_v<From, float> && internal::kIsHalf<To>) {
          if (s[1] == 1) return internal::StoreFromF32(out.dtype, o, s[0], n, x);
        }
        if (s[0] == 1 && s[1] == 1) {
          for (int64_t i = 0; i < n; ++i) o[i] = Cast<To>(x[i]);
        } else {
          for (int64_t i = 0; i < n; ++i) o[i * s[0]] = Cast<To>(x[i * s[1]]);
        }
      });
    });
  });
  return Status::Ok();
}

Status ConstantPad(const TensorRef& out, const TensorRef& in, const int64_t* before,
                   double value) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == in.ndim, "ConstantPad: one dtype and rank");
  if (out.numel() == 0) return Status::Ok();
  if (out.ndim == 0) return Copy(out, in);
  alignas(8) unsigned char v[8] = {};
  VisitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T t = Cast<T>(value);
    std::memcpy(v, &t, sizeof(t));
  });
  const size_t item = ItemSize(out.dtype);
  const int last = out.ndim - 1;
  const int64_t n = out.sizes[last], os = out.strides[last], is = in.strides[last];
  // The part of every row that comes from `in`: [lo, hi).
  const int64_t lo = std::clamp<int64_t>(before[last], 0, n);
  const int64_t hi = std::clamp<int64_t>(before[last] + in.sizes[last], lo, n);
  // A row: the last dim at one index of the others. Rows go plane by plane
  // (dim last - 1 innermost) so that a row's offsets are one add each.
  auto row = [&](char* o, const char* x, bool inside) {
    if (!inside || hi <= lo) {
      FillRun(o, n, os, v, item);
      return;
    }
    FillRun(o, lo, os, v, item);
    CopyRun(o + lo * os * static_cast<int64_t>(item),
            x + (lo - before[last]) * is * static_cast<int64_t>(item), hi - lo, os, is, item);
    FillRun(o + hi * os * static_cast<int64_t>(item), n - hi, os, v, item);
  };
  if (last == 0) {
    row(static_cast<char*>(out.data), static_cast<const char*>(in.data), true);
    return Status::Ok();
  }
  const int r = last - 1;  // the rows' dim
  int64_t idx[kMaxDims] = {};
  int64_t planes = 1;
  for (int d = 0; d < r; ++d) planes *= out.sizes[d];
  for (int64_t pl = 0; pl < planes; ++pl) {
    int64_t o_off = 0, i_off = 0;
    bool inside = true;
    for (int d = 0; d < r; ++d) {
      const int64_t i = idx[d] - before[d];
      inside = inside && i >= 0 && i < in.sizes[d];
      o_off += idx[d] * out.strides[d];
      i_off += i * in.strides[d];
    }
    char* o = static_cast<char*>(out.data) + o_off * static_cast<int64_t>(item);
    for (int64_t y = 0; y < out.sizes[r]; ++y) {
      const int64_t iy = y - before[r];
      const bool in_row = inside && iy >= 0 && iy < in.sizes[r];
      const char* x = in_row ? static_cast<const char*>(in.data) +
                                   (i_off + iy * in.strides[r]) * static_cast<int64_t>(item)
                             : nullptr;
      row(o + y * out.strides[r] * static_cast<int64_t>(item), x, in_row);
    }
    for (int d = r - 1; d >= 0; --d) {  // odometer over the planes
      if (++idx[d] < out.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return Status::Ok();
}

Status IndexPad(const TensorRef& out, const TensorRef& in, const int64_t* before, PadMode mode) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == in.ndim, "IndexPad: one dtype and rank");
  if (out.numel() == 0) return Status::Ok();
  if (out.ndim == 0) return Copy(out, in);
  // src[d][o]: the input index that out index o of dim d reads.
  std::vector<int64_t> maps[kMaxDims];
  for (int d = 0; d < out.ndim; ++d) {
    const int64_t n = in.sizes[d];
    TRN_ASSERT(n > 0, "IndexPad: every dim of in must be non-empty");
    maps[d].resize(static_cast<size_t>(out.sizes[d]));
    for (int64_t o = 0; o < out.sizes[d]; ++o) {
      int64_t i = o - before[d];
      if (mode == PadMode::kReplicate) {
        i = std::clamp<int64_t>(i, 0, n - 1);
      } else {
        if (i < 0) i = -i;
        if (i >= n) i = 2 * (n - 1) - i;
        TRN_ASSERT(i >= 0 && i < n, "IndexPad: a reflection pad must be smaller than the dim");
      }
      maps[d][static_cast<size_t>(o)] = i;
    }
  }
  const size_t item = ItemSize(out.dtype);
  const int last = out.ndim - 1;
  const int64_t n = out.sizes[last], os = out.strides[last], is = in.strides[last];
  const std::vector<int64_t>& row_map = maps[last];
  // The part of a row read straight through: [lo, hi) maps to lo - before.
  const int64_t lo = std::clamp<int64_t>(before[last], 0, n);
  const int64_t hi = std::clamp<int64_t>(before[last] + in.sizes[last], lo, n);
  const auto row = [&](char* o, const char* x) {
    VisitBits(item, [&](auto tag) {
      using U = decltype(tag);
      U* ou = reinterpret_cast<U*>(o);
      const U* xu = reinterpret_cast<const U*>(x);
      for (int64_t j = 0; j < lo; ++j) ou[j * os] = xu[row_map[j] * is];
      for (int64_t j = hi; j < n; ++j) ou[j * os] = xu[row_map[j] * is];
    });
    if (hi > lo) {
      CopyRun(o + lo * os * static_cast<int64_t>(item),
              x + row_map[lo] * is * static_cast<int64_t>(item), hi - lo, os, is, item);
    }
  };
  int64_t idx[kMaxDims] = {};
  int64_t rows = 1;
  for (int d = 0; d < last; ++d) rows *= out.sizes[d];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t o_off = 0, i_off = 0;
    for (int d = 0; d < last; ++d) {
      o_off += idx[d] * out.strides[d];
      i_off += maps[d][static_cast<size_t>(idx[d])] * in.strides[d];
    }
    row(static_cast<char*>(out.data) + o_off * static_cast<int64_t>(item),
        static_cast<const char*>(in.data) + i_off * static_cast<int64_t>(item));
    for (int d = last - 1; d >= 0; --d) {  // odometer over the rows
      if (++idx[d] < out.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return Status::Ok();
}

KernelInfo DescribeIndexPad(const TensorRef& out, const TensorRef& in, PadMode mode,
                            const char* aten_op) {
  static constexpr const char* kReflect[7] = TRN_DTYPE_NAMES("reflection_pad");
  static constexpr const char* kReplicate[7] = TRN_DTYPE_NAMES("replication_pad");
  KernelInfo info = DescribeConstantPad(out, in, aten_op);
  info.name = (mode == PadMode::kReflect ? kReflect : kReplicate)[D(out.dtype)];
  return info;
}

KernelInfo DescribeConstantPad(const TensorRef& out, const TensorRef& in, const char* aten_op) {
  KernelInfo info;
  info.name = kPadNames[D(out.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kDma;
  info.bytes_read = DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

// Note [Describe flops]: flops count vector operations per element — 1 for
// plain arithmetic and comparisons, an estimate of the polynomial evaluation
// for transcendental functions (exp ~10, gelu ~22; see kUnaryFlops). Bytes
// read count the distinct elements of each input: a broadcast input counts
// its stored elements, not out's numel.
KernelInfo DescribeBinary(BinaryOp op, const TensorRef& out, const TensorRef& a,
                          const TensorRef* b, const char* aten_op) {
  KernelInfo info;
  info.name = kBinaryNames[static_cast<int>(op)][D(a.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  const bool libm = op == BinaryOp::kPow || (op >= BinaryOp::kAtan2 && op <= BinaryOp::kXlogy);
  info.flops = static_cast<uint64_t>(out.numel()) * (libm ? 20 : 1);
  info.bytes_read = DistinctBytes(a) + (b ? DistinctBytes(*b) : 0);
  info.bytes_written = out.nbytes();
  return info;
}

KernelInfo DescribeUnary(UnaryOp op, const TensorRef& out, const TensorRef& in,
                         const char* aten_op) {
  KernelInfo info;
  info.name = kUnaryNames[static_cast<int>(op)][D(in.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(out.numel()) * kUnaryFlops[static_cast<int>(op)];
  info.bytes_read = DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

// Only out is known: a, b and cond are counted as dense in out's shape.
KernelInfo DescribeWhere(const TensorRef& out, const char* aten_op) {
  KernelInfo info;
  info.name = kWhereNames[D(out.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(out.numel());
  info.bytes_read = 2 * out.nbytes() + static_cast<uint64_t>(out.numel());
  info.bytes_written = out.nbytes();
  return info;
}

KernelInfo DescribeFill(const TensorRef& out, const char* aten_op) {
  KernelInfo info;
  info.name = kFillNames[D(out.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.bytes_written = out.nbytes();
  return info;
}

// A same-dtype copy is a DMA transfer; a cast needs the vector engine.
KernelInfo DescribeCopy(const TensorRef& out, const TensorRef& in, const char* aten_op) {
  KernelInfo info;
  const bool cast = out.dtype != in.dtype;
  info.name = cast ? kCastNames[D(in.dtype)][D(out.dtype)] : kCopyNames[D(out.dtype)];
  info.op = aten_op;
  info.engine = cast ? rt::Engine::kVector : rt::Engine::kDma;
  info.flops = cast ? static_cast<uint64_t>(out.numel()) : 0;
  info.bytes_read = DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
