// Reductions (sum, mean, amax, amin over a dim mask; argmax over one dim).
// Floating inputs accumulate in float32 through the vector loops of
// reduce-inl.h; int/bool inputs accumulate exactly in int64. The input is
// walked in memory order against an accumulator view whose reduced dims have
// stride 0, so each innermost run is either a horizontal reduction (reduced
// inner dim) or a vertical one (kept inner dim) — both contiguous SIMD loops.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/common/assert.h"
#include "core/kernels/elementwise-inl.h"
#include "core/kernels/kernels.h"
#include "core/kernels/reduce-inl.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {

// Folds a run into one accumulator.
float ReduceRunF32(ReduceOp op, const float* in, size_t n, float acc) {
  if (n == 0) return acc;
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: return acc + SumRun(in, n);
    case ReduceOp::kAmax: {
      const float m = ExtremumRun<true>(in, n);
      return (std::isnan(m) || std::isnan(acc)) ? NAN : (m > acc ? m : acc);
    }
    case ReduceOp::kAmin: {
      const float m = ExtremumRun<false>(in, n);
      return (std::isnan(m) || std::isnan(acc)) ? NAN : (m < acc ? m : acc);
    }
    default: break;
  }
  TRN_ASSERT(false, "ReduceRunF32: unsupported op");
  return acc;
}

// acc[i] = op(acc[i], in[i]).
void ReduceRowsF32(ReduceOp op, float* acc, const float* in, size_t n) {
  auto map = [&](const auto& f) { MapBinary(acc, false, in, false, acc, n, f); };
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kMean: return map([](auto, auto x, auto y) { return hn::Add(x, y); });
    case ReduceOp::kAmax: return map([](auto d, auto x, auto y) { return MaxNaNF(d, x, y); });
    case ReduceOp::kAmin: return map([](auto d, auto x, auto y) { return MinNaNF(d, x, y); });
    default: break;
  }
  TRN_ASSERT(false, "ReduceRowsF32: unsupported op");
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/kernels/convert.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(ReduceRunF32);
HWY_EXPORT(ReduceRowsF32);

namespace {

using internal::ForEachRun;
using internal::kChunk;

constexpr const char* kOpNames[] = {"sum",    "mean",   "amax", "amin",
                                    "argmax", "argmin", "all",  "any"};

// A contiguous accumulator of out's (keepdim) shape, viewed with in's sizes
// and stride 0 on the reduced dims.
TensorRef AccumulatorView(const TensorRef& in, uint32_t mask, void* data, DType dtype) {
  TensorRef acc;
  acc.data = data;
  acc.dtype = dtype;
  acc.ndim = in.ndim;
  int64_t stride = 1;
  for (int d = in.ndim - 1; d >= 0; --d) {
    acc.sizes[d] = in.sizes[d];
    const bool reduced = (mask >> d) & 1;
    acc.strides[d] = reduced ? 0 : stride;
    if (!reduced) stride *= in.sizes[d];
  }
  return acc;
}

// The accumulator as a dense tensor of out's sizes (source of the final Copy).
TensorRef DenseOut(const TensorRef& out, void* data, DType dtype) {
  TensorRef r = out;
  r.data = data;
  r.dtype = dtype;
  int64_t stride = 1;
  for (int d = out.ndim - 1; d >= 0; --d) {
    r.strides[d] = stride;
    stride *= out.sizes[d];
  }
  return r;
}

void ReduceFloat(ReduceOp op, const TensorRef& in, const TensorRef& acc) {
  const auto run = HWY_DYNAMIC_DISPATCH(ReduceRunF32);
  const auto rows = HWY_DYNAMIC_DISPATCH(ReduceRowsF32);
  ForEachRun<2>(
      {&acc, &in},
      [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
        float* a = reinterpret_cast<float*>(p[0]);
        const bool direct = in.dtype == DType::kFloat32 && s[1] == 1;
        const int64_t step = direct ? n : kChunk;
        for (int64_t start = 0; start < n; start += step) {
          const int64_t len = std::min(step, n - start);
          const float* x;
          if (direct) {
            x = reinterpret_cast<const float*>(p[1]) + start;
          } else {
            float* buf = internal::ScratchF32(0);
            internal::LoadAsF32(in.dtype, p[1] + start * s[1] * ItemSize(in.dtype), s[1], len, buf);
            x = buf;
          }
          if (s[0] == 0) {
            a[0] = run(op, x, static_cast<size_t>(len), a[0]);
          } else if (s[0] == 1) {
            rows(op, a + start, x, static_cast<size_t>(len));
          } else {
            for (int64_t i = 0; i < len; ++i) {
              float* r = a + (start + i) * s[0];
              *r = run(op, x + i, 1, *r);
            }
          }
        }
      },
      /*order_by=*/1);
}

template <typename T>
void ReduceExact(ReduceOp op, const TensorRef& in, const TensorRef& acc) {
  ForEachRun<2>(
      {&acc, &in},
      [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
        int64_t* a = reinterpret_cast<int64_t*>(p[0]);
        const T* x = reinterpret_cast<const T*>(p[1]);
        for (int64_t i = 0; i < n; ++i) {
          int64_t& r = a[i * s[0]];
          const int64_t v = static_cast<int64_t>(x[i * s[1]]);
          if (op == ReduceOp::kAmax) r = std::max(r, v);
          else if (op == ReduceOp::kAmin) r = std::min(r, v);
          else r = static_cast<int64_t>(static_cast<uint64_t>(r) + static_cast<uint64_t>(v));
        }
      },
      /*order_by=*/1);
}

// First index of the maximum (or minimum) along `dim`; the first NaN wins
// either way (torch).
template <bool kMax>
Status ArgExtremum(const TensorRef& out, const TensorRef& in, int dim) {
  const int64_t len = dim < 0 ? 1 : in.sizes[dim];
  const int64_t stride = dim < 0 ? 0 : in.strides[dim];
  if (len == 0 && out.numel() > 0) {
    return Status::Error(std::string(kMax ? "argmax" : "argmin") + ": cannot reduce over dim " +
                         std::to_string(dim) + " of size 0 (expected a non-empty dimension)");
  }
  TensorRef starts = in;
  if (dim >= 0) starts.sizes[dim] = 1;
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<std::is_integral_v<T>, int64_t, float>;
    auto value = [](T v) -> C {
      if constexpr (std::is_integral_v<T>) return static_cast<int64_t>(v);
      else return internal::ToF32(v);
    };
    ForEachRun<2>({&out, &starts}, [&](const std::array<char*, 2>& p, int64_t n,
                                       const std::array<int64_t, 2>& s) {
      for (int64_t i = 0; i < n; ++i) {
        const T* row = reinterpret_cast<const T*>(p[1]) + i * s[1];
        int64_t best = 0;
        C best_v = value(row[0]);
        for (int64_t j = 1; j < len; ++j) {
          if constexpr (!std::is_integral_v<T>) {
            if (std::isnan(best_v)) break;
          }
          const C v = value(row[j * stride]);
          bool better = kMax ? v > best_v : v < best_v;
          if constexpr (!std::is_integral_v<T>) better |= std::isnan(v);
          if (better) best = j, best_v = v;
        }
        reinterpret_cast<int64_t*>(p[0])[i * s[0]] = best;
      }
    });
  });
  return Status::Ok();
}

// all / any into a bool accumulator of out's keepdim shape.
void ReduceLogical(bool all, const TensorRef& in, const TensorRef& acc) {
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    ForEachRun<2>(
        {&acc, &in},
        [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
          bool* a = reinterpret_cast<bool*>(p[0]);
          const T* x = reinterpret_cast<const T*>(p[1]);
          for (int64_t i = 0; i < n; ++i) {
            bool nonzero;
            if constexpr (internal::kIsHalf<T>) nonzero = internal::ToF32(x[i * s[1]]) != 0.0f;
            else nonzero = x[i * s[1]] != T(0);
            bool& r = a[i * s[0]];
            r = all ? (r && nonzero) : (r || nonzero);
          }
        },
        /*order_by=*/1);
  });
}

}  // namespace

Status Reduce(ReduceOp op, const TensorRef& out, const TensorRef& in, uint32_t reduce_mask) {
  TRN_ASSERT(out.ndim == in.ndim, "Reduce: out must have in's ndim (keepdim layout)");
  int64_t count = 1;
  int reduced_dim = -1, num_reduced = 0;
  for (int d = 0; d < in.ndim; ++d) {
    const bool reduced = (reduce_mask >> d) & 1;
    TRN_ASSERT(out.sizes[d] == (reduced ? 1 : in.sizes[d]), "Reduce: out sizes must be keepdim sizes");
    if (reduced) count *= in.sizes[d], reduced_dim = d, ++num_reduced;
  }
  if (op == ReduceOp::kArgmax) {
    TRN_ASSERT(num_reduced <= 1 && out.dtype == DType::kInt64,
               "argmax: at most one reduced dim, out kInt64");
    return ArgExtremum<true>(out, in, reduced_dim);
  }
  if (op == ReduceOp::kArgmin) {
    TRN_ASSERT(num_reduced <= 1 && out.dtype == DType::kInt64,
               "argmin: at most one reduced dim, out kInt64");
    return ArgExtremum<false>(out, in, reduced_dim);
  }
  if (out.numel() == 0) return Status::Ok();
  if (op == ReduceOp::kAll || op == ReduceOp::kAny) {
    TRN_ASSERT(out.dtype == DType::kBool, "all/any: out kBool");
    std::vector<uint8_t> acc(static_cast<size_t>(out.numel()), op == ReduceOp::kAll ? 1 : 0);
    ReduceLogical(op == ReduceOp::kAll, in,
                  AccumulatorView(in, reduce_mask, acc.data(), DType::kBool));
    return Copy(out, DenseOut(out, acc.data(), DType::kBool));
  }
  if (count == 0) {  // torch: sum of nothing is 0, mean is NaN, amax/amin are errors
    if (op == ReduceOp::kSum) return Fill(out, 0.0);
    if (op == ReduceOp::kMean) return Fill(out, std::nan(""));
    return Status::Error(std::string(kOpNames[static_cast<int>(op)]) +
                         ": cannot reduce over an empty dimension (expected size > 0)");
  }
  const size_t acc_numel = static_cast<size_t>(out.numel());
  if (IsFloating(in.dtype)) {
    const float init = op == ReduceOp::kAmax   ? -std::numeric_limits<float>::infinity()
                       : op == ReduceOp::kAmin ? std::numeric_limits<float>::infinity()
                                               : 0.0f;
    std::vector<float> acc(acc_numel, init);
    ReduceFloat(op, in, AccumulatorView(in, reduce_mask, acc.data(), DType::kFloat32));
    if (op == ReduceOp::kMean) {
      for (float& v : acc) v /= static_cast<float>(count);
    }
    return Copy(out, DenseOut(out, acc.data(), DType::kFloat32));
  }
  TRN_ASSERT(op != ReduceOp::kMean, "mean needs a floating dtype");
  const int64_t init = op == ReduceOp::kAmax   ? std::numeric_limits<int64_t>::min()
                       : op == ReduceOp::kAmin ? std::numeric_limits<int64_t>::max()
                                               : 0;
  std::vector<int64_t> acc(acc_numel, init);
  const TensorRef acc_view = AccumulatorView(in, reduce_mask, acc.data(), DType::kInt64);
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) ReduceExact<T>(op, in, acc_view);
  });
  return Copy(out, DenseOut(out, acc.data(), DType::kInt64));
}

KernelInfo DescribeReduce(ReduceOp op, const TensorRef& out, const TensorRef& in,
                          const char* aten_op) {
  static constexpr const char* kNames[][7] = {
      TRN_DTYPE_NAMES("sum"),  TRN_DTYPE_NAMES("mean"),   TRN_DTYPE_NAMES("amax"),
      TRN_DTYPE_NAMES("amin"), TRN_DTYPE_NAMES("argmax"), TRN_DTYPE_NAMES("argmin"),
      TRN_DTYPE_NAMES("all"),  TRN_DTYPE_NAMES("any"),
  };
  KernelInfo info;
  info.name = kNames[static_cast<int>(op)][static_cast<int>(in.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(in.numel());
  info.bytes_read = internal::DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
