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

// Runs fn(inputs, input_is_scalar, out, len) over float32 chunks of out's
// innermost runs. A float32 operand with unit stride is used in place and a
// stride-0 operand is passed as one broadcast value (both without copies);
// other dtypes/strides are converted through per-thread scratch chunks.
template <int NIn, class Fn>
inline void RunF32(const TensorRef& out, const std::array<const TensorRef*, NIn>& ins, Fn&& fn) {
  std::array<const TensorRef*, NIn + 1> ops;
  ops[0] = &out;
  for (int k = 0; k < NIn; ++k) ops[k + 1] = ins[k];
  ForEachRun<NIn + 1>(ops, [&](const std::array<char*, NIn + 1>& p, int64_t n,
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

}  // namespace trn::kernels::internal
