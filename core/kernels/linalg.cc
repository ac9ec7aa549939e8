// Triangular solves (torch.linalg.solve_triangular): per batch matrix, the
// triangle is loaded into a float32 scratch (reversed for an upper one, so one
// forward substitution serves both; a lower float32 one with unit column
// stride is read in place) and the right-hand sides solved in place.
// Note [Blocked triangular solve]: rows go in blocks of kSolveBlock. A block
// first subtracts the solved rows above it with one GEMM (Matmul accumulating
// onto the block), then substitutes within itself, the columns in panels of up
// to four vectors held in registers. One block (n <= 64: the gated delta
// rule's chunks) is substitution alone; larger systems spend their time in
// the GEMM, where row-by-row substitution re-read the triangle per panel.

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/linalg.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "hwy/highway.h"

#include "core/kernels/kernels.h"

#ifndef TRN_KERNELS_LINALG_BLOCK_  // once, though foreach_target re-includes this file
#define TRN_KERNELS_LINALG_BLOCK_
namespace trn::kernels {
inline constexpr int64_t kSolveBlock = 64;  // Note [Blocked triangular solve]
}  // namespace trn::kernels
#endif

HWY_BEFORE_NAMESPACE();
namespace trn::kernels::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Columns [c, c + V * lanes) of rows r0..r1-1 of x (row stride k): row i becomes
// (x_i - sum_{r0 <= j < i} t[i, j] x_j) / t[i, i] (no division when unit; t's
// rows ldt apart).
template <int V, class D>
HWY_INLINE void SolvePanel(D d, const float* t, int64_t ldt, float* x, int64_t k, int64_t r0,
                           int64_t r1, int64_t c, bool unit) {
  const size_t N = hn::Lanes(d);
  for (int64_t i = r0; i < r1; ++i) {
    float* xi = x + i * k + c;
    hn::Vec<D> acc[V];
    for (int v = 0; v < V; ++v) acc[v] = hn::LoadU(d, xi + v * N);
    const float* ti = t + i * ldt;
    for (int64_t j = r0; j < i; ++j) {
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

// Forward substitution within rows r0..r1-1 of t x = b, for a lower-triangular
// n x n t (rows ldt apart) and x [n, k] row-major (rows above r0 already
// subtracted).
void SolveLowerBlockF32(const float* t, int64_t ldt, float* x, int64_t k, int64_t r0, int64_t r1,
                        bool unit) {
  const hn::ScalableTag<float> d;
  const int64_t N = static_cast<int64_t>(hn::Lanes(d));
  int64_t c = 0;
  for (; c + 4 * N <= k; c += 4 * N) SolvePanel<4>(d, t, ldt, x, k, r0, r1, c, unit);
  for (; c + N <= k; c += N) SolvePanel<1>(d, t, ldt, x, k, r0, r1, c, unit);
  // The last columns, fewer than a vector (k = 1: a vector solve), one at a
  // time: copied out contiguous so each row's sum is a vector dot product.
  HWY_ALIGN float col[kSolveBlock];
  for (; c < k; ++c) {
    for (int64_t i = r0; i < r1; ++i) col[i - r0] = x[i * k + c];
    for (int64_t i = 0; i < r1 - r0; ++i) {
      const float* ti = t + (r0 + i) * ldt + r0;
      auto acc = hn::Zero(d);
      int64_t j = 0;
      for (; j + N <= i; j += N) acc = hn::MulAdd(hn::LoadU(d, ti + j), hn::Load(d, col + j), acc);
      float s = hn::GetLane(hn::SumOfLanes(d, acc));
      for (; j < i; ++j) s += ti[j] * col[j];
      const float v = col[i] - s;
      col[i] = unit ? v : v / ti[i];
    }
    for (int64_t i = r0; i < r1; ++i) x[i * k + c] = col[i - r0];
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

HWY_EXPORT(SolveLowerBlockF32);

namespace {

// A row-major float32 matrix view of scratch for Matmul.
TensorRef F32Matrix(float* data, int64_t rows, int64_t cols, int64_t row_stride) {
  TensorRef r;
  r.data = data;
  r.dtype = DType::kFloat32;
  r.ndim = 2;
  r.sizes[0] = rows, r.sizes[1] = cols;
  r.strides[0] = row_stride, r.strides[1] = 1;
  return r;
}

// Solves t x = b in place (t lower-triangular n x n with rows ldt apart, x
// [n, k] row-major, both float32), Note [Blocked triangular solve].
Status SolveLower(const float* t, int64_t ldt, float* x, int64_t n, int64_t k, bool unit) {
  const auto block_fn = HWY_DYNAMIC_DISPATCH(SolveLowerBlockF32);
  for (int64_t r0 = 0; r0 < n; r0 += kSolveBlock) {
    const int64_t r1 = std::min(n, r0 + kSolveBlock);
    if (r0 > 0) {
      // x[r0:r1] -= t[r0:r1, :r0] @ x[:r0]: float32 rows disjoint from a and b,
      // so Matmul accumulates straight onto them and takes no float32 scratch
      // (which would be this kernel's: one ScratchBuffer<float> per thread).
      const TensorRef rows = F32Matrix(x + r0 * k, r1 - r0, k, k);
      const Status s = Matmul(rows, F32Matrix(const_cast<float*>(t) + r0 * ldt, r1 - r0, r0, ldt),
                              F32Matrix(x, r0, k, k), rows, -1.0, 1.0);
      if (!s.ok()) return s;
    }
    block_fn(t, ldt, x, k, r0, r1, unit);
  }
  return Status::Ok();
}

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
  const int64_t as0 = a.strides[r - 2], as1 = a.strides[r - 1];
  // A lower float32 triangle with unit column stride is read where it is; any
  // other is loaded (an upper one reversed) into scratch.
  const bool in_place = !upper && a.dtype == DType::kFloat32 && as1 == 1;
  internal::ScratchBuffer<float> scratch;
  float* const t = scratch.Get((in_place ? 0 : n * n) + n * k);
  if (t == nullptr) return Status::Error("out of host memory for a triangular solve's scratch");
  float* const x = t + (in_place ? 0 : n * n);
  const int64_t bs0 = b.strides[r - 2], bs1 = b.strides[r - 1];
  const int64_t os0 = out.strides[r - 2], os1 = out.strides[r - 1];
  const size_t ai = ItemSize(a.dtype), bi = ItemSize(b.dtype), oi = ItemSize(out.dtype);
  const TensorRef ob = BatchOf(out), ab = BatchOf(a), bb = BatchOf(b);
  Status status = Status::Ok();
  internal::ForEachRun<3>(
      {&ob, &ab, &bb},
      [&](const std::array<char*, 3>& p, int64_t count, const std::array<int64_t, 3>& s) {
        for (int64_t m = 0; m < count && status.ok(); ++m) {
          char* const o = p[0] + m * s[0] * static_cast<int64_t>(oi);
          const char* const am = p[1] + m * s[1] * static_cast<int64_t>(ai);
          const char* const bm = p[2] + m * s[2] * static_cast<int64_t>(bi);
          // Row i of the solve is row i of a lower a, row n-1-i of an upper one
          // (its columns reversed too): only the triangle torch reads is loaded.
          for (int64_t i = 0; i < n; ++i) {
            const int64_t row = upper ? n - 1 - i : i;
            const int64_t col0 = upper ? row : 0;  // the triangle's columns col0..col0+i
            if (!in_place) {
              internal::LoadAsF32(a.dtype,
                                  am + (row * as0 + col0 * as1) * static_cast<int64_t>(ai), as1,
                                  i + 1, t + i * n);
              if (upper) std::reverse(t + i * n, t + i * n + i + 1);
            }
            internal::LoadAsF32(b.dtype, bm + row * bs0 * static_cast<int64_t>(bi), bs1, k,
                                x + i * k);
          }
          status = in_place ? SolveLower(reinterpret_cast<const float*>(am), as0, x, n, k,
                                         unitriangular)
                            : SolveLower(t, n, x, n, k, unitriangular);
          if (!status.ok()) return;
          for (int64_t i = 0; i < n; ++i) {
            const int64_t row = upper ? n - 1 - i : i;
            internal::StoreFromF32(out.dtype, o + row * os0 * static_cast<int64_t>(oi), os1, k,
                                   x + i * k);
          }
        }
      });
  return status;
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
