// nn.EmbeddingBag's forward (EmbeddingBag in indexing.h): validation, then
// per bag either the float32 fast path (sum / mean over contiguous rows: a
// Highway loop whose accumulators stay in registers across the bag's rows,
// Note [Bag sums]) or the general scalar loop (bfloat16 / float16 / float64,
// max, strided rows), which also writes CPU's auxiliary outputs.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/embedding_bag.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include <cmath>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Note [Bag sums]: out[c] (+)= sum_r scale_r * rows[r][c], rows given as
// pointers. Four vectors of columns at a time stay in registers over all the
// rows, then one store: the row-at-a-time loop over a stack accumulator was
// load-add-store bound (2.5x CPU PyTorch's fbgemm on [1000, 128] tables).
void SumRowsF32(const float* const* rows, const float* scales, size_t count, size_t dim,
                float* out, bool accumulate) {
  const hn::ScalableTag<float> d;
  const size_t lanes = hn::Lanes(d);
  size_t c = 0;
  for (; c + 4 * lanes <= dim; c += 4 * lanes) {
    auto a0 = accumulate ? hn::LoadU(d, out + c) : hn::Zero(d);
    auto a1 = accumulate ? hn::LoadU(d, out + c + lanes) : hn::Zero(d);
    auto a2 = accumulate ? hn::LoadU(d, out + c + 2 * lanes) : hn::Zero(d);
    auto a3 = accumulate ? hn::LoadU(d, out + c + 3 * lanes) : hn::Zero(d);
    for (size_t r = 0; r < count; ++r) {
      const float* p = rows[r] + c;
      if (scales != nullptr) {
        const auto s = hn::Set(d, scales[r]);
        a0 = hn::MulAdd(hn::LoadU(d, p), s, a0);
        a1 = hn::MulAdd(hn::LoadU(d, p + lanes), s, a1);
        a2 = hn::MulAdd(hn::LoadU(d, p + 2 * lanes), s, a2);
        a3 = hn::MulAdd(hn::LoadU(d, p + 3 * lanes), s, a3);
      } else {
        a0 = hn::Add(a0, hn::LoadU(d, p));
        a1 = hn::Add(a1, hn::LoadU(d, p + lanes));
        a2 = hn::Add(a2, hn::LoadU(d, p + 2 * lanes));
        a3 = hn::Add(a3, hn::LoadU(d, p + 3 * lanes));
      }
    }
    hn::StoreU(a0, d, out + c);
    hn::StoreU(a1, d, out + c + lanes);
    hn::StoreU(a2, d, out + c + 2 * lanes);
    hn::StoreU(a3, d, out + c + 3 * lanes);
  }
  for (; c + lanes <= dim; c += lanes) {  // then one vector of columns at a time
    auto a = accumulate ? hn::LoadU(d, out + c) : hn::Zero(d);
    for (size_t r = 0; r < count; ++r) {
      const auto x = hn::LoadU(d, rows[r] + c);
      a = scales != nullptr ? hn::MulAdd(x, hn::Set(d, scales[r]), a) : hn::Add(a, x);
    }
    hn::StoreU(a, d, out + c);
  }
  for (; c < dim; ++c) {  // and the last columns one by one, in the same order
    float a = accumulate ? out[c] : 0.0f;
    for (size_t r = 0; r < count; ++r) {
      a = scales != nullptr ? std::fma(rows[r][c], scales[r], a) : a + rows[r][c];
    }
    out[c] = a;
  }
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <string>
#include <type_traits>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/indexing_internal.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {

HWY_EXPORT(SumRowsF32);

using internal::IndexValue;

namespace {
bool Present(const TensorRef& t) { return t.data != nullptr && t.numel() > 0; }

void PutIndex(const TensorRef& t, int64_t off, int64_t v) {  // int32 / int64 (indices')
  if (!Present(t)) return;
  if (t.dtype == DType::kInt64) t.ptr<int64_t>()[off] = v;
  else t.ptr<int32_t>()[off] = static_cast<int32_t>(v);
}

// One float32 bag over contiguous rows (Note [Bag sums]): the kept rows'
// pointers gathered kRows at a time, each prefetched as it is found, then
// summed into out (zeros for no row).
template <class I>
void SumBag(const EmbeddingBagRefs& r, int64_t lo, int64_t hi, float* out) {
  constexpr int64_t kRows = 64, kLines = 16;
  const I* idx = r.indices.ptr<const I>();
  const int64_t is = r.indices.strides[0];
  const float* table = r.weight.ptr<const float>();
  const int64_t ws0 = r.weight.strides[0], dim = r.weight.sizes[1];
  const TensorRef& p = r.per_sample_weights;
  const bool psw = p.data != nullptr;
  const auto sum = HWY_DYNAMIC_DISPATCH(SumRowsF32);
  const float* rows[kRows];
  float scales[kRows];
  const int64_t lines = std::min(kLines, (dim * 4 + 63) / 64);
  size_t m = 0;
  bool written = false;
  auto flush = [&] {
    sum(rows, psw ? scales : nullptr, m, static_cast<size_t>(dim), out, written);
    written = true;
    m = 0;
  };
  for (int64_t i = lo; i < hi; ++i) {
    const int64_t v = idx[i * is];
    if (v == r.padding_idx) continue;
    rows[m] = table + v * ws0;
    const char* line = reinterpret_cast<const char*>(rows[m]);
    for (int64_t l = 0; l < lines; ++l) __builtin_prefetch(line + 64 * l);
    if (psw) scales[m] = p.ptr<const float>()[i * p.strides[0]];
    if (++m == kRows) flush();
  }
  if (m > 0 || !written) flush();  // no row at all: zeros
}

// The bags of EmbeddingBag, T weight's element type, I the indices', kUnit
// whether a row's elements are adjacent (the common case: plain loops over
// 256 stack accumulators, which the compiler vectorizes).
template <class T, class I, bool kUnit, class Start, class End>
void BagRows(const EmbeddingBagRefs& r, int64_t bags, Start start, End end) {
  const TensorRef &out = r.out, &w = r.weight, &p = r.per_sample_weights;
  const I* idx = r.indices.ptr<const I>();
  const int64_t is = r.indices.strides[0], dim = w.sizes[1];
  const T* table = w.ptr<const T>();
  const int64_t ws0 = w.strides[0], ws1 = kUnit ? 1 : w.strides[1];
  const int64_t out0 = out.strides[0], out1 = out.strides[1];
  const bool psw = p.data != nullptr, max_rows = r.mode == 2;
  constexpr int64_t kChunk = 256;  // columns per pass
  float acc[kChunk];
  int64_t arg[kChunk];
  for (int64_t b = 0; b < bags; ++b) {
    const int64_t lo = start(b), hi = end(b);
    int64_t kept = 0;
    for (int64_t i = lo; i < hi; ++i) {
      if (Present(r.offset2bag)) PutIndex(r.offset2bag, i * r.offset2bag.strides[0], b);
      kept += idx[i * is] != r.padding_idx ? 1 : 0;
    }
    const int64_t size = r.mode == 0 ? 0 : kept;
    PutIndex(r.bag_size, b * r.bag_size.strides[0], size);
    if (!max_rows) PutIndex(r.max_indices, b * r.max_indices.strides[0], size);
    if constexpr (std::is_same_v<T, float> && kUnit) {
      if (!max_rows && out1 == 1) {
        SumBag<I>(r, lo, hi, out.ptr<float>() + b * out0);
        if (r.mode == 1 && kept > 0) {
          float* o = out.ptr<float>() + b * out0;
          for (int64_t c = 0; c < dim; ++c) o[c] /= static_cast<float>(kept);
        }
        continue;
      }
    }
    for (int64_t c0 = 0; c0 < dim; c0 += kChunk) {
      const int64_t cols = std::min(kChunk, dim - c0);
      std::fill(acc, acc + cols, 0.0f);
      bool first = true;
      for (int64_t i = lo; i < hi; ++i) {
        const int64_t v = idx[i * is];
        if (v == r.padding_idx) continue;
        const T* row = table + v * ws0 + c0 * ws1;
        if (max_rows) {
          for (int64_t c = 0; c < cols; ++c) {
            const float x = internal::ToF32(row[c * ws1]);
            if (first || x > acc[c]) {  // NaN only from the first row, as CPU's
              acc[c] = x;
              arg[c] = v;
            }
          }
        } else if (psw) {
          const float scale = internal::ToF32(p.ptr<const T>()[i * p.strides[0]]);
          for (int64_t c = 0; c < cols; ++c) acc[c] += internal::ToF32(row[c * ws1]) * scale;
        } else {
          for (int64_t c = 0; c < cols; ++c) acc[c] += internal::ToF32(row[c * ws1]);
        }
        first = false;
      }
      if (max_rows && first) std::fill(arg, arg + cols, int64_t{0});  // no row kept
      T* o = out.ptr<T>() + b * out0 + c0 * out1;
      if (r.mode == 1 && kept > 0) {
        for (int64_t c = 0; c < cols; ++c) {  // CPU's mean: the sum stored, then divided
          const float sum = internal::ToF32(internal::Cast<T>(acc[c]));
          o[c * out1] = internal::Cast<T>(sum / static_cast<float>(kept));
        }
      } else {
        for (int64_t c = 0; c < cols; ++c) o[c * out1] = internal::Cast<T>(acc[c]);
      }
      if (max_rows) {
        const TensorRef& m = r.max_indices;
        for (int64_t c = 0; c < cols; ++c) {
          PutIndex(m, b * m.strides[0] + (c0 + c) * m.strides[1], arg[c]);
        }
      }
    }
  }
}
}  // namespace

Status EmbeddingBag(const EmbeddingBagRefs& r) {
  const TensorRef &out = r.out, &w = r.weight, &idx = r.indices, &offs = r.offsets;
  const bool psw = r.per_sample_weights.data != nullptr;
  TRN_ASSERT(w.ndim == 2 && IsFloating(w.dtype) && out.ndim == 2 && out.dtype == w.dtype &&
                 out.sizes[1] == w.sizes[1] && idx.ndim == 1 && offs.ndim == 1 &&
                 r.mode >= 0 && r.mode <= 2 &&
                 (!psw || (r.mode == 0 && r.per_sample_weights.dtype == w.dtype &&
                           r.per_sample_weights.numel() == idx.numel())),
             "embedding_bag: weight [V, D] floating, indices and offsets 1-D, out [B, D], "
             "per_sample_weights [n] of weight's dtype (mode sum)");
  const int64_t n = idx.sizes[0], bags = out.sizes[0], rows = w.sizes[0];
  TRN_ASSERT(offs.sizes[0] == bags + (r.include_last_offset ? 1 : 0) &&
                 (!Present(r.bag_size) || r.bag_size.numel() == bags) &&
                 (!Present(r.offset2bag) || r.offset2bag.numel() == n),
             "embedding_bag: offsets [B] (B + 1 with include_last_offset), bag_size [B] or none");
  const int64_t is = idx.strides[0], os = offs.strides[0];
  auto start = [&](int64_t b) { return IndexValue(offs, b * os); };
  auto end = [&](int64_t b) {
    return b + 1 < offs.sizes[0] ? IndexValue(offs, (b + 1) * os) : n;
  };
  // Checked first, so a failed call writes nothing (CPU's messages).
  if (bags > 0 && start(0) != 0) {
    return Status::Error("offsets[0] has to be 0, i.e., the first sequence in the mini-batch "
                         "has to start from position 0. However, got " +
                         std::to_string(start(0)));
  }
  for (int64_t b = 0; b < bags; ++b) {
    if (end(b) < start(b) || end(b) > n) {
      return Status::Error("offsets[" + std::to_string(b + 1) + "] (" + std::to_string(end(b)) +
                           ") must be at least offsets[" + std::to_string(b) + "] (" +
                           std::to_string(start(b)) + ") and at most the number of indices (" +
                           std::to_string(n) + ")");
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = IndexValue(idx, i * is);
    if (v < 0 || v >= rows) {
      return Status::Error("Index " + std::to_string(i) + " of input takes value " +
                           std::to_string(v) + " which is not in the valid range [0, " +
                           std::to_string(rows) + ")");
    }
  }
  const auto run = [&](auto tag, auto index_tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T> || internal::kIsHalf<T>) {
      using I = decltype(index_tag);
      if (w.strides[1] == 1) {
        BagRows<T, I, true>(r, bags, start, end);
      } else {
        BagRows<T, I, false>(r, bags, start, end);
      }
    }
  };
  internal::VisitDType(w.dtype, [&](auto tag) {
    if (idx.dtype == DType::kInt64) run(tag, int64_t{});
    else run(tag, int32_t{});
  });
  return Status::Ok();
}

KernelInfo DescribeEmbeddingBag(const EmbeddingBagRefs& r, const char* aten_op) {
  static constexpr const char* kNames[7] = TRN_DTYPE_NAMES("embedding_bag");
  KernelInfo info;
  info.name = kNames[static_cast<int>(r.weight.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  const uint64_t gathered = static_cast<uint64_t>(r.indices.numel() * r.weight.sizes[1]);
  info.flops = gathered;
  info.bytes_read = gathered * ItemSize(r.weight.dtype) + r.indices.nbytes() + r.offsets.nbytes();
  info.bytes_written = r.out.nbytes();
  for (const TensorRef* t : {&r.offset2bag, &r.bag_size, &r.max_indices}) {
    if (Present(*t)) info.bytes_written += t->nbytes();
  }
  return info;
}


}  // namespace trn::kernels
#endif  // HWY_ONCE
