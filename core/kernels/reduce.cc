// Reductions (sum, mean, amax, amin over a dim mask; argmax over one dim;
// var/std and vector norms). Floating sums accumulate in float32 through the
// vector loops of reduce-inl.h, var/std and norms in double (the folds
// below); int/bool inputs accumulate exactly in int64. The input is
// walked in memory order against an accumulator view whose reduced dims have
// stride 0, so each innermost run is either a horizontal reduction (reduced
// inner dim) or a vertical one (kept inner dim) — both contiguous SIMD loops.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/reduce.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include <algorithm>
#include <limits>
#include <type_traits>

#include "core/common/assert.h"
#include "core/kernels/elementwise-inl.h"
#include "core/kernels/kernels.h"
#include "core/kernels/reduce-inl.h"

// Shared by every target's copy of this file (foreach_target re-includes it).
#ifndef TRN_KERNELS_REDUCE_FOLD_
#define TRN_KERNELS_REDUCE_FOLD_
namespace trn::kernels::internal {
// What a double fold adds into its accumulator per float32 term x.
enum class Fold : uint8_t {
  kSum,           // x
  kSumSqDev,      // (x - center)^2 in double
  kSumSqF32,      // x * x rounded to float32 (torch's overflow), summed in double
  kSumAbs,        // |x|
  kCountNonzero,  // x != 0 (NaN counts)
  kMaxAbs,        // max |x|, NaN wins
  kMinAbs,        // min |x|, NaN wins
  kSumPow,        // |x|^p in float32 (scalar std::pow, not a vector loop)
};
}  // namespace trn::kernels::internal
#endif

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

// ---- Double folds (Note [Double accumulation]) ------------------------------------
using internal::Fold;
using DD = hn::ScalableTag<double>;
using DHalf = hn::Rebind<float, DD>;  // the float32 lanes one double vector holds
constexpr size_t kMaxLanesF64 = HWY_MAX_BYTES / sizeof(double);

template <Fold kFold>
HWY_INLINE double FoldIdentity() {
  if constexpr (kFold == Fold::kMinAbs) return std::numeric_limits<double>::infinity();
  return 0.0;  // sums, counts and max |x| (|x| >= 0)
}

// acc op term(x); c is the center of kSumSqDev.
template <Fold kFold, class V>
HWY_INLINE V FoldStep(DD d, V acc, V x, V c) {
  if constexpr (kFold == Fold::kSum) {
    return hn::Add(acc, x);
  } else if constexpr (kFold == Fold::kSumSqDev) {
    const V dx = hn::Sub(x, c);
    return hn::MulAdd(dx, dx, acc);
  } else if constexpr (kFold == Fold::kSumSqF32) {  // x*x is exact in double: one rounding
    return hn::Add(acc, hn::PromoteTo(d, hn::DemoteTo(DHalf(), hn::Mul(x, x))));
  } else if constexpr (kFold == Fold::kSumAbs) {
    return hn::Add(acc, hn::Abs(x));
  } else if constexpr (kFold == Fold::kCountNonzero) {  // Eq, not Ne: NaN is nonzero
    return hn::Add(acc, hn::IfThenZeroElse(hn::Eq(x, hn::Zero(d)), hn::Set(d, 1.0)));
  } else if constexpr (kFold == Fold::kMaxAbs) {
    return MaxNaNF(d, acc, hn::Abs(x));
  } else {
    static_assert(kFold == Fold::kMinAbs, "kSumPow has no vector step");
    return MinNaNF(d, acc, hn::Abs(x));
  }
}

// Merges two partial accumulators of one fold.
template <Fold kFold, class V>
HWY_INLINE V FoldMerge(DD d, V a, V b) {
  if constexpr (kFold == Fold::kMaxAbs) return MaxNaNF(d, a, b);
  if constexpr (kFold == Fold::kMinAbs) return MinNaNF(d, a, b);
  return hn::Add(a, b);
}

HWY_INLINE hn::Vec<DD> LoadPromoted(const float* x) {
  return hn::PromoteTo(DD(), hn::LoadU(DHalf(), x));
}

// Folds a run into one accumulator. Two vector accumulators; the tail is
// masked so that its missing lanes keep their partial value.
template <Fold kFold>
HWY_INLINE double FoldRun(const float* x, size_t n, double center, double acc) {
  const DD d;
  const size_t N = hn::Lanes(d);
  const auto c = hn::Set(d, center);
  auto a0 = hn::Set(d, FoldIdentity<kFold>());
  auto a1 = a0;
  size_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    a0 = FoldStep<kFold>(d, a0, LoadPromoted(x + i), c);
    a1 = FoldStep<kFold>(d, a1, LoadPromoted(x + i + N), c);
  }
  for (; i < n; i += N) {
    const size_t rem = std::min(N, n - i);
    HWY_ALIGN float buf[kMaxLanesF64] = {};
    for (size_t j = 0; j < rem; ++j) buf[j] = x[i + j];
    a0 = hn::IfThenElse(hn::FirstN(d, rem), FoldStep<kFold>(d, a0, LoadPromoted(buf), c), a0);
  }
  a0 = FoldMerge<kFold>(d, a0, a1);
  HWY_ALIGN double lanes[kMaxLanesF64];
  hn::Store(a0, d, lanes);
  // The lanes meet acc through FoldMerge too, so its NaN rules hold here as well.
  auto merged = hn::Set(d, acc);
  for (size_t j = 0; j < N; ++j) merged = FoldMerge<kFold>(d, merged, hn::Set(d, lanes[j]));
  return hn::GetLane(merged);
}

// acc[i] = acc[i] op term(x[i]) for i < n; center (kSumSqDev only) per i.
template <Fold kFold>
HWY_INLINE void FoldRows(double* acc, const double* center, const float* x, size_t n) {
  const DD d;
  const size_t N = hn::Lanes(d);
  auto step = [&](const double* a, const double* c, const float* xs, double* o) {
    auto vc = hn::Zero(d);
    if constexpr (kFold == Fold::kSumSqDev) vc = hn::LoadU(d, c);
    hn::StoreU(FoldStep<kFold>(d, hn::LoadU(d, a), LoadPromoted(xs), vc), d, o);
  };
  size_t i = 0;
  for (; i + N <= n; i += N) step(acc + i, center ? center + i : nullptr, x + i, acc + i);
  if (i == n) return;
  HWY_ALIGN double ba[kMaxLanesF64] = {};
  HWY_ALIGN double bc[kMaxLanesF64] = {};
  HWY_ALIGN float bx[kMaxLanesF64] = {};
  for (size_t j = 0; i + j < n; ++j) {
    ba[j] = acc[i + j];
    bc[j] = center ? center[i + j] : 0.0;
    bx[j] = x[i + j];
  }
  step(ba, bc, bx, ba);
  for (size_t j = 0; i + j < n; ++j) acc[i + j] = ba[j];
}

// Calls f(std::integral_constant<Fold, fold>) for the folds with a vector step.
template <class F>
HWY_INLINE void VisitVectorFold(Fold fold, const F& f) {
  using std::integral_constant;
  switch (fold) {
    case Fold::kSum: return f(integral_constant<Fold, Fold::kSum>());
    case Fold::kSumSqDev: return f(integral_constant<Fold, Fold::kSumSqDev>());
    case Fold::kSumSqF32: return f(integral_constant<Fold, Fold::kSumSqF32>());
    case Fold::kSumAbs: return f(integral_constant<Fold, Fold::kSumAbs>());
    case Fold::kCountNonzero: return f(integral_constant<Fold, Fold::kCountNonzero>());
    case Fold::kMaxAbs: return f(integral_constant<Fold, Fold::kMaxAbs>());
    case Fold::kMinAbs: return f(integral_constant<Fold, Fold::kMinAbs>());
    case Fold::kSumPow: break;
  }
  TRN_ASSERT(false, "this fold has no vector loop");
}

double FoldRunF64(Fold fold, const float* x, size_t n, double center, double acc) {
  VisitVectorFold(fold, [&](auto f) { acc = FoldRun<decltype(f)::value>(x, n, center, acc); });
  return acc;
}

void FoldRowsF64(Fold fold, double* acc, const double* center, const float* x, size_t n) {
  VisitVectorFold(fold, [&](auto f) { FoldRows<decltype(f)::value>(acc, center, x, n); });
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
HWY_EXPORT(FoldRunF64);
HWY_EXPORT(FoldRowsF64);

namespace {

using internal::Fold;
using internal::ForEachRun;
using internal::kChunk;

constexpr const char* kOpNames[] = {"sum",    "mean",   "amax", "amin",
                                    "argmax", "argmin", "all",  "any", "prod"};

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

// Walks a floating `in` in memory order against the accumulator view `acc`
// (element type Acc) in float32 chunks: across(a, x, n) folds x[0..n) into
// *a (the run's dim is reduced), along(a, x, n) folds x[i] into a[i] (kept).
template <typename Acc, class Across, class Along>
void FoldRuns(const TensorRef& in, const TensorRef& acc, const Across& across,
              const Along& along) {
  ForEachRun<2>(
      {&acc, &in},
      [&](const std::array<char*, 2>& p, int64_t n, const std::array<int64_t, 2>& s) {
        Acc* a = reinterpret_cast<Acc*>(p[0]);
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
            across(a, x, static_cast<size_t>(len));
          } else if (s[0] == 1) {
            along(a + start, x, static_cast<size_t>(len));
          } else {
            for (int64_t i = 0; i < len; ++i) across(a + (start + i) * s[0], x + i, size_t{1});
          }
        }
      },
      /*order_by=*/1);
}

void ReduceFloat(ReduceOp op, const TensorRef& in, const TensorRef& acc) {
  const auto run = HWY_DYNAMIC_DISPATCH(ReduceRunF32);
  const auto rows = HWY_DYNAMIC_DISPATCH(ReduceRowsF32);
  FoldRuns<float>(
      in, acc, [&](float* a, const float* x, size_t n) { *a = run(op, x, n, *a); },
      [&](float* a, const float* x, size_t n) { rows(op, a, x, n); });
}

// Note [Double accumulation]: var/std and the vector norms accumulate in
// double, as torch's CPU kernels do for float32 var (Welford in double). A
// float32 sum of n terms can drift by ~n/4 ulp, and var's cancellation
// (sum of squared deviations much smaller than the mean's square) amplifies
// that; a double sum stays within an ulp of the float32 result. var is two
// passes (the mean, then the squared deviations from it). Norm terms stay in
// float32 (|x|^2 of 1e20 is inf, as torch), only their sum is double.
//
// acc (dense, out's keepdim shape, one double per output) <- fold of `in`
// over `mask`; center (kSumSqDev) is laid out like acc.
void FoldDouble(Fold fold, const TensorRef& in, uint32_t mask, double* acc, const double* center,
                float p) {
  const TensorRef view = AccumulatorView(in, mask, acc, DType::kFloat64);
  if (fold == Fold::kSumPow) {
    auto term = [p](float x) { return static_cast<double>(std::pow(std::fabs(x), p)); };
    FoldRuns<double>(
        in, view,
        [&](double* a, const float* x, size_t n) {
          for (size_t i = 0; i < n; ++i) *a += term(x[i]);
        },
        [&](double* a, const float* x, size_t n) {
          for (size_t i = 0; i < n; ++i) a[i] += term(x[i]);
        });
    return;
  }
  const auto run = HWY_DYNAMIC_DISPATCH(FoldRunF64);
  const auto rows = HWY_DYNAMIC_DISPATCH(FoldRowsF64);
  auto center_of = [&](const double* a) { return center ? center + (a - acc) : nullptr; };
  FoldRuns<double>(
      in, view,
      [&](double* a, const float* x, size_t n) {
        *a = run(fold, x, n, center ? *center_of(a) : 0.0, *a);
      },
      [&](double* a, const float* x, size_t n) { rows(fold, a, center_of(a), x, n); });
}

// Checks that out is in's keepdim layout over `mask`; returns the number of
// elements reduced into each output.
int64_t ReducedCount(const TensorRef& out, const TensorRef& in, uint32_t mask) {
  TRN_ASSERT(out.ndim == in.ndim, "reduction out must have in's ndim (keepdim layout)");
  int64_t count = 1;
  for (int d = 0; d < in.ndim; ++d) {
    const bool reduced = (mask >> d) & 1;
    TRN_ASSERT(out.sizes[d] == (reduced ? 1 : in.sizes[d]),
               "reduction out sizes must be keepdim sizes");
    if (reduced) count *= in.sizes[d];
  }
  return count;
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

// kProd: one scalar pass in memory order against the accumulator view; products
// are rare (grid sizes of vision-language models) and short.
Status ReduceProd(const TensorRef& out, const TensorRef& in, uint32_t reduce_mask) {
  const size_t numel = static_cast<size_t>(out.numel());
  const bool floating = IsFloating(in.dtype);
  std::vector<double> accf(floating ? numel : 0, 1.0);
  std::vector<int64_t> acci(floating ? 0 : numel, 1);
  const TensorRef acc = AccumulatorView(in, reduce_mask, floating ? static_cast<void*>(accf.data())
                                                                  : static_cast<void*>(acci.data()),
                                        floating ? DType::kFloat64 : DType::kInt64);
  internal::VisitDType(in.dtype, [&](auto tag) {
    using T = decltype(tag);
    ForEachRun<2>({&in, &acc}, [&](const std::array<char*, 2>& p, int64_t n,
                                   const std::array<int64_t, 2>& st) {
      const T* x = reinterpret_cast<const T*>(p[0]);
      for (int64_t i = 0; i < n; ++i) {
        const T v = x[i * st[0]];
        if constexpr (std::is_integral_v<T>) {  // wraps like torch's int64 product
          int64_t* a = reinterpret_cast<int64_t*>(p[1]) + i * st[1];
          *a = static_cast<int64_t>(static_cast<uint64_t>(*a) * static_cast<uint64_t>(static_cast<int64_t>(v)));
        } else {
          double* a = reinterpret_cast<double*>(p[1]) + i * st[1];
          if constexpr (std::is_floating_point_v<T>) *a *= static_cast<double>(v);
          else *a *= static_cast<double>(internal::ToF32(v));
        }
      }
    });
  });
  return floating ? Copy(out, DenseOut(out, accf.data(), DType::kFloat64))
                  : Copy(out, DenseOut(out, acci.data(), DType::kInt64));
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
  if (op == ReduceOp::kProd) {
    TRN_ASSERT(out.dtype == (IsFloating(in.dtype) ? in.dtype : DType::kInt64),
               "prod: out floating like in, or int64");
    return ReduceProd(out, in, reduce_mask);
  }
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

Status VarMean(const TensorRef& var_out, const TensorRef& mean_out, const TensorRef& in,
               uint32_t reduce_mask, double correction, bool take_sqrt) {
  TRN_ASSERT(IsFloating(in.dtype) && IsFloating(var_out.dtype), "VarMean: floating dtypes");
  const bool with_mean = mean_out.data != nullptr;
  const int64_t count = ReducedCount(var_out, in, reduce_mask);
  if (with_mean) {
    TRN_ASSERT(IsFloating(mean_out.dtype) && ReducedCount(mean_out, in, reduce_mask) == count,
               "VarMean: mean_out must have var_out's sizes");
  }
  if (var_out.numel() == 0) return Status::Ok();
  if (count == 0) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    Status s = Fill(var_out, nan);
    return s.ok() && with_mean ? Fill(mean_out, nan) : s;
  }
  const size_t n = static_cast<size_t>(var_out.numel());
  std::vector<double> mean(n, 0.0), m2(n, 0.0);
  FoldDouble(Fold::kSum, in, reduce_mask, mean.data(), nullptr, 0.0f);
  for (double& m : mean) m /= static_cast<double>(count);
  FoldDouble(Fold::kSumSqDev, in, reduce_mask, m2.data(), mean.data(), 0.0f);
  const double dof = std::max(0.0, static_cast<double>(count) - correction);
  for (double& v : m2) v = take_sqrt ? std::sqrt(v / dof) : v / dof;
  Status s = Copy(var_out, DenseOut(var_out, m2.data(), DType::kFloat64));
  if (s.ok() && with_mean) s = Copy(mean_out, DenseOut(mean_out, mean.data(), DType::kFloat64));
  return s;
}

Status VectorNorm(const TensorRef& out, const TensorRef& in, uint32_t reduce_mask, double ord) {
  TRN_ASSERT(IsFloating(in.dtype) && IsFloating(out.dtype), "VectorNorm: floating dtypes");
  const int64_t count = ReducedCount(out, in, reduce_mask);
  if (out.numel() == 0) return Status::Ok();
  const double inf = std::numeric_limits<double>::infinity();
  if (count == 0) {
    if (ord < 0 || ord == inf) {
      return Status::Error("vector_norm: the " + std::to_string(ord) +
                           " norm of an empty extent has no identity (expected a non-empty "
                           "reduction)");
    }
    return Fill(out, 0.0);
  }
  Fold fold = Fold::kSumPow;
  if (ord == inf) fold = Fold::kMaxAbs;
  else if (ord == -inf) fold = Fold::kMinAbs;
  else if (ord == 0) fold = Fold::kCountNonzero;
  else if (ord == 1) fold = Fold::kSumAbs;
  else if (ord == 2) fold = Fold::kSumSqF32;
  std::vector<double> acc(static_cast<size_t>(out.numel()), fold == Fold::kMinAbs ? inf : 0.0);
  FoldDouble(fold, in, reduce_mask, acc.data(), nullptr, static_cast<float>(ord));
  if (fold == Fold::kSumSqF32) {
    for (double& v : acc) v = std::sqrt(v);
  } else if (fold == Fold::kSumPow) {
    for (double& v : acc) v = std::pow(v, 1.0 / ord);
  }
  return Copy(out, DenseOut(out, acc.data(), DType::kFloat64));
}

KernelInfo DescribeVarMean(const TensorRef& var_out, const TensorRef& mean_out,
                           const TensorRef& in, bool take_sqrt, const char* aten_op) {
  static constexpr const char* kNames[][7] = {
      TRN_DTYPE_NAMES("var"), TRN_DTYPE_NAMES("std"),
      TRN_DTYPE_NAMES("var_mean"), TRN_DTYPE_NAMES("std_mean"),
  };
  const bool with_mean = mean_out.data != nullptr;
  KernelInfo info;
  info.name = kNames[(with_mean ? 2 : 0) + (take_sqrt ? 1 : 0)][static_cast<int>(in.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = 4 * static_cast<uint64_t>(in.numel());  // two passes
  info.bytes_read = 2 * internal::DistinctBytes(in);    // in is read twice
  info.bytes_written = var_out.nbytes() + (with_mean ? mean_out.nbytes() : 0);
  return info;
}

KernelInfo DescribeVectorNorm(const TensorRef& out, const TensorRef& in, double ord,
                              const char* aten_op) {
  static constexpr const char* kNames[7] = TRN_DTYPE_NAMES("vector_norm");
  const bool uses_pow = !(std::isinf(ord) || ord == 0 || ord == 1 || ord == 2);
  KernelInfo info;
  info.name = kNames[static_cast<int>(in.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(in.numel()) * (uses_pow ? 20 : 2);
  info.bytes_read = internal::DistinctBytes(in);
  info.bytes_written = out.nbytes();
  return info;
}

KernelInfo DescribeReduce(ReduceOp op, const TensorRef& out, const TensorRef& in,
                          const char* aten_op) {
  static constexpr const char* kNames[][7] = {
      TRN_DTYPE_NAMES("sum"),  TRN_DTYPE_NAMES("mean"),   TRN_DTYPE_NAMES("amax"),
      TRN_DTYPE_NAMES("amin"), TRN_DTYPE_NAMES("argmax"), TRN_DTYPE_NAMES("argmin"),
      TRN_DTYPE_NAMES("all"),  TRN_DTYPE_NAMES("any"),    TRN_DTYPE_NAMES("prod"),
  };
  static_assert(std::size(kNames) == static_cast<size_t>(ReduceOp::kProd) + 1);
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
