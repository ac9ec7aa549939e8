// Triangular solves (torch.linalg.solve_triangular): per batch matrix, the
// triangle is loaded into a float32 scratch (reversed for an upper one, so one
// forward substitution serves both) and the right-hand sides solved in place.
// Note [Triangular solve order]: the columns of x are solved in panels of up to
// four vectors held in registers, panel by panel, so a panel's solved rows stay
// in L1 while each new row is reduced against them.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/linalg.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/kernels/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Columns [c, c + V * lanes) of rows 0..n-1 of x (row stride k): row i becomes
// (x_i - sum_{j < i} t[i, j] x_j) / t[i, i] (no division when unit).
template <int V, class D>
HWY_INLINE void SolvePanel(D d, const float* t, float* x, int64_t n, int64_t k, int64_t c,
                           bool unit) {
  const size_t N = hn::Lanes(d);
  for (int64_t i = 0; i < n; ++i) {
    float* xi = x + i * k + c;
    hn::Vec<D> acc[V];
    for (int v = 0; v < V; ++v) acc[v] = hn::LoadU(d, xi + v * N);
    const float* ti = t + i * n;
    for (int64_t j = 0; j < i; ++j) {
      const auto a = hn::Set(d, ti[j]);
      const float* xj = x + j * k + c;
      for (int v = 0; v < V; ++v) acc[v] = hn::NegMulAdd(a, hn::LoadU(d, xj + v * N), acc[v]);
    }
    if (!unit) {
      const auto diag = hn::Set(d, ti[i]);
      for (int v = 0; v < V; ++v) acc[v] = hn::Div(acc[v], diag);
    }
    for (int v = 0; v < V; ++v) hn::StoreU(acc[v], d, xi + v * N);
  }
}

// Forward substitution t x = b for a lower-triangular row-major n x n t, x
// [n, k] row-major holding b on entry.
void SolveLowerF32(const float* t, float* x, int64_t n, int64_t k, bool unit) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  for (; c + 4 * N <= k; c += 4 * N) SolvePanel<4>(d, t, x, n, k, c, unit);
  for (; c + N <= k; c += N) SolvePanel<1>(d, t, x, n, k, c, unit);
  for (; c < k; ++c) {  // the last columns, fewer than a vector
    for (int64_t i = 0; i < n; ++i) {
      float s = x[i * k + c];
      for (int64_t j = 0; j < i; ++j) s -= t[i * n + j] * x[j * k + c];
      x[i * k + c] = unit ? s : s / t[i * n + i];
    }
  }
}

}  // namespace trn::kernels::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

#include <algorithm>
#include <array>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/scratch.h"
#include "core/kernels/strided.h"

namespace trn::kernels {

HWY_EXPORT(SolveLowerF32);

namespace {

// The batch dims of a [..., rows, cols] view.
TensorRef BatchOf(const TensorRef& t) {
  TensorRef b = t;
  b.ndim = t.ndim - 2;
  return b;
}

}  // namespace

Status SolveTriangular(const TensorRef& out, const TensorRef& a, const TensorRef& b, bool upper,
                       bool unitriangular) {
  TRN_ASSERT(a.ndim >= 2 && a.ndim == b.ndim && b.ndim == out.ndim,
             "SolveTriangular: a, b and out need one rank >= 2");
  TRN_ASSERT(IsFloating(a.dtype) && a.dtype == b.dtype && b.dtype == out.dtype,
             "SolveTriangular: one floating dtype");
  const int r = a.ndim;
  const int64_t n = a.sizes[r - 1], k = b.sizes[r - 1];
  TRN_ASSERT(a.sizes[r - 2] == n && b.sizes[r - 2] == n && out.sizes[r - 2] == n &&
                 out.sizes[r - 1] == k,
             "SolveTriangular: a must be n x n and b, out n x k");
  for (int i = 0; i < r - 2; ++i) {
    TRN_ASSERT(a.sizes[i] == out.sizes[i] && b.sizes[i] == out.sizes[i],
               "SolveTriangular: batch sizes must match (the caller broadcasts)");
  }
  if (out.numel() == 0) return Status::Ok();
  internal::ScratchBuffer<float> scratch;
  float* const t = scratch.Get(n * n + n * k);
  if (t == nullptr) return Status::Error("out of host memory for a triangular solve's scratch");
  float* const x = t + n * n;
  const auto solve = HWY_DYNAMIC_DISPATCH(SolveLowerF32);
  const int64_t as0 = a.strides[r - 2], as1 = a.strides[r - 1];
  const int64_t bs0 = b.strides[r - 2], bs1 = b.strides[r - 1];
  const int64_t os0 = out.strides[r - 2], os1 = out.strides[r - 1];
  const size_t ai = ItemSize(a.dtype), bi = ItemSize(b.dtype), oi = ItemSize(out.dtype);
  const TensorRef ob = BatchOf(out), ab = BatchOf(a), bb = BatchOf(b);
  internal::ForEachRun<3>(
      {&ob, &ab, &bb},
      [&](const std::array<char*, 3>& p, int64_t count, const std::array<int64_t, 3>& s) {
        for (int64_t m = 0; m < count; ++m) {
          char* const o = p[0] + m * s[0] * static_cast<int64_t>(oi);
          const char* const am = p[1] + m * s[1] * static_cast<int64_t>(ai);
          const char* const bm = p[2] + m * s[2] * static_cast<int64_t>(bi);
          // Row i of the solve is row i of a lower a, row n-1-i of an upper one
          // (its columns reversed too): only the triangle torch reads is loaded.
          for (int64_t i = 0; i < n; ++i) {
            const int64_t row = upper ? n - 1 - i : i;
            const int64_t col0 = upper ? row : 0;  // the triangle's columns col0..col0+i
            internal::LoadAsF32(a.dtype, am + (row * as0 + col0 * as1) * static_cast<int64_t>(ai),
                                as1, i + 1, t + i * n);
            if (upper) std::reverse(t + i * n, t + i * n + i + 1);
            internal::LoadAsF32(b.dtype, bm + row * bs0 * static_cast<int64_t>(bi), bs1, k,
                                x + i * k);
          }
          solve(t, x, n, k, unitriangular);
          for (int64_t i = 0; i < n; ++i) {
            const int64_t row = upper ? n - 1 - i : i;
            internal::StoreFromF32(out.dtype, o + row * os0 * static_cast<int64_t>(oi), os1, k,
                                   x + i * k);
          }
        }
      });
  return Status::Ok();
}

KernelInfo DescribeSolveTriangular(const TensorRef& out, const TensorRef& a, const TensorRef& b,
                                   const char* aten_op) {
  static constexpr const char* kNames[7] = TRN_DTYPE_NAMES("solve_triangular");
  const int r = out.ndim;
  const uint64_t n = static_cast<uint64_t>(out.sizes[r - 2]);
  const uint64_t batch = n == 0 ? 0 : static_cast<uint64_t>(out.numel()) / n /
                                          std::max<uint64_t>(out.sizes[r - 1], 1);
  KernelInfo info;
  info.name = kNames[static_cast<int>(out.dtype)];
  info.op = aten_op;
  info.engine = rt::Engine::kTensor;  // n^2 k / 2 multiply-adds: a triangular GEMM
  info.flops = batch * n * n * static_cast<uint64_t>(out.sizes[r - 1]);
  info.bytes_read = internal::DistinctBytes(a) / 2 + internal::DistinctBytes(b);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
