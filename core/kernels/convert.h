// Scalar dtype conversions shared by the kernels: bfloat16/float16 encode and
// decode with round-to-nearest-even, exact casts between all DTypes (torch
// semantics: nonzero -> true, float -> int truncates), and chunk loaders that
// turn n strided elements of any DType into float32 and back.
// Target-independent plain loops the compiler vectorizes, except contiguous
// float16/bfloat16 runs (*Contiguous below, dispatched per target).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/common/assert.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels::internal {

// Storage types of the 16-bit floats, distinct so overloads can tell them apart.
struct BF16 {
  uint16_t bits;
};
struct F16 {
  uint16_t bits;
};

inline float BitsToF32(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint32_t F32ToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float BF16ToF32(uint16_t h) { return BitsToF32(static_cast<uint32_t>(h) << 16); }

inline uint16_t F32ToBF16(float f) {
  uint32_t u = F32ToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1);  // round to nearest even; overflow carries into inf
  return static_cast<uint16_t>(u >> 16);
}

inline float F16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f;
  const uint32_t mant = h & 0x3ff;
  if (exp == 0x1f) return BitsToF32(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    const float f = static_cast<float>(mant) * (1.0f / 16777216.0f);  // mant * 2^-24
    return sign ? -f : f;
  }
  return BitsToF32(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t F32ToF16(float f) {
  uint32_t u = F32ToBits(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  u &= 0x7fffffffu;
  if (u >= 0x7f800000u) return sign | 0x7c00 | (u > 0x7f800000u ? 0x200 : 0);  // inf / NaN
  if (u >= 0x477ff000u) return sign | 0x7c00;  // >= 65520 rounds to inf
  uint32_t r, rem, half;
  if (u < 0x38800000u) {  // below 2^-14: float16 subnormal (or zero)
    const uint32_t e = u >> 23;
    const uint32_t shift = 126 - e;  // >= 14
    if (shift > 24) return sign;
    const uint32_t m = (u & 0x7fffffu) | 0x800000u;
    r = m >> shift;
    rem = m & ((1u << shift) - 1);
    half = 1u << (shift - 1);
  } else {
    const uint32_t rebased = u - (112u << 23);
    r = rebased >> 13;
    rem = rebased & 0x1fffu;
    half = 0x1000u;
  }
  if (rem > half || (rem == half && (r & 1))) ++r;  // carries into the exponent correctly
  return static_cast<uint16_t>(sign | r);
}

inline float ToF32(float v) { return v; }
inline float ToF32(BF16 v) { return BF16ToF32(v.bits); }
inline float ToF32(F16 v) { return F16ToF32(v.bits); }
template <typename T>
inline float ToF32(T v) {
  return static_cast<float>(v);
}

template <typename T>
inline constexpr bool kIsHalf = std::is_same_v<T, BF16> || std::is_same_v<T, F16>;

// Float to integer as torch on x86: truncate; NaN and out-of-range give the
// "integer indefinite" value (the type's minimum).
template <typename I>
inline I FloatToInt(double v) {
  constexpr double kLimit = std::is_same_v<I, int64_t> ? 9223372036854775808.0 : 2147483648.0;
  if (!(v > -kLimit - 1.0 && v < kLimit)) return std::numeric_limits<I>::min();
  return static_cast<I>(v);
}

// Exact cast From -> To with torch semantics (double -> half goes through float).
template <typename To, typename From>
inline To Cast(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (kIsHalf<From>) {
    return Cast<To>(ToF32(v));
  } else if constexpr (std::is_same_v<To, BF16>) {
    return BF16{F32ToBF16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, F16>) {
    return F16{F32ToF16(static_cast<float>(v))};
  } else if constexpr (std::is_same_v<To, bool>) {
    return v != From(0);
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return FloatToInt<To>(static_cast<double>(v));
  } else {
    return static_cast<To>(v);
  }
}

// Calls f(T{}) with T the storage type of dtype (float, double, BF16, F16,
// int32_t, int64_t, bool).
template <typename F>
inline decltype(auto) VisitDType(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kFloat32: return f(float{});
    case DType::kFloat64: return f(double{});
    case DType::kBFloat16: return f(BF16{});
    case DType::kFloat16: return f(F16{});
    case DType::kInt32: return f(int32_t{});
    case DType::kInt64: return f(int64_t{});
    case DType::kBool: return f(bool{});
    default: break;  // the device model's integer dtypes: never runtime tensors
  }
  TRN_ASSERT(false, "a device-model dtype reached a runtime kernel");
  return f(float{});
}

// Contiguous float16 <-> float32 runs, vectorized where the CPU converts in
// hardware (F16C: the AVX2 and AVX-512 targets) and scalar (the functions
// above) elsewhere; bit-identical to F16ToF32 / F32ToF16 except for NaN
// payloads. Runtime-dispatched; defined in elementwise_convert.cc.
void F16ToF32Contiguous(const uint16_t* src, float* dst, int64_t n);
void F32ToF16Contiguous(const float* src, uint16_t* dst, int64_t n);
// The same for bfloat16 (vectorized on every target, bit-identical to
// BF16ToF32 / F32ToBF16 including the quiet NaN).
void BF16ToF32Contiguous(const uint16_t* src, float* dst, int64_t n);
void F32ToBF16Contiguous(const float* src, uint16_t* dst, int64_t n);

// dst[i] = float(src[i * stride]) for i < n.
inline void LoadAsF32(DType dtype, const void* src, int64_t stride, int64_t n, float* dst) {
  if (dtype == DType::kFloat16 && stride == 1) {
    return F16ToF32Contiguous(static_cast<const uint16_t*>(src), dst, n);
  }
  if (dtype == DType::kBFloat16 && stride == 1) {
    return BF16ToF32Contiguous(static_cast<const uint16_t*>(src), dst, n);
  }
  VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* s = static_cast<const T*>(src);
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) dst[i] = ToF32(s[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) dst[i] = ToF32(s[i * stride]);
    }
  });
}

// dst[i * stride] = T(src[i]) for i < n, rounding to nearest even.
inline void StoreFromF32(DType dtype, void* dst, int64_t stride, int64_t n, const float* src) {
  if (dtype == DType::kFloat16 && stride == 1) {
    return F32ToF16Contiguous(src, static_cast<uint16_t*>(dst), n);
  }
  if (dtype == DType::kBFloat16 && stride == 1) {
    return F32ToBF16Contiguous(src, static_cast<uint16_t*>(dst), n);
  }
  VisitDType(dtype, [&](auto tag) {
    using T = decltype(tag);
    T* d = static_cast<T*>(dst);
    if (stride == 1) {
      for (int64_t i = 0; i < n; ++i) d[i] = Cast<T>(src[i]);
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * stride] = Cast<T>(src[i]);
    }
  });
}

}  // namespace trn::kernels::internal
