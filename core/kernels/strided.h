// N-d strided iteration shared by the kernels: N operands of one shape are
// coalesced (size-1 dims dropped, dims that are contiguous for every operand
// merged), then the outer dims are walked with an odometer and the innermost
// run is handed to a callback with its per-operand strides. Kernels turn a
// run into SIMD work: unit stride and stride 0 directly, other strides through
// a per-thread scratch chunk (ScratchF32).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>

#include "core/common/assert.h"
#include "core/common/tensor_ref.h"

namespace trn::kernels::internal {

// Elements per scratch chunk: 4 KiB of float32, small enough for L1.
constexpr int64_t kChunk = 1024;

// Per-thread scratch chunk `slot` (kChunk floats, 64-byte aligned). Kernels run
// single-threaded on a core's worker, so a slot is never shared.
inline float* ScratchF32(int slot) {
  constexpr int kSlots = 4;
  alignas(64) static thread_local float scratch[kSlots][kChunk];
  TRN_ASSERT(slot >= 0 && slot < kSlots, "scratch slot out of range");
  return scratch[slot];
}

// A shape shared by N operands, each with its own element strides.
template <int N>
struct StridedShape {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};

  int64_t numel() const {
    int64_t n = 1;
    for (int d = 0; d < ndim; ++d) n *= sizes[d];
    return n;
  }
};

// Builds the shape of `ops` (all with ops[0]'s sizes), optionally reordering
// dims so that operand `order_by` is walked in memory order, then coalesces.
template <int N>
StridedShape<N> MakeShape(const std::array<const TensorRef*, N>& ops, int order_by = -1) {
  StridedShape<N> s;
  const TensorRef& ref = *ops[0];
  int perm[kMaxDims];
  for (int d = 0; d < ref.ndim; ++d) perm[d] = d;
  if (order_by >= 0) {  // stable insertion sort, largest stride outermost
    const int64_t* st = ops[order_by]->strides;
    for (int i = 1; i < ref.ndim; ++i) {
      const int p = perm[i];
      int j = i;
      for (; j > 0 && st[perm[j - 1]] < st[p]; --j) perm[j] = perm[j - 1];
      perm[j] = p;
    }
  }
  for (int i = 0; i < ref.ndim; ++i) {
    const int d = perm[i];
    for (int k = 0; k < N; ++k) {
      TRN_ASSERT(ops[k]->ndim == ref.ndim && ops[k]->sizes[d] == ref.sizes[d],
                 "operands of one strided loop must share sizes");
    }
    if (ref.sizes[d] == 0) {  // empty: one zero-sized dim says it all
      s.ndim = 1;
      s.sizes[0] = 0;
      return s;
    }
    if (ref.sizes[d] == 1) continue;
    bool merge = s.ndim > 0;
    for (int k = 0; k < N && merge; ++k) {
      merge = ops[k]->strides[d] * ref.sizes[d] == s.strides[k][s.ndim - 1];
    }
    if (merge) {
      s.sizes[s.ndim - 1] *= ref.sizes[d];
      for (int k = 0; k < N; ++k) s.strides[k][s.ndim - 1] = ops[k]->strides[d];
    } else {
      s.sizes[s.ndim] = ref.sizes[d];
      for (int k = 0; k < N; ++k) s.strides[k][s.ndim] = ops[k]->strides[d];
      ++s.ndim;
    }
  }
  return s;
}

// Edge of the square tiles of the tiled loops (Note [Tiled transpose] in
// elementwise.cc, Note [Tiled elementwise] in elementwise_run.h).
constexpr int64_t kTile = 32;

// o[c * o_col + r] = x[r * x_row + c] for r < rows, c < cols, tile by tile:
// r runs along o's contiguous dim, c along x's.
template <typename U>
void TransposeTiles(U* o, const U* x, int64_t rows, int64_t cols, int64_t o_col, int64_t x_row) {
  for (int64_t c0 = 0; c0 < cols; c0 += kTile) {
    const int64_t c1 = std::min(cols, c0 + kTile);
    for (int64_t r0 = 0; r0 < rows; r0 += kTile) {
      const int64_t r1 = std::min(rows, r0 + kTile);
      for (int64_t c = c0; c < c1; ++c) {
        U* oc = o + c * o_col;
        for (int64_t r = r0; r < r1; ++r) oc[r] = x[r * x_row + c];
      }
    }
  }
}

// `s` without dims a and b (the tile dims of a tiled loop): the dims its
// caller walks around each tile.
template <int N>
StridedShape<N> WithoutDims(const StridedShape<N>& s, int a, int b) {
  StridedShape<N> rest;
  for (int d = 0; d < s.ndim; ++d) {
    if (d == a || d == b) continue;
    rest.sizes[rest.ndim] = s.sizes[d];
    for (int k = 0; k < N; ++k) rest.strides[k][rest.ndim] = s.strides[k][d];
    ++rest.ndim;
  }
  return rest;
}

// Calls f(ptrs, n, strides) for every innermost run: ptrs[k] points at the
// run's first element of operand k (typed by `base`'s element sizes), strides
// are in elements. A 0-d shape is one run of one element.
template <int N, typename F>
void ForEachRun(const StridedShape<N>& s, const std::array<char*, N>& base,
                const std::array<size_t, N>& item_size, F&& f) {
  std::array<int64_t, N> inner{};
  if (s.ndim == 0) {
    f(base, int64_t{1}, inner);
    return;
  }
  if (s.numel() == 0) return;
  const int last = s.ndim - 1;
  for (int k = 0; k < N; ++k) inner[k] = s.strides[k][last];
  int64_t outer = 1;
  for (int d = 0; d < last; ++d) outer *= s.sizes[d];
  int64_t idx[kMaxDims] = {};
  std::array<char*, N> p = base;
  for (int64_t o = 0; o < outer; ++o) {
    f(p, s.sizes[last], inner);
    for (int d = last - 1; d >= 0; --d) {  // odometer over the outer dims
      for (int k = 0; k < N; ++k) p[k] += s.strides[k][d] * static_cast<int64_t>(item_size[k]);
      if (++idx[d] < s.sizes[d]) break;
      for (int k = 0; k < N; ++k) {
        p[k] -= s.strides[k][d] * s.sizes[d] * static_cast<int64_t>(item_size[k]);
      }
      idx[d] = 0;
    }
  }
}

// Convenience: iterate N TensorRefs of one shape.
template <int N, typename F>
void ForEachRun(const std::array<const TensorRef*, N>& ops, F&& f, int order_by = -1) {
  std::array<char*, N> base;
  std::array<size_t, N> item;
  for (int k = 0; k < N; ++k) {
    base[k] = static_cast<char*>(ops[k]->data);
    item[k] = ItemSize(ops[k]->dtype);
  }
  ForEachRun<N>(MakeShape<N>(ops, order_by), base, item, static_cast<F&&>(f));
}

// Bytes of the distinct elements a (possibly broadcast) view reads: what a
// Describe* reports as bytes_read.
inline uint64_t DistinctBytes(const TensorRef& t) {
  uint64_t n = 1;
  for (int d = 0; d < t.ndim; ++d) {
    if (t.sizes[d] == 0) return 0;
    if (t.strides[d] != 0) n *= static_cast<uint64_t>(t.sizes[d]);
  }
  return n * ItemSize(t.dtype);
}

// Static kernel-name table row for one op, indexed by DType:
// constexpr const char* kNames[7] = TRN_DTYPE_NAMES("exp");
#define TRN_DTYPE_NAMES(op) \
  { op "_f32", op "_f64", op "_bf16", op "_f16", op "_i32", op "_i64", op "_bool" }

}  // namespace trn::kernels::internal
