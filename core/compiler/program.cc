// Program execution (one kernel per call, on the calling core worker), the
// JSON artifact and the human-readable compile report.
#include "core/compiler/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <mutex>
#include <unordered_set>

#include "core/common/assert.h"
#include "core/common/names.h"
#include "core/compiler/program_internal.h"
#include "core/kernels/attention.h"
#include "core/kernels/complex.h"
#include "core/kernels/conv.h"
#include "core/kernels/indexing.h"
#include "core/kernels/kernels.h"
#include "core/kernels/vision.h"

namespace trn::compiler {
using internal::KernelImpl;

TensorRef View::Bind(void* base) const {
  TensorRef t;
  t.data = static_cast<char*>(base) + offset * static_cast<int64_t>(ItemSize(dtype));
  t.dtype = dtype;
  t.ndim = static_cast<int>(sizes.size());
  for (int d = 0; d < t.ndim; ++d) {
    t.sizes[d] = sizes[d];
    t.strides[d] = strides[d];
  }
  return t;
}

Program::Program() = default;
Program::~Program() = default;
Program::Program(Program&&) noexcept = default;
Program& Program::operator=(Program&&) noexcept = default;

const char* Intern(const std::string& s) {
  // Never freed: trace records hold these pointers after programs die.
  static std::mutex mu;
  static auto* table = new std::unordered_set<std::string>();
  std::lock_guard<std::mutex> lock(mu);
  return table->insert(s).first->c_str();
}

namespace {

TensorRef BindOrNull(const View& v, const std::vector<void*>& base) {
  if (v.buffer < 0) return TensorRef();
  return v.Bind(base[v.buffer]);
}

// A 2-D row slice [r0, r1) of a 2-D view.
TensorRef RowSlice(TensorRef t, int64_t r0, int64_t r1) {
  t.data = static_cast<char*>(t.data) + r0 * t.strides[0] * static_cast<int64_t>(ItemSize(t.dtype));
  t.sizes[0] = r1 - r0;
  return t;
}

// Batch b of a 3-D view as a 2-D view.
TensorRef Batch(TensorRef t, int64_t b) {
  if (t.ndim != 3) return t;
  t.data = static_cast<char*>(t.data) + b * t.strides[0] * static_cast<int64_t>(ItemSize(t.dtype));
  t.ndim = 2;
  t.sizes[0] = t.sizes[1];
  t.sizes[1] = t.sizes[2];
  t.strides[0] = t.strides[1];
  t.strides[1] = t.strides[2];
  return t;
}

// GEMM row blocks, each followed by the epilogue on the rows just computed
// (still in L2/L3).
Status RunMatmulEpilogue(const KernelImpl& ki, const std::vector<void*>& base,
                         kernels::PackedB* packed_b) {
  const TensorRef a = BindOrNull(ki.gemm.a, base), b = BindOrNull(ki.gemm.b, base);
  const TensorRef bias = BindOrNull(ki.gemm.bias, base);
  const View& ov = ki.gemm.out;
  const int nd = static_cast<int>(ov.sizes.size());
  const int64_t batches = nd == 3 ? ov.sizes[0] : 1;
  const int64_t m = ov.sizes[nd - 2], n = ov.sizes[nd - 1];
  const DType dt = ov.dtype;
  const size_t item = ItemSize(dt);
  // Blocks of ~4 MiB of output: GEMM row blocks of that height still pack B
  // rarely compared to their FLOPs.
  const int64_t block = std::max<int64_t>(144, (int64_t{1} << 20) / std::max<int64_t>(n, 1));
  static thread_local std::vector<uint64_t> scratch;
  const size_t need = static_cast<size_t>(std::min(block, m) * n) * item / 8 + 1;
  if (scratch.size() < need) scratch.resize(need);
  for (int64_t bi = 0; bi < batches; ++bi) {
    const TensorRef a2 = Batch(a, bi), b2 = Batch(b, bi);
    for (int64_t i0 = 0; i0 < m; i0 += block) {
      const int64_t i1 = std::min(m, i0 + block);
      TensorRef out;
      out.data = scratch.data();
      out.dtype = dt;
      out.ndim = 2;
      out.sizes[0] = i1 - i0;
      out.sizes[1] = n;
      out.strides[0] = n;
      out.strides[1] = 1;
      TensorRef bias_blk = bias;
      if (bias.data != nullptr && bias.ndim == 2 && bias.sizes[0] == m && m != 1) {
        bias_blk = RowSlice(bias, i0, i1);
      }
      Status s = kernels::Matmul(out, RowSlice(a2, i0, i1), b2, bias_blk, ki.gemm.alpha,
                                 ki.gemm.beta, packed_b);  // a 2-D B is every batch's
      if (!s.ok()) return s;
      internal::RunRows(ki.prog, base, reinterpret_cast<const float*>(scratch.data()),
                        bi * m + i0, bi * m + i1);
    }
  }
  return Status::Ok();
}

// `t` broadcast to `out`'s sizes (right-aligned, stride 0 on expanded dims).
TensorRef Expand(const TensorRef& t, const TensorRef& out) {
  TensorRef r = t;
  r.ndim = out.ndim;
  const int lead = out.ndim - t.ndim;
  for (int d = 0; d < out.ndim; ++d) {
    const int s = d - lead;
    const bool have = s >= 0 && t.sizes[s] == out.sizes[d];
    r.sizes[d] = out.sizes[d];
    r.strides[d] = have ? t.strides[s] : 0;
  }
  return r;
}

// [N, C, L] as [N, C, 1, L]; 4-D refs unchanged.
TensorRef WithUnitH(const TensorRef& t) {
  if (t.ndim != 3) return t;
  TensorRef r = t;
  r.ndim = 4;
  r.sizes[3] = t.sizes[2];
  r.strides[3] = t.strides[2];
  r.sizes[2] = 1;
  r.strides[2] = t.sizes[2] * t.strides[2];  // as unsqueeze(2): contiguous stays contiguous
  return r;
}

kernels::BinaryOp BinaryOf(Op op) {
  switch (op) {
    case Op::kAdd: return kernels::BinaryOp::kAdd;
    case Op::kSub: return kernels::BinaryOp::kSub;
    case Op::kMul: return kernels::BinaryOp::kMul;
    case Op::kMaximum: return kernels::BinaryOp::kMaximum;
    case Op::kMinimum: return kernels::BinaryOp::kMinimum;
    case Op::kEq: return kernels::BinaryOp::kEq;
    case Op::kNe: return kernels::BinaryOp::kNe;
    case Op::kLt: return kernels::BinaryOp::kLt;
    case Op::kLe: return kernels::BinaryOp::kLe;
    case Op::kGt: return kernels::BinaryOp::kGt;
    case Op::kGe: return kernels::BinaryOp::kGe;
    case Op::kLogicalAnd: return kernels::BinaryOp::kLogicalAnd;
    case Op::kLogicalOr: return kernels::BinaryOp::kLogicalOr;
    case Op::kDivTrunc: return kernels::BinaryOp::kDivTrunc;
    case Op::kDivFloor: return kernels::BinaryOp::kDivFloor;
    case Op::kRemainder: return kernels::BinaryOp::kRemainder;
    case Op::kFmod: return kernels::BinaryOp::kFmod;
    default: TRN_ASSERT(false, "library kernel: no binary kernel for this op");
  }
  return kernels::BinaryOp::kAdd;
}

// The library unary kernel of a graph op (Note [Library kernels]), or false.
bool UnaryOf(Op op, kernels::UnaryOp* u) {
  switch (op) {
    case Op::kLogicalNot: *u = kernels::UnaryOp::kLogicalNot; return true;
    case Op::kNeg: *u = kernels::UnaryOp::kNeg; return true;
    case Op::kAbs: *u = kernels::UnaryOp::kAbs; return true;
    case Op::kRelu: *u = kernels::UnaryOp::kRelu; return true;
    case Op::kFloor: *u = kernels::UnaryOp::kFloor; return true;
    case Op::kCeil: *u = kernels::UnaryOp::kCeil; return true;
    case Op::kTrunc: *u = kernels::UnaryOp::kTrunc; return true;
    case Op::kRound: *u = kernels::UnaryOp::kRound; return true;
    case Op::kSign: *u = kernels::UnaryOp::kSign; return true;
    default: return false;
  }
}

// out starts as self (the scatters below write into a copy; nothing when in place).
Status StartFromSelf(const TensorRef& out, const TensorRef& self) {
  return out.data == self.data ? Status::Ok() : kernels::Copy(out, self);
}

// A pairs tensor (Note [Complex as pairs] in kernels/complex.h) without its pair dim.
TensorRef Unpaired(TensorRef t) {
  --t.ndim;
  return t;
}

// Op::kComplex (graph.h): each operand pairs or real, broadcast to out's sizes.
static_assert(static_cast<int>(kernels::ComplexBinaryOp::kDiv) ==
                  static_cast<int>(ComplexCode::kDiv),
              "ComplexCode's arithmetic codes are kernels::ComplexBinaryOp's");
Status RunComplex(const TensorRef& out, const KernelImpl& ki, const TensorRef& a,
                  const TensorRef& b) {
  const TensorRef* ins[2] = {&a, &b};
  const auto code = static_cast<ComplexCode>(ki.lib_dims[0]);
  const bool real_out = code == ComplexCode::kAbs || code == ComplexCode::kAngle;
  const TensorRef o = real_out ? out : Unpaired(out);  // out's complex sizes
  const int64_t real = ki.lib_dims[1];
  auto operand = [&](size_t i) {
    kernels::ComplexOperand c;
    c.real = (real >> i) & 1;
    c.t = Expand(c.real ? *ins[i] : Unpaired(*ins[i]), o);
    return c;
  };
  kernels::ComplexOperand zero;  // the scalar 0 + 0i
  switch (code) {
    case ComplexCode::kAdd:
    case ComplexCode::kSub:
    case ComplexCode::kMul:
    case ComplexCode::kDiv:
      return kernels::ComplexBinary(static_cast<kernels::ComplexBinaryOp>(ki.lib_dims[0]), o,
                                    operand(0), operand(1));
    case ComplexCode::kPolar:
      return kernels::Polar(o, Expand(a, o), Expand(b, o));
    case ComplexCode::kConj: {
      kernels::ComplexOperand c = operand(0);
      c.conj = true;
      return kernels::ComplexBinary(kernels::ComplexBinaryOp::kAdd, o, c, zero);
    }
    case ComplexCode::kFromReal:
      return kernels::ComplexBinary(kernels::ComplexBinaryOp::kAdd, o, operand(0), zero);
    case ComplexCode::kAbs:
      return kernels::ComplexUnary(kernels::ComplexUnaryOp::kAbs, o, operand(0));
    case ComplexCode::kAngle:
      return kernels::ComplexUnary(kernels::ComplexUnaryOp::kAngle, o, operand(0));
    case ComplexCode::kExp:
      return kernels::ComplexUnary(kernels::ComplexUnaryOp::kExp, o, operand(0));
    case ComplexCode::kLog:
      return kernels::ComplexUnary(kernels::ComplexUnaryOp::kLog, o, operand(0));
    case ComplexCode::kSqrt:
      return kernels::ComplexUnary(kernels::ComplexUnaryOp::kSqrt, o, operand(0));
  }
  return Status::Error("complex: unknown code");
}

// Op::kFft: one 1-D pass (Note [FFT passes] in torch_bridge/ops_complex.cc).
Status RunFft(const TensorRef& out, const KernelImpl& ki, const TensorRef& in) {
  const auto kind = static_cast<kernels::FftKind>(ki.lib_dims[0]);
  kernels::ComplexOperand c;
  c.real = kind == kernels::FftKind::kR2C;
  c.t = c.real ? in : Unpaired(in);
  return kernels::Fft(kind, kind == kernels::FftKind::kC2R ? out : Unpaired(out), c,
                      static_cast<int>(ki.lib_dims[1]), ki.lib_dims[2] != 0, ki.lib_scalar);
}

// out = self, then src (or the scalar) scattered into it by index (Op::kScatter).
Status RunScatter(const TensorRef& out, const KernelImpl& ki, const TensorRef& self,
                  const TensorRef& index, const TensorRef& src) {
  if (Status s = StartFromSelf(out, self); !s.ok()) return s;
  return kernels::Scatter(out, static_cast<int>(ki.lib_dims[0]), index, src, ki.lib_scalar,
                          ki.lib_dims[1] != 0 ? kernels::ScatterReduce::kAdd
                                              : kernels::ScatterReduce::kNone);
}

// Advanced indexing self[i0, i1, ...] on `dims` as the indexing kernels see it
// (kernels/indexing.h): self with the indexed dims first, the indices broadcast
// to B, and the result [B..., rest...]. Torch's result puts B after self's
// leading unindexed dims when the indexed dims are adjacent (kIndex in graph.h).
struct AdvancedIndex {
  TensorRef self;                  // indexed dims first, then the rest in order
  std::vector<TensorRef> indices;  // broadcast to B
  int b_ndim = 0;
  int lead = 0;      // the rest dims before B in torch's order
  TensorRef result;  // sizes only: the result in torch's order

  AdvancedIndex(const TensorRef& t, std::vector<TensorRef> idx, const std::vector<int64_t>& dims)
      : self(t), indices(std::move(idx)) {
    const int k = static_cast<int>(dims.size());
    TensorRef b;
    b.ndim = 0;
    for (const TensorRef& i : indices) {
      const int nd = std::max(b.ndim, i.ndim);
      TensorRef r;
      r.ndim = nd;
      for (int d = 0; d < nd; ++d) {
        const int ib = d - (nd - b.ndim), it = d - (nd - i.ndim);
        const int64_t x = ib >= 0 ? b.sizes[ib] : 1, y = it >= 0 ? i.sizes[it] : 1;
        r.sizes[d] = x == 1 ? y : x;
      }
      b = r;
    }
    for (TensorRef& i : indices) i = Expand(i, b);
    b_ndim = b.ndim;
    int at = 0;
    for (int j = 0; j < k; ++j, ++at) {
      self.sizes[at] = t.sizes[dims[j]];
      self.strides[at] = t.strides[dims[j]];
    }
    for (int d = 0; d < t.ndim; ++d) {
      if (std::find(dims.begin(), dims.end(), d) != dims.end()) continue;
      self.sizes[at] = t.sizes[d];
      self.strides[at] = t.strides[d];
      ++at;
    }
    lead = dims.back() - dims.front() + 1 == k ? static_cast<int>(dims.front()) : 0;
    // The result's torch order: lead rest dims, B, the other rest dims.
    result.ndim = b_ndim + t.ndim - k;
    at = 0;
    for (int j = 0; j < lead; ++j) result.sizes[at++] = self.sizes[k + j];
    for (int j = 0; j < b_ndim; ++j) result.sizes[at++] = b.sizes[j];
    for (int j = k + lead; j < t.ndim; ++j) result.sizes[at++] = self.sizes[j];
  }

  // `t` (the result's sizes, torch's order) seen as [B..., rest...].
  TensorRef BFirst(const TensorRef& t) const {
    TensorRef o = t;
    int at = 0;
    for (int j = 0; j < b_ndim; ++j, ++at) {
      o.sizes[at] = t.sizes[lead + j];
      o.strides[at] = t.strides[lead + j];
    }
    for (int j = 0; j < lead; ++j, ++at) {
      o.sizes[at] = t.sizes[j];
      o.strides[at] = t.strides[j];
    }
    for (int j = lead + b_ndim; j < t.ndim; ++j, ++at) {
      o.sizes[at] = t.sizes[j];
      o.strides[at] = t.strides[j];
    }
    return o;
  }
};

// self[i0, i1, ...] on `dims` (Op::kIndex).
Status RunIndex(const TensorRef& out, const TensorRef& self, std::vector<TensorRef> indices,
                const std::vector<int64_t>& dims) {
  const AdvancedIndex ix(self, std::move(indices), dims);
  return kernels::Index(ix.BFirst(out), ix.self, ix.indices,
                        std::vector<int>(dims.begin(), dims.end()));
}

// out = self, then out[i0, i1, ...] = values (+= when accumulate) on `dims`
// (Op::kIndexPut); values broadcast to what self[i0, i1, ...] gives.
Status RunIndexPut(const TensorRef& out, const TensorRef& self, std::vector<TensorRef> indices,
                   const TensorRef& values, const std::vector<int64_t>& dims, bool accumulate) {
  if (Status s = StartFromSelf(out, self); !s.ok()) return s;
  const AdvancedIndex ix(out, std::move(indices), dims);
  return kernels::IndexPut(ix.self, ix.indices, ix.BFirst(Expand(values, ix.result)), accumulate,
                           std::vector<int>(dims.begin(), dims.end()));
}

// argmax on dim d: the reduction kernel takes out with in's rank (size 1 at d).
Status RunArgExtremum(kernels::ReduceOp op, TensorRef out, const TensorRef& in, int d) {
  if (out.ndim == in.ndim - 1) {
    for (int i = out.ndim; i > d; --i) {
      out.sizes[i] = out.sizes[i - 1];
      out.strides[i] = out.strides[i - 1];
    }
    out.sizes[d] = 1;
    out.strides[d] = 0;
    ++out.ndim;
  }
  return kernels::Reduce(op, out, in, 1u << d);
}

// constant_pad_nd: kernels::ConstantPad, one pass over out.
Status RunPad(const TensorRef& out, const TensorRef& in, const std::vector<int64_t>& pads,
              double value) {
  int64_t before[kMaxDims] = {};
  for (int d = 0; d < out.ndim; ++d) {  // pads: (before, after) from the last dim back
    const size_t from_end = static_cast<size_t>(out.ndim - 1 - d);
    before[d] = 2 * from_end < pads.size() ? pads[2 * from_end] : 0;
  }
  return kernels::ConstantPad(out, in, before, value);
}

// out = self, then src into out's slice start:end:step of dim d (Op::kSliceScatter).
Status RunSliceScatter(const TensorRef& out, const TensorRef& self, const TensorRef& src,
                       const std::vector<int64_t>& a) {
  if (Status s = StartFromSelf(out, self); !s.ok()) return s;
  const int d = static_cast<int>(a[0]);
  TensorRef slice = out;
  slice.data = static_cast<char*>(out.data) +
               a[1] * out.strides[d] * static_cast<int64_t>(ItemSize(out.dtype));
  slice.sizes[d] = src.sizes[d];
  slice.strides[d] = out.strides[d] * a[3];
  return slice.numel() == 0 ? Status::Ok() : kernels::Copy(slice, src);
}

kernels::PoolParams PoolParamsOf(const KernelImpl& ki) {
  kernels::PoolParams p;
  for (int d = 0; d < 2; ++d) {
    p.kernel[d] = ki.lib_pool.kernel[d];
    p.stride[d] = ki.lib_pool.stride[d];
    p.padding[d] = ki.lib_pool.padding[d];
    p.dilation[d] = ki.lib_pool.dilation[d];
  }
  p.count_include_pad = ki.lib_pool.count_include_pad;
  p.divisor_override = ki.lib_pool.divisor_override;
  return p;
}

// The library ops and integer/bool elementwise math (Note [Library kernels]).
Status RunLibraryOp(const KernelImpl& ki, const std::vector<void*>& base) {
  const TensorRef out = BindOrNull(ki.lib_out, base);
  auto in = [&](size_t i) { return BindOrNull(ki.lib_ins[i], base); };
  // Unary and copy inputs may lack the output's leading ones (Note [Pass-through reshapes]).
  kernels::UnaryOp unary;
  if (UnaryOf(ki.lib_op, &unary)) return kernels::Unary(unary, out, Expand(in(0), out));
  switch (ki.lib_op) {
    case Op::kCat: {
      std::vector<TensorRef> parts;
      for (size_t i = 0; i < ki.lib_ins.size(); ++i) parts.push_back(in(i));
      return kernels::Cat(out, parts, static_cast<int>(ki.lib_dims[0]));
    }
    case Op::kEmbedding: {  // index_select on dim 0 by the flattened (contiguous) index
      TensorRef index = in(1), rows = out;
      const TensorRef table = in(0);
      index.sizes[0] = index.numel();
      index.strides[0] = 1;
      index.ndim = 1;
      rows.ndim = table.ndim;
      rows.sizes[0] = index.sizes[0];
      for (int d = 1; d < table.ndim; ++d) {
        rows.sizes[d] = table.sizes[d];
        rows.strides[d] = out.strides[out.ndim - table.ndim + d];
      }
      rows.strides[0] = table.ndim > 1 ? rows.strides[1] * rows.sizes[1] : 1;
      return kernels::IndexSelect(rows, table, 0, index);
    }
    case Op::kCast:
    case Op::kClone: return kernels::Copy(out, Expand(in(0), out));
    case Op::kWhere:
      return kernels::Where(out, Expand(in(0), out), Expand(in(1), out), Expand(in(2), out));
    case Op::kSdpa: {
      const TensorRef q = in(0), k = in(1);
      TensorRef mask = TensorRef{};
      if (ki.lib_ins.size() == 4) {
        TensorRef scores = q;  // [B, Hq, Sq, Skv]: the shape the mask broadcasts to
        scores.sizes[3] = k.sizes[2];
        mask = Expand(in(3), scores);
      }
      return kernels::Attention(out, q, k, in(2), mask, ki.lib_scalar, ki.lib_causal,
                                TensorRef{});
    }
    case Op::kLayerNorm:
      return kernels::LayerNorm(out, in(0), ki.lib_ins.size() > 1 ? in(1) : TensorRef{},
                                ki.lib_ins.size() > 2 ? in(2) : TensorRef{},
                                static_cast<int>(ki.lib_dims[0]),
                                ki.lib_eps, TensorRef{}, TensorRef{});
    case Op::kGroupNorm:
      return kernels::GroupNorm(out, in(0), ki.lib_ins.size() > 1 ? in(1) : TensorRef{},
                                ki.lib_ins.size() > 2 ? in(2) : TensorRef{}, ki.lib_dims[0],
                                ki.lib_eps, TensorRef{}, TensorRef{});
    case Op::kBatchNorm: {
      const bool affine = ki.lib_ins.size() == 5;
      return kernels::BatchNormInference(out, in(0), in(1), in(2),
                                         affine ? in(3) : TensorRef{}, affine ? in(4) : TensorRef{},
                                         ki.lib_eps);
    }
    case Op::kMaxPool2d: return kernels::MaxPool2d(out, TensorRef{}, in(0), PoolParamsOf(ki));
    case Op::kAvgPool2d: return kernels::AvgPool2d(out, in(0), PoolParamsOf(ki));
    case Op::kAdaptiveAvgPool2d: return kernels::AdaptiveAvgPool2d(out, in(0));
    case Op::kIm2Col:
    case Op::kCol2Im: {
      const Node::PoolAttrs& a = ki.lib_pool;
      kernels::Im2ColParams p;
      for (int d = 0; d < 2; ++d) {
        p.kernel[d] = a.kernel[d];
        p.stride[d] = a.stride[d];
        p.padding[d] = a.padding[d];
        p.dilation[d] = a.dilation[d];
      }
      return ki.lib_op == Op::kIm2Col ? kernels::Im2Col(out, in(0), p)
                                      : kernels::Col2Im(out, in(0), p);
    }
    case Op::kIndexPut: {  // inputs self, indices..., values; dims indexed..., accumulate
      const size_t k = ki.lib_ins.size() - 2;
      std::vector<TensorRef> indices;
      for (size_t i = 1; i <= k; ++i) indices.push_back(in(i));
      return RunIndexPut(out, in(0), std::move(indices), in(k + 1),
                         {ki.lib_dims.begin(), ki.lib_dims.begin() + static_cast<long>(k)},
                         ki.lib_dims[k] != 0);
    }
    case Op::kArange: return kernels::Arange(out, ki.lib_scalar, ki.lib_alpha);
    case Op::kGather: return kernels::Gather(out, in(0), static_cast<int>(ki.lib_dims[0]), in(1));
    case Op::kScatter:
      return RunScatter(out, ki, in(0), in(1), ki.lib_ins.size() > 2 ? in(2) : TensorRef{});
    case Op::kIndexSelect:
      return kernels::IndexSelect(out, in(0), static_cast<int>(ki.lib_dims[0]), in(1));
    case Op::kIndex: {
      std::vector<TensorRef> indices;
      for (size_t i = 1; i < ki.lib_ins.size(); ++i) indices.push_back(in(i));
      return RunIndex(out, in(0), std::move(indices), ki.lib_dims);
    }
    case Op::kTopk:  // the indices alone (Op::kTopk in graph.h)
      return kernels::TopK(TensorRef{}, out, in(0), static_cast<int>(ki.lib_dims[0]),
                           ki.lib_dims[1], ki.lib_dims[2] != 0);
    case Op::kSort:
      return kernels::Sort(TensorRef{}, out, in(0), static_cast<int>(ki.lib_dims[0]),
                           ki.lib_dims[1] != 0);
    case Op::kHistc: return kernels::Histc(out, in(0), ki.lib_dims[0], ki.lib_scalar, ki.lib_alpha);
    case Op::kLogcumsumexp:
      return kernels::Scan(kernels::ScanOp::kLogSumExp, out, in(0), static_cast<int>(ki.lib_dims[0]));
    case Op::kCummax:
    case Op::kCummin:
      return kernels::ScanExtremum(TensorRef{}, out, in(0), static_cast<int>(ki.lib_dims[0]),
                                   ki.lib_op == Op::kCummax);
    case Op::kSolveTriangular: {  // a and b broadcast over out's batch dims
      TensorRef a_shape = out, b_shape = out;
      a_shape.sizes[out.ndim - 1] = out.sizes[out.ndim - 2];
      return kernels::SolveTriangular(out, Expand(in(0), a_shape), Expand(in(1), b_shape),
                                      ki.lib_dims[0] != 0, ki.lib_dims[1] != 0);
    }
    case Op::kFlip: {
      uint32_t mask = 0;
      for (int64_t d : ki.lib_dims) mask |= 1u << d;
      return kernels::Flip(out, in(0), mask);
    }
    case Op::kCumsum:
      return kernels::Scan(kernels::ScanOp::kSum, out, in(0), static_cast<int>(ki.lib_dims[0]));
    case Op::kArgmax:
      return RunArgExtremum(kernels::ReduceOp::kArgmax, out, in(0), static_cast<int>(ki.lib_dims[0]));
    case Op::kArgmin:
      return RunArgExtremum(kernels::ReduceOp::kArgmin, out, in(0), static_cast<int>(ki.lib_dims[0]));
    case Op::kPad: return RunPad(out, in(0), ki.lib_dims, ki.lib_scalar);
    case Op::kSliceScatter: return RunSliceScatter(out, in(0), in(1), ki.lib_dims);
    case Op::kMath:
      return kernels::Unary(static_cast<kernels::UnaryOp>(ki.lib_dims[0]), out, in(0));
    case Op::kComplex:
      return RunComplex(out, ki, in(0), ki.lib_ins.size() > 1 ? in(1) : TensorRef{});
    case Op::kFft: return RunFft(out, ki, in(0));
    case Op::kConvTranspose: {
      const Node::ConvAttrs& c = ki.lib_conv;
      kernels::ConvParams p;  // (H, W): the last two attributes; 1-D is 2-D with H = 1
      for (int d = 0; d < 2; ++d) {
        p.stride[d] = c.stride[d + 1];
        p.pad_begin[d] = p.pad_end[d] = c.padding[d + 1];
        p.dilation[d] = c.dilation[d + 1];
      }
      p.groups = c.groups;
      return kernels::ConvTranspose2d(WithUnitH(out), WithUnitH(in(0)), WithUnitH(in(1)),
                                      ki.lib_ins.size() == 3 ? in(2) : TensorRef{}, p);
    }
    case Op::kConv: {
      const Node::ConvAttrs& c = ki.lib_conv;
      if (out.ndim == 5) {  // no epilogue joins a 3-D convolution (Note [Conv epilogue])
        kernels::Conv3dParams p3;
        for (int d = 0; d < 3; ++d) {
          p3.stride[d] = c.stride[d];
          p3.pad[d] = c.padding[d];
          p3.dilation[d] = c.dilation[d];
        }
        p3.groups = c.groups;
        return kernels::Conv3d(out, in(0), in(1), ki.lib_ins.size() == 3 ? in(2) : TensorRef{},
                               p3);
      }
      kernels::ConvParams p;  // (H, W): the last two of the (T, H, W) attributes
      for (int d = 0; d < 2; ++d) {
        p.stride[d] = c.stride[d + 1];
        p.pad_begin[d] = c.padding[d + 1];
        p.pad_end[d] = c.padding_end[d + 1];
        p.dilation[d] = c.dilation[d + 1];
      }
      p.groups = c.groups;
      p.activation = ki.lib_act;
      if (ki.lib_act == kernels::ConvActivation::kClamp) {
        p.clamp_lo = static_cast<float>(ki.lib_lo);
        p.clamp_hi = static_cast<float>(ki.lib_hi);
      }
      // A 1-D convolution (rank 3, Note in graph.cc's NodeCheck::Conv) is 2-D with H = 1.
      const TensorRef x = WithUnitH(in(0)), w = WithUnitH(in(1)), o = WithUnitH(out);
      const size_t conv_ins = ki.lib_ins.size() - static_cast<size_t>(ki.lib_bn_inputs);
      const TensorRef bias = conv_ins == 3 ? in(2) : TensorRef{};
      kernels::ConvBatchNorm bn;
      if (ki.lib_bn_inputs > 0) {
        bn.mean = in(conv_ins);
        bn.var = in(conv_ins + 1);
        if (ki.lib_bn_inputs == 4) {
          bn.weight = in(conv_ins + 2);
          bn.bias = in(conv_ins + 3);
        }
        bn.eps = ki.lib_eps;
      }
      // The worker's own workspace, kept across calls: no allocation per launch.
      // Cache-line aligned as the allocator's blocks are (a vector's 16-byte
      // alignment split the depthwise rows' vectors: 15 % slower).
      constexpr size_t kAlignFloats = 16;
      static thread_local std::vector<float> scratch;
      const size_t floats = kernels::ConvWorkspaceBytes(o, x, w, p) / sizeof(float) + 1;
      if (scratch.size() < floats + kAlignFloats) scratch.resize(floats + kAlignFloats);
      const uintptr_t at = reinterpret_cast<uintptr_t>(scratch.data());
      const size_t skip = ((64 - at % 64) % 64) / sizeof(float);
      TensorRef ws;
      ws.data = scratch.data() + skip;
      ws.ndim = 1;
      ws.sizes[0] = static_cast<int64_t>(scratch.size() - skip);
      ws.strides[0] = 1;
      return kernels::Conv2d(o, x, w, bias, p, ws, ki.lib_bn_inputs > 0 ? &bn : nullptr);
    }
    default: break;
  }
  const kernels::BinaryOp op = BinaryOf(ki.lib_op);
  if (ki.lib_has_scalar) {
    // add/sub(x, s, alpha) = x +- alpha * s (rsub is lowered only with alpha 1).
    const bool scaled = (ki.lib_op == Op::kAdd || ki.lib_op == Op::kSub) && !ki.lib_scalar_first;
    const double s = scaled ? ki.lib_scalar * ki.lib_alpha : ki.lib_scalar;
    return kernels::BinaryScalar(op, out, Expand(in(0), out), s, ki.lib_scalar_first);
  }
  return kernels::Binary(op, out, Expand(in(0), out), Expand(in(1), out), ki.lib_alpha);
}

Status RunLibrary(const KernelImpl& ki, const std::vector<void*>& base) {
  const bool reduction = ki.lib_op == Op::kSum || ki.lib_op == Op::kMean ||
                         ki.lib_op == Op::kAmax || ki.lib_op == Op::kAmin;
  if (!reduction && ki.lib_op != Op::kSoftmax && ki.lib_op != Op::kLogSoftmax) {
    return RunLibraryOp(ki, base);
  }
  const TensorRef in = BindOrNull(ki.lib_ins[0], base);
  TensorRef out = BindOrNull(ki.lib_out, base);
  if (ki.lib_op == Op::kSoftmax || ki.lib_op == Op::kLogSoftmax) {
    return kernels::Softmax(out, in, static_cast<int>(ki.lib_dims[0]),
                            ki.lib_op == Op::kLogSoftmax);
  }
  // Reduce wants the keepdim layout: reduced dims of size 1, stride 0.
  uint32_t mask = 0;
  for (int64_t d : ki.lib_dims) mask |= 1u << d;
  if (ki.lib_dims.empty()) mask = (1u << in.ndim) - 1;
  TensorRef keep = out;
  keep.ndim = in.ndim;
  const bool keepdim = out.ndim == in.ndim;
  for (int d = 0, o = 0; d < in.ndim; ++d) {
    if (mask & (1u << d)) {
      keep.sizes[d] = 1;
      keep.strides[d] = 0;
      if (keepdim) ++o;
    } else {
      keep.sizes[d] = out.sizes[o];
      keep.strides[d] = out.strides[o];
      ++o;
    }
  }
  kernels::ReduceOp op = kernels::ReduceOp::kSum;
  if (ki.lib_op == Op::kMean) op = kernels::ReduceOp::kMean;
  if (ki.lib_op == Op::kAmax) op = kernels::ReduceOp::kAmax;
  if (ki.lib_op == Op::kAmin) op = kernels::ReduceOp::kAmin;
  return kernels::Reduce(op, keep, in, mask);
}

}  // namespace

int Program::GemmWeightInput(int k) const {
  TRN_ASSERT(impl_ != nullptr && k >= 0 && static_cast<size_t>(k) < impl_->kernels.size(),
             "GemmWeightInput: kernel index out of range");
  const KernelImpl& ki = impl_->kernels[k];
  if (ki.kind != KernelImpl::Kind::kMatmul || ki.gemm.b.buffer < 0 || ki.gemm.b.sizes.size() != 2) {
    return -1;
  }
  const Buffer& b = buffers_[ki.gemm.b.buffer];
  return b.kind == Buffer::Kind::kInput ? b.index : -1;
}

TensorRef Program::GemmB(int k, const std::vector<void*>& buffer_base) const {
  return BindOrNull(impl_->kernels[k].gemm.b, buffer_base);
}

Status Program::RunKernel(int k, const std::vector<void*>& buffer_base,
                          kernels::PackedB* packed_b) const {
  TRN_ASSERT(impl_ != nullptr && k >= 0 && static_cast<size_t>(k) < impl_->kernels.size(),
             "RunKernel: kernel index out of range");
  TRN_ASSERT(buffer_base.size() == buffers_.size(), "RunKernel: one base pointer per buffer");
  const KernelImpl& ki = impl_->kernels[k];
  switch (ki.kind) {
    case KernelImpl::Kind::kRows:
      internal::RunRows(ki.prog, buffer_base, nullptr, 0, ki.prog.rows);
      return Status::Ok();
    case KernelImpl::Kind::kCopy:
      return kernels::Copy(BindOrNull(ki.copy_out, buffer_base),
                           BindOrNull(ki.copy_in, buffer_base));
    case KernelImpl::Kind::kLibrary: return RunLibrary(ki, buffer_base);
    case KernelImpl::Kind::kMatmul:
      if (ki.has_epilogue) return RunMatmulEpilogue(ki, buffer_base, packed_b);
      return kernels::Matmul(BindOrNull(ki.gemm.out, buffer_base),
                             BindOrNull(ki.gemm.a, buffer_base),
                             BindOrNull(ki.gemm.b, buffer_base),
                             BindOrNull(ki.gemm.bias, buffer_base), ki.gemm.alpha, ki.gemm.beta,
                             packed_b);
  }
  return Status::Ok();
}

// ---- artifact and report --------------------------------------------------------------
namespace {

std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string ViewJson(const View& v) {
  return fmt::format(R"({{"buffer": {}, "dtype": "{}", "sizes": [{}], "strides": [{}], "offset": {}}})",
                     v.buffer, DTypeName(v.dtype), fmt::join(v.sizes, ", "),
                     fmt::join(v.strides, ", "), v.offset);
}

std::string ViewsJson(const std::vector<View>& vs) {
  std::vector<std::string> parts;
  for (const View& v : vs) parts.push_back(ViewJson(v));
  return fmt::format("[{}]", fmt::join(parts, ", "));
}

const char* BufferKindName(Buffer::Kind k) {
  switch (k) {
    case Buffer::Kind::kInput: return "input";
    case Buffer::Kind::kOutput: return "output";
    case Buffer::Kind::kTemp: return "temp";
  }
  return "?";
}

std::string Shape(const std::vector<int64_t>& s) { return fmt::format("[{}]", fmt::join(s, ",")); }

}  // namespace

std::string Program::ToJson() const {
  std::string j = "{\n";
  j += R"(  "format": "trnscope.program",)" "\n";
  j += R"(  "version": 1,)" "\n";
  j += fmt::format("  \"graph_hash\": \"{:016x}\",\n", graph_hash_);
  j += "  \"buffers\": [";
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    j += fmt::format(R"({}{{"id": {}, "kind": "{}", "index": {}, "dtype": "{}", "numel": {}}})",
                     i ? ",\n    " : "\n    ", i, BufferKindName(b.kind), b.index,
                     DTypeName(b.dtype), b.numel);
  }
  j += "\n  ],\n";
  j += fmt::format("  \"inputs\": {},\n", ViewsJson(input_views_));
  j += fmt::format("  \"outputs\": {},\n", ViewsJson(output_views_));
  j += "  \"steps\": [";
  for (size_t i = 0; i < steps_.size(); ++i) {
    j += fmt::format(R"({}{{"kind": "{}", "index": {}}})", i ? ", " : "",
                     steps_[i].kind == Step::Kind::kKernel ? "kernel" : "eager", steps_[i].index);
  }
  j += "],\n  \"kernels\": [";
  for (size_t i = 0; i < kernels_.size(); ++i) {
    const KernelSummary& k = kernels_[i];
    std::vector<std::string> ops;
    for (const std::string& a : k.aten_ops) ops.push_back(Quote(a));
    const KernelImpl* ki = impl_ ? &impl_->kernels[i] : nullptr;
    j += fmt::format(
        "{}{{\"id\": {}, \"name\": {}, \"op\": {}, \"engine\": \"{}\", \"aten_ops\": [{}], "
        "\"flops\": {}, \"bytes_read\": {}, \"bytes_written\": {}, \"reads\": {}, "
        "\"writes\": {}}}",
        i ? ",\n    " : "\n    ", i, Quote(k.name), Quote(k.info.op), rt::EngineName(k.info.engine),
        fmt::join(ops, ", "), k.info.flops, k.info.bytes_read, k.info.bytes_written,
        ki ? ViewsJson(ki->reads) : "[]", ki ? ViewsJson(ki->writes) : "[]");
  }
  j += "\n  ],\n  \"eager\": [";
  for (size_t i = 0; i < eager_.size(); ++i) {
    const EagerStep& e = eager_[i];
    j += fmt::format(
        R"({}{{"id": {}, "node": {}, "target": {}, "reason": {}, "inputs": {}, "output": {}}})",
        i ? ",\n    " : "\n    ", i, e.node, Quote(e.target), Quote(e.reason),
        ViewsJson(e.inputs), ViewJson(e.output));
  }
  j += eager_.empty() ? "]\n}\n" : "\n  ]\n}\n";
  return j;
}

std::string Program::Report() const {
  std::string r = fmt::format("trn compiled program {:016x}: {} kernel(s), {} eager step(s)\n",
                              graph_hash_, kernels_.size(), eager_.size());
  for (const Step& st : steps_) {
    if (st.kind == Step::Kind::kKernel) {
      const KernelSummary& k = kernels_[st.index];
      const KernelImpl* ki = impl_ ? &impl_->kernels[st.index] : nullptr;
      std::string shape;
      if (ki && !ki->writes.empty()) shape = " -> " + Shape(ki->writes[0].sizes);
      r += fmt::format("  kernel {:3d} {}{} [{}] covers {}: {} FLOPs, {} bytes read, {} written\n",
                       st.index, k.name, shape, rt::EngineName(k.info.engine),
                       fmt::join(k.aten_ops, " "), k.info.flops, k.info.bytes_read,
                       k.info.bytes_written);
    } else {
      const EagerStep& e = eager_[st.index];
      r += fmt::format("  eager  {:3d} node {} {} (fallback: runs as an eager trn op{}{})\n",
                       st.index, e.node, e.target, e.reason.empty() ? "" : ": ", e.reason);
    }
  }
  if (!eager_.empty()) {
    r += "eager (fallback) nodes:";
    for (const EagerStep& e : eager_) r += fmt::format(" {} (node {})", e.target, e.node);
    r += "\n";
  }
  return r;
}

}  // namespace trn::compiler
