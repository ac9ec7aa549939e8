// Indexing and layout kernels (indexing.h). Data movement copies elements by
// their storage bytes; the few arithmetic kernels go through convert.h's
// casts. Every index is validated before anything is written, so a failed
// kernel leaves its output untouched.
#include "core/kernels/indexing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <type_traits>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/indexing_internal.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {
namespace {

using internal::CopyView;
using internal::ForEachOffset;
using internal::IndexValue;
using internal::Narrow;
using internal::Trailing;

char* At(const TensorRef& t, int64_t off) {
  return static_cast<char*>(t.data) + off * static_cast<int64_t>(ItemSize(t.dtype));
}

Status OutOfRange(int64_t index, int dim, int64_t size) {
  return Status::Error("index " + std::to_string(index) + " is out of bounds for dimension " +
                       std::to_string(dim) + " with size " + std::to_string(size));
}

template <typename T>
bool IsNonzero(T v) {
  if constexpr (internal::kIsHalf<T>) {
    return internal::ToF32(v) != 0.0f;
  } else {
    return v != T(0);
  }
}

// *dst = *dst + *src in T's arithmetic: float32 for floating dtypes (float64
// too, Note [float64 policy]), wrapping int64 for integers, or for bool.
template <typename T>
void AddElem(T* dst, const T* src) {
  if constexpr (std::is_same_v<T, bool>) {
    *dst = *dst || *src;
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    *dst = static_cast<T>(static_cast<U>(*dst) + static_cast<U>(*src));
  } else {
    *dst = internal::Cast<T>(internal::ToF32(*dst) + internal::ToF32(*src));
  }
}

// dst += src over two views of one shape and dtype.
void AddView(const TensorRef& dst, const TensorRef& src) {
  internal::VisitDType(dst.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (dst.ndim == 0) {
      AddElem(dst.ptr<T>(), src.ptr<const T>());
      return;
    }
    internal::ForEachRun<2>(
        {&dst, &src},
        [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
          T* d = reinterpret_cast<T*>(p[0]);
          const T* x = reinterpret_cast<const T*>(p[1]);
          for (int64_t i = 0; i < n; ++i) AddElem(d + i * s[0], x + i * s[1]);
        },
        /*order_by=*/0);
  });
}

void CopyElem(char* dst, const char* src, size_t item) { std::memcpy(dst, src, item); }

// Checks every index of `index` against [lo, size); lo = 0 or -size.
Status CheckIndices(const TensorRef& index, int dim, int64_t size, bool allow_negative) {
  Status st;
  ForEachOffset<1>(index.ndim, index.sizes, {index.strides},
                   [&](const std::array<int64_t, 1>& off, const int64_t*) {
                     if (!st.ok()) return;
                     const int64_t v = IndexValue(index, off[0]);
                     if (v >= size || v < (allow_negative ? -size : 0)) {
                       st = OutOfRange(v, dim, size);
                     }
                   });
  return st;
}

// Strides of t with dim's stride replaced by 0 (the index supplies it).
std::array<int64_t, kMaxDims> WithoutDim(const TensorRef& t, int dim) {
  std::array<int64_t, kMaxDims> s{};
  for (int d = 0; d < t.ndim; ++d) s[d] = d == dim ? 0 : t.strides[d];
  return s;
}

// Element offsets into `in` (its first k dims) of every b of the broadcast
// index shape, in row-major order of b; validates the indices.
Status IndexedOffsets(const TensorRef& in, const std::vector<TensorRef>& indices,
                      const std::vector<int>& dims, std::vector<int64_t>* offsets,
                      bool negative = true) {
  const TensorRef& first = indices[0];
  offsets->assign(static_cast<size_t>(first.numel()), 0);
  for (size_t j = 0; j < indices.size(); ++j) {
    const TensorRef& index = indices[j];
    TRN_ASSERT(index.ndim == first.ndim, "index tensors must be broadcast to one shape");
    const int64_t size = in.sizes[j];
    const int dim = dims.empty() ? static_cast<int>(j) : dims[j];
    int64_t b = 0;
    Status st;
    ForEachOffset<1>(index.ndim, index.sizes, {index.strides},
                     [&](const std::array<int64_t, 1>& off, const int64_t*) {
                       int64_t v = IndexValue(index, off[0]);
                       if (v < (negative ? -size : 0) || v >= size) {
                         if (st.ok()) st = OutOfRange(v, dim, size);
                         return;
                       }
                       if (v < 0) v += size;
                       (*offsets)[b++] += v * in.strides[j];
                     });
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

// Calls f(line_in, line_values, line_indices) for every line along dim of
// `in`; the line views are 1-D TensorRefs (sizes of their own tensor at dim).
template <typename F>
void ForEachLine(const TensorRef& in, const TensorRef& values, const TensorRef& indices,
                 int dim, F&& f) {
  int64_t sizes[kMaxDims];
  for (int d = 0; d < in.ndim; ++d) sizes[d] = d == dim ? 1 : in.sizes[d];
  const auto line = [&](const TensorRef& t, int64_t off) {
    TensorRef v;
    v.data = t.data == nullptr ? nullptr : At(t, off);  // absent values stay absent
    v.dtype = t.dtype;
    v.ndim = 1;
    v.sizes[0] = t.sizes[dim];
    v.strides[0] = t.strides[dim];
    return v;
  };
  ForEachOffset<3>(in.ndim, sizes, {in.strides, values.strides, indices.strides},
                   [&](const std::array<int64_t, 3>& off, const int64_t*) {
                     f(line(in, off[0]), line(values, off[1]), line(indices, off[2]));
                   });
}

// Note [sort keys]: a line is sorted as one uint64 per element, the value's
// order-preserving 32-bit key in the high half and its position in the low
// half, so a plain integer sort is stable (ties order by position) and needs
// no comparator. Floats (float64 and halves through float32, as every kernel
// computes them) map to their sign-flipped bits with -0 as +0 and every NaN
// as the largest key (torch sorts NaN last ascending, first descending);
// int32 and bool offset by 2^31. Descending inverts the key. int64 values do
// not fit in 32 bits and sort (value, position) pairs instead.
template <typename T>
uint32_t SortKey(T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? 1u : 0u;
  } else if constexpr (std::is_integral_v<T>) {
    return static_cast<uint32_t>(v) ^ 0x80000000u;
  } else {
    float f = internal::ToF32(v);
    if (std::isnan(f)) return 0xffffffffu;
    if (f == 0.0f) f = 0.0f;
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return (u & 0x80000000u) ? ~u : u | 0x80000000u;
  }
}

// Sorts (or partially sorts: the first k) the positions of one line by value.
template <typename T>
void SortLine(const TensorRef& in, const TensorRef& values, const TensorRef& indices,
              int64_t k, bool descending, std::vector<uint64_t>& packed,
              std::vector<std::pair<int64_t, int64_t>>& pairs) {
  const int64_t n = in.sizes[0];
  const T* x = in.ptr<const T>();
  T* v = values.ptr<T>();
  int64_t* ix = indices.ptr<int64_t>();
  const auto sort_first_k = [&](auto& items) {
    if (k < n) {
      std::partial_sort(items.begin(), items.begin() + k, items.end());
    } else {
      std::sort(items.begin(), items.end());
    }
  };
  if constexpr (std::is_same_v<T, int64_t>) {
    pairs.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const int64_t key = x[i * in.strides[0]];
      // Descending: ~key reverses the order of every int64 without overflow.
      pairs[i] = {descending ? ~key : key, i};
    }
    sort_first_k(pairs);
    for (int64_t i = 0; i < k; ++i) {
      ix[i * indices.strides[0]] = pairs[i].second;
      if (v != nullptr) v[i * values.strides[0]] = x[pairs[i].second * in.strides[0]];
    }
  } else {
    packed.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      uint32_t key = SortKey(x[i * in.strides[0]]);
      if (descending) key = ~key;
      packed[i] = (static_cast<uint64_t>(key) << 32) | static_cast<uint64_t>(i);
    }
    sort_first_k(packed);
    for (int64_t i = 0; i < k; ++i) {
      const int64_t pos = static_cast<int64_t>(packed[i] & 0xffffffffu);
      ix[i * indices.strides[0]] = pos;
      if (v != nullptr) v[i * values.strides[0]] = x[pos * in.strides[0]];
    }
  }
}

Status SortOrTopK(const TensorRef& values, const TensorRef& indices, const TensorRef& in,
                  int dim, int64_t k, bool descending) {
  TRN_ASSERT((values.data == nullptr || values.dtype == in.dtype) &&
                 indices.dtype == DType::kInt64,
             "sort: values (optional) of in's dtype, kInt64 indices");
  if (in.ndim == 0) {
    if (values.data != nullptr) std::memcpy(values.data, in.data, ItemSize(in.dtype));
    *indices.ptr<int64_t>() = 0;
    return Status::Ok();
  }
  TRN_ASSERT(dim >= 0 && dim < in.ndim && k <= in.sizes[dim], "sort: dim or k out of range");
  if (in.sizes[dim] > (int64_t{1} << 32)) {
    return Status::Error("sort: lines longer than 2^32 elements are not supported, got " +
                         std::to_string(in.sizes[dim]));
  }
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    std::vector<uint64_t> packed;
    std::vector<std::pair<int64_t, int64_t>> pairs;
    ForEachLine(in, values, indices, dim,
                [&](const TensorRef& li, const TensorRef& lv, const TensorRef& lx) {
                  SortLine<T>(li, lv, lx, k, descending, packed, pairs);
                });
  });
  return Status::Ok();
}

// Roll of dims [d, ndim): splits each rolled dim into its two moved halves.
void RollFrom(const TensorRef& out, const TensorRef& in, const int64_t* shifts, int d) {
  if (d == in.ndim) return CopyView(out, in);
  const int64_t n = in.sizes[d];
  const int64_t s = n == 0 ? 0 : ((shifts[d] % n) + n) % n;
  if (s == 0) return RollFrom(out, in, shifts, d + 1);
  RollFrom(Narrow(out, d, s, n - s), Narrow(in, d, 0, n - s), shifts, d + 1);
  RollFrom(Narrow(out, d, 0, s), Narrow(in, d, n - s, s), shifts, d + 1);
}

}  // namespace

Status Arange(const TensorRef& out, double start, double step) {
  TRN_ASSERT(out.ndim == 1 && out.dtype != DType::kBool, "arange: 1-D out, not bool");
  internal::VisitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    const int64_t n = out.sizes[0], os = out.strides[0];
    if constexpr (std::is_integral_v<T>) {
      const int64_t s0 = static_cast<int64_t>(start), st = static_cast<int64_t>(step);
      if (os == 1) {  // the common case, a loop the compiler vectorizes
        for (int64_t i = 0; i < n; ++i) o[i] = static_cast<T>(s0 + i * st);
      } else {
        for (int64_t i = 0; i < n; ++i) o[i * os] = static_cast<T>(s0 + i * st);
      }
    } else {
      for (int64_t i = 0; i < out.sizes[0]; ++i) {
        o[i * out.strides[0]] = internal::Cast<T>(start + static_cast<double>(i) * step);
      }
    }
  });
  return Status::Ok();
}

Status Linspace(const TensorRef& out, double start, double end, double base) {
  TRN_ASSERT(out.ndim == 1 && out.dtype != DType::kBool, "linspace: 1-D out, not bool");
  internal::VisitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_integral_v<T> || std::is_same_v<T, double>, double, float>;
    const int64_t n = out.sizes[0], half = n / 2;
    // Integers: torch casts start and end to the dtype first.
    const C s = std::is_integral_v<T> ? static_cast<C>(static_cast<int64_t>(start)) : static_cast<C>(start);
    const C e = std::is_integral_v<T> ? static_cast<C>(static_cast<int64_t>(end)) : static_cast<C>(end);
    const C step = n > 1 ? (e - s) / static_cast<C>(n - 1) : C(0);
    const C b = static_cast<C>(base);
    T* o = out.ptr<T>();
    for (int64_t i = 0; i < n; ++i) {
      C v = n == 1 ? s  // step is 0 and the one point is start, not end
            : i < half ? s + step * static_cast<C>(i)
                       : e - step * static_cast<C>(n - 1 - i);
      if (base > 0) v = std::pow(b, v);
      if constexpr (std::is_integral_v<T>) o[i * out.strides[0]] = static_cast<T>(v);
      else o[i * out.strides[0]] = internal::Cast<T>(v);
    }
  });
  return Status::Ok();
}

Status Triangle(const TensorRef& out, const TensorRef& in, int64_t diagonal, bool upper) {
  TRN_ASSERT(out.ndim >= 2 && out.ndim == in.ndim && out.dtype == in.dtype,
             "tril/triu: out and in of one shape and dtype, ndim >= 2");
  const int nd = out.ndim;
  const int64_t cols = out.sizes[nd - 1];
  const size_t item = ItemSize(out.dtype);
  const int64_t os = out.strides[nd - 1], is = in.strides[nd - 1];
  const bool in_place = out.data == in.data;
  const auto zero = [&](char* o, int64_t from, int64_t to) {
    if (from >= to) return;
    if (os == 1) {
      std::memset(o + from * static_cast<int64_t>(item), 0, static_cast<size_t>(to - from) * item);
      return;
    }
    for (int64_t j = from; j < to; ++j) std::memset(o + j * os * static_cast<int64_t>(item), 0, item);
  };
  const auto copy = [&](char* o, const char* x, int64_t from, int64_t to) {
    if (from >= to || in_place) return;
    const int64_t step = static_cast<int64_t>(item);
    internal::CopyRun(o + from * os * step, os, x + from * is * step, is, to - from, item);
  };
  ForEachOffset<2>(nd - 1, out.sizes, {out.strides, in.strides},
                   [&](const std::array<int64_t, 2>& off, const int64_t* idx) {
                     // Row `row` keeps j <= row + diagonal (tril) or j >= row + diagonal (triu).
                     const int64_t row = idx[nd - 2];
                     char* o = At(out, off[0]);
                     const char* x = At(in, off[1]);
                     if (upper) {
                       const int64_t first = std::clamp<int64_t>(row + diagonal, 0, cols);
                       zero(o, 0, first);
                       copy(o, x, first, cols);
                     } else {
                       const int64_t end = std::clamp<int64_t>(row + diagonal + 1, 0, cols);
                       copy(o, x, 0, end);
                       zero(o, end, cols);
                     }
                   });
  return Status::Ok();
}

Status Gather(const TensorRef& out, const TensorRef& in, int dim, const TensorRef& index) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == index.ndim, "gather: out of index's shape");
  if (out.numel() == 0) return Status::Ok();
  if (in.ndim == 0) {  // torch: a 0-d input is indexed as size 1
    Status st = CheckIndices(index, 0, 1, false);
    if (st.ok()) std::memcpy(out.data, in.data, ItemSize(in.dtype));
    return st;
  }
  const int64_t size = in.sizes[dim];
  if (Status st = CheckIndices(index, dim, size, false); !st.ok()) return st;
  const auto in_strides = WithoutDim(in, dim);
  const size_t item = ItemSize(out.dtype);
  const int64_t dim_stride = in.strides[dim];
  ForEachOffset<3>(out.ndim, out.sizes, {out.strides, index.strides, in_strides.data()},
                   [&](const std::array<int64_t, 3>& off, const int64_t*) {
                     const int64_t v = IndexValue(index, off[1]);
                     CopyElem(At(out, off[0]), At(in, off[2] + v * dim_stride), item);
                   });
  return Status::Ok();
}

namespace {
// A floating element as compared: float64 as itself, the others in float32
// (which holds them exactly).
template <typename T>
auto Comparable(T v) {
  if constexpr (std::is_same_v<T, double>) {
    return v;
  } else {
    return internal::ToF32(v);
  }
}

// *dst = reduce(*dst, *src) for the scatter_reduce modes but add; a NaN wins.
template <typename T>
void ReduceElem(ScatterReduce reduce, T* dst, const T* src) {
  if constexpr (std::is_same_v<T, bool>) {
    *dst = reduce == ScatterReduce::kMin || reduce == ScatterReduce::kMul ? (*dst && *src)
                                                                         : (*dst || *src);
  } else if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    if (reduce == ScatterReduce::kMul) {
      *dst = static_cast<T>(static_cast<U>(*dst) * static_cast<U>(*src));
    } else {
      *dst = reduce == ScatterReduce::kMax ? std::max(*dst, *src) : std::min(*dst, *src);
    }
  } else if (reduce == ScatterReduce::kMul) {
    *dst = internal::Cast<T>(internal::ToF32(*dst) * internal::ToF32(*src));
  } else {  // max / min keep the winner's exact value (float64 too)
    const auto a = Comparable(*dst), b = Comparable(*src);
    if (!std::isnan(a) && (std::isnan(b) || (reduce == ScatterReduce::kMax ? b > a : b < a))) {
      *dst = *src;
    }
  }
}
}  // namespace

Status Scatter(const TensorRef& out, int dim, const TensorRef& index, const TensorRef& src,
               double value, ScatterReduce reduce) {
  const bool has_src = src.data != nullptr;
  TRN_ASSERT(!has_src || (src.dtype == out.dtype && src.ndim == index.ndim),
             "scatter: src of out's dtype and index's ndim");
  if (index.numel() == 0) return Status::Ok();
  const int64_t size = out.ndim == 0 ? 1 : out.sizes[dim];
  if (Status st = CheckIndices(index, dim, size, false); !st.ok()) return st;
  const auto out_strides = WithoutDim(out, dim);
  const int64_t dim_stride = out.ndim == 0 ? 0 : out.strides[dim];
  static const int64_t kZeros[kMaxDims] = {};
  internal::VisitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    const T scalar = internal::Cast<T>(value);
    ForEachOffset<3>(index.ndim, index.sizes,
                     {index.strides, out_strides.data(), has_src ? src.strides : kZeros},
                     [&](const std::array<int64_t, 3>& off, const int64_t*) {
                       T* o = out.ptr<T>() + off[1] + IndexValue(index, off[0]) * dim_stride;
                       const T* x = has_src ? src.ptr<const T>() + off[2] : &scalar;
                       if (reduce == ScatterReduce::kNone) {
                         *o = *x;
                       } else if (reduce == ScatterReduce::kAdd) {
                         AddElem(o, x);
                       } else {
                         ReduceElem(reduce, o, x);
                       }
                     });
  });
  return Status::Ok();
}

Status Index(const TensorRef& out, const TensorRef& in, const std::vector<TensorRef>& indices,
             const std::vector<int>& dims) {
  TRN_ASSERT(!indices.empty() && out.dtype == in.dtype, "index: at least one index tensor");
  const int k = static_cast<int>(indices.size());
  const int nb = indices[0].ndim;
  TRN_ASSERT(out.ndim == nb + in.ndim - k, "index: out must be [B..., rest...]");
  std::vector<int64_t> offsets;
  if (Status st = IndexedOffsets(in, indices, dims, &offsets); !st.ok()) return st;
  const TensorRef rest_in = Trailing(in, k, 0);
  const size_t item = ItemSize(in.dtype);
  size_t b = 0;
  ForEachOffset<1>(nb, out.sizes, {out.strides},
                   [&](const std::array<int64_t, 1>& off, const int64_t*) {
                     const int64_t src = offsets[b++];
                     if (rest_in.ndim == 0) {
                       CopyElem(At(out, off[0]), At(in, src), item);
                     } else {
                       TensorRef from = rest_in;
                       from.data = At(in, src);
                       CopyView(Trailing(out, nb, off[0]), from);
                     }
                   });
  return Status::Ok();
}

Status IndexPut(const TensorRef& self, const std::vector<TensorRef>& indices,
                const TensorRef& values, bool accumulate, const std::vector<int>& dims,
                bool negative) {
  TRN_ASSERT(!indices.empty() && values.dtype == self.dtype, "index_put: values of self's dtype");
  const int k = static_cast<int>(indices.size());
  const int nb = indices[0].ndim;
  TRN_ASSERT(values.ndim == nb + self.ndim - k, "index_put: values must be [B..., rest...]");
  std::vector<int64_t> offsets;
  if (Status st = IndexedOffsets(self, indices, dims, &offsets, negative); !st.ok()) return st;
  const TensorRef rest_self = Trailing(self, k, 0);
  const size_t item = ItemSize(self.dtype);
  size_t b = 0;
  ForEachOffset<1>(nb, values.sizes, {values.strides},
                   [&](const std::array<int64_t, 1>& off, const int64_t*) {
                     TensorRef to = rest_self;
                     to.data = At(self, offsets[b++]);
                     const TensorRef from = Trailing(values, nb, off[0]);
                     if (accumulate) {
                       AddView(to, from);
                     } else if (to.ndim == 0) {
                       CopyElem(static_cast<char*>(to.data), static_cast<const char*>(from.data), item);
                     } else {
                       CopyView(to, from);
                     }
                   });
  return Status::Ok();
}

namespace {
// log(exp(a) + exp(b)) without overflow: torch's log_add_exp (equal
// infinities return a; a NaN propagates).
double LogAddExp(double a, double b) {
  const double lo = std::isnan(b) ? b : std::min(a, b), hi = std::isnan(b) ? b : std::max(a, b);
  if (lo != hi || std::isfinite(lo)) return std::log1p(std::exp(lo - hi)) + hi;
  return a;
}
}  // namespace

Status Scan(ScanOp op, const TensorRef& out, const TensorRef& in, int dim) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == in.ndim && in.dtype != DType::kBool,
             "cumsum/cumprod: out and in of one shape and dtype, not bool");
  TRN_ASSERT(op != ScanOp::kLogSumExp || IsFloating(in.dtype), "logcumsumexp: floating dtypes");
  if (in.ndim == 0) {
    std::memcpy(out.data, in.data, ItemSize(in.dtype));
    return Status::Ok();
  }
  int64_t sizes[kMaxDims];
  for (int d = 0; d < in.ndim; ++d) sizes[d] = d == dim ? 1 : in.sizes[d];
  const int64_t n = in.sizes[dim], os = out.strides[dim], is = in.strides[dim];
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (!std::is_same_v<T, bool>) {
      using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
      ForEachOffset<2>(in.ndim, sizes, {out.strides, in.strides},
                       [&](const std::array<int64_t, 2>& off, const int64_t*) {
                         T* o = out.ptr<T>() + off[0];
                         const T* x = in.ptr<const T>() + off[1];
                         Acc acc = op == ScanOp::kSum ? Acc(0) : Acc(1);
                         for (int64_t i = 0; i < n; ++i) {
                           Acc v;
                           if constexpr (std::is_integral_v<T>) {
                             v = static_cast<Acc>(x[i * is]);
                           } else {
                             v = static_cast<double>(internal::ToF32(x[i * is]));
                           }
                           if constexpr (std::is_integral_v<T>) {  // wraps as torch
                             const auto u = static_cast<uint64_t>(acc), w = static_cast<uint64_t>(v);
                             acc = static_cast<Acc>(op == ScanOp::kSum ? u + w : u * w);
                           } else if (op == ScanOp::kLogSumExp) {
                             acc = i == 0 ? v : LogAddExp(acc, v);
                           } else {
                             acc = op == ScanOp::kSum ? acc + v : acc * v;
                           }
                           o[i * os] = internal::Cast<T>(acc);
                         }
                       });
    }
  });
  return Status::Ok();
}

Status ScanExtremum(const TensorRef& values, const TensorRef& indices, const TensorRef& in,
                    int dim, bool max) {
  const bool want_values = values.data != nullptr;
  TRN_ASSERT((!want_values || (values.dtype == in.dtype && values.ndim == in.ndim)) &&
                 indices.dtype == DType::kInt64 && indices.ndim == in.ndim,
             "cummax/cummin: values (optional) of in's dtype, int64 indices, one shape");
  if (in.ndim == 0) {
    if (want_values) std::memcpy(values.data, in.data, ItemSize(in.dtype));
    *static_cast<int64_t*>(indices.data) = 0;
    return Status::Ok();
  }
  int64_t sizes[kMaxDims];
  for (int d = 0; d < in.ndim; ++d) sizes[d] = d == dim ? 1 : in.sizes[d];
  const int64_t n = in.sizes[dim], vs = want_values ? values.strides[dim] : 0;
  const int64_t xs = indices.strides[dim];
  const int64_t is = in.strides[dim];
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_integral_v<T>, T, float>;  // compared as
    const auto load = [](const T* p) -> C {
      if constexpr (std::is_integral_v<T>) {
        return *p;
      } else {
        return internal::ToF32(*p);
      }
    };
    static const int64_t kZeros[kMaxDims] = {};
    ForEachOffset<3>(in.ndim, sizes,
                     {want_values ? values.strides : kZeros, indices.strides, in.strides},
                     [&](const std::array<int64_t, 3>& off, const int64_t*) {
                       T* v = want_values ? values.ptr<T>() + off[0] : nullptr;
                       int64_t* ix = indices.ptr<int64_t>() + off[1];
                       const T* x = in.ptr<const T>() + off[2];
                       T best = x[0];
                       int64_t at = 0;
                       for (int64_t i = 0; i < n; ++i) {
                         const C c = load(x + i * is), b = load(&best);
                         bool take;
                         if constexpr (std::is_integral_v<T>) {
                           take = max ? c >= b : c <= b;
                         } else {
                           take = std::isnan(c) || (!std::isnan(b) && (max ? c >= b : c <= b));
                         }
                         if (take) {
                           best = x[i * is];
                           at = i;
                         }
                         if (v != nullptr) v[i * vs] = best;
                         ix[i * xs] = at;
                       }
                     });
  });
  return Status::Ok();
}

Status Sort(const TensorRef& values, const TensorRef& indices, const TensorRef& in, int dim,
            bool descending) {
  return SortOrTopK(values, indices, in, dim, in.ndim == 0 ? 1 : in.sizes[dim], descending);
}

Status TopK(const TensorRef& values, const TensorRef& indices, const TensorRef& in, int dim,
            int64_t k, bool largest) {
  if (in.ndim == 0 && k == 0) return Status::Ok();
  return SortOrTopK(values, indices, in, dim, k, largest);
}

Status Flip(const TensorRef& out, const TensorRef& in, uint32_t mask) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == in.ndim, "flip: out of in's shape");
  if (in.numel() == 0) return Status::Ok();
  TensorRef v = in;
  for (int d = 0; d < in.ndim; ++d) {
    if (!((mask >> d) & 1)) continue;
    v.data = At(v, (in.sizes[d] - 1) * in.strides[d]);
    v.strides[d] = -in.strides[d];
  }
  CopyView(out, v);
  return Status::Ok();
}

Status Roll(const TensorRef& out, const TensorRef& in, const int64_t* shifts) {
  TRN_ASSERT(out.dtype == in.dtype && out.ndim == in.ndim, "roll: out of in's shape");
  if (in.numel() == 0) return Status::Ok();
  RollFrom(out, in, shifts, 0);
  return Status::Ok();
}

Status CountNonzero(const TensorRef& out, const TensorRef& in) {
  TRN_ASSERT(out.dtype == DType::kInt64 && out.numel() == 1, "count_nonzero: int64 scalar out");
  int64_t count = 0;
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    ForEachOffset<1>(in.ndim, in.sizes, {in.strides},
                     [&](const std::array<int64_t, 1>& off, const int64_t*) {
                       count += IsNonzero(in.ptr<const T>()[off[0]]);
                     });
  });
  *out.ptr<int64_t>() = count;
  return Status::Ok();
}

Status Nonzero(const TensorRef& out, const TensorRef& in) {
  TRN_ASSERT(out.dtype == DType::kInt64 && out.ndim == 2 && out.sizes[1] == in.ndim,
             "nonzero: out [n, ndim] int64");
  const int64_t n = out.sizes[0];
  int64_t row = 0;
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    ForEachOffset<1>(in.ndim, in.sizes, {in.strides},
                     [&](const std::array<int64_t, 1>& off, const int64_t* idx) {
                       if (!IsNonzero(in.ptr<const T>()[off[0]])) return;
                       if (row < n) {
                         int64_t* o = out.ptr<int64_t>() + row * out.strides[0];
                         for (int d = 0; d < in.ndim; ++d) o[d * out.strides[1]] = idx[d];
                       }
                       ++row;
                     });
  });
  if (row != n) {
    return Status::Error("nonzero: the input has " + std::to_string(row) +
                         " nonzero elements, expected " + std::to_string(n) +
                         " (was it modified after the count?)");
  }
  return Status::Ok();
}

Status RepeatIndex(const TensorRef& out, const TensorRef& repeats) {
  TRN_ASSERT(out.dtype == DType::kInt64 && out.ndim == 1 && repeats.ndim == 1,
             "repeat_interleave: 1-D repeats, 1-D int64 out");
  int64_t total = 0;
  for (int64_t i = 0; i < repeats.sizes[0]; ++i) {
    const int64_t r = IndexValue(repeats, i * repeats.strides[0]);
    if (r < 0) {
      return Status::Error("repeat_interleave: repeats can not be negative, got " +
                           std::to_string(r) + " at position " + std::to_string(i));
    }
    total += r;
  }
  if (total != out.sizes[0]) {
    return Status::Error("repeat_interleave: repeats sum to " + std::to_string(total) +
                         ", expected output_size " + std::to_string(out.sizes[0]));
  }
  int64_t* o = out.ptr<int64_t>();
  int64_t j = 0;
  for (int64_t i = 0; i < repeats.sizes[0]; ++i) {
    const int64_t r = IndexValue(repeats, i * repeats.strides[0]);
    for (int64_t t = 0; t < r; ++t) o[(j++) * out.strides[0]] = i;
  }
  return Status::Ok();
}

Status IsIn(const TensorRef& out, const TensorRef& elements, const TensorRef& test,
            bool invert) {
  TRN_ASSERT(out.dtype == DType::kBool && out.ndim == elements.ndim && elements.dtype == test.dtype,
             "isin: bool out of elements' shape, elements and test of one dtype");
  internal::VisitDType(elements.dtype, [&](auto tag) {
    using T = decltype(tag);
    using K = std::conditional_t<std::is_integral_v<T>, int64_t, float>;
    auto key = [](T v) -> K {
      if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(v);
      else return internal::ToF32(v);
    };
    std::vector<K> keys;
    keys.reserve(static_cast<size_t>(test.numel()));
    ForEachOffset<1>(test.ndim, test.sizes, {test.strides},
                     [&](const std::array<int64_t, 1>& off, const int64_t*) {
                       const K k = key(test.ptr<const T>()[off[0]]);
                       if constexpr (!std::is_integral_v<T>) {
                         if (std::isnan(k)) return;  // NaN equals nothing
                       }
                       keys.push_back(k);
                     });
    std::sort(keys.begin(), keys.end());
    ForEachOffset<2>(elements.ndim, elements.sizes, {out.strides, elements.strides},
                     [&](const std::array<int64_t, 2>& off, const int64_t*) {
                       const K k = key(elements.ptr<const T>()[off[1]]);
                       const bool found = std::binary_search(keys.begin(), keys.end(), k);
                       out.ptr<bool>()[off[0]] = found != invert;
                     });
  });
  return Status::Ok();
}

Status Histc(const TensorRef& out, const TensorRef& in, int64_t bins, double lo, double hi) {
  TRN_ASSERT(out.ndim == 1 && out.sizes[0] == bins && bins > 0 && out.dtype == in.dtype &&
                 in.dtype != DType::kBool,
             "histc: out [bins] of in's dtype");
  Status status = Status::Ok();
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    // The binning type: exact int64 for integers, the element type for
    // float32/float64 (torch's CPU), float32 for the 16-bit floats.
    using A = std::conditional_t<std::is_integral_v<T>, int64_t,
                                 std::conditional_t<std::is_same_v<T, double>, double, float>>;
    auto value = [&](int64_t off) -> A {
      if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(in.ptr<const T>()[off]);
      else if constexpr (std::is_same_v<T, double>) return in.ptr<const T>()[off];
      else return internal::ToF32(in.ptr<const T>()[off]);
    };
    auto each = [&](const auto& f) {
      ForEachOffset<1>(in.ndim, in.sizes, {in.strides},
                       [&](const std::array<int64_t, 1>& off, const int64_t*) { f(value(off[0])); });
    };
    A a = static_cast<A>(lo), b = static_cast<A>(hi);
    if (lo == hi && in.numel() > 0) {  // the data's range; NaN makes it non-finite
      bool nan = false, first = true;
      each([&](A v) {
        if constexpr (!std::is_integral_v<A>) nan = nan || std::isnan(v);
        a = first || v < a ? v : a;
        b = first || v > b ? v : b;
        first = false;
      });
      if (nan || !std::isfinite(static_cast<double>(a)) || !std::isfinite(static_cast<double>(b))) {
        status = Status::Error("torch.histc: range of [" + std::to_string(nan ? NAN : double(a)) +
                               ", " + std::to_string(nan ? NAN : double(b)) + "] is not finite");
        return;
      }
    }
    if (a == b) {
      a -= 1;
      b += 1;
    }
    std::vector<int64_t> counts(static_cast<size_t>(bins), 0);
    each([&](A v) {
      if (!(v >= a && v <= b)) return;  // also drops NaN
      int64_t pos = static_cast<int64_t>((v - a) * static_cast<A>(bins) / (b - a));
      if (pos >= bins) pos = bins - 1;  // x == hi (or rounding up to it)
      ++counts[static_cast<size_t>(pos)];
    });
    for (int64_t i = 0; i < bins; ++i) {
      T& o = out.ptr<T>()[i * out.strides[0]];
      if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>) o = static_cast<T>(counts[i]);
      else o = internal::Cast<T>(static_cast<float>(counts[i]));
    }
  });
  return status;
}

Status NllLoss(const TensorRef& out, const TensorRef& total_weight, const TensorRef& in,
               const TensorRef& target, const TensorRef& weight, int reduction,
               int64_t ignore_index) {
  TRN_ASSERT((in.ndim == 1 || in.ndim == 2) && IsFloating(in.dtype) &&
                 target.dtype == DType::kInt64 &&
                 target.ndim == in.ndim - 1 && reduction >= 0 && reduction <= 2 &&
                 out.dtype == in.dtype && total_weight.dtype == in.dtype,
             "nll_loss: in [N, C] or [C] floating, target [N] int64, out of in's dtype");
  const int64_t n = in.ndim == 2 ? in.sizes[0] : 1, c = in.sizes[in.ndim - 1];
  const int64_t row = in.ndim == 2 ? in.strides[0] : 0, col = in.strides[in.ndim - 1];
  const int64_t tstride = target.ndim == 1 ? target.strides[0] : 0;
  TRN_ASSERT(target.ndim == 0 || target.sizes[0] == n, "nll_loss: target [N] for in [N, C]");
  TRN_ASSERT(weight.data == nullptr || (weight.ndim == 1 && weight.sizes[0] == c &&
                                        weight.dtype == in.dtype),
             "nll_loss: weight [C] of in's dtype");
  auto label = [&](int64_t i) { return target.ptr<const int64_t>()[i * tstride]; };
  for (int64_t i = 0; i < n; ++i) {  // checked first, so a bad target writes nothing
    const int64_t t = label(i);
    if (t != ignore_index && (t < 0 || t >= c)) {
      return Status::Error("Target " + std::to_string(t) + " is out of bounds.");
    }
  }
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, internal::BF16> ||
                  std::is_same_v<T, internal::F16>) {
      auto f64 = [](T v) -> double {
        if constexpr (std::is_floating_point_v<T>) return static_cast<double>(v);
        else return static_cast<double>(internal::ToF32(v));
      };
      auto store = [](T* p, double v) {
        if constexpr (std::is_floating_point_v<T>) *p = static_cast<T>(v);
        else *p = internal::Cast<T>(static_cast<float>(v));
      };
      const T* x = in.ptr<const T>();
      double sum = 0, wsum = 0;
      for (int64_t i = 0; i < n; ++i) {
        const int64_t t = label(i);
        double loss = 0;
        if (t != ignore_index) {
          const double w = weight.data == nullptr ? 1.0 : f64(weight.ptr<const T>()[t * weight.strides[0]]);
          loss = -w * f64(x[i * row + t * col]);
          sum += loss;
          wsum += w;
        }
        if (reduction == 0) store(out.ptr<T>() + (out.ndim == 1 ? i * out.strides[0] : 0), loss);
      }
      if (reduction == 1) store(out.ptr<T>(), sum / wsum);  // 0 / 0 = NaN when nothing counts
      if (reduction == 2) store(out.ptr<T>(), sum);
      store(total_weight.ptr<T>(), reduction == 0 ? 0.0 : wsum);
    }
  });
  return Status::Ok();
}

Status SearchSorted(const TensorRef& out, const TensorRef& seq, const TensorRef& values,
                    bool right) {
  TRN_ASSERT(seq.ndim >= 1 && seq.dtype == values.dtype && values.dtype != DType::kBool &&
                 (out.dtype == DType::kInt32 || out.dtype == DType::kInt64) &&
                 out.ndim == values.ndim,
             "searchsorted: seq and values of one dtype, out int32/int64 of values' shape");
  TRN_ASSERT(seq.ndim == 1 || seq.ndim == values.ndim, "searchsorted: seq 1-D or of values' rank");
  const int64_t len = seq.sizes[seq.ndim - 1], step = seq.strides[seq.ndim - 1];
  internal::VisitDType(values.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_integral_v<T> || std::is_same_v<T, double>, T, float>;
    auto load = [](const T* p) -> C {
      if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>) return *p;
      else return internal::ToF32(*p);
    };
    const T* s = seq.ptr<const T>();
    const T* v = values.ptr<const T>();
    ForEachOffset<2>(values.ndim, values.sizes, {values.strides, out.strides},
                     [&](const std::array<int64_t, 2>& off, const int64_t* idx) {
      int64_t row = 0;  // the seq row of this value: its leading coordinates
      if (seq.ndim > 1) {
        for (int d = 0; d < seq.ndim - 1; ++d) row += idx[d] * seq.strides[d];
      }
      const C x = load(v + off[0]);
      int64_t lo = 0, hi = len;
      while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        const C m = load(s + row + mid * step);
        if (right ? !(m > x) : !(m >= x)) lo = mid + 1;
        else hi = mid;
      }
      if (out.dtype == DType::kInt64) out.ptr<int64_t>()[off[1]] = lo;
      else out.ptr<int32_t>()[off[1]] = static_cast<int32_t>(lo);
    });
  });
  return Status::Ok();
}

Status Bincount(const TensorRef& out, const TensorRef& in, const TensorRef& weights) {
  TRN_ASSERT(in.ndim == 1 && (in.dtype == DType::kInt32 || in.dtype == DType::kInt64) &&
                 out.ndim == 1,
             "bincount: in 1-D int32/int64, out 1-D");
  TRN_ASSERT(weights.data == nullptr || (weights.ndim == 1 && weights.sizes[0] == in.sizes[0]),
             "bincount: weights [n]");
  const int64_t n = in.sizes[0], bins = out.sizes[0];
  for (int64_t i = 0; i < n; ++i) {  // checked first, so a bad entry writes nothing
    const int64_t k = internal::IndexValue(in, i * in.strides[0]);
    if (k < 0 || k >= bins) {
      return Status::Error("bincount: entry " + std::to_string(k) + " at position " +
                           std::to_string(i) + " is outside [0, " + std::to_string(bins) + ")");
    }
  }
  std::vector<double> acc(static_cast<size_t>(bins), 0.0);
  if (weights.data == nullptr) {
    for (int64_t i = 0; i < n; ++i) acc[internal::IndexValue(in, i * in.strides[0])] += 1.0;
  } else {
    internal::VisitDType(weights.dtype, [&](auto tag) {
      using W = decltype(tag);
      const W* w = weights.ptr<const W>();
      for (int64_t i = 0; i < n; ++i) {
        const W x = w[i * weights.strides[0]];
        double v;
        if constexpr (std::is_integral_v<W> || std::is_floating_point_v<W>) v = static_cast<double>(x);
        else v = internal::ToF32(x);
        acc[internal::IndexValue(in, i * in.strides[0])] += v;
      }
    });
  }
  internal::VisitDType(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    T* o = out.ptr<T>();
    for (int64_t k = 0; k < bins; ++k) {
      if constexpr (std::is_integral_v<T> || std::is_same_v<T, double>) o[k * out.strides[0]] = static_cast<T>(acc[k]);
      else o[k * out.strides[0]] = internal::Cast<T>(static_cast<float>(acc[k]));
    }
  });
  return Status::Ok();
}

// Note [Multinomial]: CPU PyTorch samples without replacement (and n == 1) by
// the exponential race: argmax / top-n of p / q with q ~ Exp(1) drawn as a
// tensor like p from the generator, so trn draws the same q (Note [trn random
// numbers]) and rounds p / q to p's dtype as CPU's div does: one seed gives
// CPU's tokens in sampled generate(). With replacement CPU walks a float32
// running sum per row for each U[0, 1) draw (MultinomialKernel.cpp), as here.
Status Multinomial(const TensorRef& out, const TensorRef& probs, const TensorRef& draws,
                   bool replacement) {
  TRN_ASSERT(probs.ndim == 2 && IsFloating(probs.dtype) && out.ndim == 2 &&
                 out.dtype == DType::kInt64 && out.sizes[0] == probs.sizes[0],
             "multinomial: probs [R, C] floating, out [R, n] int64");
  const int64_t rows = probs.sizes[0], cats = probs.sizes[1], n = out.sizes[1];
  TRN_ASSERT(draws.ndim == 2 && draws.sizes[0] == rows &&
                 (replacement ? draws.dtype == DType::kFloat64 && draws.sizes[1] == n
                              : draws.dtype == probs.dtype && draws.sizes[1] == cats),
             "multinomial: draws [R, C] of probs' dtype, or [R, n] float64 with replacement");
  TRN_ASSERT(rows == 0 || n == 0 || (cats > 0 && (replacement || n <= cats)),
             "multinomial: n samples from C > 0 categories (n <= C without replacement)");
  if (rows == 0 || n == 0) return Status::Ok();
  Status status = Status::Ok();
  internal::VisitDType(probs.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || internal::kIsHalf<T>) {
      const T* pp = probs.ptr<const T>();
      auto p = [&](int64_t i, int64_t j) {
        return internal::ToF32(pp[i * probs.strides[0] + j * probs.strides[1]]);
      };
      // Every row is checked before anything is written; the messages are CPU's.
      for (int64_t i = 0; i < rows && status.ok(); ++i) {
        bool nonzero = false;
        float sum = 0.0f;
        for (int64_t j = 0; j < cats; ++j) {
          const float v = p(i, j);
          if (replacement && !(v >= 0.0f)) {
            status = Status::Error(
                "invalid multinomial distribution (encountering probability entry < 0)");
          } else if (replacement && !std::isfinite(v)) {
            status = Status::Error(
                "invalid multinomial distribution (encountering probability entry = infinity "
                "or NaN)");
          } else if (!replacement && !(v >= 0.0f && std::isfinite(v))) {
            status =
                Status::Error("probability tensor contains either `inf`, `nan` or element < 0");
          }
          if (!status.ok()) return;
          nonzero = nonzero || v != 0.0f;
          sum += v;
        }
        if (replacement ? !(sum > 0.0f) : !nonzero) {
          status = Status::Error("invalid multinomial distribution (sum of probabilities <= 0)");
        }
      }
      if (!status.ok()) return;
      int64_t* o = out.ptr<int64_t>();
      if (replacement) {
        std::vector<float> cdf(static_cast<size_t>(cats));
        const double* u = draws.ptr<const double>();
        for (int64_t i = 0; i < rows; ++i) {
          float sum = 0.0f;
          for (int64_t j = 0; j < cats; ++j) cdf[j] = sum += p(i, j);
          for (float& c : cdf) c /= sum;
          cdf[cats - 1] = 1.0f;
          for (int64_t k = 0; k < n; ++k) {
            const double x = u[i * draws.strides[0] + k * draws.strides[1]];
            const auto at = std::lower_bound(cdf.begin(), cdf.end(), x,
                                             [](float c, double v) { return c < v; });
            o[i * out.strides[0] + k * out.strides[1]] = at - cdf.begin();
          }
        }
        return;
      }
      const T* qq = draws.ptr<const T>();
      auto ratio = [&](int64_t i, int64_t j) {
        const float r = p(i, j) / internal::ToF32(qq[i * draws.strides[0] + j * draws.strides[1]]);
        if constexpr (internal::kIsHalf<T>) return internal::ToF32(internal::Cast<T>(r));
        else return r;
      };
      // NaN ranks above every number (torch's argmax and topk).
      auto above = [](float a, float b) { return std::isnan(a) ? !std::isnan(b) : a > b; };
      std::vector<std::pair<float, int64_t>> ranked;
      for (int64_t i = 0; i < rows; ++i) {
        if (n == 1) {
          int64_t best = 0;
          float top = ratio(i, 0);
          for (int64_t j = 1; j < cats; ++j) {
            const float r = ratio(i, j);
            if (above(r, top)) {
              top = r;
              best = j;
            }
          }
          o[i * out.strides[0]] = best;
          continue;
        }
        ranked.resize(static_cast<size_t>(cats));
        for (int64_t j = 0; j < cats; ++j) ranked[j] = {ratio(i, j), j};
        // CPU's topk selection, whose order of equal quotients (bfloat16 rounds
        // many together) this repeats: a partial sort for small n, else the
        // n-th element and a sort of the ones before it.
        auto first = [&](const auto& a, const auto& b) { return above(a.first, b.first); };
        if (n * 64 <= cats) {
          std::partial_sort(ranked.begin(), ranked.begin() + n, ranked.end(), first);
        } else {
          std::nth_element(ranked.begin(), ranked.begin() + n - 1, ranked.end(), first);
          std::sort(ranked.begin(), ranked.begin() + n - 1, first);
        }
        for (int64_t k = 0; k < n; ++k) o[i * out.strides[0] + k * out.strides[1]] = ranked[k].second;
      }
    }
  });
  return status;
}

Status AssertNonzero(const TensorRef& in, const std::string& message) {
  TRN_ASSERT(in.numel() == 1, "assert: one element");
  bool nonzero = false;
  internal::VisitDType(in.dtype, [&](auto tag) { nonzero = IsNonzero(*in.ptr<const decltype(tag)>()); });
  return nonzero ? Status::Ok() : Status::Error(message);
}

KernelInfo DescribeIndexing(IndexingKernel kernel, const TensorRef& out, const TensorRef* in,
                            const char* aten_op) {
  static constexpr const char* kNames[][7] = {
      TRN_DTYPE_NAMES("arange"),    TRN_DTYPE_NAMES("tril"),        TRN_DTYPE_NAMES("triu"),
      TRN_DTYPE_NAMES("gather"),    TRN_DTYPE_NAMES("scatter"),     TRN_DTYPE_NAMES("scatter_add"),
      TRN_DTYPE_NAMES("index"),     TRN_DTYPE_NAMES("index_put"),   TRN_DTYPE_NAMES("index_put_add"),
      TRN_DTYPE_NAMES("cumsum"),    TRN_DTYPE_NAMES("cumprod"),     TRN_DTYPE_NAMES("sort"),
      TRN_DTYPE_NAMES("topk"),      TRN_DTYPE_NAMES("flip"),        TRN_DTYPE_NAMES("roll"),
      TRN_DTYPE_NAMES("nonzero"),   TRN_DTYPE_NAMES("repeat_index"), TRN_DTYPE_NAMES("isin"),
      TRN_DTYPE_NAMES("histc"),     TRN_DTYPE_NAMES("nll_loss"),
      TRN_DTYPE_NAMES("linspace"),  TRN_DTYPE_NAMES("searchsorted"), TRN_DTYPE_NAMES("bincount"),
      TRN_DTYPE_NAMES("multinomial"), TRN_DTYPE_NAMES("assert"),
      TRN_DTYPE_NAMES("scatter_reduce"), TRN_DTYPE_NAMES("logcumsumexp"),
      TRN_DTYPE_NAMES("cummax"),    TRN_DTYPE_NAMES("cummin"),
  };
  static_assert(std::size(kNames) == static_cast<size_t>(IndexingKernel::kCummin) + 1);
  KernelInfo info;
  const DType named = in != nullptr ? in->dtype : out.dtype;
  info.name = kNames[static_cast<int>(kernel)][static_cast<int>(named)];
  info.op = aten_op;
  const bool math = kernel == IndexingKernel::kScatterAdd ||
                    kernel == IndexingKernel::kIndexPutAdd || kernel == IndexingKernel::kCumsum ||
                    kernel == IndexingKernel::kCumprod || kernel == IndexingKernel::kSort ||
                    kernel == IndexingKernel::kTopk || kernel == IndexingKernel::kHistc ||
                    kernel == IndexingKernel::kNllLoss || kernel == IndexingKernel::kBincount ||
                    kernel == IndexingKernel::kMultinomial || kernel == IndexingKernel::kAssert ||
                    kernel == IndexingKernel::kScatterReduce ||
                    kernel == IndexingKernel::kLogcumsumexp || kernel == IndexingKernel::kCummax ||
                    kernel == IndexingKernel::kCummin;
  info.engine = math ? rt::Engine::kVector : rt::Engine::kDma;
  info.flops = math ? static_cast<uint64_t>(in != nullptr ? in->numel() : out.numel()) : 0;
  info.bytes_read = in != nullptr ? internal::DistinctBytes(*in) : 0;
  info.bytes_written = kernel == IndexingKernel::kAssert ? 0 : out.nbytes();
  return info;
}

}  // namespace trn::kernels
