// Pass 2, fuse: in graph order, each live value gets its layout (Note
// [Views]) and joins a kernel group (Note [Fusion groups]): a fused row
// kernel, a matmul with an elementwise epilogue, a copy, a library kernel
// (Note [Library kernels]) or an eager step (Note [Eager nodes]).
//
// Note [Views]
// A kView's meta is what the FakeTensor says: sizes, strides and storage
// offset in the storage of its source. Every materialized value is stored
// exactly as its meta says (dense strides kept, otherwise contiguous), and a
// graph input's buffer base is the input's data pointer (its storage offset
// is meta.storage_offset), so a view is just (root buffer, strides, offset -
// root offset): no copy. A view with no strides is a reshape of its source;
// when the source is not contiguous, or the view would address memory outside
// its root, the source is first copied to a contiguous buffer (kClone + view).
//
// Note [Fusion groups]
// A row group has a domain S (n dims) and k trailing reduced dims (0 while it
// is purely elementwise). Its values are full (sizes S) or per-row (S with the
// trailing k dims reduced, keepdim or not). A node joins the group of one of
// its inputs when its output is full or per-row, every in-group input fits
// (full, or per-row broadcast along the row), reductions are over exactly the
// trailing k dims, and no input it reads from memory depends on the group
// (that would be a cycle). Softmax over the last dim is a row group too. A
// matmul kernel is a group whose first value is the GEMM result (full over
// the output, or over a row-preserving reshape of it: Note [Epilogue through
// a reshape]; elementwise epilogue only).
#include <fmt/format.h>

#include <algorithm>
#include <set>
#include <stdexcept>

#include "core/common/error.h"
#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {
namespace {

// Dims are the trailing ones of an n-dim input: returns their count, or -1.
int TrailingDims(const std::vector<int64_t>& dims, int n) {
  if (dims.empty()) return n;  // a full reduction: one row
  std::vector<int64_t> d = dims;
  std::sort(d.begin(), d.end());
  for (size_t i = 0; i < d.size(); ++i) {
    if (d[i] != n - static_cast<int64_t>(d.size()) + static_cast<int64_t>(i)) return -1;
  }
  return static_cast<int>(d.size());
}

// One run of the pass over one KernelGraph.
class Fuser {
 public:
  explicit Fuser(KernelGraph& ir) : ir_(ir) {}
  void Run();

 private:
  void Place(int id);  // layout and group of one live node, in graph order
  bool Fusable(const Node& n) const;
  bool RunsAsLibrary(int id) const;
  bool JoinsConv(int id);
  bool FeedsReduction(int id, int depth) const;
  void ResolveView(int id);
  bool TryJoin(int id, int gi);
  void NewGroup(int id);
  void AddDeps(Group& g, int id);
  // Appends g as the group of node `id` alone and records its dependencies.
  void AddSingleNodeGroup(Group g, int id);
  void GiveConstantsKernels();

  KernelGraph& ir_;
  std::set<int> pending_;  // values waiting for their consumer (Note [Deferred leaves])
};

void Fuser::Run() {
  for (size_t id = 0; id < ir_.nodes.size(); ++id) {
    if (ir_.vals[id].live) Place(static_cast<int>(id));
  }
  for (int id : pending_) NewGroup(id);
  GiveConstantsKernels();
}

void Fuser::Place(int id) {
  const Node& n = ir_.N(id);
  Value& v = ir_.vals[id];
  v.root = id;
  v.view.dtype = n.meta.dtype;
  v.view.sizes = n.meta.sizes;
  const bool dense = !n.meta.strides.empty() && IsDense(n.meta.sizes, n.meta.strides);
  v.view.strides = dense ? n.meta.strides : ContiguousStrides(n.meta.sizes);
  // A functional copy's FakeTensor (aten.copy into a select: BART's
  // shift_tokens_right; lowered to a clone or cast, or an eager op) may be a
  // strided part of a larger storage that later views index by those strides;
  // its buffer keeps them, holes and all (Note [Functional copy] in backend.py).
  // So may a slice_scatter into such a part (Longformer's chunked attention
  // mask: select, then slice_scatter, then unsqueeze + expand of the result).
  const bool copies = n.op == Op::kEager || n.op == Op::kClone || n.op == Op::kCast ||
                      n.op == Op::kSliceScatter;
  const bool kept = dense || (copies && !n.meta.strides.empty() &&
                              IsNonOverlapping(n.meta.sizes, n.meta.strides));
  if (kept) v.view.strides = n.meta.strides;
  // The FakeTensor may also start past its storage's start (a slice_scatter into
  // the last row of a select: Longformer at other lengths); its views' offsets
  // count from there, as an input's do.
  v.root_offset = kept ? n.meta.storage_offset : 0;
  const bool fusable = n.op != Op::kView && n.op != Op::kEager && n.op != Op::kInput &&
                       n.op != Op::kConstant && !IsMatmulOp(n.op) && Fusable(n);
  if (!fusable || !ir_.options.fuse) {  // pending_ inputs are read from memory: give them kernels
    for (int in : n.inputs) {
      if (pending_.erase(in)) NewGroup(in);
    }
  }
  switch (n.op) {
    case Op::kInput:
      v.view.strides = n.meta.strides.empty() ? ContiguousStrides(n.meta.sizes) : n.meta.strides;
      v.root_offset = n.meta.storage_offset;
      return;
    case Op::kConstant: return;
    case Op::kView: ResolveView(id); return;
    case Op::kEager: {
      Group g;
      g.kind = Group::Kind::kEager;
      AddSingleNodeGroup(std::move(g), id);
      return;
    }
    default: break;
  }
  if (JoinsConv(id)) return;
  if (IsMatmulOp(n.op)) {
    bool ok = IsFloating(n.meta.dtype);
    for (int in : n.inputs) ok = ok && ir_.N(in).meta.dtype == n.meta.dtype && !ir_.IsConst(in);
    if (ok) {
      NewGroup(id);
      return;
    }
  } else if (fusable) {
    bool joined = false;
    if (ir_.options.fuse) {
      auto candidates = [&] {
        std::vector<int> cands;
        for (int in : n.inputs) {
          if (!ir_.IsConst(in) && !ir_.vals[in].is_view && ir_.IsComputed(in) &&
              ir_.group_of[in] >= 0) {
            cands.push_back(ir_.group_of[in]);
          }
          const int gemm = ir_.GemmRowsOf(in);  // Note [Epilogue through a reshape]
          if (gemm >= 0 && ir_.group_of[gemm] >= 0) cands.push_back(ir_.group_of[gemm]);
        }
        std::sort(cands.rbegin(), cands.rend());
        return cands;
      };
      // Note [Deferred leaves]: an elementwise node reading only memory (a
      // cast of an input, x * w) waits for its single consumer and joins the
      // consumer's group instead of becoming a kernel of its own. So does one
      // whose inputs' groups did not take it (rotary q * cos: cos is a small
      // table's kernel, q a view of the projection).
      int live_users = 0;
      for (int u : v.users) live_users += ir_.vals[u].live;
      const bool deferrable = !IsReductionOp(n.op) && !IsSoftmaxOp(n.op) && live_users == 1 &&
                              !ir_.IsOutput(id);
      const bool leaf = candidates().empty() &&
                        std::none_of(n.inputs.begin(), n.inputs.end(),
                                     [&](int in) { return pending_.count(in) > 0; });
      if (leaf && deferrable) {
        pending_.insert(id);
        return;
      }
      for (int in : n.inputs) {
        if (!pending_.erase(in)) continue;
        bool placed = false;
        for (int gi : candidates()) {
          if (TryJoin(in, gi)) {
            placed = true;
            break;
          }
        }
        if (!placed) NewGroup(in);
      }
      for (int gi : candidates()) {
        if (TryJoin(id, gi)) {
          joined = true;
          break;
        }
      }
      if (!joined && deferrable) {
        pending_.insert(id);
        return;
      }
    }
    if (!joined) NewGroup(id);
    return;
  }
  Group g;
  // One core kernel (Note [Library kernels]), or else an eager trn op (Note [Eager nodes]).
  g.kind = RunsAsLibrary(id) ? Group::Kind::kLibrary : Group::Kind::kEager;
  AddSingleNodeGroup(std::move(g), id);
}

void Fuser::GiveConstantsKernels() {
  // Constants something must read from memory get a fill kernel.
  for (size_t i = 0; i < ir_.nodes.size(); ++i) {
    const int id = static_cast<int>(i);
    if (!ir_.vals[i].live || ir_.nodes[i].op != Op::kConstant) continue;
    bool needs_memory = ir_.IsOutput(id);
    for (int u : ir_.vals[i].users) {
      if (!ir_.vals[u].live) continue;
      const Op op = ir_.nodes[u].op;
      needs_memory = needs_memory || op == Op::kEager || op == Op::kView ||
                     IsMatmulOp(op) || ir_.group_of[u] < 0 ||
                     ir_.groups[ir_.group_of[u]].kind == Group::Kind::kEager ||
                     ir_.groups[ir_.group_of[u]].kind == Group::Kind::kLibrary;
    }
    if (!needs_memory) continue;
    Group g;
    g.S = ir_.nodes[i].meta.sizes;
    g.nodes = {id};
    g.row[id] = false;
    ir_.groups.push_back(g);
    ir_.group_of[id] = static_cast<int>(ir_.groups.size()) - 1;
  }
}

// Float (or bool) math the f32 interpreter computes exactly as torch does;
// int arithmetic goes to eager trn ops.
bool Fuser::Fusable(const Node& n) const {
  if (IsLibraryOp(n.op)) return false;
  auto fb = [](DType d) { return IsFloating(d) || d == DType::kBool; };
  if (n.op == Op::kCast) {
    const DType in = ir_.N(n.inputs[0]).meta.dtype, out = n.meta.dtype;
    return fb(in) || IsFloating(out) || (in == out);
  }
  if (!fb(n.meta.dtype)) return false;
  // Integer operands of a floating elementwise op are widened as they load:
  // torch casts them to the floating result type first (SegFormer's x - an
  // int64 index, BLOOM's alibi pow).
  bool floating_in = false;
  for (int v : n.inputs) floating_in = floating_in || IsFloating(ir_.N(v).meta.dtype);
  const bool widens =
      (floating_in || IsFloating(n.meta.dtype)) && (IsBinaryOp(n.op) || n.op == Op::kWhere);
  for (int v : n.inputs) {
    if (!fb(ir_.N(v).meta.dtype) && !widens) return false;
  }
  if (IsReductionOp(n.op) || IsSoftmaxOp(n.op)) return IsFloating(ir_.N(n.inputs[0]).meta.dtype);
  return true;
}

// Note [Library kernels]: a node the row interpreter does not take (a
// library op such as cat, or integer math, which the f32 interpreter would
// round) still runs inside the program as one core kernel over its own
// dtypes, instead of an eager step (a Python round trip per call). Only
// dtype combinations the core kernels define qualify; the rest is eager.
bool Fuser::RunsAsLibrary(int id) const {
  const Node& n = ir_.N(id);
  const DType out = n.meta.dtype;
  auto in = [&](size_t i) { return ir_.N(n.inputs[i]).meta.dtype; };
  auto all_inputs = [&](DType d) {
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (in(i) != d) return false;
    }
    return true;
  };
  switch (n.op) {
    case Op::kCat: return all_inputs(out);
    case Op::kLogicalAnd:
    case Op::kLogicalOr: return out == DType::kBool && in(0) == in(1);
    case Op::kLogicalNot: return out == DType::kBool;
    case Op::kEmbedding:
      return in(0) == out && (in(1) == DType::kInt32 || in(1) == DType::kInt64) &&
             IsContiguous(ir_.vals[n.inputs[1]].view.sizes, ir_.vals[n.inputs[1]].view.strides) &&
             IsContiguous(ir_.vals[id].view.sizes, ir_.vals[id].view.strides);
    case Op::kCast:
    case Op::kClone: return true;
    case Op::kSdpa:
      return IsFloating(out) && in(0) == out && in(1) == out && in(2) == out &&
             (n.inputs.size() == 3 || in(3) == DType::kBool || IsFloating(in(3)));
    case Op::kConv:
      return IsFloating(out) && in(0) == out && in(1) == out &&
             (n.inputs.size() == 2 || IsFloating(in(2)));
    case Op::kMath: return IsFloating(out) && in(0) == out;
    case Op::kComplex:
    case Op::kFft: return out == DType::kFloat32 && all_inputs(DType::kFloat32);
    case Op::kConvTranspose:  // one dtype, bias included (as the eager op)
      return IsFloating(out) && all_inputs(out);
    case Op::kLayerNorm: return IsFloating(out) && all_inputs(out);
    case Op::kGroupNorm: {  // kernels::GroupNorm walks contiguous groups
      bool ok = IsFloating(out) && in(0) == out &&
                IsContiguous(ir_.vals[n.inputs[0]].view.sizes, ir_.vals[n.inputs[0]].view.strides) &&
                IsContiguous(ir_.vals[id].view.sizes, ir_.vals[id].view.strides);
      for (size_t i = 1; i < n.inputs.size(); ++i) ok = ok && IsFloating(in(i));
      return ok;
    }
    case Op::kBatchNorm: {
      bool ok = IsFloating(out) && in(0) == out;
      for (size_t i = 1; i < n.inputs.size(); ++i) ok = ok && IsFloating(in(i));
      return ok;
    }
    case Op::kMaxPool2d:
    case Op::kAvgPool2d:
    case Op::kAdaptiveAvgPool2d:
    case Op::kIm2Col:
    case Op::kCol2Im: return IsFloating(out) && in(0) == out;
    case Op::kIndexPut: {  // self, indices..., values
      bool ok = in(0) == out && in(n.inputs.size() - 1) == out;
      for (size_t i = 1; i + 1 < n.inputs.size(); ++i) {
        ok = ok && (in(i) == DType::kInt32 || in(i) == DType::kInt64);
      }
      return ok;
    }
    case Op::kArange: return out != DType::kBool;
    case Op::kGather: return in(0) == out && in(1) == DType::kInt64;
    case Op::kScatter:
      return in(0) == out && in(1) == DType::kInt64 && (n.inputs.size() == 2 || in(2) == out);
    case Op::kIndexSelect:
      return in(0) == out && (in(1) == DType::kInt32 || in(1) == DType::kInt64);
    case Op::kIndex: {
      bool ok = in(0) == out;
      for (size_t i = 1; i < n.inputs.size(); ++i) {
        ok = ok && (in(i) == DType::kInt32 || in(i) == DType::kInt64);
      }
      return ok;
    }
    case Op::kCumsum: return in(0) == out && out != DType::kBool;
    case Op::kTopk: return out == DType::kInt64 && in(0) != DType::kBool;
    case Op::kSort: return out == DType::kInt64;
    case Op::kHistc: return in(0) == out && out != DType::kBool;
    case Op::kFlip: return in(0) == out;
    case Op::kSolveTriangular: return IsFloating(out) && in(0) == out && in(1) == out;
    case Op::kLogcumsumexp: return IsFloating(out) && in(0) == out;
    case Op::kCummax:
    case Op::kCummin: return out == DType::kInt64;
    case Op::kArgmax:
    case Op::kArgmin: return out == DType::kInt64 && in(0) != DType::kBool;
    case Op::kPad: return in(0) == out;
    case Op::kSliceScatter: return in(0) == out && in(1) == out;
    case Op::kDivTrunc:
    case Op::kDivFloor:
    case Op::kRemainder:
    case Op::kFmod:
      return out != DType::kBool && all_inputs(out);
    // Integer and bool reductions (mBART's mask.sum(), int64 position maxima):
    // the core's Reduce kernel sums them in int64, as torch.
    case Op::kSum: return !IsFloating(in(0)) && out == DType::kInt64;
    // bool: any / all (the frontend lowers them so only over a nonempty extent).
    case Op::kAmax:
    case Op::kAmin: return !IsFloating(in(0)) && in(0) == out;
    case Op::kWhere: return in(0) == DType::kBool && in(1) == out && in(2) == out;
    case Op::kNeg:
    case Op::kAbs:
    case Op::kRelu:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kTrunc:
    case Op::kRound:
    case Op::kSign: return in(0) == out && out != DType::kBool;
    default: break;
  }
  if (IsBinaryOp(n.op) && n.op != Op::kPow && n.op != Op::kDiv && !n.inputs.empty()) {
    const DType d = in(0);
    return all_inputs(d) && (out == d || (IsComparisonOp(n.op) && out == DType::kBool));
  }
  return false;
}

// A relu right after a convolution (its only user) becomes the
// convolution kernel's fused activation: the pre-activation never reaches memory.
// Note [Conv epilogue]: a convolution's library kernel takes what follows it
// in inference CNNs: one batch norm with running statistics (folded into the
// weights and bias), then relu, a clamp (maximum, then minimum, with number
// bounds: hardtanh / relu6), gelu (wav2vec2's and Whisper's feature convs) or
// silu (EfficientNet), each reading only the previous node's value.
bool Fuser::JoinsConv(int id) {
  const Node& n = ir_.N(id);
  if (!ir_.options.fuse || n.inputs.empty()) return false;
  const int c = n.inputs[0];
  const int gi = ir_.group_of[c];
  if (gi < 0 || ir_.groups[gi].kind != Group::Kind::kLibrary ||
      ir_.N(ir_.groups[gi].nodes[0]).op != Op::kConv || ir_.groups[gi].nodes.back() != c ||
      ir_.N(c).meta.dtype != n.meta.dtype || ir_.N(c).meta.sizes.size() == 5) {
    return false;  // kernels::Conv3d takes no epilogue
  }
  // What the group holds after the conv decides what may come next.
  bool has_bn = false, has_max = false, has_min = false, has_smooth = false;
  for (size_t i = 1; i < ir_.groups[gi].nodes.size(); ++i) {
    const Op op = ir_.N(ir_.groups[gi].nodes[i]).op;
    has_bn = has_bn || op == Op::kBatchNorm;
    has_max = has_max || op == Op::kRelu || op == Op::kMaximum;
    has_min = has_min || op == Op::kMinimum;
    has_smooth = has_smooth || op == Op::kGelu || op == Op::kSilu;
  }
  const bool has_act = has_max || has_min || has_smooth;
  const bool number = n.has_scalar && !n.scalar_first && n.inputs.size() == 1;
  bool joins = false;
  switch (n.op) {
    case Op::kBatchNorm: joins = !has_bn && !has_act && RunsAsLibrary(id); break;
    case Op::kRelu:
    case Op::kGelu:
    case Op::kSilu: joins = !has_act; break;
    case Op::kMaximum: joins = number && !has_act; break;
    case Op::kMinimum: joins = number && !has_min && !has_smooth; break;
    default: break;
  }
  if (!joins) return false;
  for (size_t i = 1; i < n.inputs.size(); ++i) {  // batch norm statistics: not the conv
    if (n.inputs[i] == c) return false;
  }
  int live_users = 0;
  for (int u : ir_.vals[c].users) live_users += ir_.vals[u].live;
  const auto& outs = ir_.graph->outputs();
  if (live_users != 1 || std::find(outs.begin(), outs.end(), c) != outs.end()) return false;
  ir_.groups[gi].nodes.push_back(id);
  ir_.group_of[id] = gi;
  return true;
}

// Whether a reduction or softmax reads `id`, directly or through up to
// `depth` elementwise ops.
bool Fuser::FeedsReduction(int id, int depth) const {
  for (int u : ir_.vals[id].users) {
    if (!ir_.vals[u].live) continue;
    const Op op = ir_.N(u).op;
    if (IsReductionOp(op) || IsSoftmaxOp(op)) return true;
    if (depth > 0 && op != Op::kView && op != Op::kEager && !IsMatmulOp(op) &&
        FeedsReduction(u, depth - 1)) {
      return true;
    }
  }
  return false;
}

void Fuser::ResolveView(int id) {
  const Node& n = ir_.N(id);
  Value& v = ir_.vals[id];
  const int src = n.inputs[0];
  const Value& s = ir_.vals[src];
  v.is_view = true;
  v.root = s.root;
  v.root_offset = s.root_offset;
  v.view.dtype = n.meta.dtype;
  v.view.sizes = n.meta.sizes;
  bool ok = true;
  if (!n.meta.strides.empty() || n.meta.sizes.empty()) {  // a 0-dim view has no strides
    v.view.strides = n.meta.strides;
    v.view.offset = n.meta.storage_offset - s.root_offset;
  } else {
    v.view.strides = ContiguousStrides(n.meta.sizes);
    v.view.offset = s.view.offset;
    ok = IsContiguous(s.view.sizes, s.view.strides) && Numel(s.view.sizes) == Numel(n.meta.sizes);
  }
  if (n.meta.dtype != ir_.N(src).meta.dtype) ok = false;
  // Inside the root's memory?
  const Value& r = ir_.vals[s.root];
  const int64_t root_extent = Extent(r.view.sizes, r.view.strides) + r.view.offset;
  if (ok && Numel(v.view.sizes) > 0) {
    ok = v.view.offset >= 0 && v.view.offset + Extent(v.view.sizes, v.view.strides) <= root_extent;
  }
  if (ok) return;
  // kClone + view (Note [Views]): copy the source to a contiguous buffer.
  if (Numel(n.meta.sizes) != Numel(ir_.N(src).meta.sizes) ||
      n.meta.dtype != ir_.N(src).meta.dtype) {
    FailNode(static_cast<size_t>(id), n,
             fmt::format("sizes/strides/offset do not describe memory of its source (value {})",
                         src));
  }
  v.clone_view = true;
  v.is_view = false;
  v.root = id;
  v.root_offset = 0;
  v.view.strides = ContiguousStrides(n.meta.sizes);
  v.view.offset = 0;
  Group g;
  g.kind = Group::Kind::kCopy;
  AddSingleNodeGroup(std::move(g), id);
}

void Fuser::AddSingleNodeGroup(Group g, int id) {
  g.nodes = {id};
  ir_.groups.push_back(std::move(g));
  ir_.group_of[id] = static_cast<int>(ir_.groups.size()) - 1;
  AddDeps(ir_.groups.back(), id);
}

void Fuser::AddDeps(Group& g, int id) {
  for (int v : ir_.N(id).inputs) {
    const int p = ir_.Producer(v);
    if (p >= 0 && p != ir_.group_of[id]) g.deps.insert(p);
  }
}

bool Fuser::TryJoin(int id, int gi) {
  Group& g = ir_.groups[gi];
  const Node& n = ir_.N(id);
  if (g.kind != Group::Kind::kRows && g.kind != Group::Kind::kMatmul) return false;
  const Sizes& O = n.meta.sizes;
  const bool red = IsReductionOp(n.op), smax = IsSoftmaxOp(n.op);
  if (g.kind == Group::Kind::kMatmul && (red || smax)) return false;
  // A value a reduction reads is better made by the reduction's row kernel
  // (which reads the GEMM result once) than stored by the epilogue and
  // re-read: rms_norm(x + mm) stays one row kernel.
  if (g.kind == Group::Kind::kMatmul && FeedsReduction(id, 4)) return false;
  // Inputs read from memory must not depend on this group.
  for (int v : n.inputs) {
    if (ir_.IsConst(v) || ir_.InGroup(v, gi) >= 0) continue;
    const int p = ir_.Producer(v);
    if (p == gi || ir_.DependsOn(p, gi)) return false;
  }
  auto in_group = [&](int v) { return ir_.InGroup(v, gi) >= 0; };
  // A GEMM alone takes the row domain of the first consumer that reads it
  // through a row-preserving view (Note [Epilogue through a reshape]).
  Sizes S = g.S;
  const bool via_view = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int v) {
    return ir_.vals[v].is_view && in_group(v);
  });
  if (via_view && g.nodes.size() == 1 && !SameUpToLeadingOnes(O, S) && !O.empty() &&
      !S.empty() && O.back() == S.back() && Numel(O) == Numel(S)) {
    S = O;
  }
  // rotate_half reads its input from memory, gathered (Note [Rotate half]).
  if (n.op == Op::kRotateHalf && (in_group(n.inputs[0]) || !SameUpToLeadingOnes(O, S))) {
    return false;
  }
  bool out_row = false;
  int new_k = g.k;
  if (red || smax) {
    const int x = n.inputs[0];
    if (ir_.N(x).meta.sizes != S) return false;
    if (in_group(x) && g.row.at(ir_.InGroup(x, gi))) return false;
    const int nd = static_cast<int>(S.size());
    const int k = smax ? (n.dims[0] == nd - 1 ? 1 : -1) : TrailingDims(n.dims, nd);
    if (k <= 0 || (g.k != 0 && g.k != k)) return false;
    new_k = k;
    out_row = red;
  } else {
    if (SameUpToLeadingOnes(O, S)) {
      out_row = false;
    } else if (g.k > 0 && (O == ir_.RowSizes(g, true) || O == ir_.RowSizes(g, false))) {
      out_row = true;
    } else {
      return false;
    }
    for (int v : n.inputs) {
      if (!in_group(v)) continue;
      const bool vrow = g.row.at(ir_.InGroup(v, gi));
      if (!out_row) {
        if (vrow && ir_.N(v).meta.sizes != ir_.RowSizes(g, true)) return false;
      } else {
        if (!vrow || ir_.N(v).meta.sizes != O) return false;
      }
    }
  }
  g.S = S;
  g.k = new_k;
  g.nodes.push_back(id);
  g.row[id] = out_row;
  ir_.group_of[id] = gi;
  AddDeps(g, id);
  return true;
}

void Fuser::NewGroup(int id) {
  const Node& n = ir_.N(id);
  Group g;
  if (IsMatmulOp(n.op)) {
    g.kind = Group::Kind::kMatmul;
    g.S = n.meta.sizes;
    g.row[id] = false;
  } else if (IsReductionOp(n.op) || IsSoftmaxOp(n.op)) {
    const Sizes& in = ir_.N(n.inputs[0]).meta.sizes;
    const int nd = static_cast<int>(in.size());
    const int k = IsSoftmaxOp(n.op) ? (nd > 0 && n.dims[0] == nd - 1 ? 1 : -1)
                                    : TrailingDims(n.dims, nd);
    if (k <= 0) {
      g.kind = Group::Kind::kLibrary;
    } else {
      g.S = in;
      g.k = k;
      g.row[id] = IsReductionOp(n.op);
    }
  } else {
    g.S = n.meta.sizes;
    g.row[id] = false;
  }
  AddSingleNodeGroup(std::move(g), id);
}

}  // namespace

void Fuse(KernelGraph& ir) { Fuser(ir).Run(); }

}  // namespace trn::compiler::internal
