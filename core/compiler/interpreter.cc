// The row/tile interpreter of fused kernels (Note [Row programs] in
// program_internal.h), compiled once per Highway target with runtime dispatch.
// Each instruction is one SIMD loop over a chunk; no allocation once a
// thread's register file has grown to the largest program it ran.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/compiler/interpreter.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/cache_control.h"
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/common/assert.h"
#include "core/compiler/program_internal.h"
#include "core/kernels/convert.h"
#include "core/kernels/elementwise-inl.h"

#ifndef TRN_COMPILER_INTERPRETER_ONCE_
#define TRN_COMPILER_INTERPRETER_ONCE_
namespace trn::compiler::internal {
namespace {

// Per-thread register file, grown on demand and then reused.
struct Registers {
  std::vector<float> vregs;   // num_vregs * chunk
  std::vector<float> spills;  // num_spills * inner
  std::vector<float> scalars;
  std::vector<float> accs;
  std::vector<const float*> vp;  // where each chunk register's data is now
  std::vector<char*> base;       // per operand: buffer base
  std::vector<int64_t> row;      // per operand: element offset of the current row
  std::vector<int64_t> next;     // per operand: element offset of the next row
};

inline Registers& ThreadRegisters() {
  static thread_local Registers regs;
  return regs;
}

// Scalar semantics of every VOp (per-row math; also the reference for the
// chunk loops' special cases).
inline float ScalarOp(VOp op, float a, float b, float c, DType round) {
  switch (op) {
    case VOp::kCopy: return a;
    case VOp::kNeg: return -a;
    case VOp::kAbs: return std::fabs(a);
    case VOp::kRelu: return a < 0 ? 0.0f : a;
    case VOp::kExp: return std::exp(a);
    case VOp::kLog: return std::log(a);
    case VOp::kSqrt: return std::sqrt(a);
    case VOp::kRsqrt: return 1.0f / std::sqrt(a);
    case VOp::kReciprocal: return 1.0f / a;
    case VOp::kSigmoid: return 1.0f / (1.0f + std::exp(-a));
    case VOp::kTanh: return std::tanh(a);
    case VOp::kSilu: return a / (1.0f + std::exp(-a));
    case VOp::kGelu: return 0.5f * a * std::erfc(-a * 0.70710678118654752f);
    case VOp::kGeluTanh: {
      const float u = 0.7978845608028654f * (a + 0.044715f * a * a * a);
      return 0.5f * a * (1.0f + std::tanh(u));
    }
    case VOp::kSin: return std::sin(a);
    case VOp::kCos: return std::cos(a);
    case VOp::kLog1p: return std::log1p(a);
    case VOp::kExpm1: return std::expm1(a);
    case VOp::kErf: return std::erf(a);
    case VOp::kSquare: return a * a;
    case VOp::kRound: {
      float r;
      kernels::internal::VisitDType(round, [&](auto tag) {
        using T = decltype(tag);
        r = kernels::internal::ToF32(kernels::internal::Cast<T>(a));
      });
      return r;
    }
    case VOp::kAdd: return a + b;
    case VOp::kSub: return a - b;
    case VOp::kMul: return a * b;
    case VOp::kDiv: return a / b;
    case VOp::kPow: return std::pow(a, b);
    case VOp::kMax: return (std::isnan(a) || std::isnan(b)) ? a + b : std::max(a, b);
    case VOp::kMin: return (std::isnan(a) || std::isnan(b)) ? a + b : std::min(a, b);
    case VOp::kEq: return a == b;
    case VOp::kNe: return a != b;
    case VOp::kLt: return a < b;
    case VOp::kLe: return a <= b;
    case VOp::kGt: return a > b;
    case VOp::kGe: return a >= b;
    case VOp::kWhere: return a != 0 ? b : c;
    case VOp::kMulMul: return a * b * c;
    case VOp::kExpSub: return std::exp(a - b);
  }
  return a;
}

// Calls f(inner offset, count) for the runs of elements [c0, c0 + n) of a
// row of segments, each run `count` elements inner_stride apart.
// No division per segment (a 64-bit idiv, then a dependent multiply: a
// quarter of a rotary kernel's time on 32-float segments), and none for a
// chunk that starts in the first segment (a row's first chunk).
template <class F>
inline void ForEachRun(const Operand& o, int64_t c0, int64_t n, const F& f) {
  const int64_t end = c0 + n;
  int64_t seg = c0 < o.seg_len ? 0 : c0 / o.seg_len, at = c0 - seg * o.seg_len;
  int64_t off = seg * o.seg_stride + at * o.inner_stride;
  for (int64_t i = c0; i < end;) {
    const int64_t len = std::min(o.seg_len - at, end - i);
    f(off, i - c0, len);
    i += len;
    off += o.seg_stride - at * o.inner_stride;  // the next segment's start
    at = 0;
  }
}

// Strided, segmented or gathered load of elements [c0, c0 + n) of operand `o`
// in the row at element offset `row`, converted to f32 (rotate_half aside).
inline void LoadElements(const Operand& o, const char* base, int64_t row, int64_t c0, int64_t n,
                         float* dst) {
  const size_t item = ItemSize(o.dtype);
  if (!o.gather.empty()) {
    if (o.dtype == DType::kFloat32) {
      const float* b = reinterpret_cast<const float*>(base) + row;
      const int64_t* g = o.gather.data() + c0;
      for (int64_t i = 0; i < n; ++i) dst[i] = b[g[i]];
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      kernels::internal::LoadAsF32(o.dtype, base + (row + o.gather[c0 + i]) * item, 1, 1, dst + i);
    }
    return;
  }
  if (o.seg_len > 0) {
    ForEachRun(o, c0, n, [&](int64_t off, int64_t at, int64_t len) {
      if (o.dtype == DType::kFloat32 && o.inner_stride == 1) {
        std::memcpy(dst + at, reinterpret_cast<const float*>(base) + row + off,
                    static_cast<size_t>(len) * sizeof(float));
      } else {
        kernels::internal::LoadAsF32(o.dtype, base + (row + off) * item, o.inner_stride, len,
                                     dst + at);
      }
    });
    return;
  }
  const char* src = base + (row + c0 * o.inner_stride) * item;
  if (o.inner_stride == 1 && o.dtype == DType::kBool) {  // masks: a loop that vectorizes
    const uint8_t* b = reinterpret_cast<const uint8_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = b[i] != 0 ? 1.0f : 0.0f;
    return;
  }
  if (o.inner_stride == 1 && o.dtype == DType::kBFloat16) {
    const uint16_t* h = reinterpret_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(h[i]) << 16;
      std::memcpy(dst + i, &u, sizeof(float));
    }
    return;
  }
  kernels::internal::LoadAsF32(o.dtype, src, o.inner_stride, n, dst);
}

// LoadElements, then each 2h-block's halves swapped, the new first one negated
// (Note [Rotate half]): chunks hold whole blocks (RowLowering::Finish).
inline void LoadChunk(const Operand& o, const char* base, int64_t row, int64_t c0, int64_t n,
                      float* HWY_RESTRICT dst) {
  LoadElements(o, base, row, c0, n, dst);
  const int64_t h = o.rotate_half;
  if (h == 0) return;
  for (int64_t b = 0; b < n; b += 2 * h) {
    float* HWY_RESTRICT lo = dst + b;
    float* HWY_RESTRICT hi = dst + b + h;
    for (int64_t j = 0; j < h; ++j) {
      const float t = lo[j];
      lo[j] = -hi[j];
      hi[j] = t;
    }
  }
}

inline void StoreChunk(const Operand& o, char* base, int64_t row, int64_t c0, int64_t n,
                       const float* src) {
  const size_t item = ItemSize(o.dtype);
  if (!o.gather.empty()) {
    if (o.dtype == DType::kFloat32) {
      float* b = reinterpret_cast<float*>(base) + row;
      const int64_t* g = o.gather.data() + c0;
      for (int64_t i = 0; i < n; ++i) b[g[i]] = src[i];
      return;
    }
    for (int64_t i = 0; i < n; ++i) {
      kernels::internal::StoreFromF32(o.dtype, base + (row + o.gather[c0 + i]) * item, 1, 1,
                                      src + i);
    }
    return;
  }
  if (o.seg_len > 0) {
    ForEachRun(o, c0, n, [&](int64_t off, int64_t at, int64_t len) {
      if (o.dtype == DType::kFloat32 && o.inner_stride == 1) {
        std::memcpy(reinterpret_cast<float*>(base) + row + off, src + at,
                    static_cast<size_t>(len) * sizeof(float));
      } else {
        kernels::internal::StoreFromF32(o.dtype, base + (row + off) * item, o.inner_stride, len,
                                        src + at);
      }
    });
    return;
  }
  kernels::internal::StoreFromF32(o.dtype, base + (row + c0 * o.inner_stride) * item,
                                  o.inner_stride, n, src);
}

}  // namespace
}  // namespace trn::compiler::internal
#endif  // TRN_COMPILER_INTERPRETER_ONCE_

HWY_BEFORE_NAMESPACE();
namespace trn::compiler::internal::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace kx = trn::kernels::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

// Note [Streamed outputs]: a value stored only to a huge output (lower_rows.cc's
// kStreamBytes) is computed straight into it with non-temporal stores, so the
// output costs one DRAM write per line and no read-for-ownership; computing
// into a chunk register and streaming a copy measured 1.3-1.5x slower on
// rms_norm 4096^2 (an extra L1 pass and bursts of stores that stall the
// write-combining buffers). Rows that start misaligned take the copy.
//
// Stores a result vector: non-temporal when kStream (p is then vector-aligned).
template <bool kStream>
HWY_INLINE void Put(DF d, VF v, float* HWY_RESTRICT p) {
  if constexpr (kStream) {
    hn::Stream(v, d, p);
  } else {
    hn::StoreU(v, d, p);
  }
}

struct Src {
  const float* p;
  float s;
  bool scalar;
};

// A row reduction over another memory stream, run inside a compute loop (Note
// [Row pipelining]): acc += sum of p[i] (squared when sq) for i < n.
struct Side {
  const float* p = nullptr;
  bool sq = false;
  float acc = 0;
};

// Adds p[i0, n) of a side reduction in scalar code.
HWY_INLINE void SideTail(Side& side, size_t i0, size_t n) {
  for (size_t i = i0; i < n; ++i) side.acc += side.sq ? side.p[i] * side.p[i] : side.p[i];
}

// out[i] = f(a[i], b[i], c[i]) for i < n, with each source's broadcast-ness a
// compile-time constant so the loop body has no branch (kUnroll: two vectors
// per step, for cheap bodies; unary bodies are long enough). kSide 1 / 2 also
// folds `side` (its sum / sum of squares) in the same loop. (Few ops take a side, FoldsSide: each variant is
// another copy of every loop, and compile time grows with them.)
template <bool kStream, bool kUnroll, bool kSa, bool kSb, bool kSc, int kSide, class F>
HWY_INLINE void MapLoop(const Src& a, const Src& b, const Src& c, float* HWY_RESTRICT out,
                        size_t n, Side& side, const F& f) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const VF va = hn::Set(d, a.s), vb = hn::Set(d, b.s), vc = hn::Set(d, c.s);
  // Locals, so that stores to out need not reload them.
  const float* HWY_RESTRICT pa = a.p;
  const float* HWY_RESTRICT pb = b.p;
  const float* HWY_RESTRICT pc = c.p;
  const float* HWY_RESTRICT sp = side.p;
  const auto at = [&](size_t i) {
    VF x, y, z;
    if constexpr (kSa) x = va; else x = hn::LoadU(d, pa + i);
    if constexpr (kSb) y = vb; else y = hn::LoadU(d, pb + i);
    if constexpr (kSc) z = vc; else z = hn::LoadU(d, pc + i);
    return f(d, x, y, z);
  };
  VF s0 = hn::Zero(d), s1 = hn::Zero(d);
  // A separate loop per kind of sum: one shared loop with a blend measured 5%
  // slower on rms_norm.
  const auto fold = [&](size_t i, VF acc) {
    const VF x = hn::LoadU(d, sp + i);
    if constexpr (kSide == 2) return hn::MulAdd(x, x, acc);
    return hn::Add(x, acc);
  };
  size_t i = 0;
  for (; kUnroll && i + 2 * N <= n; i += 2 * N) {
    if constexpr (kSide != 0) {
      s0 = fold(i, s0);
      s1 = fold(i + N, s1);
    }
    const VF y0 = at(i), y1 = at(i + N);
    Put<kStream>(d, y0, out + i);
    Put<kStream>(d, y1, out + i + N);
  }
  for (; i + N <= n; i += N) {
    if constexpr (kSide != 0) s0 = fold(i, s0);
    Put<kStream>(d, at(i), out + i);
  }
  if constexpr (kSide != 0) {
    side.acc += hn::GetLane(hn::SumOfLanes(d, hn::Add(s0, s1)));
    SideTail(side, i, n);
  }
  if (i == n) return;
  HWY_ALIGN float ba[kx::kMaxLanesF32] = {};
  HWY_ALIGN float bb[kx::kMaxLanesF32] = {};
  HWY_ALIGN float bc[kx::kMaxLanesF32] = {};
  for (size_t j = 0; i + j < n; ++j) {
    ba[j] = kSa ? a.s : a.p[i + j];
    bb[j] = kSb ? b.s : b.p[i + j];
    bc[j] = kSc ? c.s : c.p[i + j];
  }
  hn::Store(f(d, hn::Load(d, ba), hn::Load(d, bb), hn::Load(d, bc)), d, ba);
  for (size_t j = 0; i + j < n; ++j) out[i + j] = ba[j];
}

// MapLoop over the first kArity sources (the others are unused broadcasts), for
// any combination of broadcast sources; all broadcasts compute one vector.
template <bool kStream, int kArity, int kSide, class F>
HWY_INLINE void Map(const Src& a, const Src& b, const Src& c, float* HWY_RESTRICT out, size_t n,
                    Side& side, const F& f) {
  constexpr bool kU = kArity > 1;
  const int sa = a.scalar, sb = kArity < 2 || b.scalar, sc = kArity < 3 || c.scalar;
  switch (sa * 4 + sb * 2 + sc) {
    case 0: if constexpr (kArity == 3) return MapLoop<kStream, kU, false, false, false, kSide>(a, b, c, out, n, side, f); break;
    case 1: if constexpr (kArity >= 2) return MapLoop<kStream, kU, false, false, true, kSide>(a, b, c, out, n, side, f); break;
    case 2: if constexpr (kArity == 3) return MapLoop<kStream, kU, false, true, false, kSide>(a, b, c, out, n, side, f); break;
    case 3: return MapLoop<kStream, kU, false, true, true, kSide>(a, b, c, out, n, side, f);
    case 4: if constexpr (kArity == 3) return MapLoop<kStream, kU, true, false, false, kSide>(a, b, c, out, n, side, f); break;
    case 5: if constexpr (kArity >= 2) return MapLoop<kStream, kU, true, false, true, kSide>(a, b, c, out, n, side, f); break;
    case 6: if constexpr (kArity == 3) return MapLoop<kStream, kU, true, true, false, kSide>(a, b, c, out, n, side, f); break;
    default: break;
  }
  const DF d;
  const float v = hn::GetLane(f(d, hn::Set(d, a.s), hn::Set(d, b.s), hn::Set(d, c.s)));
  for (size_t i = 0; i < n; ++i) out[i] = v;
  if constexpr (kSide != 0) SideTail(side, 0, n);
}

// Flag (1.0 / 0.0) of a mask.
HWY_INLINE VF Flag(DF d, hn::Mask<DF> m) { return hn::IfThenElseZero(m, hn::Set(d, 1.0f)); }

// out = in.op(a, b, c) over n elements; kStream: non-temporal stores, out
// vector-aligned (Note [Streamed outputs]).
// `side` (side.p may be null) is folded in the same loop.
template <bool kStream>
void Compute(const Instr& in, const Src& a, const Src& b, const Src& c, float* out, size_t n,
             Side& side) {
  Side none;
  auto u = [&](const auto& f) {
    Map<kStream, 1, 0>(a, b, c, out, n, none, [&f](DF d, VF x, VF, VF) { return f(d, x); });
  };
  auto bin = [&](const auto& f) {
    Map<kStream, 2, 0>(a, b, c, out, n, none, [&f](DF d, VF x, VF y, VF) { return f(d, x, y); });
  };
  auto tern = [&](const auto& f) { Map<kStream, 3, 0>(a, b, c, out, n, none, f); };
  // The ops of FoldsSide, with or without a side.
  auto sided = [&](auto arity, const auto& f) {
    constexpr int kArity = decltype(arity)::value;
    if (side.p == nullptr) return Map<kStream, kArity, 0>(a, b, c, out, n, none, f);
    if (side.sq) return Map<kStream, kArity, 2>(a, b, c, out, n, side, f);
    return Map<kStream, kArity, 1>(a, b, c, out, n, side, f);
  };
  using Two = std::integral_constant<int, 2>;
  using Three = std::integral_constant<int, 3>;
  TRN_ASSERT(side.p == nullptr || FoldsSide(in.op), "Compute: a side on an op that cannot fold it");
  switch (in.op) {
    case VOp::kCopy: return u([](DF, VF x) { return x; });
    case VOp::kNeg: return u([](DF, VF x) { return hn::Neg(x); });
    case VOp::kAbs: return u([](DF, VF x) { return hn::Abs(x); });
    case VOp::kRelu: return u([](DF d, VF x) { return hn::IfThenZeroElse(hn::Lt(x, hn::Zero(d)), x); });
    case VOp::kExp: return u([](DF d, VF x) { return kx::ExpF(d, x); });
    case VOp::kLog: return u([](DF d, VF x) { return kx::LogF(d, x); });
    case VOp::kSqrt: return u([](DF, VF x) { return hn::Sqrt(x); });
    case VOp::kRsqrt: return u([](DF d, VF x) { return hn::Div(hn::Set(d, 1.0f), hn::Sqrt(x)); });
    case VOp::kReciprocal: return u([](DF d, VF x) { return hn::Div(hn::Set(d, 1.0f), x); });
    case VOp::kSigmoid: return u([](DF d, VF x) { return kx::SigmoidF(d, x); });
    case VOp::kTanh: return u([](DF d, VF x) { return kx::TanhF(d, x); });
    case VOp::kSilu: return u([](DF d, VF x) { return kx::SiluF(d, x); });
    case VOp::kGelu: return u([](DF d, VF x) { return kx::GeluF(d, x); });
    case VOp::kGeluTanh: return u([](DF d, VF x) { return kx::GeluTanhF(d, x); });
    case VOp::kSin: return u([](DF d, VF x) { return hn::Sin(d, x); });
    case VOp::kCos: return u([](DF d, VF x) { return hn::Cos(d, x); });
    case VOp::kLog1p: return u([](DF d, VF x) { return kx::Log1pF(d, x); });
    case VOp::kExpm1: return u([](DF d, VF x) { return kx::Expm1F(d, x); });
    case VOp::kErf: return u([](DF d, VF x) { return kx::ErfPreciseF(d, x); });
    case VOp::kSquare: return u([](DF, VF x) { return hn::Mul(x, x); });
    case VOp::kRound:  // a bfloat16 / float16 model's casts: SIMD (scalar: 5x its eager time)
      if (in.round == DType::kBFloat16) {
        return u([](DF d, VF x) { return hn::BitCast(d, kx::BF16HighBits(d, x)); });
      }
      if constexpr (kx::kHardwareF16) {  // Note [float16 conversion targets]
        if (in.round == DType::kFloat16) {
          return u([](DF d, VF x) {
            const hn::Rebind<hwy::float16_t, DF> dh;
            return hn::PromoteTo(d, hn::DemoteTo(dh, x));
          });
        }
      }
      for (size_t i = 0; i < n; ++i) {
        out[i] = ScalarOp(VOp::kRound, a.scalar ? a.s : a.p[i], 0, 0, in.round);
      }
      return;
    case VOp::kAdd: return bin([](DF, VF x, VF y) { return hn::Add(x, y); });
    case VOp::kSub: return sided(Two(), [](DF, VF x, VF y, VF) { return hn::Sub(x, y); });
    case VOp::kMul: return sided(Two(), [](DF, VF x, VF y, VF) { return hn::Mul(x, y); });
    case VOp::kDiv: return bin([](DF, VF x, VF y) { return hn::Div(x, y); });
    case VOp::kMax: return bin([](DF d, VF x, VF y) { return kx::MaxNaNF(d, x, y); });
    case VOp::kMin: return bin([](DF d, VF x, VF y) { return kx::MinNaNF(d, x, y); });
    case VOp::kEq: return bin([](DF d, VF x, VF y) { return Flag(d, hn::Eq(x, y)); });
    case VOp::kNe:
      return bin([](DF d, VF x, VF y) { return hn::IfThenZeroElse(hn::Eq(x, y), hn::Set(d, 1.0f)); });
    case VOp::kLt: return bin([](DF d, VF x, VF y) { return Flag(d, hn::Lt(x, y)); });
    case VOp::kLe: return bin([](DF d, VF x, VF y) { return Flag(d, hn::Le(x, y)); });
    case VOp::kGt: return bin([](DF d, VF x, VF y) { return Flag(d, hn::Gt(x, y)); });
    case VOp::kGe: return bin([](DF d, VF x, VF y) { return Flag(d, hn::Ge(x, y)); });
    case VOp::kPow:  // std::pow: torch's semantics for every sign and special value
      for (size_t i = 0; i < n; ++i) {
        out[i] = std::pow(a.scalar ? a.s : a.p[i], b.scalar ? b.s : b.p[i]);
      }
      return;
    case VOp::kMulMul:
      return sided(Three(), [](DF, VF x, VF y, VF z) { return hn::Mul(hn::Mul(x, y), z); });
    case VOp::kExpSub: return bin([](DF d, VF x, VF y) { return kx::ExpF(d, hn::Sub(x, y)); });
    case VOp::kWhere:  // not (a == 0): NaN != 0 is true, as in ScalarOp
      return tern([](DF d, VF x, VF y, VF z) { return hn::IfThenElse(hn::Eq(x, hn::Zero(d)), z, y); });
  }
}

// Folds n elements into acc.
float ReduceChunk(RedOp op, const float* HWY_RESTRICT p, size_t n, float acc) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  if (op == RedOp::kSum || op == RedOp::kSumSq) {
    const bool sq = op == RedOp::kSumSq;
    VF s0 = hn::Zero(d), s1 = hn::Zero(d), s2 = hn::Zero(d), s3 = hn::Zero(d);
    auto term = [&](size_t j, VF s) {
      const VF x = hn::LoadU(d, p + j);
      return sq ? hn::MulAdd(x, x, s) : hn::Add(x, s);
    };
    for (; i + 4 * N <= n; i += 4 * N) {
      s0 = term(i, s0);
      s1 = term(i + N, s1);
      s2 = term(i + 2 * N, s2);
      s3 = term(i + 3 * N, s3);
    }
    for (; i + N <= n; i += N) s0 = term(i, s0);
    float sum = hn::GetLane(hn::SumOfLanes(d, hn::Add(hn::Add(s0, s1), hn::Add(s2, s3))));
    for (; i < n; ++i) sum += sq ? p[i] * p[i] : p[i];
    return acc + sum;
  }
  const bool mx = op == RedOp::kMax;
  float m = acc;
  if (n >= N) {
    VF v = hn::LoadU(d, p);
    VF nan = hn::IfThenElseZero(hn::IsNaN(v), v);  // any NaN lane poisons the result
    for (i = N; i + N <= n; i += N) {
      const VF x = hn::LoadU(d, p + i);
      nan = hn::Add(nan, hn::IfThenElseZero(hn::IsNaN(x), x));
      v = mx ? hn::Max(v, x) : hn::Min(v, x);
    }
    const float r = mx ? hn::GetLane(hn::MaxOfLanes(d, v)) : hn::GetLane(hn::MinOfLanes(d, v));
    const float has_nan = hn::GetLane(hn::SumOfLanes(d, nan));
    m = ScalarOp(mx ? VOp::kMax : VOp::kMin, m, std::isnan(has_nan) ? has_nan : r, 0,
                 DType::kFloat32);
  }
  for (; i < n; ++i) m = ScalarOp(mx ? VOp::kMax : VOp::kMin, m, p[i], 0, DType::kFloat32);
  return m;
}

// Non-temporal copy of n floats to out (aligned middle part streamed).
void StreamCopy(float* out, const float* HWY_RESTRICT in, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  size_t i = 0;
  for (; i < n && reinterpret_cast<uintptr_t>(out + i) % (N * sizeof(float)) != 0; ++i) {
    out[i] = in[i];
  }
  for (; i + N <= n; i += N) hn::Stream(hn::LoadU(d, in + i), d, out + i);
  for (; i < n; ++i) out[i] = in[i];
}

// Sizes the calling thread's registers for `p`, starts the row odometer
// `idx` at row `begin` and points each operand at that row.
Registers& PrepareRows(const RowProgram& p, void* const* buffers, const float* scratch,
                       int64_t begin, int64_t* idx) {
  Registers& r = ThreadRegisters();
  const size_t nops = p.operands.size();
  const int64_t R = p.inner;
  const int64_t C = p.chunk;
  if (r.vregs.size() < static_cast<size_t>(p.num_vregs * C)) {
    r.vregs.resize(static_cast<size_t>(p.num_vregs * C));
  }
  if (r.spills.size() < static_cast<size_t>(p.num_spills * R)) {
    r.spills.resize(static_cast<size_t>(p.num_spills * R));
  }
  r.scalars.assign(p.scalar_init.begin(), p.scalar_init.end());
  r.accs.resize(static_cast<size_t>(p.num_accs));
  r.vp.resize(static_cast<size_t>(p.num_vregs));
  r.base.resize(nops);
  r.row.resize(nops);
  r.next.resize(nops);
  int64_t rem = begin;
  for (int dd = p.nouter - 1; dd >= 0; --dd) {
    idx[dd] = rem % p.outer_sizes[dd];
    rem /= p.outer_sizes[dd];
  }
  for (size_t k = 0; k < nops; ++k) {
    const Operand& o = p.operands[k];
    if (o.buffer < 0) {
      r.base[k] = reinterpret_cast<char*>(const_cast<float*>(scratch));
      r.row[k] = 0;
      continue;
    }
    r.base[k] = static_cast<char*>(buffers[o.buffer]);
    int64_t off = o.offset;
    for (int dd = 0; dd < p.nouter; ++dd) off += idx[dd] * o.outer_strides[dd];
    r.row[k] = off;
  }
  return r;
}

// One per-row scalar instruction (Note [Row programs]).
HWY_INLINE void ScalarStep(const RowProgram& p, const ScalarInstr& si, char* const* base,
                           const int64_t* rows, float* s, const float* acc) {
  switch (si.kind) {
    case ScalarInstr::Kind::kLoad: {
      const Operand& o = p.operands[si.a];
      kernels::internal::LoadAsF32(o.dtype, base[si.a] + rows[si.a] * ItemSize(o.dtype), 1, 1,
                                   &s[si.dst]);
      break;
    }
    case ScalarInstr::Kind::kStore: {
      const Operand& o = p.operands[si.dst];
      kernels::internal::StoreFromF32(o.dtype, base[si.dst] + rows[si.dst] * ItemSize(o.dtype),
                                      1, 1, &s[si.a]);
      break;
    }
    case ScalarInstr::Kind::kCompute:
      s[si.dst] = ScalarOp(si.op, s[si.a], si.b >= 0 ? s[si.b] : 0.0f,
                           si.c >= 0 ? s[si.c] : 0.0f, si.round);
      break;
    case ScalarInstr::Kind::kFinish: s[si.dst] = acc[si.a] * si.scale; break;
  }
}

void RunRowsImpl(const RowProgram& p, void* const* buffers, const float* scratch,
                 int64_t begin, int64_t end) {
  int64_t idx[kMaxDims] = {};  // the row odometer
  Registers& r = PrepareRows(p, buffers, scratch, begin, idx);
  const size_t nops = p.operands.size();
  const int64_t R = p.inner;
  const int64_t C = p.chunk;
  // Plain locals: GCC rematerializes the address of a thread_local (a
  // __tls_get_addr call in a shared library) at every use in the loops.
  char** base = r.base.data();
  int64_t* rows = r.row.data();
  int64_t* next = r.next.data();
  float* vbuf = r.vregs.data();
  float* spill = r.spills.data();
  float* s = r.scalars.data();
  float* acc = r.accs.data();
  const float** vp = r.vp.data();
  const auto aligned = [](const float* q) {
    return reinterpret_cast<uintptr_t>(q) % (hn::Lanes(DF()) * sizeof(float)) == 0;
  };
  auto src = [&](const Arg& a) -> Src {
    if (a.reg < 0) return {nullptr, 0, true};
    if (a.scalar) return {nullptr, s[a.reg], true};
    return {vp[a.reg], 0, false};
  };
  auto scalar_step = [&](const ScalarInstr& si) { ScalarStep(p, si, base, rows, s, acc); };

  // Note [Row pipelining]: when phase 0 is one row reduction of one input
  // (rms_norm's sum of squares), it is not run on its own for row r+1: the
  // first compute instruction of row r's last phase folds row r+1's elements
  // in its loop (a Side), so DRAM reads of the next row overlap this row's
  // writes and the row is read from memory once, as in the hand-written
  // rms_norm (Note [fused rms_norm]). Phase 0's scalars are not read after
  // the last phase's chunk loop, so row r+1 may overwrite them then.
  // Measured on rms_norm 4096^2 against software prefetch of the next row:
  // 1.04-1.14x the hand-written kernel instead of 1.12-1.27x.
  // Note [No row prefetch]: other multi-phase programs used to prefetch row
  // r+1's inputs during row r's last phase. Against none, in one process
  // (Emerald Rapids, 2026-12-05), that was 10-17 % slower on residual +
  // rms_norm rows in L2 (128x256 to 8x4096), 5-14 % slower at 4096^2 (the
  // burst of prefetches stalls; the hardware prefetcher follows rows) and
  // 1-7 % faster only in between (512x1024), so nothing prefetches.
  const int side_at = p.pipeline_instr;  // in the last phase's body, or -1
  const Phase& first = p.phases.front();
  const size_t last = p.phases.size() - 1;
  const Instr* side_load = side_at >= 0 ? &first.body[0] : nullptr;
  const Instr* side_red = side_at >= 0 ? &first.body[1] : nullptr;
  bool first_done = false;  // phase 0 of this row ran inside the previous row
  for (int64_t row = begin; row < end; ++row) {
    const bool with_next = side_at >= 0 && row + 1 < end;
    if (with_next) {
      for (size_t k = 0; k < nops; ++k) next[k] = rows[k];
      for (int dd = p.nouter - 1; dd >= 0; --dd) {  // the odometer's next step
        if (idx[dd] + 1 < p.outer_sizes[dd]) {
          for (size_t k = 0; k < nops; ++k) next[k] += p.operands[k].outer_strides[dd];
          break;
        }
        for (size_t k = 0; k < nops; ++k) {
          next[k] -= p.operands[k].outer_strides[dd] * (p.outer_sizes[dd] - 1);
        }
      }
    }
    for (size_t phi = first_done ? 1 : 0; phi <= last; ++phi) {
      const Phase& ph = p.phases[phi];
      const bool side_here = with_next && phi == last;
      for (const ScalarInstr& si : ph.pre) scalar_step(si);
      for (const Reduction& red : ph.reductions) {
        acc[red.acc] = red.op == RedOp::kMax   ? -std::numeric_limits<float>::infinity()
                       : red.op == RedOp::kMin ? std::numeric_limits<float>::infinity()
                                               : 0.0f;
      }
      if (side_here) acc[side_red->dst] = 0.0f;
      if (!ph.body.empty()) {
        for (int64_t c0 = 0; c0 < R; c0 += C) {
          const int64_t len = std::min(C, R - c0);
          const size_t n = static_cast<size_t>(len);
          for (size_t j = 0; j < ph.body.size(); ++j) {
            const Instr& in = ph.body[j];
            switch (in.kind) {
              case Instr::Kind::kLoad: {
                if (in.spill >= 0) {
                  vp[in.dst] = spill + in.spill * R + c0;
                  break;
                }
                const Operand& o = p.operands[in.operand];
                const char* b = base[in.operand];
                if (o.direct()) {
                  vp[in.dst] = reinterpret_cast<const float*>(b) + rows[in.operand] + c0;
                } else {
                  float* dst = vbuf + in.dst * C;
                  LoadChunk(o, b, rows[in.operand], c0, len, dst);
                  vp[in.dst] = dst;
                }
                break;
              }
              case Instr::Kind::kCompute: {
                float* mem = in.out_operand < 0 ? nullptr
                                                : reinterpret_cast<float*>(base[in.out_operand]) +
                                                      rows[in.out_operand] + c0;
                float* out;
                if (in.spill >= 0) {
                  out = spill + in.spill * R + c0;
                } else if (mem != nullptr && (!in.stream || aligned(mem))) {
                  out = mem;
                } else {
                  out = vbuf + in.dst * C;
                }
                Side side;
                if (side_here && static_cast<int>(j) == side_at) {
                  side.p = reinterpret_cast<const float*>(base[side_load->operand]) +
                           next[side_load->operand] + c0;
                  side.sq = side_red->red == RedOp::kSumSq;
                }
                if (in.stream && out == mem) {
                  Compute<true>(in, src(in.a), src(in.b), src(in.c), out, n, side);
                } else {
                  Compute<false>(in, src(in.a), src(in.b), src(in.c), out, n, side);
                  if (in.stream) StreamCopy(mem, out, n);  // a misaligned row
                }
                if (side.p != nullptr) acc[side_red->dst] += side.acc;
                vp[in.dst] = out;
                break;
              }
              case Instr::Kind::kReduce:
                acc[in.dst] = ReduceChunk(in.red, vp[in.a.reg], n, acc[in.dst]);
                break;
              case Instr::Kind::kStore:
                StoreChunk(p.operands[in.dst], base[in.dst], rows[in.dst], c0, len,
                           vp[in.a.reg]);
                break;
            }
          }
        }
      }
      for (const ScalarInstr& si : ph.post) scalar_step(si);
      if (side_here) {
        for (const ScalarInstr& si : first.post) scalar_step(si);
      }
    }
    first_done = with_next;
    // Next row: odometer over the outer dims.
    for (int dd = p.nouter - 1; dd >= 0; --dd) {
      for (size_t k = 0; k < nops; ++k) rows[k] += p.operands[k].outer_strides[dd];
      if (++idx[dd] < p.outer_sizes[dd]) break;
      for (size_t k = 0; k < nops; ++k) {
        rows[k] -= p.operands[k].outer_strides[dd] * p.outer_sizes[dd];
      }
      idx[dd] = 0;
    }
    for (size_t k = 0; k < nops; ++k) {
      if (p.operands[k].buffer < 0) rows[k] = (row + 1 - begin) * R;
    }
  }
  if (p.stream) hwy::FlushStream();
}

}  // namespace trn::compiler::internal::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace trn::compiler::internal {
HWY_EXPORT(RunRowsImpl);

void RunRows(const RowProgram& p, const std::vector<void*>& buffers, const float* scratch,
             int64_t begin, int64_t end) {
  HWY_DYNAMIC_DISPATCH(RunRowsImpl)(p, buffers.data(), scratch, begin, end);
}
}  // namespace trn::compiler::internal
#endif  // HWY_ONCE
