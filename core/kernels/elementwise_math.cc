// Elementwise kernels with torch's integer and rounding rules, and the ones
// that take scalar parameters: rounding division, remainder / fmod, bitwise
// ops and shifts (internal::BinaryMath, reached through Binary and
// BinaryScalar), Clamp, the parametrized activations (Activation),
// RoundDecimals, NanToNum, Lerp and their Describe*. Clamp, Activation and
// RoundDecimals are Highway loops (they are hot in models); the rest are
// scalar loops over float32 chunks or exact integer types.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/elementwise_math.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/kernels/elementwise-inl.h"
#include "core/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {

// Selects instead of max/min, whose operand order on ties and NaN differs
// between targets: x is kept unless it is past a bound, so NaN stays NaN and
// -0 clamped to [0, 6] stays -0 (torch's vec::clamp).
void ClampF32(const float* in, float* out, size_t n, float lo, float hi) {
  MapUnary(in, out, n, [lo, hi](auto d, auto x) {
    const auto vlo = hn::Set(d, lo), vhi = hn::Set(d, hi);
    const auto c = hn::IfThenElse(hn::Lt(x, vlo), vlo, x);
    return hn::IfThenElse(hn::Gt(c, vhi), vhi, c);
  });
}

// torch's round(decimals) in float32: scale, round half to even, unscale.
void RoundDecimalsF32(const float* in, float* out, size_t n, float scale, bool divide_first) {
  if (divide_first) {
    MapUnary(in, out, n, [scale](auto d, auto x) {
      const auto s = hn::Set(d, scale);
      return hn::CopySign(hn::Mul(hn::Round(hn::Div(x, s)), s), x);  // -0 kept (see UnaryF32)
    });
  } else {
    MapUnary(in, out, n, [scale](auto d, auto x) {
      const auto s = hn::Set(d, scale);
      return hn::CopySign(hn::Div(hn::Round(hn::Mul(x, s)), s), x);
    });
  }
}

// torch's CPU formulas in its evaluation order (aten/src/ATen/native/cpu/
// Activation.cpp, the vector paths), so float32 results round alike.
void ActivationF32(ActivationOp op, const float* in, float* out, size_t n, float p0, float p1,
                   float p2) {
  auto map = [&](const auto& f) { MapUnary(in, out, n, f); };
  // min(max(x + 3, 0), 6), the hard gate of hardswish / hardsigmoid. x86
  // max/min drop a NaN operand, so the callers put NaN back.
  auto hard_gate = [](auto d, auto x) {
    return hn::Min(hn::Max(hn::Add(x, hn::Set(d, 3.0f)), hn::Zero(d)), hn::Set(d, 6.0f));
  };
  switch (op) {
    case ActivationOp::kLeakyRelu:
      return map([p0](auto d, auto x) {
        return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), x, hn::Mul(x, hn::Set(d, p0)));
      });
    case ActivationOp::kElu: {
      const float negcoef = p0 * p1;  // alpha * scale, rounded as torch does
      return map([=](auto d, auto x) {
        const auto neg = hn::Mul(Expm1F(d, hn::Mul(x, hn::Set(d, p2))), hn::Set(d, negcoef));
        return hn::IfThenElse(hn::Gt(x, hn::Zero(d)), hn::Mul(x, hn::Set(d, p1)), neg);
      });
    }
    case ActivationOp::kSoftplus:
      return map([=](auto d, auto x) {
        const auto bx = hn::Mul(x, hn::Set(d, p0));
        const auto soft = hn::Div(Log1pF(d, ExpF(d, bx)), hn::Set(d, p0));
        return hn::IfThenElse(hn::Gt(bx, hn::Set(d, p1)), x, soft);
      });
    case ActivationOp::kHardswish:
      return map([&](auto d, auto x) {
        const auto y = hn::Div(hn::Mul(x, hard_gate(d, x)), hn::Set(d, 6.0f));
        return hn::IfThenElse(hn::IsNaN(x), x, y);
      });
    case ActivationOp::kHardsigmoid:
      return map([&](auto d, auto x) {
        const auto y = hn::Div(hard_gate(d, x), hn::Set(d, 6.0f));
        return hn::IfThenElse(hn::IsNaN(x), x, y);
      });
    case ActivationOp::kMish:
      return map([](auto d, auto x) { return hn::Mul(x, TanhF(d, Log1pF(d, ExpF(d, x)))); });
    case ActivationOp::kHardshrink:
      return map([p0](auto d, auto x) {
        const auto inside = hn::And(hn::Ge(x, hn::Set(d, -p0)), hn::Le(x, hn::Set(d, p0)));
        return hn::IfThenElse(inside, hn::Zero(d), x);  // NaN compares false: stays NaN
      });
    case ActivationOp::kSoftshrink:
      return map([p0](auto d, auto x) {
        const auto l = hn::Set(d, p0);
        const auto band = hn::Mul(x, hn::Zero(d));  // x * 0 keeps -0 and NaN, as torch
        const auto low = hn::IfThenElse(hn::Lt(x, hn::Neg(l)), hn::Add(x, l), band);
        return hn::IfThenElse(hn::Gt(x, l), hn::Sub(x, l), low);
      });
    case ActivationOp::kThreshold:
      return map([=](auto d, auto x) {
        return hn::IfThenElse(hn::Le(x, hn::Set(d, p0)), hn::Set(d, p1), x);
      });
    case ActivationOp::kLogSigmoid:
      return map([](auto d, auto x) {
        const auto tail = Log1pF(d, ExpF(d, hn::Neg(hn::Abs(x))));
        return hn::Sub(hn::Min(x, hn::Zero(d)), tail);  // NaN: the tail is NaN
      });
  }
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <numbers>
#include <type_traits>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/elementwise_run.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(ClampF32);
HWY_EXPORT(RoundDecimalsF32);
HWY_EXPORT(ActivationF32);

namespace {

using internal::Cast;
using internal::ComputeType;
using internal::DistinctBytes;
using internal::ForEachRun;
using internal::MapExact;
using internal::RunF32;
using internal::VisitDType;
using internal::WrapMul;

// ---- Rounding division, remainder, fmod (floats: torch's c10 formulas) -----------
// Note [Half rounding division]: for bfloat16/float16 torch's CPU kernels
// round the quotient (trunc) and each step of the floor formula to the
// storage type; `q` does that rounding (identity for float32/float64), so
// results match CPU PyTorch bit for bit instead of differing by one.
template <class Q>
float DivFloorF(float a, float b, Q q) {
  if (b == 0) return a / b;  // IEEE: +-inf or NaN
  const float mod = std::fmod(a, b);
  float div = q(q(a - mod) / b);
  if (mod != 0 && (b < 0) != (mod < 0)) div = q(div - 1.0f);
  if (div == 0) return std::copysign(0.0f, a / b);
  float floordiv = std::floor(div);
  if (div - floordiv > 0.5f) floordiv += 1.0f;
  return floordiv;
}
float RemainderF(float a, float b) {
  float mod = std::fmod(a, b);
  if (mod != 0 && (b < 0) != (mod < 0)) mod += b;
  return mod;
}

template <BinaryOp kOp, class Q>
float FloatMath(float a, float b, Q q) {
  if constexpr (kOp == BinaryOp::kDivTrunc) return std::trunc(q(a / b));
  if constexpr (kOp == BinaryOp::kDivFloor) return DivFloorF(a, b, q);
  if constexpr (kOp == BinaryOp::kRemainder) return RemainderF(a, b);
  if constexpr (kOp == BinaryOp::kFmod) return std::fmod(a, b);
  if constexpr (kOp == BinaryOp::kAtan2) return std::atan2(a, b);
  if constexpr (kOp == BinaryOp::kHypot) return std::hypot(a, b);
  if constexpr (kOp == BinaryOp::kLogAddExp || kOp == BinaryOp::kLogAddExp2) {
    if (std::isinf(a) && a == b) return a;  // inf - inf would be NaN
    const float m = std::max(a, b);
    if constexpr (kOp == BinaryOp::kLogAddExp) return m + std::log1p(std::exp(-std::abs(a - b)));
    return m + std::log1p(std::exp2(-std::abs(a - b))) * (1.0f / std::numbers::ln2_v<float>);
  }
  if constexpr (kOp == BinaryOp::kCopysign) return std::copysign(a, b);
  if constexpr (kOp == BinaryOp::kXlogy) {
    if (std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
    return a == 0 ? 0.0f : a * q(std::log(b));  // torch rounds bf16 / f16 log to storage
  }
  if constexpr (kOp == BinaryOp::kFmax) return std::fmax(a, b);
  if constexpr (kOp == BinaryOp::kFmin) return std::fmin(a, b);
  if constexpr (kOp == BinaryOp::kHeaviside) return a == 0 ? b : static_cast<float>(a > 0);
  return 0;
}

template <BinaryOp kOp, class Q>
void RunFloatMath(const TensorRef& out, const TensorRef& a, const TensorRef& b, Q q) {
  RunF32<2>(out, {&a, &b}, [q](auto in, auto sc, float* o, size_t n) {
    const float* x = in[0];
    const float* y = in[1];
    if (!sc[0] && !sc[1]) {
      for (size_t i = 0; i < n; ++i) o[i] = FloatMath<kOp>(x[i], y[i], q);
    } else {
      for (size_t i = 0; i < n; ++i) o[i] = FloatMath<kOp>(x[sc[0] ? 0 : i], y[sc[1] ? 0 : i], q);
    }
  });
}

template <BinaryOp kOp>
void RunFloatMath(DType storage, const TensorRef& out, const TensorRef& a, const TensorRef& b) {
  switch (storage) {
    case DType::kBFloat16:
      return RunFloatMath<kOp>(out, a, b, [](float v) {
        return internal::BF16ToF32(internal::F32ToBF16(v));
      });
    case DType::kFloat16:
      return RunFloatMath<kOp>(out, a, b, [](float v) {
        return internal::F16ToF32(internal::F32ToF16(v));
      });
    default: return RunFloatMath<kOp>(out, a, b, [](float v) { return v; });
  }
}

// Note [Integer division]: x / 0 sets `zero` (the kernel then fails with
// torch's message); x / -1 is a wrapping negation so INT_MIN / -1 never traps.
template <typename C>
C IntDiv(BinaryOp op, C a, C b, bool& zero) {
  if (b == 0) {
    zero = true;
    return 0;
  }
  if (b == -1) {
    return op == BinaryOp::kDivTrunc || op == BinaryOp::kDivFloor ? WrapMul(a, C(-1)) : C(0);
  }
  switch (op) {
    case BinaryOp::kDivTrunc: return a / b;
    case BinaryOp::kDivFloor: {
      const C q = a / b;
      return (a % b != 0 && ((a < 0) != (b < 0))) ? C(q - 1) : q;
    }
    case BinaryOp::kRemainder: {
      const C r = a % b;
      return (r != 0 && ((r < 0) != (b < 0))) ? C(r + b) : r;
    }
    default: return a % b;  // kFmod
  }
}

// torch's shifts: a shift by a negative amount or by >= the width gives 0
// (left) or the sign fill (right); the left shift wraps.
template <typename C>
C ShiftLeft(C a, C b) {
  constexpr C kBits = sizeof(C) * 8;
  if (b < 0 || b >= kBits) return 0;
  return static_cast<C>(static_cast<std::make_unsigned_t<C>>(a) << b);
}
template <typename C>
C ShiftRight(C a, C b) {
  constexpr C kBits = sizeof(C) * 8 - 1;
  if (b < 0 || b >= kBits) return a >> kBits;
  return a >> b;
}

template <typename T>
Status IntMath(BinaryOp op, const TensorRef& out, const TensorRef& a, const TensorRef& b) {
  using C = ComputeType<T>;
  switch (op) {
    case BinaryOp::kDivTrunc:
    case BinaryOp::kDivFloor:
    case BinaryOp::kRemainder:
    case BinaryOp::kFmod: {
      bool zero = false;
      MapExact<T, T>(out, a, b, [op, &zero](C x, C y) { return IntDiv(op, x, y, zero); });
      if (zero) return Status::Error("ZeroDivisionError: integer division by zero");
      return Status::Ok();
    }
    case BinaryOp::kBitwiseAnd: MapExact<T, T>(out, a, b, [](C x, C y) { return C(x & y); }); break;
    case BinaryOp::kBitwiseOr: MapExact<T, T>(out, a, b, [](C x, C y) { return C(x | y); }); break;
    case BinaryOp::kBitwiseXor: MapExact<T, T>(out, a, b, [](C x, C y) { return C(x ^ y); }); break;
    case BinaryOp::kShiftLeft: MapExact<T, T>(out, a, b, [](C x, C y) { return ShiftLeft(x, y); }); break;
    case BinaryOp::kShiftRight: MapExact<T, T>(out, a, b, [](C x, C y) { return ShiftRight(x, y); }); break;
    case BinaryOp::kFmax: MapExact<T, T>(out, a, b, [](C x, C y) { return std::max(x, y); }); break;
    case BinaryOp::kFmin: MapExact<T, T>(out, a, b, [](C x, C y) { return std::min(x, y); }); break;
    case BinaryOp::kHeaviside:
      MapExact<T, T>(out, a, b, [](C x, C y) { return x == 0 ? y : C(x > 0); });
      break;
    default: TRN_ASSERT(false, "BinaryMath: not a rounding or bitwise op");
  }
  return Status::Ok();
}

// Integer clamp bound: the nearest value of C inside [lo, hi] (bounds reach
// integer kernels only as integers, or +-inf when absent).
template <typename C>
C SaturatingBound(double v) {
  if (v <= static_cast<double>(std::numeric_limits<C>::lowest())) return std::numeric_limits<C>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<C>::max())) return std::numeric_limits<C>::max();
  return static_cast<C>(v);
}

constexpr const char* kClampNames[7] = TRN_DTYPE_NAMES("clamp");
constexpr const char* kActivationNames[][7] = {
    TRN_DTYPE_NAMES("leaky_relu"), TRN_DTYPE_NAMES("elu"),         TRN_DTYPE_NAMES("softplus"),
    TRN_DTYPE_NAMES("hardswish"),  TRN_DTYPE_NAMES("hardsigmoid"), TRN_DTYPE_NAMES("mish"),
    TRN_DTYPE_NAMES("hardshrink"), TRN_DTYPE_NAMES("softshrink"),  TRN_DTYPE_NAMES("threshold"),
    TRN_DTYPE_NAMES("log_sigmoid"),
};
// Vector instructions per element (Note [Describe flops] in elementwise.cc).
constexpr uint64_t kActivationFlops[] = {2, 16, 30, 5, 4, 44, 3, 6, 2, 33};
static_assert(std::size(kActivationNames) == static_cast<size_t>(ActivationOp::kLogSigmoid) + 1);
static_assert(std::size(kActivationFlops) == std::size(kActivationNames));
constexpr const char* kNanToNumNames[7] = TRN_DTYPE_NAMES("nan_to_num");
constexpr const char* kLerpNames[7] = TRN_DTYPE_NAMES("lerp");

KernelInfo DescribeMap(const char* name, const TensorRef& out, const TensorRef& in,
                       uint64_t flops_per_element, const char* aten_op) {
  KernelInfo info;
  info.name = name;
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(out.numel()) * flops_per_element;
  info.bytes_read = DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace

namespace internal {

Status BinaryMath(BinaryOp op, DType dtype, const TensorRef& out, const TensorRef& a,
                  const TensorRef& b) {
  if (IsFloating(dtype)) {
    switch (op) {
      case BinaryOp::kDivTrunc: RunFloatMath<BinaryOp::kDivTrunc>(dtype, out, a, b); break;
      case BinaryOp::kDivFloor: RunFloatMath<BinaryOp::kDivFloor>(dtype, out, a, b); break;
      case BinaryOp::kRemainder: RunFloatMath<BinaryOp::kRemainder>(dtype, out, a, b); break;
      case BinaryOp::kFmod: RunFloatMath<BinaryOp::kFmod>(dtype, out, a, b); break;
      case BinaryOp::kAtan2: RunFloatMath<BinaryOp::kAtan2>(dtype, out, a, b); break;
      case BinaryOp::kHypot: RunFloatMath<BinaryOp::kHypot>(dtype, out, a, b); break;
      case BinaryOp::kLogAddExp: RunFloatMath<BinaryOp::kLogAddExp>(dtype, out, a, b); break;
      case BinaryOp::kLogAddExp2: RunFloatMath<BinaryOp::kLogAddExp2>(dtype, out, a, b); break;
      case BinaryOp::kCopysign: RunFloatMath<BinaryOp::kCopysign>(dtype, out, a, b); break;
      case BinaryOp::kXlogy: RunFloatMath<BinaryOp::kXlogy>(dtype, out, a, b); break;
      case BinaryOp::kFmax: RunFloatMath<BinaryOp::kFmax>(dtype, out, a, b); break;
      case BinaryOp::kFmin: RunFloatMath<BinaryOp::kFmin>(dtype, out, a, b); break;
      case BinaryOp::kHeaviside: RunFloatMath<BinaryOp::kHeaviside>(dtype, out, a, b); break;
      default: TRN_ASSERT(false, "bitwise ops need an integer or bool dtype");
    }
    return Status::Ok();
  }
  return VisitDType(dtype, [&](auto tag) -> Status {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) return IntMath<T>(op, out, a, b);
    return Status::Ok();
  });
}

// torch's CPU computes these with libm (Sleef where it vectorizes), in float32
// for the 16-bit dtypes (float64 here too: Note [float64 policy]); scalar libm
// loops, as they are rare in models.
template <class F>
void MapLibm(const TensorRef& out, const TensorRef& in, F f) {
  MapF32(out, in, [&f](const float* x, float* o, size_t n) {
    for (size_t i = 0; i < n; ++i) o[i] = f(x[i]);
  });
}

Status UnaryMath(UnaryOp op, const TensorRef& out, const TensorRef& in) {
  switch (op) {
    case UnaryOp::kTan: MapLibm(out, in, [](float x) { return std::tan(x); }); break;
    case UnaryOp::kAsin: MapLibm(out, in, [](float x) { return std::asin(x); }); break;
    case UnaryOp::kAcos: MapLibm(out, in, [](float x) { return std::acos(x); }); break;
    case UnaryOp::kAtan: MapLibm(out, in, [](float x) { return std::atan(x); }); break;
    case UnaryOp::kSinh: MapLibm(out, in, [](float x) { return std::sinh(x); }); break;
    case UnaryOp::kCosh: MapLibm(out, in, [](float x) { return std::cosh(x); }); break;
    case UnaryOp::kAsinh: MapLibm(out, in, [](float x) { return std::asinh(x); }); break;
    case UnaryOp::kAcosh: MapLibm(out, in, [](float x) { return std::acosh(x); }); break;
    case UnaryOp::kAtanh: MapLibm(out, in, [](float x) { return std::atanh(x); }); break;
    case UnaryOp::kLog2: MapLibm(out, in, [](float x) { return std::log2(x); }); break;
    case UnaryOp::kLog10: MapLibm(out, in, [](float x) { return std::log10(x); }); break;
    case UnaryOp::kExp2: MapLibm(out, in, [](float x) { return std::exp2(x); }); break;
    case UnaryOp::kErfc: MapLibm(out, in, [](float x) { return std::erfc(x); }); break;
    case UnaryOp::kLgamma:  // the _r form: std::lgamma writes the global signgam (a data race)
      MapLibm(out, in, [](float x) {
        int sign;
        return lgammaf_r(x, &sign);
      });
      break;
    case UnaryOp::kFrac: MapLibm(out, in, [](float x) { return x - std::trunc(x); }); break;
    case UnaryOp::kSinc:
      MapLibm(out, in, [](float x) {
        if (x == 0) return 1.0f;
        const float p = std::numbers::pi_v<float> * x;
        return std::sin(p) / p;
      });
      break;
    case UnaryOp::kSignbit: {  // the stored sign bit: a bf16 / f16 -NaN keeps it (torch's too)
      const size_t item = ItemSize(in.dtype);
      ForEachRun<2>({&out, &in}, [item](const std::array<char*, 2>& p, int64_t n,
                                        const std::array<int64_t, 2>& s) {
        bool* o = reinterpret_cast<bool*>(p[0]);
        const unsigned char* x = reinterpret_cast<const unsigned char*>(p[1]);
        // Little-endian: the sign bit is the top bit of the element's last byte.
        for (int64_t i = 0; i < n; ++i) o[i * s[0]] = (x[(i * s[1] + 1) * item - 1] & 0x80) != 0;
      });
      break;
    }
    default: TRN_ASSERT(false, "UnaryMath: not a libm op");
  }
  return Status::Ok();
}

}  // namespace internal

Status Clamp(const TensorRef& out, const TensorRef& in, double lo, double hi) {
  TRN_ASSERT(out.dtype == in.dtype, "Clamp: out and in share one dtype");
  if (IsFloating(in.dtype)) {
    const auto fn = HWY_DYNAMIC_DISPATCH(ClampF32);
    const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
    internal::MapF32(out, in, [&](const float* x, float* o, size_t n) { fn(x, o, n, flo, fhi); });
    return Status::Ok();
  }
  VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) {
      using C = ComputeType<T>;
      const C l = SaturatingBound<C>(lo), h = SaturatingBound<C>(hi);
      MapExact<T, T>(out, in, in, [l, h](C x, C) { return std::min(std::max(x, l), h); });
    }
  });
  return Status::Ok();
}

Status Activation(ActivationOp op, const TensorRef& out, const TensorRef& in, double p0,
                  double p1, double p2) {
  TRN_ASSERT(out.dtype == in.dtype && IsFloating(in.dtype),
             "Activation: floating in and out of one dtype");
  const auto fn = HWY_DYNAMIC_DISPATCH(ActivationF32);
  const float a = static_cast<float>(p0), b = static_cast<float>(p1), c = static_cast<float>(p2);
  internal::MapF32(out, in, [&](const float* x, float* o, size_t n) { fn(op, x, o, n, a, b, c); });
  return Status::Ok();
}

Status RoundDecimals(const TensorRef& out, const TensorRef& in, int64_t decimals) {
  TRN_ASSERT(out.dtype == in.dtype && IsFloating(in.dtype),
             "RoundDecimals: floating in and out of one dtype");
  const bool divide_first = decimals < 0;
  const float scale = static_cast<float>(std::pow(10.0, static_cast<double>(
                                                            divide_first ? -decimals : decimals)));
  const auto fn = HWY_DYNAMIC_DISPATCH(RoundDecimalsF32);
  internal::MapF32(out, in,
                   [&](const float* x, float* o, size_t n) { fn(x, o, n, scale, divide_first); });
  return Status::Ok();
}

Status NanToNum(const TensorRef& out, const TensorRef& in, double nan, double posinf,
                double neginf) {
  TRN_ASSERT(out.dtype == in.dtype, "NanToNum: out and in share one dtype");
  if (!IsFloating(in.dtype)) return Copy(out, in);
  VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || internal::kIsHalf<T>) {
      const T vn = Cast<T>(nan), vp = Cast<T>(posinf), vm = Cast<T>(neginf);
      ForEachRun<2>({&out, &in}, [&](const std::array<char*, 2>& p, int64_t n,
                                     const std::array<int64_t, 2>& s) {
        T* o = reinterpret_cast<T*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        for (int64_t i = 0; i < n; ++i) {
          const T v = x[i * s[1]];
          const auto f = [&] {
            if constexpr (internal::kIsHalf<T>) return internal::ToF32(v);
            else return v;
          }();
          o[i * s[0]] = std::isnan(f) ? vn : f == std::numeric_limits<decltype(f)>::infinity() ? vp
                        : f == -std::numeric_limits<decltype(f)>::infinity()              ? vm
                                                                                          : v;
        }
      });
    }
  });
  return Status::Ok();
}

Status Lerp(const TensorRef& out, const TensorRef& a, const TensorRef& b,
            const TensorRef& weight) {
  TRN_ASSERT(IsFloating(out.dtype) && a.dtype == out.dtype && b.dtype == out.dtype,
             "Lerp: floating a, b and out of one dtype");
  RunF32<3>(out, {&a, &b, &weight}, [](auto in, auto sc, float* o, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const float x = in[0][sc[0] ? 0 : i], y = in[1][sc[1] ? 0 : i], w = in[2][sc[2] ? 0 : i];
      const float diff = y - x;
      o[i] = std::fabs(w) < 0.5f ? x + w * diff : y - diff * (1.0f - w);
    }
  });
  return Status::Ok();
}

KernelInfo DescribeClamp(const TensorRef& out, const TensorRef& in, const char* aten_op) {
  return DescribeMap(kClampNames[static_cast<int>(in.dtype)], out, in, 2, aten_op);
}
KernelInfo DescribeActivation(ActivationOp op, const TensorRef& out, const TensorRef& in,
                              const char* aten_op) {
  const int k = static_cast<int>(op);
  return DescribeMap(kActivationNames[k][static_cast<int>(in.dtype)], out, in,
                     kActivationFlops[k], aten_op);
}
KernelInfo DescribeNanToNum(const TensorRef& out, const TensorRef& in, const char* aten_op) {
  return DescribeMap(kNanToNumNames[static_cast<int>(in.dtype)], out, in, 3, aten_op);
}
// Only out and a are known: b (and a tensor weight) count as dense like a.
KernelInfo DescribeLerp(const TensorRef& out, const TensorRef& a, const char* aten_op) {
  KernelInfo info = DescribeMap(kLerpNames[static_cast<int>(a.dtype)], out, a, 3, aten_op);
  info.bytes_read *= 2;
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
