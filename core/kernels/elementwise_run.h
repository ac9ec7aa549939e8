// Strided loops shared by the elementwise kernel files (elementwise.cc,
// elementwise_math.cc): float32 chunk runs over any dtype/stride mix (RunF32)
// and exact integer/bool maps (MapExact). Target-independent, header-only.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <type_traits>

#include "core/common/tensor_ref.h"
#include "core/kernels/convert.h"
#include "core/kernels/kernels.h"
#include "core/kernels/strided.h"

namespace trn::kernels::internal {

// Note [Tiled elementwise]: an operand contiguous along another dim T than
// out's innermost L (a residual added to a transposed conv output: Whisper,
// wav2vec2) is read one element per cache line along out's runs. That is
// fine while the lines of one run stay in L1 until the next run reads their
// next element, and not when its stride maps them to a few L1 sets (a stride
// of 256 floats uses 4 of 64 sets): then, when every operand is float32 and
// contiguous along L or T (or broadcast), the loop goes over kTile x
// kTile tiles of (T, L), each transposed operand's tile transposed into
// scratch, and fn runs row by row on the tile. Whisper's residual add
// ([2, 150, 256], the output permuted like one input, the other read at
// stride 256): 1.8x faster; at strides of 150 and 799 floats the tiles were
// 14-18 % slower than the run-by-run loop, so those keep it (in one process,
// Emerald Rapids). Tiles of kTile, as Note [Tiled transpose] measured for copies.
static_assert(kTile * kTile <= kChunk, "a tile fits a scratch chunk");
// L1 sets and ways assumed for the test above (Zen 4: 64 x 8; Intel: 64 x 12).
constexpr int64_t kL1Sets = 64, kL1Ways = 8;

// Whether a run of n elements `stride` floats apart keeps its lines in L1.
inline bool RunStaysInL1(int64_t stride, int64_t n) {
  const int64_t bytes = stride * static_cast<int64_t>(sizeof(float));
  if (bytes % 64 != 0) return true;  // lines at irregular offsets spread over the sets
  int64_t a = (bytes / 64) % kL1Sets, b = kL1Sets;  // sets used: kL1Sets / gcd
  while (a != 0) {
    const int64_t t = b % a;
    b = a;
    a = t;
  }
  return (kL1Sets / b) * kL1Ways >= n;
}

// The tiled loop of RunF32 over shape s (operand 0 is out), or false when s
// does not qualify.
template <int NIn, class Fn>
bool RunF32Tiled(const StridedShape<NIn + 1>& s, const std::array<const TensorRef*, NIn + 1>& ops,
                 Fn& fn) {
  if (s.ndim < 2) return false;
  const int L = s.ndim - 1;
  if (ops[0]->dtype != DType::kFloat32 || s.strides[0][L] != 1 || s.sizes[L] < kTile) {
    return false;
  }
  int T = -1;  // the dim some operand is contiguous along instead of L
  for (int k = 1; k <= NIn; ++k) {
    if (s.strides[k][L] == 1 || s.strides[k][L] == 0) continue;
    for (int d = 0; d < L && T < 0; ++d) {
      if (s.strides[k][d] == 1) T = d;
    }
    if (T < 0) return false;
  }
  if (T < 0 || s.sizes[T] < kTile) return false;
  std::array<bool, NIn> transposed{}, scalar{};
  bool thrashes = false;
  for (int k = 1; k <= NIn; ++k) {
    const int64_t sl = s.strides[k][L];
    if (ops[k]->dtype != DType::kFloat32 || (sl > 1 && s.strides[k][T] != 1) || sl < 0) return false;
    transposed[k - 1] = sl > 1;
    scalar[k - 1] = sl == 0;
    thrashes = thrashes || (sl > 1 && !RunStaysInL1(sl, s.sizes[L]));
  }
  if (!thrashes) return false;
  const int64_t nl = s.sizes[L], nt = s.sizes[T];
  const auto tiles = [&](const std::array<char*, NIn + 1>& base) {
    std::array<const float*, NIn> in_p;
    for (int64_t t0 = 0; t0 < nt; t0 += kTile) {
      const int64_t tt = std::min(kTile, nt - t0);
      for (int64_t l0 = 0; l0 < nl; l0 += kTile) {
        const int64_t tl = std::min(kTile, nl - l0);
        for (int k = 0; k < NIn; ++k) {
          if (!transposed[k]) continue;
          // tile[t][l] = in(t0 + t, l0 + l)
          const float* src = reinterpret_cast<const float*>(base[k + 1]) + t0 +
                             l0 * s.strides[k + 1][L];
          TransposeTiles(ScratchF32(k), src, tl, tt, kTile, s.strides[k + 1][L]);
        }
        for (int64_t t = 0; t < tt; ++t) {
          for (int k = 0; k < NIn; ++k) {
            const float* b = reinterpret_cast<const float*>(base[k + 1]);
            in_p[k] = transposed[k] ? ScratchF32(k) + t * kTile
                      : scalar[k]   ? b + (t0 + t) * s.strides[k + 1][T]
                                    : b + (t0 + t) * s.strides[k + 1][T] + l0;
          }
          float* o = reinterpret_cast<float*>(base[0]) + (t0 + t) * s.strides[0][T] + l0;
          fn(in_p, scalar, o, static_cast<size_t>(tl));
        }
      }
    }
  };
  std::array<char*, NIn + 1> base;
  std::array<size_t, NIn + 1> item;
  for (int k = 0; k <= NIn; ++k) {
    base[k] = static_cast<char*>(ops[k]->data);
    item[k] = sizeof(float);
  }
  ForEachRun<NIn + 1>(WithoutDims(s, T, L), base, item,
                      [&](const std::array<char*, NIn + 1>& p, int64_t n,
                          const std::array<int64_t, NIn + 1>& st) {
                        std::array<char*, NIn + 1> q = p;
                        for (int64_t i = 0; i < n; ++i) {
                          tiles(q);
                          for (int k = 0; k <= NIn; ++k) q[k] += st[k] * sizeof(float);
                        }
                      });
  return true;
}

// Runs fn(inputs, input_is_scalar, out, len) over float32 chunks of out's
// innermost runs, walked in out's memory order. A float32 operand with unit
// stride is used in place and a stride-0 operand is passed as one broadcast
// value (both without copies); an operand contiguous along another dim goes
// by tiles (Note [Tiled elementwise]); other dtypes/strides are converted
// through per-thread scratch chunks.
template <int NIn, class Fn>
inline void RunF32(const TensorRef& out, const std::array<const TensorRef*, NIn>& ins, Fn&& fn) {
  std::array<const TensorRef*, NIn + 1> ops;
  ops[0] = &out;
  for (int k = 0; k < NIn; ++k) ops[k + 1] = ins[k];
  const StridedShape<NIn + 1> shape = MakeShape<NIn + 1>(ops, /*order_by=*/0);
  if (RunF32Tiled<NIn>(shape, ops, fn)) return;
  std::array<char*, NIn + 1> base;
  std::array<size_t, NIn + 1> item;
  for (int k = 0; k <= NIn; ++k) {
    base[k] = static_cast<char*>(ops[k]->data);
    item[k] = ItemSize(ops[k]->dtype);
  }
  // Every run read and written in place (float32, unit or zero inner strides):
  // no per-run checks, which cost as much as the math on a head's 32 floats.
  const int last = shape.ndim - 1;
  bool all_direct = last >= 0 && out.dtype == DType::kFloat32 && shape.strides[0][last] == 1;
  std::array<bool, NIn> broadcast{};
  for (int k = 0; k < NIn && all_direct; ++k) {
    const int64_t st = shape.strides[k + 1][last];
    broadcast[k] = st == 0;
    all_direct = ins[k]->dtype == DType::kFloat32 && (st == 0 || st == 1);
  }
  if (all_direct) {
    ForEachRun<NIn + 1>(shape, base, item, [&](const std::array<char*, NIn + 1>& p, int64_t n,
                                               const std::array<int64_t, NIn + 1>&) {
      std::array<const float*, NIn> in_p;
      for (int k = 0; k < NIn; ++k) in_p[k] = reinterpret_cast<const float*>(p[k + 1]);
      fn(in_p, broadcast, reinterpret_cast<float*>(p[0]), static_cast<size_t>(n));
    });
    return;
  }
  ForEachRun<NIn + 1>(shape, base, item, [&](const std::array<char*, NIn + 1>& p, int64_t n,
                                             const std::array<int64_t, NIn + 1>& s) {
    const bool out_direct = out.dtype == DType::kFloat32 && s[0] == 1;
    bool direct = out_direct;
    for (int k = 0; k < NIn; ++k) {
      direct &= s[k + 1] == 0 || (ins[k]->dtype == DType::kFloat32 && s[k + 1] == 1);
    }
    const int64_t step = direct ? n : kChunk;
    float scalar[NIn];
    std::array<const float*, NIn> in_p;
    std::array<bool, NIn> in_scalar;
    for (int64_t start = 0; start < n; start += step) {
      const int64_t len = std::min(step, n - start);
      for (int k = 0; k < NIn; ++k) {
        const DType dt = ins[k]->dtype;
        in_scalar[k] = s[k + 1] == 0;
        if (in_scalar[k]) {
          if (start == 0) internal::LoadAsF32(dt, p[k + 1], 0, 1, &scalar[k]);
          in_p[k] = &scalar[k];
        } else if (dt == DType::kFloat32 && s[k + 1] == 1) {
          in_p[k] = reinterpret_cast<const float*>(p[k + 1]) + start;
        } else {
          float* buf = ScratchF32(k);
          internal::LoadAsF32(dt, p[k + 1] + start * s[k + 1] * ItemSize(dt), s[k + 1], len, buf);
          in_p[k] = buf;
        }
      }
      float* o = out_direct ? reinterpret_cast<float*>(p[0]) + start : ScratchF32(NIn);
      fn(in_p, in_scalar, o, static_cast<size_t>(len));
      if (!out_direct) {
        internal::StoreFromF32(out.dtype, p[0] + start * s[0] * ItemSize(out.dtype), s[0], len, o);
      }
    }
  });
}

// out = f(in) for one input, where fn(const float* in, float* out, size_t n)
// is a vector loop; a broadcast input is one value, computed once per run.
template <class Fn>
inline void MapF32(const TensorRef& out, const TensorRef& in, Fn&& fn) {
  RunF32<1>(out, {&in}, [&](auto p, auto scalar, float* o, size_t n) {
    if (!scalar[0]) return fn(p[0], o, n);
    fn(p[0], o, 1);
    std::fill_n(o + 1, n - 1, o[0]);
  });
}

// ---- Exact integer / bool loops ----------------------------------------------------
template <typename T>
using ComputeType = std::conditional_t<std::is_same_v<T, bool>, int64_t, T>;

template <typename C>
C WrapAdd(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(x) + static_cast<U>(y));
}
template <typename C>
C WrapMul(C x, C y) {
  using U = std::make_unsigned_t<C>;
  return static_cast<C>(static_cast<U>(x) * static_cast<U>(y));
}
// out[i] = Cast<O>(f(a[i], b[i])) over exact types.
template <typename T, typename O, typename F>
void MapExact(const TensorRef& out, const TensorRef& a, const TensorRef& b, F f) {
  using C = ComputeType<T>;
  ForEachRun<3>({&out, &a, &b}, [&](const std::array<char*, 3>& p, int64_t n,
                                    const std::array<int64_t, 3>& s) {
    O* o = reinterpret_cast<O*>(p[0]);
    const T* x = reinterpret_cast<const T*>(p[1]);
    const T* y = reinterpret_cast<const T*>(p[2]);
    if (s[0] == 1 && s[1] == 1 && s[2] == 1) {
      for (int64_t i = 0; i < n; ++i) o[i] = Cast<O>(f(C(x[i]), C(y[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) o[i * s[0]] = Cast<O>(f(C(x[i * s[1]]), C(y[i * s[2]])));
    }
  });
}

// Binary ops kDivTrunc .. kShiftRight (elementwise_math.cc); Binary and
// BinaryScalar route them here with the operands' dtype.
Status BinaryMath(BinaryOp op, DType dtype, const TensorRef& out, const TensorRef& a,
                  const TensorRef& b);

// The unary ops computed with libm in float32 (kTan .. kSinc, kSignbit), and
// their loop over a floating `in` (elementwise_math.cc); Unary routes them here.
inline bool IsLibmUnary(UnaryOp op) {
  return (op >= UnaryOp::kTan && op <= UnaryOp::kSinc) || op == UnaryOp::kSignbit;
}
Status UnaryMath(UnaryOp op, const TensorRef& out, const TensorRef& in);

}  // namespace trn::kernels::internal
