// Pass 5, lower: each group becomes a kernel (a row program, a matmul with
// an optional epilogue, a copy, a library kernel) with its summary (name,
// covered aten ops, FLOPs, bytes), or an eager step.
#include <fmt/format.h>

#include <limits>
#include <string>
#include <vector>

#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {
namespace {

uint64_t RealBytes(const View& v) {
  uint64_t n = 1;
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 0) return 0;
    if (v.strides[d] != 0) n *= static_cast<uint64_t>(v.sizes[d]);
  }
  return n * ItemSize(v.dtype);
}

std::string ShortName(const Node& n) {  // "aten.mul.Tensor" -> "mul"
  std::string t = n.target;
  if (t.empty() || n.op == Op::kRotateHalf) return OpName(n.op);
  for (const char* prefix : {"aten::", "aten.", "prims::", "prims."}) {
    if (t.rfind(prefix, 0) == 0) {
      t = t.substr(std::string(prefix).size());
      break;
    }
  }
  const size_t dot = t.find('.');
  return dot == std::string::npos ? t : t.substr(0, dot);
}

std::string AtenName(const Node& n) {  // "aten.mul.Tensor" -> "aten::mul.Tensor"
  if (n.target.empty()) return std::string("aten::") + OpName(n.op);
  std::string t = n.target;
  if (t.rfind("aten.", 0) == 0) t = "aten::" + t.substr(5);
  if (t.rfind("prims.", 0) == 0) t = "prims::" + t.substr(6);
  return t;
}

// Note [Lone nodes]: a row group that is one node eager runs as one library
// kernel runs that kernel: nothing is fused, and the row interpreter pays per
// row and per instruction where the library kernel does not.
//  - A same-dtype copy (a clone, a one-input cat: the KV cache's transpose of
//    [B, S, H, D] to [B, H, S, D]) is kernels::Copy, a memmove per contiguous
//    run; the interpreter copied each 32-float run into a chunk register and
//    again out, 1.55x eager's time (10.3 vs 6.6 us for [2, 8, 64, 32]).
//  - A reduction (sum, mean, amax, amin) or softmax is the library kernel:
//    in one process the interpreter took 1.4-3.2x eager's time (mean over
//    [2, 1280, 3, 3]'s last two dims, MobileNetV2's pooling: 140 vs 44 us;
//    softmax over [2, 8, 64, 64]: 182 vs 57 us; [64, 4096]: 1.4x).
Group::Kind LoneKind(const KernelGraph& ir, const Group& g) {
  if (g.kind != Group::Kind::kRows || g.nodes.size() != 1) return g.kind;
  const int id = g.nodes[0];
  const Node& n = ir.N(id);
  if (n.inputs.empty()) return g.kind;
  const View& in = ir.vals[n.inputs[0]].view;
  const View& out = ir.vals[id].view;
  if (!ir.vals[id].materialized || in.buffer < 0 || out.buffer < 0 || in.dtype != out.dtype) {
    return g.kind;
  }
  if (n.op == Op::kClone || (n.op == Op::kCat && n.inputs.size() == 1)) {
    return in.sizes == out.sizes ? Group::Kind::kCopy : g.kind;
  }
  const bool library = IsReductionOp(n.op) || IsSoftmaxOp(n.op);
  return library && IsFloating(in.dtype) ? Group::Kind::kLibrary : g.kind;
}

// Why a core op runs as an eager step instead (the frontend reports it).
std::string EagerReason(const KernelGraph& ir, const Node& n) {
  if (n.op == Op::kEager) return "";
  std::string dtypes = DTypeName(n.meta.dtype);
  for (int v : n.inputs) {
    dtypes += std::string(v == n.inputs[0] ? " from " : ", ") + DTypeName(ir.N(v).meta.dtype);
  }
  if (IsMatmulOp(n.op)) {
    for (int v : n.inputs) {
      if (ir.IsConst(v)) return "a matmul operand is a constant";
    }
    return std::string("the compiled GEMM takes one floating dtype, got ") + dtypes;
  }
  return std::string("fused kernels compute floating/bool values, got ") + dtypes;
}

KernelImpl LowerKernel(const KernelGraph& ir, const std::vector<Buffer>& buffers, const Group& g,
                       KernelSummary& sum) {
  KernelImpl ki;
  std::vector<std::string> shorts;
  uint64_t flops = 0;
  for (int id : g.nodes) {
    const Node& n = ir.N(id);
    // rotate_half is the cat it was made from and that cat's neg (Note [Rotate half]).
    if (n.op == Op::kRotateHalf) sum.aten_ops.push_back("aten::neg.default");
    sum.aten_ops.push_back(AtenName(n));
    shorts.push_back(ShortName(n));
    const uint64_t out_n = static_cast<uint64_t>(Numel(n.meta.sizes));
    if (IsMatmulOp(n.op)) {
      const Sizes& a = ir.N(n.inputs[n.op == Op::kAddmm ? 1 : 0]).meta.sizes;
      flops += 2 * out_n * static_cast<uint64_t>(a.back()) + (n.op == Op::kAddmm ? out_n : 0);
    } else if (IsReductionOp(n.op)) {
      flops += static_cast<uint64_t>(Numel(ir.N(n.inputs[0]).meta.sizes));
    } else if (IsSoftmaxOp(n.op)) {
      flops += 5 * out_n;
    } else if (n.op == Op::kConvTranspose) {  // every input element meets Cout/groups x taps
      const Sizes& w = ir.N(n.inputs[1]).meta.sizes;  // [Cin, Cout/groups, (kh,) kw]
      flops += 2 * static_cast<uint64_t>(Numel(ir.N(n.inputs[0]).meta.sizes)) *
               static_cast<uint64_t>(Numel(w) / w[0]);
    } else if (n.op == Op::kConv) {
      const Sizes& w = ir.N(n.inputs[1]).meta.sizes;  // [O, I/groups, (kh,) kw]
      flops += 2 * out_n * static_cast<uint64_t>(Numel(w) / w[0]);
    } else if (n.op == Op::kSdpa) {  // q k^T and p v per (query, key) pair
      const Sizes& q = ir.N(n.inputs[0]).meta.sizes;
      const Sizes& k = ir.N(n.inputs[1]).meta.sizes;
      const Sizes& v = ir.N(n.inputs[2]).meta.sizes;
      uint64_t pairs = static_cast<uint64_t>(q[0] * q[1] * q[2] * k[2]);
      if (n.causal) pairs /= 2;
      flops += 2 * pairs * static_cast<uint64_t>(q[3] + v[3]);
    } else if (n.op == Op::kSolveTriangular) {  // n^2 k / 2 multiply-adds per matrix
      flops += out_n * static_cast<uint64_t>(n.meta.sizes[n.meta.sizes.size() - 2]);
    } else if (n.op != Op::kView && n.op != Op::kClone && n.op != Op::kCast &&
               n.op != Op::kCat && n.op != Op::kEmbedding && n.op != Op::kGather && n.op != Op::kScatter &&
               n.op != Op::kFft && n.op != Op::kComplex && n.op != Op::kIm2Col &&
               n.op != Op::kIndexSelect &&
               n.op != Op::kIndex && n.op != Op::kPad && n.op != Op::kSliceScatter) {
      flops += out_n;
    }
  }
  const std::string name = shorts.size() == 1
                               ? shorts[0]
                               : fmt::format("fused[{}]", fmt::join(shorts, ","));
  sum.name = Intern(name);
  sum.info.name = sum.name;
  // The first covered aten op; a leading rotate_half covers a neg first (not an aten op itself).
  sum.info.op = Intern("aten::" + (ir.N(g.nodes[0]).op == Op::kRotateHalf ? "neg" : shorts[0]));
  sum.info.flops = flops;
  sum.info.engine = g.kind == Group::Kind::kMatmul ? rt::Engine::kTensor : rt::Engine::kVector;
  const int first = g.nodes[0];
  switch (LoneKind(ir, g)) {  // Note [Lone nodes]
    case Group::Kind::kCopy: {  // a kClone + view's copy (Note [Views]) or a lone copy
      ki.kind = KernelImpl::Kind::kCopy;
      const int src = ir.N(first).inputs[0];
      ki.copy_in = ir.vals[src].view;
      ki.copy_out = ir.vals[first].view;
      if (g.kind == Group::Kind::kCopy) {  // contiguous, src's element order
        ki.copy_out.sizes = ir.vals[src].view.sizes;
        ki.copy_out.strides = ContiguousStrides(ki.copy_out.sizes);
      }
      ki.reads = {ki.copy_in};
      ki.writes = {ki.copy_out};
      break;
    }
    case Group::Kind::kLibrary: {
      const Node& n = ir.N(first);
      ki.kind = KernelImpl::Kind::kLibrary;
      ki.lib_op = n.op;
      ki.lib_dims = n.dims;
      for (int v : n.inputs) ki.lib_ins.push_back(ir.vals[v].view);
      ki.lib_out = ir.vals[g.nodes.back()].view;  // a joined epilogue writes the result
      ki.lib_causal = n.causal;
      ki.lib_conv = n.conv;
      ki.lib_pool = n.pool;
      ki.lib_scalar = n.scalar;
      ki.lib_alpha = n.alpha;
      ki.lib_eps = n.eps;
      ki.lib_has_scalar = n.has_scalar;
      ki.lib_scalar_first = n.scalar_first;
      ki.lib_lo = -std::numeric_limits<double>::infinity();
      ki.lib_hi = std::numeric_limits<double>::infinity();
      for (size_t i = 1; i < g.nodes.size(); ++i) {  // Note [Conv epilogue]
        const Node& e = ir.N(g.nodes[i]);
        if (e.op == Op::kBatchNorm) {
          for (size_t j = 1; j < e.inputs.size(); ++j) ki.lib_ins.push_back(ir.vals[e.inputs[j]].view);
          ki.lib_bn_inputs = static_cast<int>(e.inputs.size()) - 1;
          ki.lib_eps = e.eps;
          continue;
        }
        if (e.op == Op::kGelu || e.op == Op::kSilu) {
          ki.lib_act = e.op == Op::kGelu ? kernels::ConvActivation::kGelu
                                         : kernels::ConvActivation::kSilu;
          continue;
        }
        ki.lib_act = kernels::ConvActivation::kClamp;
        if (e.op == Op::kRelu) ki.lib_lo = 0;
        if (e.op == Op::kMaximum) ki.lib_lo = e.scalar;
        if (e.op == Op::kMinimum) ki.lib_hi = e.scalar;
      }
      ki.reads = ki.lib_ins;
      ki.writes = {ki.lib_out};
      break;
    }
    case Group::Kind::kMatmul: {
      ki.kind = KernelImpl::Kind::kMatmul;
      const Node& mm = ir.N(first);
      const size_t a0 = mm.op == Op::kAddmm ? 1 : 0;
      ki.gemm.a = ir.vals[mm.inputs[a0]].view;
      ki.gemm.b = ir.vals[mm.inputs[a0 + 1]].view;
      ki.reads = {ki.gemm.a, ki.gemm.b};
      if (mm.op == Op::kAddmm) {
        ki.gemm.bias = ir.vals[mm.inputs[0]].view;
        ki.gemm.alpha = mm.alpha;
        ki.gemm.beta = mm.beta;
        ki.reads.push_back(ki.gemm.bias);
      }
      ki.gemm.out = ir.vals[first].view;
      if (!ir.vals[first].materialized) ki.gemm.out.buffer = -1;
      ki.has_epilogue = g.nodes.size() > 1;
      if (ki.has_epilogue) {
        LowerRows(ir, buffers, g, ki);
      } else {
        ki.writes = {ki.gemm.out};
      }
      break;
    }
    case Group::Kind::kRows: LowerRows(ir, buffers, g, ki); break;
    case Group::Kind::kEager: break;
  }
  for (const View& v : ki.reads) sum.info.bytes_read += RealBytes(v);
  for (const View& v : ki.writes) sum.info.bytes_written += RealBytes(v);
  return ki;
}

}  // namespace

std::vector<Step> Lower(const KernelGraph& ir, const std::vector<Buffer>& buffers,
                        std::vector<KernelSummary>* kernels, std::vector<KernelImpl>* impls,
                        std::vector<EagerStep>* eager) {
  std::vector<Step> step_of(ir.groups.size());
  for (size_t gi = 0; gi < ir.groups.size(); ++gi) {
    const Group& g = ir.groups[gi];
    Step st;
    if (g.kind == Group::Kind::kEager) {
      const int id = g.nodes[0];
      EagerStep e;
      e.node = id;
      e.target = ir.N(id).target;
      for (int v : ir.N(id).inputs) e.inputs.push_back(ir.vals[v].view);
      e.output = ir.vals[id].view;
      e.reason = EagerReason(ir, ir.N(id));
      st.kind = Step::Kind::kEager;
      st.index = static_cast<int>(eager->size());
      eager->push_back(std::move(e));
    } else {
      KernelSummary sum;
      impls->push_back(LowerKernel(ir, buffers, g, sum));
      st.kind = Step::Kind::kKernel;
      st.index = static_cast<int>(kernels->size());
      kernels->push_back(std::move(sum));
    }
    step_of[gi] = st;
  }
  return step_of;
}

}  // namespace trn::compiler::internal
