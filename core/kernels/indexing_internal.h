// Strided-view helpers shared by index.cc and indexing.cc: narrowing and
// selecting views of a TensorRef, copying one view into another of the same
// sizes, and an odometer over the leading dims of several operands.
#pragma once

#include <array>
#include <cstdint>
#include <cstring>

#include "core/common/assert.h"
#include "core/common/tensor_ref.h"
#include "core/kernels/strided.h"

namespace trn::kernels::internal {

// Copies one run of n elements of `item` bytes between strided pointers.
template <typename T>
void CopyRunAs(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n) {
  T* d = reinterpret_cast<T*>(dst);
  const T* s = reinterpret_cast<const T*>(src);
  for (int64_t i = 0; i < n; ++i) std::memcpy(d + i * ds, s + i * ss, sizeof(T));
}

inline void CopyRun(char* dst, int64_t ds, const char* src, int64_t ss, int64_t n,
                    size_t item) {
  if (ds == 1 && ss == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * item);
    return;
  }
  switch (item) {
    case 1: return CopyRunAs<uint8_t>(dst, ds, src, ss, n);
    case 2: return CopyRunAs<uint16_t>(dst, ds, src, ss, n);
    case 4: return CopyRunAs<uint32_t>(dst, ds, src, ss, n);
    case 8: return CopyRunAs<uint64_t>(dst, ds, src, ss, n);
  }
  TRN_ASSERT(false, "unexpected item size");
}

// dst <- src, same sizes and dtype, any strides (negative ones too: flip).
inline void CopyView(const TensorRef& dst, const TensorRef& src) {
  const size_t item = ItemSize(dst.dtype);
  if (dst.numel() == 0) return;
  if (dst.ndim == 0) {
    std::memcpy(dst.data, src.data, item);
    return;
  }
  ForEachRun<2>(
      {&dst, &src},
      [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& st) {
        CopyRun(p[0], st[0], p[1], st[1], n, item);
      },
      /*order_by=*/0);
}

// t restricted to [start, start + len) along dim.
inline TensorRef Narrow(const TensorRef& t, int dim, int64_t start, int64_t len) {
  TensorRef v = t;
  v.data = static_cast<char*>(t.data) + start * t.strides[dim] * static_cast<int64_t>(ItemSize(t.dtype));
  v.sizes[dim] = len;
  return v;
}

// t at position i of dim, with dim removed.
inline TensorRef Select(const TensorRef& t, int dim, int64_t i) {
  TensorRef v = Narrow(t, dim, i, 1);
  for (int d = dim; d + 1 < t.ndim; ++d) {
    v.sizes[d] = t.sizes[d + 1];
    v.strides[d] = t.strides[d + 1];
  }
  v.ndim = t.ndim - 1;
  return v;
}

// Dims [first, ndim) of t as a view starting `offset` elements after t.data.
inline TensorRef Trailing(const TensorRef& t, int first, int64_t offset) {
  TensorRef v;
  v.data = static_cast<char*>(t.data) + offset * static_cast<int64_t>(ItemSize(t.dtype));
  v.dtype = t.dtype;
  v.ndim = t.ndim - first;
  for (int d = first; d < t.ndim; ++d) {
    v.sizes[d - first] = t.sizes[d];
    v.strides[d - first] = t.strides[d];
  }
  return v;
}

// Row-major odometer over `nd` dims of `sizes`: f(off, idx) for every
// multi-index idx, off[k] = sum_d idx[d] * strides[k][d] (elements). nd == 0
// calls f once; an empty dim calls it never.
template <int N, typename F>
void ForEachOffset(int nd, const int64_t* sizes, const std::array<const int64_t*, N>& strides,
                   F&& f) {
  for (int d = 0; d < nd; ++d) {
    if (sizes[d] == 0) return;
  }
  int64_t idx[kMaxDims] = {};
  std::array<int64_t, N> off{};
  while (true) {
    f(off, static_cast<const int64_t*>(idx));
    int d = nd - 1;
    for (; d >= 0; --d) {
      for (int k = 0; k < N; ++k) off[k] += strides[k][d];
      if (++idx[d] < sizes[d]) break;
      for (int k = 0; k < N; ++k) off[k] -= strides[k][d] * sizes[d];
      idx[d] = 0;
    }
    if (d < 0) return;
  }
}

// Value of an int32/int64 index tensor at element offset `off`.
inline int64_t IndexValue(const TensorRef& index, int64_t off) {
  return index.dtype == DType::kInt64 ? index.ptr<const int64_t>()[off]
                                      : index.ptr<const int32_t>()[off];
}

}  // namespace trn::kernels::internal
