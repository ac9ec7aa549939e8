// Complex64 kernels over (re, im) float pairs (Note [Complex as pairs] in
// complex.h): elementwise arithmetic, polar, abs / angle (the FFTs: fft.cc).
// Additions and products over unit-stride runs are vector code; the rest
// (division, polar, abs) scalar loops: complex models use them rarely.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/complex.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <array>
#include <type_traits>
#include <utility>

#include "hwy/highway.h"

#include "core/kernels/complex.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Operand layouts of a run: pairs at stride 2, real values at stride 1, or
// one value (stride 0, a broadcast).
enum RunOperand : int { kPairs = 0, kPairsConj = 1, kReal = 2, kOnePair = 3, kOneReal = 4 };

// o[0 .. 2 count) = x op y (add / sub: x + y (s + 0i)) for kAdd / kSub / kMul
// (Mul: true), over the first count - count % lanes elements; returns how many
// it did. Products round as CPU's (a separate multiply and add: no fused
// multiply-add), so results equal CPU PyTorch's bit for bit. One instance per
// op and operand layouts: a broadcast's runs are short (Meta's rotary table:
// 32 pairs), so the loop carries no per-element dispatch.
template <bool Mul, int XM, int YM>
int64_t BinaryRun(float* o, const float* x, const float* y, int64_t count, float s) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  const auto load = [&](const float* p, auto mode, int64_t i, V& re, V& im) {
    constexpr int kMode = decltype(mode)::value;
    if constexpr (kMode == kPairs || kMode == kPairsConj) {
      hn::LoadInterleaved2(d, p + 2 * i, re, im);
      if constexpr (kMode == kPairsConj) im = hn::Neg(im);
    } else if constexpr (kMode == kReal) {
      re = hn::LoadU(d, p + i);
      im = hn::Zero(d);
    } else if constexpr (kMode == kOnePair) {
      re = hn::Set(d, p[0]);
      im = hn::Set(d, p[1]);
    } else {
      re = hn::Set(d, p[0]);
      im = hn::Zero(d);
    }
  };
  const V vs = hn::Set(d, s), zero = hn::Zero(d);
  int64_t i = 0;
  for (; i + N <= count; i += N) {
    V ar, ai, br, bi;
    load(x, std::integral_constant<int, XM>(), i, ar, ai);
    load(y, std::integral_constant<int, YM>(), i, br, bi);
    V rr, ri;
    if constexpr (Mul) {
      rr = hn::Sub(hn::Mul(ar, br), hn::Mul(ai, bi));
      ri = hn::Add(hn::Mul(ar, bi), hn::Mul(ai, br));
    } else {  // x + y * (s + 0i): CPU's a + alpha * b, a complex product (inf * 0 is NaN)
      rr = hn::Add(ar, hn::Sub(hn::Mul(br, vs), hn::Mul(bi, zero)));
      ri = hn::Add(ai, hn::Add(hn::Mul(br, zero), hn::Mul(bi, vs)));
    }
    hn::StoreInterleaved2(rr, ri, d, o + 2 * i);
  }
  return i;
}

using BinaryRunFn = int64_t (*)(float*, const float*, const float*, int64_t, float);
template <bool Mul, int XM, int... YM>
constexpr std::array<BinaryRunFn, sizeof...(YM)> RunsFor(std::integer_sequence<int, YM...>) {
  return {&BinaryRun<Mul, XM, YM>...};
}

// The run function of an op and operand layouts (RunOperand), for this target.
BinaryRunFn ComplexBinaryRunFor(bool mul, int xm, int ym) {
  using Modes = std::make_integer_sequence<int, 5>;
  static constexpr std::array<BinaryRunFn, 5> kRuns[2][5] = {
      {RunsFor<false, 0>(Modes()), RunsFor<false, 1>(Modes()), RunsFor<false, 2>(Modes()),
       RunsFor<false, 3>(Modes()), RunsFor<false, 4>(Modes())},
      {RunsFor<true, 0>(Modes()), RunsFor<true, 1>(Modes()), RunsFor<true, 2>(Modes()),
       RunsFor<true, 3>(Modes()), RunsFor<true, 4>(Modes())}};
  return kRuns[mul][xm][ym];
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <array>
#include <cmath>
#include <complex>

#include "core/common/assert.h"
#include "core/kernels/scratch.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(ComplexBinaryRunFor);

namespace {

struct C {
  float re, im;
};
inline C Mul(C a, C b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
inline C Add(C a, C b) { return {a.re + b.re, a.im + b.im}; }

// c10::complex's division (numpy's: Smith's scaling), so results match CPU's.
inline C Div(C x, C y) {
  const float a = x.re, b = x.im, c = y.re, d = y.im;
  const float abs_c = std::fabs(c), abs_d = std::fabs(d);
  if (abs_c >= abs_d) {
    if (abs_c == 0 && abs_d == 0) return {a / abs_c, b / abs_d};  // inf / NaN, as torch
    const float rat = d / c, scl = 1.0f / (c + d * rat);
    return {(a + b * rat) * scl, (b - a * rat) * scl};
  }
  const float rat = c / d, scl = 1.0f / (d + c * rat);
  return {(a * rat + b) * scl, (b * rat - a) * scl};
}

// An operand's element at p (floats).
inline C Read(const float* p, bool real, bool conj) {
  if (real) return {p[0], 0.0f};
  return {p[0], conj ? -p[1] : p[1]};
}

// A run operand's layout for ComplexBinaryRun, or -1 when its stride has none.
int RunMode(int64_t stride, bool real, bool conj) {
  if (stride == 0) return real ? 4 : conj ? -1 : 3;  // kOneReal, kOnePair
  if (real) return stride == 1 ? 2 : -1;             // kReal
  return stride == 2 ? (conj ? 1 : 0) : -1;          // kPairsConj, kPairs
}

// A scalar operand as a stride-0 view of out's sizes over `pair`.
TensorRef ScalarView(const TensorRef& out, float* pair) {
  TensorRef r = out;
  r.data = pair;
  r.dtype = DType::kFloat32;
  for (int d = 0; d < r.ndim; ++d) r.strides[d] = 0;
  return r;
}

}  // namespace

Status ComplexBinary(ComplexBinaryOp op, const TensorRef& out, const ComplexOperand& a_in,
                     const ComplexOperand& b_in, double alpha) {
  TRN_ASSERT(out.dtype == DType::kFloat32, "ComplexBinary: out must be float32 pairs");
  float a_pair[2] = {static_cast<float>(a_in.re), static_cast<float>(a_in.im)};
  float b_pair[2] = {static_cast<float>(b_in.re), static_cast<float>(b_in.im)};
  const bool a_scalar = a_in.t.data == nullptr, b_scalar = b_in.t.data == nullptr;
  const TensorRef a = a_scalar ? ScalarView(out, a_pair) : a_in.t;
  const TensorRef b = b_scalar ? ScalarView(out, b_pair) : b_in.t;
  TRN_ASSERT(a.dtype == DType::kFloat32 && b.dtype == DType::kFloat32,
             "ComplexBinary: operands must be float32 pairs or values");
  const bool a_real = a_in.real && !a_scalar, b_real = b_in.real && !b_scalar;
  const bool a_conj = a_in.conj, b_conj = b_in.conj;
  const float s = static_cast<float>(op == ComplexBinaryOp::kSub ? -alpha : alpha);
  int64_t (*run)(float*, const float*, const float*, int64_t, float) = nullptr;
  int run_xm = -1, run_ym = -1;
  internal::ForEachRun<3>(
      {&out, &a, &b},
      [&](const std::array<char*, 3>& p, int64_t count, const std::array<int64_t, 3>& st) {
        float* o = reinterpret_cast<float*>(p[0]);
        const float* x = reinterpret_cast<const float*>(p[1]);
        const float* y = reinterpret_cast<const float*>(p[2]);
        int64_t i = 0;
        if (op != ComplexBinaryOp::kDiv && st[0] == 2) {  // unit-stride runs: vector code
          const int xm = RunMode(st[1], a_real, a_conj), ym = RunMode(st[2], b_real, b_conj);
          if (xm >= 0 && ym >= 0) {
            if (xm != run_xm || ym != run_ym) {  // the runs' strides rarely change
              run = HWY_DYNAMIC_DISPATCH(ComplexBinaryRunFor)(op == ComplexBinaryOp::kMul, xm, ym);
              run_xm = xm, run_ym = ym;
            }
            i = run(o, x, y, count, s);
            o += i * st[0], x += i * st[1], y += i * st[2];
          }
        }
        for (; i < count; ++i, o += st[0], x += st[1], y += st[2]) {
          const C u = Read(x, a_real, a_conj), v = Read(y, b_real, b_conj);
          C r;
          switch (op) {
            case ComplexBinaryOp::kAdd:
            case ComplexBinaryOp::kSub: r = Add(u, Mul(v, C{s, 0.0f})); break;
            case ComplexBinaryOp::kMul: r = Mul(u, v); break;
            case ComplexBinaryOp::kDiv: r = Div(u, v); break;
          }
          o[0] = r.re;
          o[1] = r.im;
        }
      });
  return Status::Ok();
}

Status Polar(const TensorRef& out, const TensorRef& abs, const TensorRef& angle) {
  TRN_ASSERT(out.dtype == DType::kFloat32 && abs.dtype == DType::kFloat32 &&
                 angle.dtype == DType::kFloat32,
             "Polar: float32 abs and angle, out pairs");
  internal::ForEachRun<3>(
      {&out, &abs, &angle},
      [&](const std::array<char*, 3>& p, int64_t count, const std::array<int64_t, 3>& st) {
        float* o = reinterpret_cast<float*>(p[0]);
        const float* r = reinterpret_cast<const float*>(p[1]);
        const float* t = reinterpret_cast<const float*>(p[2]);
        for (int64_t i = 0; i < count; ++i, o += st[0], r += st[1], t += st[2]) {
          o[0] = *r * std::cos(*t);
          o[1] = *r * std::sin(*t);
        }
      });
  return Status::Ok();
}

Status ComplexUnary(ComplexUnaryOp op, const TensorRef& out, const ComplexOperand& in) {
  TRN_ASSERT(out.dtype == DType::kFloat32 && in.t.dtype == DType::kFloat32 && !in.real,
             "ComplexUnary: pairs in, float32 pairs or values out");
  const bool conj = in.conj;
  internal::ForEachRun<2>(
      {&out, &in.t},
      [&](const std::array<char*, 2>& p, int64_t count, const std::array<int64_t, 2>& st) {
        float* o = reinterpret_cast<float*>(p[0]);
        const float* x = reinterpret_cast<const float*>(p[1]);
        for (int64_t i = 0; i < count; ++i, o += st[0], x += st[1]) {
          const C u = Read(x, false, conj);
          switch (op) {
            case ComplexUnaryOp::kAbs: *o = std::hypot(u.re, u.im); break;
            case ComplexUnaryOp::kAngle: *o = std::atan2(u.im, u.re); break;
            case ComplexUnaryOp::kExp:
            case ComplexUnaryOp::kLog:
            case ComplexUnaryOp::kSqrt: {
              const std::complex<float> z(u.re, u.im);
              const std::complex<float> e = op == ComplexUnaryOp::kExp   ? std::exp(z)
                                            : op == ComplexUnaryOp::kLog ? std::log(z)
                                                                         : std::sqrt(z);
              o[0] = e.real();
              o[1] = e.imag();
              break;
            }
          }
        }
      });
  return Status::Ok();
}

KernelInfo DescribeComplex(const char* name, const TensorRef& out, uint64_t flops_per_elem,
                           const char* aten_op) {
  KernelInfo info;
  info.name = name;
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(out.numel()) * flops_per_elem;
  info.bytes_read = out.nbytes();
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
