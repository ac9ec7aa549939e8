// rms_norm and layer_norm: strided rows gathered to f32 when needed, the row
// math in norm-inl.h (Note [fused rms_norm]); group_norm over contiguous
// groups. weight_norm: a VectorNorm and one scaling pass.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "core/kernels/norm.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep

#include "core/kernels/norm-inl.h"
#include "hwy/highway.h"

#if HWY_ONCE
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/common/assert.h"
#include "core/kernels/convert.h"
#include "core/kernels/elementwise_run.h"
#include "core/kernels/kernels.h"

namespace trn::kernels {
namespace norm {
HWY_EXPORT(RmsNormRows);
HWY_EXPORT(LayerNormRow);
HWY_EXPORT(GroupNormGroup);
HWY_EXPORT(StreamFence);
HWY_EXPORT(AddSquaresF64);
HWY_EXPORT(SumSquaresF64);
}  // namespace norm

namespace {

// Outputs at least this large are written with non-temporal stores
// (Note [fused rms_norm]): well past the 32 MiB L3 of the target machine, so a
// result that a following kernel could still find in cache keeps normal stores.
constexpr size_t kStreamBytes = size_t{64} << 20;

// The rows of a tensor: dims [0, lead) index rows, dims [lead, ndim) are one row.
struct Rows {
  const TensorRef* t;
  int lead;
  int64_t inner_stride;  // the row is one run with this stride, or -1 (odd row layout)

  Rows(const TensorRef& ref, int lead_dims) : t(&ref), lead(lead_dims), inner_stride(1) {
    int64_t expected = 0;  // stride the next-outer dim needs to continue the run
    bool first = true;
    for (int d = t->ndim - 1; d >= lead; --d) {
      if (t->sizes[d] == 1) continue;
      if (first) {
        inner_stride = t->strides[d];
        first = false;
      } else if (t->strides[d] != expected) {
        inner_stride = -1;
        return;
      }
      expected = t->strides[d] * t->sizes[d];
    }
  }
  bool contiguous() const { return inner_stride == 1; }
  // Element offset of row r (row-major over the leading dims).
  int64_t Offset(int64_t r) const {
    int64_t off = 0;
    for (int d = lead - 1; d >= 0; --d) {
      const int64_t s = t->sizes[d];
      off += (r % s) * t->strides[d];
      r /= s;
    }
    return off;
  }
  // Element offset of the i-th element of a row (row-major over the row dims).
  int64_t InnerOffset(int64_t i) const {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= lead; --d) {
      const int64_t s = t->sizes[d];
      off += (i % s) * t->strides[d];
      i /= s;
    }
    return off;
  }
  char* Ptr(int64_t offset) const {
    return static_cast<char*>(t->data) + offset * static_cast<int64_t>(ItemSize(t->dtype));
  }
};

void GatherRow(const Rows& rows, int64_t r, float* dst, int64_t n) {
  const int64_t base = rows.Offset(r);
  const DType dt = rows.t->dtype;
  if (rows.inner_stride >= 0) {
    internal::LoadAsF32(dt, rows.Ptr(base), rows.inner_stride, n, dst);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    internal::LoadAsF32(dt, rows.Ptr(base + rows.InnerOffset(i)), 1, 1, dst + i);
  }
}

void ScatterRow(const Rows& rows, int64_t r, const float* src, int64_t n) {
  const int64_t base = rows.Offset(r);
  const DType dt = rows.t->dtype;
  if (rows.inner_stride >= 0) {
    internal::StoreFromF32(dt, rows.Ptr(base), rows.inner_stride, n, src);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    internal::StoreFromF32(dt, rows.Ptr(base + rows.InnerOffset(i)), 1, 1, src + i);
  }
}

// A per-row statistic output (mean_out / rstd_out): the leading shape, with
// or without trailing keepdim ones.
void StoreRowStat(const TensorRef& t, int lead, int64_t r, float v) {
  if (t.data == nullptr) return;
  const Rows rows(t, t.ndim >= lead ? lead : 0);
  const int64_t off = t.ndim >= lead ? rows.Offset(r) : r;
  internal::StoreFromF32(t.dtype, rows.Ptr(off), 1, 1, &v);
}

void CheckStat(const TensorRef& stat, const TensorRef& in, int lead, int64_t rows) {
  if (stat.data == nullptr) return;
  TRN_ASSERT(stat.numel() == rows, "norm statistic must have one element per row");
  TRN_ASSERT(IsFloating(stat.dtype), "norm statistic must be floating");
  if (stat.ndim >= lead) {
    for (int d = 0; d < lead; ++d) {
      TRN_ASSERT(stat.sizes[d] == in.sizes[d], "norm statistic must have the leading shape");
    }
  } else {
    TRN_ASSERT(stat.is_contiguous(), "flattened norm statistic must be contiguous");
  }
}

// Shared checks; returns the row length.
int64_t CheckNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                  const TensorRef* bias, int norm_dims) {
  TRN_ASSERT(norm_dims >= 1 && norm_dims <= in.ndim, "norm_dims must be in [1, in.ndim]");
  TRN_ASSERT(out.ndim == in.ndim && out.dtype == in.dtype, "out must match in");
  TRN_ASSERT(IsFloating(in.dtype), "normalization needs a floating dtype");
  for (int d = 0; d < in.ndim; ++d) TRN_ASSERT(out.sizes[d] == in.sizes[d], "out must match in");
  int64_t n = 1;
  for (int d = in.ndim - norm_dims; d < in.ndim; ++d) n *= in.sizes[d];
  for (const TensorRef* p : {&weight, bias}) {
    if (p == nullptr || p->data == nullptr) continue;
    TRN_ASSERT(p->numel() == n && IsFloating(p->dtype), "weight/bias must have the row shape");
  }
  return n;
}

// Weight or bias as contiguous f32 (nullptr when absent).
const float* ParamF32(const TensorRef& p, int64_t n, std::vector<float>& scratch) {
  if (p.data == nullptr) return nullptr;
  const Rows rows(p, 0);
  if (p.dtype == DType::kFloat32 && rows.contiguous()) return p.ptr<float>();
  scratch.resize(static_cast<size_t>(n));
  GatherRow(rows, 0, scratch.data(), n);
  return scratch.data();
}

bool IsF32Rows(const Rows& rows) {
  return rows.t->dtype == DType::kFloat32 && rows.contiguous();
}

const char* NormName(const char* const names[4], DType dt) {
  switch (dt) {
    case DType::kFloat32: return names[0];
    case DType::kFloat64: return names[1];
    case DType::kBFloat16: return names[2];
    default: return names[3];
  }
}

// A norm kernel's summary: it reads in (and the weight) once from memory and
// writes out; `flops` vector operations per element.
KernelInfo DescribeRowNorm(const char* const names[4], const TensorRef& out, const TensorRef& in,
                           const TensorRef& weight, const char* aten_op, uint64_t flops) {
  KernelInfo info;
  info.name = NormName(names, in.dtype);
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  info.flops = static_cast<uint64_t>(in.numel()) * flops;
  info.bytes_read = in.nbytes() + (weight.data ? weight.nbytes() : 0);
  info.bytes_written = out.nbytes();
  return info;
}

}  // namespace

Status RmsNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
               int norm_dims, double eps, const TensorRef& rstd_out) {
  const int64_t n = CheckNorm(out, in, weight, nullptr, norm_dims);
  const int lead = in.ndim - norm_dims;
  const int64_t num_rows = n == 0 ? 0 : in.numel() / n;
  CheckStat(rstd_out, in, lead, num_rows);
  if (num_rows == 0) return Status::Ok();
  std::vector<float> w_scratch, row;
  const float* w = ParamF32(weight, n, w_scratch);
  const Rows in_rows(in, lead), out_rows(out, lead);
  const bool direct = IsF32Rows(in_rows) && IsF32Rows(out_rows);
  const bool stream = direct && out.nbytes() >= kStreamBytes;
  const auto rows_fn = HWY_DYNAMIC_DISPATCH(norm::RmsNormRows);
  const size_t len = static_cast<size_t>(n);
  const float fe = static_cast<float>(eps);
  if (!direct) {
    row.resize(len);
    const float* src = row.data();
    float* dst = row.data();
    for (int64_t r = 0; r < num_rows; ++r) {
      GatherRow(in_rows, r, row.data(), n);
      float rstd;
      rows_fn(&src, &dst, 1, w, len, fe, false, &rstd);
      ScatterRow(out_rows, r, row.data(), n);
      StoreRowStat(rstd_out, lead, r, rstd);
    }
    return Status::Ok();
  }
  // Rows go to the row kernel in batches, so it can overlap each row's writes
  // with the next row's reads (Note [fused rms_norm]).
  constexpr int64_t kBatch = 64;
  const float* src[kBatch];
  float* dst[kBatch];
  float rstd[kBatch];
  for (int64_t r0 = 0; r0 < num_rows; r0 += kBatch) {
    const int64_t count = std::min(kBatch, num_rows - r0);
    for (int64_t i = 0; i < count; ++i) {
      src[i] = in.ptr<float>() + in_rows.Offset(r0 + i);
      dst[i] = out.ptr<float>() + out_rows.Offset(r0 + i);
    }
    rows_fn(src, dst, static_cast<size_t>(count), w, len, fe, stream, rstd);
    for (int64_t i = 0; i < count; ++i) StoreRowStat(rstd_out, lead, r0 + i, rstd[i]);
  }
  if (stream) HWY_DYNAMIC_DISPATCH(norm::StreamFence)();
  return Status::Ok();
}

Status LayerNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                 const TensorRef& bias, int norm_dims, double eps, const TensorRef& mean_out,
                 const TensorRef& rstd_out) {
  const int64_t n = CheckNorm(out, in, weight, &bias, norm_dims);
  const int lead = in.ndim - norm_dims;
  const int64_t num_rows = n == 0 ? 0 : in.numel() / n;
  CheckStat(mean_out, in, lead, num_rows);
  CheckStat(rstd_out, in, lead, num_rows);
  if (num_rows == 0) return Status::Ok();
  std::vector<float> w_scratch, b_scratch, row;
  const float* w = ParamF32(weight, n, w_scratch);
  const float* b = ParamF32(bias, n, b_scratch);
  const Rows in_rows(in, lead), out_rows(out, lead);
  const bool direct = IsF32Rows(in_rows) && IsF32Rows(out_rows);
  if (!direct) row.resize(static_cast<size_t>(n));
  const auto row_fn = HWY_DYNAMIC_DISPATCH(norm::LayerNormRow);
  float stats[2];
  for (int64_t r = 0; r < num_rows; ++r) {
    if (direct) {
      row_fn(in.ptr<float>() + in_rows.Offset(r), w, b, out.ptr<float>() + out_rows.Offset(r),
             static_cast<size_t>(n), static_cast<float>(eps), stats);
    } else {
      GatherRow(in_rows, r, row.data(), n);
      row_fn(row.data(), w, b, row.data(), static_cast<size_t>(n), static_cast<float>(eps),
             stats);
      ScatterRow(out_rows, r, row.data(), n);
    }
    StoreRowStat(mean_out, lead, r, stats[0]);
    StoreRowStat(rstd_out, lead, r, stats[1]);
  }
  return Status::Ok();
}

namespace {

// Note [Weight norm in chunks]: contiguous v and w (every parametrized conv
// or linear weight) take two passes over v as float32 chunks: squares summed
// in double per index of `dim`, then w = v * (g / norm) with norm as stored,
// as the strided path computes it. That path's runs were `dim`'s extent long:
// wav2vec2's positional conv weight ([256, 64, 16], dim 2) took 1.3 ms in
// bfloat16, 5x CPU PyTorch's time, on 16-element runs.
constexpr int64_t kChunk = 4096;  // floats per load: in L1 with its squares

// Chunks [e0, e0 + n) of `outer` rows of r elements: whole rows per chunk
// when r <= kChunk (so a row never straddles two), else kChunk pieces.
int64_t RowChunk(int64_t r) { return r <= kChunk ? kChunk / r * r : kChunk; }

template <typename F>
void ForRowChunks(int64_t outer, int64_t r, F&& f) {
  const int64_t step = RowChunk(r);
  if (r <= kChunk) {
    for (int64_t e0 = 0; e0 < outer * r; e0 += step) f(e0, std::min(step, outer * r - e0));
    return;
  }
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t c0 = 0; c0 < r; c0 += step) f(o * r + c0, std::min(step, r - c0));
  }
}

// v viewed as [outer][d][inner] (contiguous): acc[j] += the squares of index j
// of `dim`, per contiguous (o, j) block when inner is long, else over rows of
// r = d * inner floats into per-position sums. f32 v is read in place.
void SumSquares(const TensorRef& v, int64_t outer, int64_t d, int64_t inner, double* acc,
                float* buf) {
  const char* base = static_cast<const char*>(v.data);
  const int64_t item = static_cast<int64_t>(ItemSize(v.dtype)), r = d * inner;
  auto floats = [&](int64_t e0, int64_t n) {  // elements [e0, e0 + n) as float32
    if (v.dtype == DType::kFloat32) return reinterpret_cast<const float*>(base) + e0;
    internal::LoadAsF32(v.dtype, base + e0 * item, 1, n, buf);
    return static_cast<const float*>(buf);
  };
  if (inner >= 64) {
    const auto sum_fn = HWY_DYNAMIC_DISPATCH(norm::SumSquaresF64);
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < d; ++j) {
        for (int64_t i0 = 0; i0 < inner; i0 += kChunk) {
          const int64_t n = std::min(kChunk, inner - i0);
          acc[j] += sum_fn(floats((o * d + j) * inner + i0, n), static_cast<size_t>(n));
        }
      }
    }
    return;
  }
  const auto add_fn = HWY_DYNAMIC_DISPATCH(norm::AddSquaresF64);
  std::vector<double> col(static_cast<size_t>(r), 0.0);
  ForRowChunks(outer, r, [&](int64_t e0, int64_t n) {
    const float* x = floats(e0, n);
    for (int64_t t = 0; t < n;) {  // the chunk's pieces of rows, at their positions
      const int64_t at = (e0 + t) % r, len = std::min(n - t, r - at);
      add_fn(x + t, col.data() + at, static_cast<size_t>(len));
      t += len;
    }
  });
  for (int64_t j = 0; j < d; ++j) {
    for (int64_t i = 0; i < inner; ++i) acc[j] += col[j * inner + i];
  }
}

Status WeightNormContiguous(const TensorRef& w, const TensorRef& norm, const TensorRef& v,
                            const TensorRef& g, int dim) {
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < dim; ++i) outer *= v.sizes[i];
  for (int i = dim + 1; i < v.ndim; ++i) inner *= v.sizes[i];
  const int64_t d = v.sizes[dim];
  std::vector<double> acc(static_cast<size_t>(d), 0.0);
  std::vector<float> buf(static_cast<size_t>(kChunk)), gf(static_cast<size_t>(d)),
      nf(static_cast<size_t>(d));
  SumSquares(v, outer, d, inner, acc.data(), buf.data());
  for (double& a : acc) a = std::sqrt(a);
  TensorRef dense = norm;  // acc as a float64 tensor of norm's sizes
  dense.data = acc.data();
  dense.dtype = DType::kFloat64;
  for (int i = 0; i < v.ndim; ++i) dense.strides[i] = i == dim ? 1 : 0;
  const Status st = Copy(norm, dense);
  if (!st.ok()) return st;
  internal::LoadAsF32(norm.dtype, norm.data, norm.strides[dim], d, nf.data());
  internal::LoadAsF32(g.dtype, g.data, g.strides[dim], d, gf.data());
  for (int64_t j = 0; j < d; ++j) gf[j] = gf[j] / nf[j];  // the factor, as the strided path
  const char* vb = static_cast<const char*>(v.data);
  char* wb = static_cast<char*>(w.data);
  const int64_t item = static_cast<int64_t>(ItemSize(v.dtype)), r = d * inner;
  // w = v * factor over n floats from element e0 (one chunk; f32 in place).
  const bool f32 = v.dtype == DType::kFloat32;
  auto scale = [&](int64_t e0, int64_t n, auto factor_of) {
    const float* x = reinterpret_cast<const float*>(vb) + e0;
    float* y = f32 ? reinterpret_cast<float*>(wb) + e0 : buf.data();
    if (!f32) {
      internal::LoadAsF32(v.dtype, vb + e0 * item, 1, n, buf.data());
      x = buf.data();
    }
    for (int64_t t = 0; t < n; ++t) y[t] = x[t] * factor_of(t);
    if (!f32) internal::StoreFromF32(w.dtype, wb + e0 * item, 1, n, buf.data());
  };
  if (inner >= 64) {  // per (o, j) block: one factor
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t j = 0; j < d; ++j) {
        const float f = gf[j];
        for (int64_t i0 = 0; i0 < inner; i0 += kChunk) {
          scale((o * d + j) * inner + i0, std::min(kChunk, inner - i0), [f](int64_t) { return f; });
        }
      }
    }
    return Status::Ok();
  }
  // Short inner: element e takes the factor of position e % r of its row;
  // chunks start at a row (r <= kChunk) or lie inside one (Note [Weight norm in chunks]).
  std::vector<float> pattern(static_cast<size_t>(std::max(RowChunk(r), r)));
  for (size_t t = 0; t < pattern.size(); ++t) {
    pattern[t] = gf[(static_cast<int64_t>(t) % r) / inner];
  }
  const float* pat = pattern.data();
  ForRowChunks(outer, r, [&](int64_t e0, int64_t n) {
    const float* p = pat + e0 % r;
    scale(e0, n, [p](int64_t t) { return p[t]; });
  });
  return Status::Ok();
}

}  // namespace

Status WeightNorm(const TensorRef& w, const TensorRef& norm, const TensorRef& v,
                  const TensorRef& g, int dim) {
  TRN_ASSERT(dim >= 0 && dim < v.ndim && g.ndim == v.ndim && norm.ndim == v.ndim,
             "WeightNorm: dim inside v, g and norm in v's rank");
  TRN_ASSERT(IsFloating(v.dtype) && w.dtype == v.dtype && IsFloating(g.dtype),
             "WeightNorm: floating v, g; w like v");
  if (v.is_contiguous() && w.is_contiguous() && v.numel() > 0) {  // Note [Weight norm in chunks]
    return WeightNormContiguous(w, norm, v, g, dim);
  }
  const uint32_t mask = ((1u << v.ndim) - 1) & ~(1u << dim);
  Status s = VectorNorm(norm, v, mask, 2.0);
  if (!s.ok()) return s;
  TensorRef ge = g, ne = norm;  // broadcast over v's other dims
  for (TensorRef* p : {&ge, &ne}) {
    for (int d = 0; d < v.ndim; ++d) {
      if (d != dim) p->sizes[d] = v.sizes[d], p->strides[d] = 0;
    }
  }
  internal::RunF32<3>(w, {&v, &ge, &ne}, [](auto in, auto sc, float* o, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      o[i] = in[0][sc[0] ? 0 : i] * (in[1][sc[1] ? 0 : i] / in[2][sc[2] ? 0 : i]);
    }
  });
  return Status::Ok();
}

KernelInfo DescribeWeightNorm(const TensorRef& w, const TensorRef& v, const char* aten_op) {
  static const char* const kNames[4] = {"weight_norm_f32", "weight_norm_f64",
                                        "weight_norm_bf16", "weight_norm_f16"};
  KernelInfo info;
  info.name = NormName(kNames, v.dtype);
  info.op = aten_op;
  info.engine = rt::Engine::kVector;
  // square-accumulate (2) + divide and scale (2) per element.
  info.flops = 4 * static_cast<uint64_t>(v.numel());
  info.bytes_read = 2 * internal::DistinctBytes(v);  // the norm pass and the scaling pass
  info.bytes_written = w.nbytes();
  return info;
}

KernelInfo DescribeRmsNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                           const char* aten_op) {
  static const char* const kNames[4] = {"rms_norm_f32", "rms_norm_f64", "rms_norm_bf16",
                                        "rms_norm_f16"};
  // square-accumulate (2) + scale (1) per element, + 1 with a weight.
  return DescribeRowNorm(kNames, out, in, weight, aten_op, weight.data ? 4 : 3);
}

KernelInfo DescribeLayerNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                             const char* aten_op) {
  static const char* const kNames[4] = {"layer_norm_f32", "layer_norm_f64", "layer_norm_bf16",
                                        "layer_norm_f16"};
  // sum (1) + centred square-accumulate (2) + centre-and-scale (2) per element,
  // + 1 with a weight. A bias is not visible here and not counted.
  return DescribeRowNorm(kNames, out, in, weight, aten_op, weight.data ? 6 : 5);
}

Status GroupNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                 const TensorRef& bias, int64_t groups, double eps, const TensorRef& mean_out,
                 const TensorRef& rstd_out) {
  TRN_ASSERT(in.ndim >= 2 && (in.numel() == 0 || (in.is_contiguous() && out.is_contiguous())),
             "group_norm: contiguous [N, C, *] in and out");
  TRN_ASSERT(out.ndim == in.ndim && out.dtype == in.dtype && out.numel() == in.numel(),
             "group_norm: out must match in");
  TRN_ASSERT(IsFloating(in.dtype), "group_norm needs a floating dtype");
  const int64_t n = in.sizes[0], c = in.sizes[1];
  TRN_ASSERT(groups > 0 && c % groups == 0, "group_norm: groups must divide the channels");
  const int64_t hw = c == 0 || n == 0 ? 0 : in.numel() / (n * c);
  const int64_t per_group = c / groups;
  for (const TensorRef* p : {&weight, &bias}) {
    TRN_ASSERT(p->data == nullptr || (p->numel() == c && IsFloating(p->dtype)),
               "group_norm: weight/bias must have C elements");
  }
  for (const TensorRef* p : {&mean_out, &rstd_out}) {
    TRN_ASSERT(p->data == nullptr || (p->numel() == n * groups && p->is_contiguous()),
               "group_norm: mean/rstd must be contiguous [N, groups]");
  }
  const auto store_stat = [](const TensorRef& t, int64_t r, float v) {
    if (t.data == nullptr) return;
    internal::StoreFromF32(t.dtype, static_cast<char*>(t.data) + r * ItemSize(t.dtype), 1, 1, &v);
  };
  if (in.numel() == 0) {  // empty groups: mean 0, rstd NaN (0 / 0), as torch's CPU kernel
    for (int64_t r = 0; r < n * groups; ++r) {
      store_stat(mean_out, r, 0.0f);
      store_stat(rstd_out, r, std::numeric_limits<float>::quiet_NaN());
    }
    return Status::Ok();
  }
  std::vector<float> w_scratch, b_scratch, buf;
  const float* w = ParamF32(weight, c, w_scratch);
  const float* b = ParamF32(bias, c, b_scratch);
  const bool f32 = in.dtype == DType::kFloat32;
  const int64_t len = per_group * hw;
  if (!f32) buf.resize(static_cast<size_t>(len));
  const auto group_fn = HWY_DYNAMIC_DISPATCH(norm::GroupNormGroup);
  const size_t item = ItemSize(in.dtype);
  float stats[2];
  for (int64_t r = 0; r < n * groups; ++r) {
    const int64_t g = r % groups;
    const float* gw = w ? w + g * per_group : nullptr;
    const float* gb = b ? b + g * per_group : nullptr;
    if (f32) {
      group_fn(in.ptr<float>() + r * len, out.ptr<float>() + r * len,
               static_cast<size_t>(per_group), static_cast<size_t>(hw), gw, gb,
               static_cast<float>(eps), stats);
    } else {
      internal::LoadAsF32(in.dtype, static_cast<const char*>(in.data) + r * len * item, 1, len,
                          buf.data());
      group_fn(buf.data(), buf.data(), static_cast<size_t>(per_group), static_cast<size_t>(hw),
               gw, gb, static_cast<float>(eps), stats);
      internal::StoreFromF32(out.dtype, static_cast<char*>(out.data) + r * len * item, 1, len,
                             buf.data());
    }
    store_stat(mean_out, r, stats[0]);
    store_stat(rstd_out, r, stats[1]);
  }
  return Status::Ok();
}

KernelInfo DescribeGroupNorm(const TensorRef& out, const TensorRef& in, const TensorRef& weight,
                             const char* aten_op) {
  static const char* const kNames[4] = {"group_norm_f32", "group_norm_f64", "group_norm_bf16",
                                        "group_norm_f16"};
  // sum (1) + centred square-accumulate (2) + one multiply-add (2) per element.
  return DescribeRowNorm(kNames, out, in, weight, aten_op, 5);
}

}  // namespace trn::kernels
#endif  // HWY_ONCE
