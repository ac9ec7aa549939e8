// Test helpers for the kernels: tensors over owned storage with element access
// as double, views with odd layouts (misaligned, transposed, step-2 slices,
// stride-0 broadcasts), dtype rounding/ulp for tolerances, and a loop that runs
// a test body once per compiled SIMD target. Decoding here is written
// independently of convert.h so tests do not trust the code under test.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/common/tensor_ref.h"
#include "core/kernels/kernels.h"

namespace trn::kernels::testing {

// The dtype sets kernel tests sweep.
inline const std::vector<DType> kFloatTypes = {DType::kFloat32, DType::kBFloat16,
                                               DType::kFloat16, DType::kFloat64};
inline const std::vector<DType> kIntTypes = {DType::kInt32, DType::kInt64};
inline const std::vector<DType> kNumTypes = {DType::kFloat32, DType::kBFloat16, DType::kFloat16,
                                             DType::kFloat64, DType::kInt32,    DType::kInt64};
inline const std::vector<DType> kAllTypes = {DType::kFloat32, DType::kBFloat16, DType::kFloat16,
                                             DType::kFloat64, DType::kInt32,    DType::kInt64,
                                             DType::kBool};

// ---- Scalar encode/decode (independent reference) ------------------------------
inline double DecodeBF16(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline double DecodeF16(uint16_t h) {
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0x1f) {
    v = mant ? std::nan("") : INFINITY;
  } else if (exp == 0) {
    v = std::ldexp(mant, -24);
  } else {
    v = std::ldexp(1024 + mant, exp - 25);
  }
  return (h & 0x8000) ? -v : v;
}
// Round-to-nearest-even of a double to `mant_bits` explicit mantissa bits with
// minimum normal exponent `min_exp` and max finite `max_finite` (through
// nearbyint in the default rounding mode).
inline double RoundToFormat(double v, int mant_bits, int min_exp, double max_finite) {
  if (!std::isfinite(v) || v == 0) return v;
  int e;
  std::frexp(v, &e);  // v = m * 2^e, 0.5 <= |m| < 1
  const int exp = std::max(e - 1, min_exp);
  const double quantum = std::ldexp(1.0, exp - mant_bits);
  const double r = std::nearbyint(v / quantum) * quantum;
  const double overflow = max_finite + std::ldexp(1.0, static_cast<int>(std::log2(max_finite)) - mant_bits) / 2;
  if (std::fabs(r) >= overflow || std::fabs(v) >= overflow) return std::copysign(INFINITY, v);
  return r;
}
inline uint16_t EncodeBF16(double v) {
  const float f = static_cast<float>(RoundToFormat(v, 7, -126, 3.3895313892515355e38));
  if (std::isnan(v)) return 0x7fc0;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}
inline uint16_t EncodeF16(double v) {
  if (std::isnan(v)) return 0x7e00;
  const double r = RoundToFormat(v, 10, -14, 65504.0);
  const uint16_t sign = std::signbit(r) ? 0x8000 : 0;
  const double a = std::fabs(r);
  if (std::isinf(a)) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14)) return sign | static_cast<uint16_t>(a / std::ldexp(1.0, -24));
  int e;
  const double m = std::frexp(a, &e);  // a = m * 2^e
  return sign | static_cast<uint16_t>(((e + 14) << 10) | (static_cast<int>(m * 2048) - 1024));
}

// The value `v` becomes when stored as `dtype` (float64 stays double).
inline double RoundTo(DType dtype, double v) {
  switch (dtype) {
    case DType::kFloat32: return static_cast<float>(v);
    case DType::kFloat64: return v;
    case DType::kBFloat16: return DecodeBF16(EncodeBF16(v));
    case DType::kFloat16: return DecodeF16(EncodeF16(v));
    case DType::kInt32: return static_cast<double>(static_cast<int32_t>(v));
    case DType::kInt64: return static_cast<double>(static_cast<int64_t>(v));
    case DType::kBool: return v != 0 ? 1.0 : 0.0;
    default: break;  // device-model dtypes: no runtime tensors
  }
  return v;
}

// One unit in the last place of `dtype` at magnitude |v| (float64 is computed
// in float32, so its ulp is float32's).
inline double Ulp(DType dtype, double v) {
  int mant = 23, min_exp = -126;
  if (dtype == DType::kBFloat16) mant = 7;
  if (dtype == DType::kFloat16) mant = 10, min_exp = -14;
  if (!IsFloating(dtype)) return 0;
  int e;
  std::frexp(v == 0 || !std::isfinite(v) ? 1.0 : v, &e);
  return std::ldexp(1.0, std::max(e - 1, min_exp) - mant);
}

// ---- Test tensors ----------------------------------------------------------------
// Owns (shares) storage and a strided TensorRef over it. Not thread-safe.
struct TestTensor {
  std::shared_ptr<std::vector<uint64_t>> storage;
  TensorRef ref;

  DType dtype() const { return ref.dtype; }
  int64_t numel() const { return ref.numel(); }
  std::vector<int64_t> sizes() const { return {ref.sizes, ref.sizes + ref.ndim}; }

  // Element offset (in elements) of the i-th element in row-major logical order.
  int64_t Offset(int64_t i) const {
    int64_t off = 0;
    for (int d = ref.ndim - 1; d >= 0; --d) {
      off += (i % ref.sizes[d]) * ref.strides[d];
      i /= ref.sizes[d];
    }
    return off;
  }
  double At(int64_t i) const {
    const char* p = static_cast<const char*>(ref.data) + Offset(i) * ItemSize(ref.dtype);
    switch (ref.dtype) {
      case DType::kFloat32: { float v; std::memcpy(&v, p, 4); return v; }
      case DType::kFloat64: { double v; std::memcpy(&v, p, 8); return v; }
      case DType::kBFloat16: { uint16_t v; std::memcpy(&v, p, 2); return DecodeBF16(v); }
      case DType::kFloat16: { uint16_t v; std::memcpy(&v, p, 2); return DecodeF16(v); }
      case DType::kInt32: { int32_t v; std::memcpy(&v, p, 4); return v; }
      case DType::kInt64: { int64_t v; std::memcpy(&v, p, 8); return static_cast<double>(v); }
      case DType::kBool: return static_cast<double>(*reinterpret_cast<const uint8_t*>(p));
      default: break;
    }
    return 0;
  }
  int64_t AtInt(int64_t i) const {  // exact for int64
    const char* p = static_cast<const char*>(ref.data) + Offset(i) * ItemSize(ref.dtype);
    if (ref.dtype == DType::kInt64) { int64_t v; std::memcpy(&v, p, 8); return v; }
    return static_cast<int64_t>(At(i));
  }
  // Stores v rounded as the dtype stores it (ints truncate, bool: nonzero).
  void Set(int64_t i, double v) {
    char* p = static_cast<char*>(ref.data) + Offset(i) * ItemSize(ref.dtype);
    switch (ref.dtype) {
      case DType::kFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); break; }
      case DType::kFloat64: std::memcpy(p, &v, 8); break;
      case DType::kBFloat16: { uint16_t h = EncodeBF16(v); std::memcpy(p, &h, 2); break; }
      case DType::kFloat16: { uint16_t h = EncodeF16(v); std::memcpy(p, &h, 2); break; }
      case DType::kInt32: { int32_t x = static_cast<int32_t>(v); std::memcpy(p, &x, 4); break; }
      case DType::kInt64: { int64_t x = static_cast<int64_t>(v); std::memcpy(p, &x, 8); break; }
      case DType::kBool: *reinterpret_cast<uint8_t*>(p) = v != 0; break;
      default: break;
    }
  }
  std::vector<double> Values() const {
    std::vector<double> out(static_cast<size_t>(numel()));
    for (int64_t i = 0; i < numel(); ++i) out[i] = At(i);
    return out;
  }

  // Views sharing storage.
  TestTensor Transpose(int d0, int d1) const {
    TestTensor t = *this;
    std::swap(t.ref.sizes[d0], t.ref.sizes[d1]);
    std::swap(t.ref.strides[d0], t.ref.strides[d1]);
    return t;
  }
  TestTensor Slice(int dim, int64_t start, int64_t step, int64_t len) const {
    TestTensor t = *this;
    t.ref.data = static_cast<char*>(ref.data) + start * ref.strides[dim] * ItemSize(ref.dtype);
    t.ref.sizes[dim] = len;
    t.ref.strides[dim] *= step;
    return t;
  }
  // Broadcast to `sizes` (right-aligned): size-1 and new leading dims get stride 0.
  TestTensor Expand(const std::vector<int64_t>& sizes) const {
    TestTensor t = *this;
    const int nd = static_cast<int>(sizes.size());
    t.ref.ndim = nd;
    for (int d = nd - 1, s = ref.ndim - 1; d >= 0; --d, --s) {
      t.ref.sizes[d] = sizes[d];
      t.ref.strides[d] = (s >= 0 && ref.sizes[s] == sizes[d]) ? ref.strides[s] : 0;
    }
    return t;
  }
};

// Contiguous tensor; `misalign` shifts the data pointer by that many elements
// off the (64-byte aligned) allocation.
inline TestTensor Empty(DType dtype, const std::vector<int64_t>& sizes, int64_t misalign = 0) {
  TestTensor t;
  t.ref.dtype = dtype;
  t.ref.ndim = static_cast<int>(sizes.size());
  int64_t n = 1;
  for (int d = t.ref.ndim - 1; d >= 0; --d) {
    t.ref.sizes[d] = sizes[d];
    t.ref.strides[d] = n;
    n *= sizes[d];
  }
  const size_t bytes = (static_cast<size_t>(n + misalign) * ItemSize(dtype) + 64);
  t.storage = std::make_shared<std::vector<uint64_t>>(bytes / 8 + 16, 0);
  char* base = reinterpret_cast<char*>(t.storage->data());
  base += (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  t.ref.data = base + misalign * ItemSize(dtype);
  return t;
}

// Deterministic values in [lo, hi]; integers for int dtypes, 0/1 for bool.
inline void FillRandom(TestTensor& t, uint32_t seed, double lo = -2.0, double hi = 2.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) {
    double v = dist(rng);
    if (t.dtype() == DType::kBool) v = v > (lo + hi) / 2;
    else if (!IsFloating(t.dtype())) v = std::round(v);
    t.Set(i, v);
  }
}

// Memory layouts tests sweep. Every layout yields a tensor of the requested
// logical sizes; only its strides/offset differ.
enum class Layout {
  kContiguous,
  kMisaligned,  // contiguous, data pointer offset by one element
  kTransposed,  // last two dims stored swapped (1-D: falls back to kStep2)
  kStep2,       // every second element of a twice-as-long last dim
  kBroadcast,   // first dim (of size > 1) is a stride-0 broadcast of one slice
};
inline const char* LayoutName(Layout l) {
  switch (l) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kMisaligned: return "misaligned";
    case Layout::kTransposed: return "transposed";
    case Layout::kStep2: return "step2";
    case Layout::kBroadcast: return "broadcast";
  }
  return "?";
}
inline const std::vector<Layout>& AllLayouts() {
  static const std::vector<Layout> all = {Layout::kContiguous, Layout::kMisaligned,
                                          Layout::kTransposed, Layout::kStep2,
                                          Layout::kBroadcast};
  return all;
}

// An uninitialised tensor of logical `sizes` stored with `layout`.
inline TestTensor MakeLayout(DType dtype, const std::vector<int64_t>& sizes, Layout layout) {
  const int nd = static_cast<int>(sizes.size());
  if (layout == Layout::kTransposed && nd < 2) layout = Layout::kStep2;
  if (nd == 0 && layout != Layout::kMisaligned) layout = Layout::kContiguous;
  switch (layout) {
    case Layout::kContiguous: return Empty(dtype, sizes);
    case Layout::kMisaligned: return Empty(dtype, sizes, 1);
    case Layout::kTransposed: {
      std::vector<int64_t> s = sizes;
      std::swap(s[nd - 1], s[nd - 2]);
      return Empty(dtype, s).Transpose(nd - 1, nd - 2);
    }
    case Layout::kStep2: {
      std::vector<int64_t> s = sizes;
      s[nd - 1] *= 2;
      return Empty(dtype, s).Slice(nd - 1, 1, 2, sizes[nd - 1]);
    }
    case Layout::kBroadcast: {
      std::vector<int64_t> s = sizes;
      int d = 0;
      while (d < nd - 1 && s[d] <= 1) ++d;
      s[d] = s[d] == 0 ? 0 : 1;
      return Empty(dtype, s).Expand(sizes);
    }
  }
  return Empty(dtype, sizes);
}

// MakeLayout filled with FillRandom values (a broadcast tensor repeats its slice).
inline TestTensor MakeRandom(DType dtype, const std::vector<int64_t>& sizes, Layout layout,
                             uint32_t seed, double lo = -2.0, double hi = 2.0) {
  TestTensor t = MakeLayout(dtype, sizes, layout);
  FillRandom(t, seed, lo, hi);
  return t;
}

// Runs body(target_name) once per compiled SIMD target with that target
// pinned, then restores the best target.
inline void ForEachTarget(const std::function<void(const char*)>& body) {
  for (int64_t target : CompiledTargets()) {
    SetTarget(target);
    SCOPED_TRACE(std::string("target ") + TargetName(target));
    body(TargetName(target));
    SetTarget(0);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// |actual - expected| <= abs_tol + rel_tol * |expected|, NaN matches NaN and
// infinities must match exactly. Returns a message on mismatch, "" if close.
inline std::string CheckClose(double actual, double expected, double rel_tol,
                              double abs_tol = 0.0) {
  if (std::isnan(expected) && std::isnan(actual)) return "";
  if (std::isinf(expected) || std::isinf(actual)) {
    if (actual == expected) return "";
  } else if (std::fabs(actual - expected) <= abs_tol + rel_tol * std::fabs(expected)) {
    return "";
  }
  char buf[128];
  std::snprintf(buf, sizeof(buf), "actual %.9g expected %.9g", actual, expected);
  return buf;
}

// Default tolerance for a floating result stored as `dtype`: `f32_rel` of
// float32 computation plus one ulp of the storage type (bf16/f16 rounding).
inline double StorageTol(DType dtype, double expected, double f32_rel) {
  double tol = f32_rel * std::fabs(expected);
  if (dtype == DType::kBFloat16 || dtype == DType::kFloat16) tol += Ulp(dtype, expected);
  return tol;
}

}  // namespace trn::kernels::testing
