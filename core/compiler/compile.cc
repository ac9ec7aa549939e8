// Compile(): graph IR -> Program. Passes, in order:
// 1. dead-code elimination (eager nodes are always kept);
// 2. views resolved to strided Views of their root's buffer (Note [Views]);
// 3. fusion into kernels (Note [Fusion groups]), matmuls with epilogues;
// 4. materialization: a value gets a buffer only when something outside its
//    kernel reads it or it is a graph output;
// 5. each kernel lowered to a row program (Note [Row programs]);
// 6. steps ordered topologically over kernel dependencies.
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
// the output, elementwise epilogue only).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <memory>
#include <set>
#include <stdexcept>

#include "core/common/assert.h"
#include "core/compiler/program.h"
#include "core/compiler/program_internal.h"

namespace trn::compiler {
using internal::Arg;
using internal::Instr;
using internal::KernelImpl;
using internal::Operand;
using internal::Phase;
using internal::RedOp;
using internal::RowProgram;
using internal::ScalarInstr;
using internal::VOp;

namespace {

// Outputs at least this large are streamed past the cache (as rms_norm does).
constexpr uint64_t kStreamBytes = uint64_t{64} << 20;
// Elementwise rows shorter than this take the next dim in (Note [Elementwise walk order]).
constexpr int64_t kShortRow = 512;

bool IsBinaryOp(Op op) { return op >= Op::kAdd && op <= Op::kGe; }
bool IsUnaryOp(Op op) { return op >= Op::kNeg && op <= Op::kCast; }
bool IsReductionOp(Op op) { return op >= Op::kSum && op <= Op::kAmin; }
bool IsSoftmaxOp(Op op) { return op == Op::kSoftmax || op == Op::kLogSoftmax; }
bool IsMatmulOp(Op op) { return op == Op::kMm || op == Op::kBmm || op == Op::kAddmm; }
bool IsLibraryOp(Op op) { return op >= Op::kCat && op < Op::kEager; }
bool IsComparisonOp(Op op) { return op >= Op::kEq && op <= Op::kGe; }

using Sizes = std::vector<int64_t>;

// Note [Chunk length]: a chunk register is only memory when its value cannot
// be read or written in place (a converted or strided load, an intermediate,
// a streamed result); the register file must stay L1-sized, but long chunks
// matter as well: restarting the loops every 1024 floats made rms_norm 4096^2
// 1.2-1.3x slower than whole 4096-float rows (the hardware prefetcher and the
// loop prologues pay per restart).
int64_t ChunkLength(const RowProgram& p) {
  std::vector<int> regs;
  for (const Phase& ph : p.phases) {
    for (const Instr& in : ph.body) {
      const bool in_file =
          in.spill < 0 &&
          ((in.kind == Instr::Kind::kLoad && !p.operands[in.operand].direct()) ||
           (in.kind == Instr::Kind::kCompute && (in.out_operand < 0 || in.stream)));
      if (in_file && std::find(regs.begin(), regs.end(), in.dst) == regs.end()) {
        regs.push_back(in.dst);
      }
    }
  }
  int64_t chunk = internal::kMaxChunk;
  for (size_t n = 1; n < regs.size() && chunk > internal::kMinChunk; n *= 2) chunk /= 2;
  return chunk;
}

// The compute instruction of the last phase that runs phase 0 for the next
// row (Note [Row pipelining] in interpreter.cc), or -1: phase 0 must be one
// load of a contiguous f32 input the kernel does not write and one sum (of
// squares) of it, the last phase must reduce nothing and have a FoldsSide op.
int PipelineInstr(const RowProgram& p) {
  if (p.phases.size() < 2) return -1;
  const Phase& first = p.phases.front();
  const Phase& last = p.phases.back();
  if (!first.pre.empty() || first.body.size() != 2 || !last.reductions.empty()) return -1;
  const Instr& ld = first.body[0];
  const Instr& red = first.body[1];
  if (ld.kind != Instr::Kind::kLoad || ld.spill >= 0 || red.kind != Instr::Kind::kReduce ||
      red.a.scalar || red.a.reg != ld.dst ||
      (red.red != RedOp::kSum && red.red != RedOp::kSumSq)) {
    return -1;
  }
  const Operand& in = p.operands[ld.operand];
  if (in.buffer < 0 || !in.direct()) return -1;
  for (const Phase& ph : p.phases) {
    for (const Instr& w : ph.body) {
      const int o = w.kind == Instr::Kind::kStore ? w.dst : w.out_operand;
      if (o >= 0 && p.operands[o].buffer == in.buffer) return -1;
    }
    for (const auto* list : {&ph.pre, &ph.post}) {
      for (const ScalarInstr& si : *list) {
        if (si.kind == ScalarInstr::Kind::kStore && p.operands[si.dst].buffer == in.buffer) {
          return -1;
        }
      }
    }
  }
  for (size_t j = 0; j < last.body.size(); ++j) {
    const Instr& c = last.body[j];
    if (c.kind == Instr::Kind::kCompute && internal::FoldsSide(c.op)) {
      return static_cast<int>(j);
    }
  }
  return -1;
}

int64_t Numel(const Sizes& s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}

Sizes ContiguousStrides(const Sizes& sizes) {
  Sizes st(sizes.size());
  int64_t n = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    st[d] = n;
    n *= std::max<int64_t>(sizes[d], 1);
  }
  return st;
}

// A finite power of two whose reciprocal is a normal float: x / s == x * (1 / s)
// bit for bit.
bool IsPowerOfTwo(double s) {
  if (!std::isfinite(s) || s == 0) return false;
  int e = 0;
  const double m = std::frexp(std::fabs(s), &e);
  return m == 0.5 && e > -120 && e < 120;
}

// Equal once leading size-1 dims are dropped: the same elements in the same
// order under right-aligned broadcasting ([1, 128, 512] and [128, 512]).
bool SameUpToLeadingOnes(const Sizes& a, const Sizes& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && a[i] == 1 && a.size() - i > b.size() - j) ++i;
  while (j < b.size() && b[j] == 1 && b.size() - j > a.size() - i) ++j;
  return std::equal(a.begin() + i, a.end(), b.begin() + j, b.end());
}

bool IsContiguous(const Sizes& sizes, const Sizes& strides) {
  int64_t expected = 1;
  for (int d = static_cast<int>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] != 1 && strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// Non-overlapping and without holes: a permutation of contiguous strides.
bool IsDense(const Sizes& sizes, const Sizes& strides) {
  std::vector<int> perm;
  for (int d = 0; d < static_cast<int>(sizes.size()); ++d) {
    if (sizes[d] != 1) perm.push_back(d);
  }
  std::sort(perm.begin(), perm.end(), [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t expected = 1;
  for (int d : perm) {
    if (strides[d] != expected) return false;
    expected *= sizes[d];
  }
  return true;
}

// Elements from the view's first element to one past its last.
int64_t Extent(const Sizes& sizes, const Sizes& strides) {
  int64_t e = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    e += (sizes[d] - 1) * strides[d];
  }
  return e;
}

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
  if (t.empty()) return OpName(n.op);
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

// Everything Compile() moves into the Program.
struct Parts {
  std::vector<Buffer> buffers;
  std::vector<View> input_views, output_views;
  std::vector<Step> steps;
  std::vector<KernelSummary> kernels;
  std::vector<EagerStep> eager;
  uint64_t graph_hash = 0;
  std::unique_ptr<Program::Impl> impl;
};

// A kernel (or eager step) being formed: its member nodes and row domain.
struct Group {
  enum class Kind : uint8_t { kRows, kMatmul, kCopy, kLibrary, kEager };
  Kind kind = Kind::kRows;
  std::vector<int> nodes;  // members in graph order
  Sizes S;
  int k = 0;
  std::map<int, bool> row;  // in-group value -> per-row (true) or full (false)
  std::set<int> deps;       // groups whose memory this one reads
};

// One compilation: owns the per-value analysis and the groups. Single-threaded.
class Compiler {
 public:
  Compiler(const Graph& g, const CompileOptions& o) : g_(g), opt_(o), nodes_(g.nodes()) {
    PassThroughReshapes();
  }
  Parts Run();

 private:
  // ---- analysis ----
  struct Value {
    bool live = false;
    bool is_view = false;
    bool clone_view = false;  // a view backed by its own contiguous copy
    int root = -1;            // the value whose buffer holds it
    int64_t root_offset = 0;  // storage offset of the root (inputs)
    View view;                // layout (buffer filled once assigned)
    bool materialized = false;
    std::vector<int> users;
  };
  const Node& N(int id) const { return nodes_[id]; }
  bool IsConst(int v) const { return N(v).op == Op::kConstant; }
  // Made by a kernel or eager step (constants only once they got a fill kernel).
  bool IsComputed(int v) const {
    const Op op = N(v).op;
    if (op == Op::kConstant) return group_of_[v] >= 0;
    return op != Op::kInput && !(op == Op::kView && !vals_[v].clone_view);
  }
  // The group producing the memory `v` is read from (-1: graph input / constant).
  int Producer(int v) const {
    const int r = vals_[v].root;
    return r >= 0 && IsComputed(r) ? group_of_[r] : -1;
  }
  bool DependsOn(int from, int target) const;
  bool Fusable(const Node& n) const;
  bool RunsAsLibrary(int id) const;
  bool JoinsConv(int id);
  std::string EagerReason(const Node& n) const;
  void PassThroughReshapes();
  bool FeedsReduction(int id, int depth) const;
  void ResolveView(int id);
  bool TryJoin(int id, int gi);
  void NewGroup(int id);
  void AddDeps(Group& g, int id);
  // Appends g as the group of node `id` alone and records its dependencies.
  void AddSingleNodeGroup(Group g, int id);
  Sizes RowSizes(const Group& g, bool keepdim) const;

  // ---- lowering ----
  void Materialize();
  void AssignBuffers(Parts& p);
  KernelImpl Lower(const Group& g, int gi, KernelSummary& sum);
  void LowerRows(const Group& g, KernelImpl& ki);
  Operand MakeOperand(const View& v, const Group& g, const Sizes& as) const;

  const Graph& g_;
  CompileOptions opt_;
  std::vector<Node> nodes_;  // the graph's, with pass-through reshapes rewired
  std::vector<Value> vals_;
  std::vector<int> group_of_;
  std::vector<Group> groups_;
  std::vector<Buffer> buffers_;
  // Row-program split chosen for the group being lowered.
  struct Split {
    int nouter = 0;
    std::vector<int> outer_dims;  // dims of S walked as rows
    std::vector<int> inner_dims;  // dims of S forming the row
    int64_t inner = 1;
  } split_;
};

bool Compiler::DependsOn(int from, int target) const {
  if (from < 0) return false;
  std::vector<char> seen(groups_.size(), 0);
  std::vector<int> stack = {from};
  while (!stack.empty()) {
    const int g = stack.back();
    stack.pop_back();
    if (g == target) return true;
    if (seen[g]) continue;
    seen[g] = 1;
    for (int d : groups_[g].deps) stack.push_back(d);
  }
  return false;
}

// Float (or bool) math the f32 interpreter computes exactly as torch does;
// int arithmetic goes to eager trn ops.
bool Compiler::Fusable(const Node& n) const {
  if (IsLibraryOp(n.op)) return false;
  auto fb = [](DType d) { return IsFloating(d) || d == DType::kBool; };
  if (n.op == Op::kCast) {
    const DType in = N(n.inputs[0]).meta.dtype, out = n.meta.dtype;
    return fb(in) || IsFloating(out) || (in == out);
  }
  if (!fb(n.meta.dtype)) return false;
  for (int v : n.inputs) {
    if (!fb(N(v).meta.dtype)) return false;
  }
  if (IsReductionOp(n.op) || IsSoftmaxOp(n.op)) return IsFloating(N(n.inputs[0]).meta.dtype);
  return true;
}

// Note [Library kernels]: a node the row interpreter does not take (a
// library op such as cat, or integer math, which the f32 interpreter would
// round) still runs inside the program as one core kernel over its own
// dtypes, instead of an eager step (a Python round trip per call). Only
// dtype combinations the core kernels define qualify; the rest is eager.
bool Compiler::RunsAsLibrary(int id) const {
  const Node& n = N(id);
  const DType out = n.meta.dtype;
  auto in = [&](size_t i) { return N(n.inputs[i]).meta.dtype; };
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
             IsContiguous(vals_[n.inputs[1]].view.sizes, vals_[n.inputs[1]].view.strides) &&
             IsContiguous(vals_[id].view.sizes, vals_[id].view.strides);
    case Op::kCast:
    case Op::kClone: return true;
    case Op::kSdpa:
      return IsFloating(out) && in(0) == out && in(1) == out && in(2) == out &&
             (n.inputs.size() == 3 || in(3) == DType::kBool || IsFloating(in(3)));
    case Op::kConv:
      return IsFloating(out) && in(0) == out && in(1) == out &&
             (n.inputs.size() == 2 || IsFloating(in(2)));
    case Op::kLayerNorm: return IsFloating(out) && all_inputs(out);
    case Op::kBatchNorm: {
      bool ok = IsFloating(out) && in(0) == out;
      for (size_t i = 1; i < n.inputs.size(); ++i) ok = ok && IsFloating(in(i));
      return ok;
    }
    case Op::kMaxPool2d: return IsFloating(out) && in(0) == out;
    case Op::kIndexPut:
      return in(0) == out && in(2) == out && (in(1) == DType::kInt32 || in(1) == DType::kInt64);
    case Op::kArange: return out != DType::kBool;
    case Op::kWhere: return in(0) == DType::kBool && in(1) == out && in(2) == out;
    case Op::kNeg:
    case Op::kAbs:
    case Op::kRelu: return in(0) == out && out != DType::kBool;
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
bool Compiler::JoinsConv(int id) {
  const Node& n = N(id);
  if (!opt_.fuse || n.op != Op::kRelu) return false;
  const int c = n.inputs[0];
  const int gi = group_of_[c];
  if (N(c).op != Op::kConv || gi < 0 || groups_[gi].kind != Group::Kind::kLibrary ||
      groups_[gi].nodes.size() != 1 || N(c).meta.dtype != n.meta.dtype) {
    return false;
  }
  int live_users = 0;
  for (int u : vals_[c].users) live_users += vals_[u].live;
  const auto& outs = g_.outputs();
  if (live_users != 1 || std::find(outs.begin(), outs.end(), c) != outs.end()) return false;
  groups_[gi].nodes.push_back(id);
  group_of_[id] = gi;
  return true;
}

// Why a core op runs as an eager step instead (the frontend reports it).
std::string Compiler::EagerReason(const Node& n) const {
  if (n.op == Op::kEager) return "";
  std::string dtypes = DTypeName(n.meta.dtype);
  for (int v : n.inputs) dtypes += std::string(v == n.inputs[0] ? " from " : ", ") + DTypeName(N(v).meta.dtype);
  if (IsMatmulOp(n.op)) {
    for (int v : n.inputs) {
      if (IsConst(v)) return "a matmul operand is a constant";
    }
    return std::string("the compiled GEMM takes one floating dtype, got ") + dtypes;
  }
  return std::string("fused kernels compute floating/bool values, got ") + dtypes;
}

// Note [Pass-through reshapes]
// mm -> _unsafe_view [1, M, N] -> add(residual) is the residual add of every
// Linear. The view only adds leading size-1 dims to a contiguous result, so
// under right-aligned broadcasting an elementwise consumer reads the same
// element from the view and from its source: the consumer is rewired to read
// the source itself, and can then join the source's group (a matmul
// epilogue). Only pure re-indexings qualify: contiguous view at offset 0 of a
// contiguous computed value, same dtype, sizes equal up to leading ones.
void Compiler::PassThroughReshapes() {
  if (!opt_.fuse) return;
  auto contiguous_meta = [](const Meta& m) {
    return m.strides.empty() || IsContiguous(m.sizes, m.strides);
  };
  auto elementwise = [](Op op) {
    return IsBinaryOp(op) || IsUnaryOp(op) || op == Op::kWhere || op == Op::kClone;
  };
  std::vector<int> source(nodes_.size(), -1);
  for (size_t id = 0; id < nodes_.size(); ++id) {
    const Node& n = nodes_[id];
    if (n.op != Op::kView || n.inputs.size() != 1) continue;
    int src = n.inputs[0];
    if (source[src] >= 0) src = source[src];  // a chain of such views
    const Node& s = nodes_[src];
    const bool computed = s.op != Op::kInput && s.op != Op::kView && s.op != Op::kConstant &&
                          s.op != Op::kEager;
    if (!computed || n.meta.dtype != s.meta.dtype || n.meta.storage_offset != 0 ||
        !contiguous_meta(n.meta) || !contiguous_meta(s.meta) ||
        !SameUpToLeadingOnes(n.meta.sizes, s.meta.sizes)) {
      continue;
    }
    source[id] = src;
  }
  for (Node& n : nodes_) {
    if (!elementwise(n.op)) continue;
    for (int& in : n.inputs) {
      if (source[in] < 0) continue;
      // The consumer's output must cover the source's rank for broadcasting to agree.
      if (n.meta.sizes.size() >= nodes_[source[in]].meta.sizes.size()) in = source[in];
    }
  }
}

// Whether a reduction or softmax reads `id`, directly or through up to
// `depth` elementwise ops.
bool Compiler::FeedsReduction(int id, int depth) const {
  for (int u : vals_[id].users) {
    if (!vals_[u].live) continue;
    const Op op = N(u).op;
    if (IsReductionOp(op) || IsSoftmaxOp(op)) return true;
    if (depth > 0 && op != Op::kView && op != Op::kEager && !IsMatmulOp(op) &&
        FeedsReduction(u, depth - 1)) {
      return true;
    }
  }
  return false;
}

void Compiler::ResolveView(int id) {
  const Node& n = N(id);
  Value& v = vals_[id];
  const int src = n.inputs[0];
  const Value& s = vals_[src];
  v.is_view = true;
  v.root = s.root;
  v.root_offset = s.root_offset;
  v.view.dtype = n.meta.dtype;
  v.view.sizes = n.meta.sizes;
  bool ok = true;
  if (!n.meta.strides.empty()) {
    v.view.strides = n.meta.strides;
    v.view.offset = n.meta.storage_offset - s.root_offset;
  } else {
    v.view.strides = ContiguousStrides(n.meta.sizes);
    v.view.offset = s.view.offset;
    ok = IsContiguous(s.view.sizes, s.view.strides) && Numel(s.view.sizes) == Numel(n.meta.sizes);
  }
  if (n.meta.dtype != N(src).meta.dtype) ok = false;
  // Inside the root's memory?
  const Value& r = vals_[s.root];
  const int64_t root_extent = Extent(r.view.sizes, r.view.strides) + r.view.offset;
  if (ok && Numel(v.view.sizes) > 0) {
    ok = v.view.offset >= 0 && v.view.offset + Extent(v.view.sizes, v.view.strides) <= root_extent;
  }
  if (ok) return;
  // kClone + view (Note [Views]): copy the source to a contiguous buffer.
  if (Numel(n.meta.sizes) != Numel(N(src).meta.sizes) || n.meta.dtype != N(src).meta.dtype) {
    throw std::invalid_argument(fmt::format(
        "trn compiler: node {} (view {}): sizes/strides/offset do not describe memory of its "
        "source (value {})",
        id, n.target, src));
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

void Compiler::AddSingleNodeGroup(Group g, int id) {
  g.nodes = {id};
  groups_.push_back(std::move(g));
  group_of_[id] = static_cast<int>(groups_.size()) - 1;
  AddDeps(groups_.back(), id);
}

void Compiler::AddDeps(Group& g, int id) {
  for (int v : N(id).inputs) {
    const int p = Producer(v);
    if (p >= 0 && p != group_of_[id]) g.deps.insert(p);
  }
}

Sizes Compiler::RowSizes(const Group& g, bool keepdim) const {
  const int n = static_cast<int>(g.S.size());
  Sizes s(g.S.begin(), g.S.begin() + (n - g.k));
  if (keepdim) s.resize(n, 1);
  return s;
}

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

bool Compiler::TryJoin(int id, int gi) {
  Group& g = groups_[gi];
  const Node& n = N(id);
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
    if (IsConst(v)) continue;
    const bool in_group = IsComputed(v) && group_of_[v] == gi && !vals_[v].is_view;
    if (in_group) continue;
    const int p = Producer(v);
    if (p == gi || DependsOn(p, gi)) return false;
  }
  auto in_group = [&](int v) { return !IsConst(v) && IsComputed(v) && group_of_[v] == gi; };
  bool out_row = false;
  int new_k = g.k;
  if (red || smax) {
    const int x = n.inputs[0];
    if (N(x).meta.sizes != g.S) return false;
    if (in_group(x) && g.row.at(x)) return false;
    const int nd = static_cast<int>(g.S.size());
    const int k = smax ? (n.dims[0] == nd - 1 ? 1 : -1) : TrailingDims(n.dims, nd);
    if (k <= 0 || (g.k != 0 && g.k != k)) return false;
    new_k = k;
    out_row = red;
  } else {
    if (SameUpToLeadingOnes(O, g.S)) {
      out_row = false;
    } else if (g.k > 0 && (O == RowSizes(g, true) || O == RowSizes(g, false))) {
      out_row = true;
    } else {
      return false;
    }
    for (int v : n.inputs) {
      if (!in_group(v)) continue;
      const bool vrow = g.row.at(v);
      if (!out_row) {
        if (vrow && N(v).meta.sizes != RowSizes(g, true)) return false;
      } else {
        if (!vrow || N(v).meta.sizes != O) return false;
      }
    }
  }
  g.k = new_k;
  g.nodes.push_back(id);
  g.row[id] = out_row;
  group_of_[id] = gi;
  AddDeps(g, id);
  return true;
}

void Compiler::NewGroup(int id) {
  const Node& n = N(id);
  Group g;
  if (IsMatmulOp(n.op)) {
    g.kind = Group::Kind::kMatmul;
    g.S = n.meta.sizes;
    g.row[id] = false;
  } else if (IsReductionOp(n.op) || IsSoftmaxOp(n.op)) {
    const Sizes& in = N(n.inputs[0]).meta.sizes;
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

void Compiler::Materialize() {
  for (size_t id = 0; id < nodes_.size(); ++id) {
    if (!vals_[id].live) continue;
    const Node& n = nodes_[id];
    const int gi = group_of_[id];
    for (int v : n.inputs) {
      const int r = vals_[v].root;
      if (r < 0 || !IsComputed(r)) continue;
      // Read from memory unless it is an in-group value of a fused group.
      const bool fused = gi >= 0 && group_of_[v] == gi && !vals_[v].is_view &&
                         (groups_[gi].kind == Group::Kind::kRows ||
                          groups_[gi].kind == Group::Kind::kMatmul ||
                          groups_[gi].kind == Group::Kind::kLibrary) &&
                         groups_[gi].nodes.size() > 1;
      if (!fused) vals_[r].materialized = true;
    }
    if (n.op == Op::kEager || vals_[id].clone_view ||
        (gi >= 0 && groups_[gi].kind == Group::Kind::kLibrary &&
         groups_[gi].nodes.back() == static_cast<int>(id))) {
      vals_[id].materialized = true;
    }
    if (IsMatmulOp(n.op) && groups_[gi].nodes.size() == 1) vals_[id].materialized = true;
  }
  for (int o : g_.outputs()) {
    const int r = vals_[o].root;
    if (r >= 0 && IsComputed(r)) vals_[r].materialized = true;
  }
}

void Compiler::AssignBuffers(Parts& p) {
  auto& bufs = buffers_;
  for (size_t i = 0; i < g_.inputs().size(); ++i) {
    const int id = g_.inputs()[i];
    Buffer b;
    b.kind = Buffer::Kind::kInput;
    b.index = static_cast<int>(i);
    b.dtype = N(id).meta.dtype;
    b.numel = Extent(vals_[id].view.sizes, vals_[id].view.strides);
    vals_[id].view.buffer = static_cast<int>(bufs.size());
    bufs.push_back(b);
  }
  std::map<int, int> output_of;  // root value -> first graph output index
  for (size_t i = 0; i < g_.outputs().size(); ++i) {
    output_of.emplace(vals_[g_.outputs()[i]].root, static_cast<int>(i));
  }
  for (size_t id = 0; id < nodes_.size(); ++id) {
    Value& v = vals_[id];
    if (!v.live || v.is_view || !IsComputed(static_cast<int>(id)) || !v.materialized) continue;
    Buffer b;
    auto it = output_of.find(static_cast<int>(id));
    b.kind = it != output_of.end() ? Buffer::Kind::kOutput : Buffer::Kind::kTemp;
    b.index = it != output_of.end() ? it->second : 0;
    b.dtype = v.view.dtype;
    b.numel = Extent(v.view.sizes, v.view.strides);
    v.view.buffer = static_cast<int>(bufs.size());
    bufs.push_back(b);
  }
  for (size_t id = 0; id < nodes_.size(); ++id) {  // views follow their roots
    Value& v = vals_[id];
    if (v.live && v.is_view && v.root >= 0) v.view.buffer = vals_[v.root].view.buffer;
  }
  for (int i : g_.inputs()) p.input_views.push_back(vals_[i].view);
  for (int o : g_.outputs()) p.output_views.push_back(vals_[o].view);
  p.buffers = bufs;
}

// Operand for a view read (or written) as a value of sizes `as` (broadcast
// right-aligned to S, or to the outer dims of S for non-keepdim row values).
Operand Compiler::MakeOperand(const View& v, const Group& g, const Sizes& as) const {
  const int n = static_cast<int>(g.S.size());
  Sizes st(n, 0);
  const int vn = static_cast<int>(v.sizes.size());
  const int an = static_cast<int>(as.size());
  // `as` is S, keepdim row sizes (n dims) or non-keepdim row sizes (n-k dims,
  // aligned to the front of S).
  for (int i = 0; i < an; ++i) {
    const int vd = vn - an + i;
    if (vd < 0) continue;
    const int sd = i;  // as-dim i is S-dim i (an == n or an == n - k)
    if (v.sizes[vd] != 1 && v.sizes[vd] == g.S[sd]) st[sd] = v.strides[vd];
  }
  Operand o;
  o.buffer = v.buffer;
  o.dtype = v.dtype;
  o.offset = v.offset;
  for (int i = 0; i < split_.nouter; ++i) {
    // An outer "dim" may be several merged dims of S: its stride is the innermost one's.
    o.outer_strides[i] = st[split_.outer_dims[i]];
  }
  // Inner: one stride for the whole row, segments (two strides), or a gather
  // table. Adjacent inner dims this operand walks contiguously are merged.
  std::vector<std::pair<int64_t, int64_t>> levels;  // (size, stride), innermost first
  for (int j = static_cast<int>(split_.inner_dims.size()) - 1; j >= 0; --j) {
    const int d = split_.inner_dims[j];
    if (g.S[d] == 1) continue;
    if (!levels.empty() && st[d] == levels.back().second * levels.back().first) {
      levels.back().first *= g.S[d];
    } else {
      levels.emplace_back(g.S[d], st[d]);
    }
  }
  if (levels.empty()) {
    o.inner_stride = 1;  // rows of one element
  } else if (levels.size() == 1) {
    o.inner_stride = levels[0].second;
  } else if (levels.size() == 2) {
    o.inner_stride = levels[0].second;
    o.seg_len = levels[0].first;
    o.seg_stride = levels[1].second;
  } else {
    o.gather.resize(static_cast<size_t>(split_.inner));
    for (int64_t i = 0; i < split_.inner; ++i) {
      int64_t rem = i, off = 0;
      for (int j = static_cast<int>(split_.inner_dims.size()) - 1; j >= 0; --j) {
        const int d = split_.inner_dims[j];
        off += (rem % g.S[d]) * st[d];
        rem /= g.S[d];
      }
      o.gather[i] = off;
    }
  }
  return o;
}

// Micro-ops of a row program before phase assignment.
struct MV {
  enum class K : uint8_t { kLoad, kScalarLoad, kImm, kScratch, kOp, kReduce };
  K k = K::kOp;
  bool row = false;
  VOp op = VOp::kCopy;
  RedOp red = RedOp::kSum;
  DType round = DType::kFloat32;
  float scale = 1, imm = 0;
  int a = -1, b = -1, c = -1;
  int operand = -1;
  int level = 0;
  bool reloadable = false;  // a memory load: re-read in any phase
  bool dead = false;
  std::vector<int> stores;  // operands this value is written to
  int users = 0;
  int node = -1;  // the graph node whose value this is (-1: an internal step)
  int last_user_level = -1;
};

void Compiler::LowerRows(const Group& g, KernelImpl& ki) {
  RowProgram& p = ki.prog;
  const int n = static_cast<int>(g.S.size());
  const bool is_mm = g.kind == Group::Kind::kMatmul;
  // ---- row split ----
  split_ = Split();
  if (g.k > 0 || is_mm) {
    const int k = is_mm ? (n > 0 ? 1 : 0) : g.k;
    for (int d = 0; d < n - k; ++d) {
      if (g.S[d] != 1 || is_mm) split_.outer_dims.push_back(d);
    }
    for (int d = n - k; d < n; ++d) split_.inner_dims.push_back(d);
  } else {
    // Pure elementwise: merge dims that every memory operand walks contiguously.
    std::vector<Sizes> strides;
    auto collect = [&](const View& v, const Sizes& as) {
      Sizes st(n, 0);
      const int vn = static_cast<int>(v.sizes.size()), an = static_cast<int>(as.size());
      for (int i = 0; i < an; ++i) {
        const int vd = vn - an + i;
        if (vd >= 0 && v.sizes[vd] != 1 && v.sizes[vd] == g.S[i]) st[i] = v.strides[vd];
      }
      strides.push_back(st);
    };
    // Written operands first: they decide the walk order.
    for (int id : g.nodes) {
      if (vals_[id].materialized) collect(vals_[id].view, g.S);
    }
    for (int id : g.nodes) {
      for (int v : N(id).inputs) {
        if (IsConst(v) || (group_of_[v] == group_of_[id] && !vals_[v].is_view && IsComputed(v))) {
          continue;
        }
        collect(vals_[v].view, g.S);
      }
    }
    // Note [Elementwise walk order]: dims are walked in the memory order of
    // the operands (outermost = largest stride of the first operand that
    // tells them apart), as TensorIterator does, so a permuted output (a
    // transposed head layout) is written sequentially and more dims merge.
    std::vector<int> order;
    for (int d = 0; d < n; ++d) {
      if (g.S[d] != 1) order.push_back(d);
    }
    auto outer_first = [&](int a, int b) {  // a belongs outside b
      for (const Sizes& st : strides) {
        if (st[a] == 0 || st[b] == 0 || st[a] == st[b]) continue;
        return st[a] > st[b];
      }
      return false;
    };
    // Insertion sort: the order need not be a strict weak one (operands may disagree).
    for (size_t i = 1; i < order.size(); ++i) {
      for (size_t j = i; j > 0 && outer_first(order[j], order[j - 1]); --j) {
        std::swap(order[j], order[j - 1]);
      }
    }
    std::vector<std::vector<int>> merged;  // groups of dims of S, outermost first
    for (int d : order) {
      bool merge = !merged.empty();
      if (merge) {
        const int prev = merged.back().back();
        for (const Sizes& st : strides) merge = merge && st[prev] == st[d] * g.S[d];
      }
      if (merge) {
        merged.back().push_back(d);
      } else {
        merged.push_back({d});
      }
    }
    if (!merged.empty()) {
      // Short rows (a head's slice of a row) cost a row's bookkeeping per few
      // elements: take the next dims into the row, as segments (two strides)
      // for the operands that do not walk them contiguously.
      size_t first_inner = merged.size() - 1;
      int64_t inner = 1;
      for (int d : merged.back()) inner *= g.S[d];
      if (inner < kShortRow && first_inner > 0) --first_inner;
      for (size_t i = 0; i < first_inner; ++i) {
        // Several S dims merged into one outer dim: walk them as separate outer dims.
        for (int d : merged[i]) split_.outer_dims.push_back(d);
      }
      for (size_t i = first_inner; i < merged.size(); ++i) {
        for (int d : merged[i]) split_.inner_dims.push_back(d);
      }
    }
  }
  split_.nouter = static_cast<int>(split_.outer_dims.size());
  split_.inner = 1;
  for (int d : split_.inner_dims) split_.inner *= g.S[d];
  p.nouter = split_.nouter;
  p.rows = 1;
  for (int i = 0; i < split_.nouter; ++i) {
    p.outer_sizes[i] = g.S[split_.outer_dims[i]];
    p.rows *= p.outer_sizes[i];
  }
  p.inner = split_.inner;

  // ---- micro-ops ----
  std::vector<MV> mv;
  std::map<int, int> value_mv;                // in-group node -> MV
  std::map<std::pair<int, int>, int> loads;   // (value, as-kind) -> MV
  std::map<std::pair<int, int>, int> op_of;   // (value, as-kind) -> operand
  auto add = [&](MV m) {
    for (int x : {m.a, m.b, m.c}) {
      if (x >= 0) mv[x].users++;
    }
    mv.push_back(m);
    return static_cast<int>(mv.size()) - 1;
  };
  auto imm = [&](double v) {
    MV m;
    m.k = MV::K::kImm;
    m.row = true;
    m.imm = static_cast<float>(v);
    return add(m);
  };
  const Sizes row_keep = RowSizes(g, true), row_drop = RowSizes(g, false);
  // A memory value read as sizes `as` (0: S, 1: keepdim row, 2: non-keepdim row).
  auto operand_for = [&](const View& view, int key_value, int as_kind, bool write) {
    const auto key = std::make_pair(write ? -1 - key_value : key_value, as_kind);
    auto it = op_of.find(key);
    if (it != op_of.end()) return it->second;
    const Sizes& as = as_kind == 0 ? g.S : as_kind == 1 ? row_keep : row_drop;
    p.operands.push_back(MakeOperand(view, g, as));
    op_of[key] = static_cast<int>(p.operands.size()) - 1;
    return op_of[key];
  };
  auto arg = [&](int v, const Sizes& O) -> int {
    if (IsConst(v)) return imm(N(v).scalar);
    if (!vals_[v].is_view && IsComputed(v) && group_of_[v] == group_of_[g.nodes[0]] &&
        value_mv.count(v)) {
      return value_mv[v];
    }
    const int as_kind = SameUpToLeadingOnes(O, g.S) ? 0 : O == row_keep ? 1 : 2;
    const auto key = std::make_pair(v, as_kind);
    auto it = loads.find(key);
    if (it != loads.end()) return it->second;
    const int o = operand_for(vals_[v].view, v, as_kind, false);
    ki.reads.push_back(vals_[v].view);
    MV m;
    const Operand& op = p.operands[o];
    const bool row_scalar =
        as_kind != 0 || (g.k > 0 && op.gather.empty() && op.seg_len == 0 && op.inner_stride == 0);
    m.k = row_scalar ? MV::K::kScalarLoad : MV::K::kLoad;
    m.row = row_scalar;
    m.reloadable = !row_scalar;
    m.operand = o;
    const int id = add(m);
    loads[key] = id;
    return id;
  };
  // Readers of x beyond those already emitted: none may exist for a peephole.
  std::map<int, int> node_uses;  // in-group readers per member node
  for (int id : g.nodes) {
    for (int v : N(id).inputs) {
      if (group_of_[v] == group_of_[id] && !vals_[v].is_view) node_uses[v]++;
    }
  }
  auto only_user = [&](int x) {
    if (!mv[x].stores.empty() || mv[x].users != 0) return false;
    return mv[x].node < 0 || node_uses[mv[x].node] == 1;
  };
  auto op1 = [&](VOp op, int a, bool row) {
    MV m;
    m.op = op;
    m.a = a;
    m.row = row;
    return add(m);
  };
  auto op2 = [&](VOp op, int a, int b, bool row) {
    // (x * y) * z with x * y used nowhere else: one pass (rms_norm's tail).
    if (op == VOp::kMul && !row && mv[a].k == MV::K::kOp && mv[a].op == VOp::kMul &&
        !mv[a].row && only_user(a) && mv[a].a != mv[a].b) {
      MV m;
      m.op = VOp::kMulMul;
      m.a = mv[a].a;
      m.b = mv[a].b;
      m.c = b;
      mv[a].dead = true;
      mv[mv[a].a].users--;
      mv[mv[a].b].users--;
      return add(m);
    }
    MV m;
    m.op = op;
    m.a = a;
    m.b = b;
    m.row = row;
    return add(m);
  };
  auto reduce = [&](RedOp r, int a, float scale) {
    MV m;
    m.k = MV::K::kReduce;
    m.red = r;
    m.a = a;
    m.scale = scale;
    m.row = true;
    // rms_norm's pow(x, 2) + sum: one sum-of-squares pass.
    if (r == RedOp::kSum && mv[a].k == MV::K::kOp && mv[a].op == VOp::kSquare && only_user(a)) {
      m.red = RedOp::kSumSq;
      m.a = mv[a].a;
      mv[a].dead = true;
      mv[mv[a].a].users--;
    }
    return add(m);
  };
  const float inv_r = 1.0f / static_cast<float>(std::max<int64_t>(split_.inner, 1));

  if (is_mm) {
    const int mm = g.nodes[0];
    MV m;
    m.k = MV::K::kScratch;
    m.reloadable = true;
    Operand o;
    o.buffer = -1;
    o.dtype = N(mm).meta.dtype;
    o.inner_stride = 1;
    p.operands.push_back(o);
    m.operand = static_cast<int>(p.operands.size()) - 1;
    value_mv[mm] = add(m);
  }
  for (int id : g.nodes) {
    const Node& nd = N(id);
    if (is_mm && id == g.nodes[0]) continue;
    const bool row = g.row.at(id);
    const Sizes& O = IsReductionOp(nd.op) || IsSoftmaxOp(nd.op) ? g.S : nd.meta.sizes;
    int res = -1;
    if (IsBinaryOp(nd.op)) {
      int a = arg(nd.inputs[0], O);
      int b = nd.has_scalar ? imm(nd.scalar) : arg(nd.inputs[1], O);
      if (nd.has_scalar && nd.scalar_first) std::swap(a, b);
      const bool scalar_exp = nd.op == Op::kPow && nd.has_scalar && !nd.scalar_first;
      if ((nd.op == Op::kAdd || nd.op == Op::kSub) && nd.alpha != 1.0) {
        b = op2(VOp::kMul, b, imm(nd.alpha), mv[b].row);
      }
      static const VOp kMap[] = {VOp::kAdd, VOp::kSub, VOp::kMul, VOp::kDiv, VOp::kPow,
                                 VOp::kMax, VOp::kMin, VOp::kEq,  VOp::kNe,  VOp::kLt,
                                 VOp::kLe,  VOp::kGt,  VOp::kGe};
      const VOp op = kMap[static_cast<int>(nd.op) - static_cast<int>(Op::kAdd)];
      if (scalar_exp && nd.scalar == 2.0) {
        res = op1(VOp::kSquare, a, row);
      } else if (scalar_exp && nd.scalar == 1.0) {
        res = op1(VOp::kCopy, a, row);
      } else if (scalar_exp && nd.scalar == 0.5) {
        res = op1(VOp::kSqrt, a, row);
      } else if (scalar_exp && nd.scalar == -0.5) {
        res = op1(VOp::kRsqrt, a, row);
      } else if (scalar_exp && nd.scalar == -1.0) {
        res = op1(VOp::kReciprocal, a, row);
      } else if (scalar_exp && nd.scalar == 3.0) {
        res = op2(VOp::kMul, op1(VOp::kSquare, a, row), a, row);
      } else if (op == VOp::kDiv && nd.has_scalar && !nd.scalar_first &&
                 IsPowerOfTwo(nd.scalar)) {
        // x / 2^k == x * 2^-k exactly (scores / sqrt(head_dim)): a multiply.
        res = op2(VOp::kMul, a, imm(1.0 / nd.scalar), row);
      } else {
        res = op2(op, a, b, row);
      }
    } else if (nd.op == Op::kWhere) {
      MV m;
      m.op = VOp::kWhere;
      m.a = arg(nd.inputs[0], O);
      m.b = arg(nd.inputs[1], O);
      m.c = arg(nd.inputs[2], O);
      m.row = row;
      res = add(m);
    } else if (nd.op == Op::kCast || nd.op == Op::kClone) {
      const int a = arg(nd.inputs[0], O);
      const DType dt = nd.meta.dtype;
      if (nd.op == Op::kCast && dt != DType::kFloat32 && dt != DType::kFloat64) {
        MV m;
        m.op = VOp::kRound;
        m.round = dt;
        m.a = a;
        m.row = row;
        res = add(m);
      } else {
        res = op1(VOp::kCopy, a, row);
      }
    } else if (IsUnaryOp(nd.op)) {
      static const VOp kMap[] = {VOp::kNeg,  VOp::kAbs,     VOp::kRelu, VOp::kExp,
                                 VOp::kLog,  VOp::kSqrt,    VOp::kRsqrt, VOp::kReciprocal,
                                 VOp::kSigmoid, VOp::kTanh, VOp::kSilu, VOp::kGelu,
                                 VOp::kGeluTanh, VOp::kSin, VOp::kCos};
      res = op1(kMap[static_cast<int>(nd.op) - static_cast<int>(Op::kNeg)],
                arg(nd.inputs[0], O), row);
    } else if (IsReductionOp(nd.op)) {
      int x = arg(nd.inputs[0], g.S);
      if (mv[x].row) x = op1(VOp::kCopy, x, false);  // a broadcast input: make it a chunk
      switch (nd.op) {
        case Op::kSum: res = reduce(RedOp::kSum, x, 1.0f); break;
        case Op::kMean: res = reduce(RedOp::kSum, x, inv_r); break;
        case Op::kAmax: res = reduce(RedOp::kMax, x, 1.0f); break;
        default: res = reduce(RedOp::kMin, x, 1.0f); break;
      }
    } else if (nd.op == Op::kConstant) {
      res = op1(VOp::kCopy, imm(nd.scalar), false);
    } else if (IsSoftmaxOp(nd.op)) {
      int x = arg(nd.inputs[0], g.S);
      if (mv[x].row) x = op1(VOp::kCopy, x, false);
      const int m = reduce(RedOp::kMax, x, 1.0f);
      // softmax never reads x - max again: exp(x - max) in one pass.
      const int t = nd.op == Op::kSoftmax ? -1 : op2(VOp::kSub, x, m, false);
      const int e = nd.op == Op::kSoftmax ? op2(VOp::kExpSub, x, m, false)
                                          : op1(VOp::kExp, t, false);
      const int s = reduce(RedOp::kSum, e, 1.0f);
      if (nd.op == Op::kSoftmax) {
        // One reciprocal per row and a multiply, as the eager softmax kernel does.
        res = op2(VOp::kMul, e, op1(VOp::kReciprocal, s, true), false);
      } else {
        res = op2(VOp::kSub, t, op1(VOp::kLog, s, true), false);
      }
    } else {
      TRN_ASSERT(false, "LowerRows: node is not fusable");
    }
    value_mv[id] = res;
    if (mv[res].node < 0) mv[res].node = id;
    if (vals_[id].materialized) {
      const int as_kind = !row ? 0 : nd.meta.sizes == row_keep ? 1 : 2;
      const int o = operand_for(vals_[id].view, id, as_kind, true);
      mv[res].stores.push_back(o);
      ki.writes.push_back(vals_[id].view);
    }
  }
  if (is_mm && vals_[g.nodes[0]].materialized) {  // the GEMM result itself is read elsewhere
    const int o = operand_for(vals_[g.nodes[0]].view, g.nodes[0], 0, true);
    mv[value_mv[g.nodes[0]]].stores.push_back(o);
    ki.writes.push_back(vals_[g.nodes[0]].view);
  }

  // ---- levels (phases) ----
  int max_level = 0;
  auto lvl = [&](int x) { return x < 0 || mv[x].reloadable ? 0 : mv[x].level; };
  for (size_t i = 0; i < mv.size(); ++i) {
    MV& m = mv[i];
    if (m.dead) continue;
    if (m.k == MV::K::kOp) {
      m.level = std::max({lvl(m.a), lvl(m.b), lvl(m.c)});
    } else if (m.k == MV::K::kReduce) {
      m.level = lvl(m.a) + 1;  // the scalar exists once the reducing phase is done
    }
    max_level = std::max(max_level, m.level);
  }
  // Full values read in a later phase than they are made in are spilled.
  std::vector<int> spill(mv.size(), -1);
  int num_spills = 0;
  for (size_t i = 0; i < mv.size(); ++i) {
    const MV& m = mv[i];
    if (m.dead || m.row) continue;
    const int use_level = m.k == MV::K::kReduce ? -1 : m.level;
    for (int x : {m.a, m.b, m.c}) {
      if (x < 0 || mv[x].row || mv[x].reloadable || mv[x].dead) continue;
      // A reduction reads its input in the input's own phase.
      const int at = m.k == MV::K::kReduce ? mv[x].level : use_level;
      if (at > mv[x].level && spill[x] < 0) spill[x] = num_spills++;
    }
  }
  for (size_t i = 0; i < mv.size(); ++i) {  // last phase that reads each value
    const MV& m = mv[i];
    if (m.dead) continue;
    const int at = m.k == MV::K::kReduce ? lvl(m.a) : m.level;
    for (int x : {m.a, m.b, m.c}) {
      if (x >= 0) mv[x].last_user_level = std::max(mv[x].last_user_level, at);
    }
  }
  p.num_spills = num_spills;

  // ---- emission ----
  p.phases.assign(static_cast<size_t>(max_level) + 1, Phase());
  std::vector<int> sreg(mv.size(), -1);
  int num_sregs = 0, num_accs = 0;
  auto new_sreg = [&](float init) {
    p.scalar_init.push_back(init);
    return num_sregs++;
  };
  // Scalars first: immediates and per-row loads in phase 0, per-row math at its level.
  for (size_t i = 0; i < mv.size(); ++i) {
    MV& m = mv[i];
    if (m.dead || !m.row) continue;
    if (m.k == MV::K::kImm) {
      sreg[i] = new_sreg(m.imm);
    } else if (m.k == MV::K::kScalarLoad) {
      sreg[i] = new_sreg(0);
      ScalarInstr si;
      si.kind = ScalarInstr::Kind::kLoad;
      si.dst = sreg[i];
      si.a = m.operand;
      p.phases[0].pre.push_back(si);
    }
  }
  // Per phase, chunk registers are virtual ids, renumbered by linear scan below.
  int num_v = 0;
  std::map<std::pair<int, int>, int> vreg;  // (MV, phase) -> virtual chunk register
  for (int ph = 0; ph <= max_level; ++ph) {
    Phase& phase = p.phases[ph];
    std::function<Arg(int)> use = [&](int x) -> Arg {
      Arg a;
      if (x < 0) return a;
      if (mv[x].row) {
        a.scalar = true;
        a.reg = sreg[x];
        TRN_ASSERT(a.reg >= 0, "per-row value used before it is computed");
        return a;
      }
      auto key = std::make_pair(x, ph);
      auto it = vreg.find(key);
      if (it != vreg.end()) {
        a.reg = it->second;
        return a;
      }
      // Not made in this phase: reload it from memory or from its spill slot.
      Instr in;
      in.kind = Instr::Kind::kLoad;
      in.dst = num_v++;
      if (mv[x].reloadable) {
        in.operand = mv[x].operand;
      } else {
        TRN_ASSERT(spill[x] >= 0, "value read in a later phase was not spilled");
        in.spill = spill[x];
      }
      phase.body.push_back(in);
      vreg[key] = in.dst;
      a.reg = in.dst;
      return a;
    };
    for (size_t i = 0; i < mv.size(); ++i) {
      MV& m = mv[i];
      if (m.dead) continue;
      if (m.row && m.k == MV::K::kOp && m.level == ph) {
        ScalarInstr si;
        si.kind = ScalarInstr::Kind::kCompute;
        si.op = m.op;
        si.round = m.round;
        si.a = m.a >= 0 ? sreg[m.a] : -1;
        si.b = m.b >= 0 ? sreg[m.b] : -1;
        si.c = m.c >= 0 ? sreg[m.c] : -1;
        sreg[i] = new_sreg(0);
        si.dst = sreg[i];
        phase.pre.push_back(si);
      }
      if (m.row && m.level == ph && (m.k == MV::K::kOp || m.k == MV::K::kScalarLoad ||
                                     m.k == MV::K::kReduce)) {
        for (int o : m.stores) {
          ScalarInstr st;
          st.kind = ScalarInstr::Kind::kStore;
          st.dst = o;
          st.a = sreg[i];
          phase.pre.push_back(st);
        }
      }
      if (m.k == MV::K::kReduce && lvl(m.a) == ph) {
        Instr in;
        in.kind = Instr::Kind::kReduce;
        in.red = m.red;
        in.dst = num_accs++;
        in.a = use(m.a);
        phase.body.push_back(in);
        phase.reductions.push_back({in.dst, m.red});
        ScalarInstr fin;
        fin.kind = ScalarInstr::Kind::kFinish;
        sreg[i] = new_sreg(0);
        fin.dst = sreg[i];
        fin.a = in.dst;
        fin.scale = m.scale;
        phase.post.push_back(fin);
      }
      if (!m.row && m.k == MV::K::kOp && m.level == ph) {
        Instr in;
        in.kind = Instr::Kind::kCompute;
        in.op = m.op;
        in.round = m.round;
        in.a = use(m.a);
        in.b = use(m.b);
        in.c = use(m.c);
        in.dst = num_v++;
        in.spill = spill[i];
        // Computed straight into a contiguous f32 output when possible.
        int direct = -1;
        for (int o : m.stores) {
          if (p.operands[o].direct() && in.spill < 0 && direct < 0) direct = o;
        }
        if (direct >= 0) {
          in.out_operand = direct;
          const Buffer& b = buffers_[p.operands[direct].buffer];
          in.stream = b.numel * 4 >= static_cast<int64_t>(kStreamBytes) && m.users == 0;
          p.stream = p.stream || in.stream;
        }
        phase.body.push_back(in);
        vreg[{static_cast<int>(i), ph}] = in.dst;
        for (int o : m.stores) {
          if (o == direct) continue;
          Instr st;
          st.kind = Instr::Kind::kStore;
          st.dst = o;
          st.a.reg = in.dst;
          phase.body.push_back(st);
        }
      }
      if (!m.row && (m.k == MV::K::kLoad || m.k == MV::K::kScratch) && !m.stores.empty() &&
          ph == 0) {
        const Arg a = use(static_cast<int>(i));
        for (int o : m.stores) {
          Instr st;
          st.kind = Instr::Kind::kStore;
          st.dst = o;
          st.a = a;
          phase.body.push_back(st);
        }
      }
    }
  }
  // Linear-scan renumbering of chunk registers per phase (loads that alias
  // memory still take a slot: vp[] is indexed by register).
  int num_phys = 0;
  for (Phase& phase : p.phases) {
    std::map<int, int> last_use;
    for (size_t j = 0; j < phase.body.size(); ++j) {
      const Instr& in = phase.body[j];
      for (const Arg* a : {&in.a, &in.b, &in.c}) {
        if (a->reg >= 0 && !a->scalar) last_use[a->reg] = static_cast<int>(j);
      }
      if (in.kind == Instr::Kind::kLoad || in.kind == Instr::Kind::kCompute) {
        last_use.emplace(in.dst, static_cast<int>(j));
      }
    }
    std::map<int, int> phys;
    std::vector<int> free_regs;
    int next = 0;
    for (size_t j = 0; j < phase.body.size(); ++j) {
      Instr& in = phase.body[j];
      for (Arg* a : {&in.a, &in.b, &in.c}) {
        if (a->reg >= 0 && !a->scalar) a->reg = phys.at(a->reg);
      }
      if (in.kind == Instr::Kind::kLoad || in.kind == Instr::Kind::kCompute) {
        int r;
        if (!free_regs.empty()) {
          r = free_regs.back();
          free_regs.pop_back();
        } else {
          r = next++;
        }
        phys[in.dst] = r;
        const int virt = in.dst;
        in.dst = r;
        if (last_use.at(virt) == static_cast<int>(j)) free_regs.push_back(r);
      }
      // Free the registers whose last use was this instruction (after dst).
      for (auto it = last_use.begin(); it != last_use.end(); ++it) {
        if (it->second == static_cast<int>(j) && phys.count(it->first) &&
            phys[it->first] != in.dst) {
          free_regs.push_back(phys[it->first]);
        }
      }
    }
    num_phys = std::max(num_phys, next);
  }
  for (const Instr& in : p.phases[0].body) {
    if (in.kind == Instr::Kind::kLoad && in.operand >= 0 && p.operands[in.operand].buffer >= 0 &&
        p.operands[in.operand].direct() &&
        std::any_of(p.operands[in.operand].outer_strides,
                    p.operands[in.operand].outer_strides + p.nouter,
                    [](int64_t st) { return st != 0; }) &&
        std::find(p.prefetch.begin(), p.prefetch.end(), in.operand) == p.prefetch.end()) {
      p.prefetch.push_back(in.operand);
    }
  }
  p.num_vregs = num_phys;
  p.num_accs = num_accs;
  p.pipeline_instr = PipelineInstr(p);
  // Only multi-phase programs re-read a row; pipelined ones load the next row in the loop.
  if (p.phases.size() < 2 || p.pipeline_instr >= 0) p.prefetch.clear();
  p.chunk = ChunkLength(p);
}

KernelImpl Compiler::Lower(const Group& g, int gi, KernelSummary& sum) {
  KernelImpl ki;
  std::vector<std::string> shorts;
  uint64_t flops = 0;
  for (int id : g.nodes) {
    const Node& n = N(id);
    sum.aten_ops.push_back(AtenName(n));
    shorts.push_back(ShortName(n));
    const uint64_t out_n = static_cast<uint64_t>(Numel(n.meta.sizes));
    if (IsMatmulOp(n.op)) {
      const Sizes& a = N(n.inputs[n.op == Op::kAddmm ? 1 : 0]).meta.sizes;
      flops += 2 * out_n * static_cast<uint64_t>(a.back()) + (n.op == Op::kAddmm ? out_n : 0);
    } else if (IsReductionOp(n.op)) {
      flops += static_cast<uint64_t>(Numel(N(n.inputs[0]).meta.sizes));
    } else if (IsSoftmaxOp(n.op)) {
      flops += 5 * out_n;
    } else if (n.op == Op::kConv) {
      const Sizes& w = N(n.inputs[1]).meta.sizes;
      flops += 2 * out_n * static_cast<uint64_t>(w[1] * w[2] * w[3]);
    } else if (n.op == Op::kSdpa) {  // q k^T and p v per (query, key) pair
      const Sizes& q = N(n.inputs[0]).meta.sizes;
      const Sizes& k = N(n.inputs[1]).meta.sizes;
      const Sizes& v = N(n.inputs[2]).meta.sizes;
      uint64_t pairs = static_cast<uint64_t>(q[0] * q[1] * q[2] * k[2]);
      if (n.causal) pairs /= 2;
      flops += 2 * pairs * static_cast<uint64_t>(q[3] + v[3]);
    } else if (n.op != Op::kView && n.op != Op::kClone && n.op != Op::kCast &&
               n.op != Op::kCat && n.op != Op::kEmbedding) {
      flops += out_n;
    }
  }
  const std::string name = shorts.size() == 1
                               ? shorts[0]
                               : fmt::format("fused[{}]", fmt::join(shorts, ","));
  sum.name = Intern(name);
  sum.info.name = sum.name;
  sum.info.op = Intern("aten::" + shorts[0]);
  sum.info.flops = flops;
  sum.info.engine = g.kind == Group::Kind::kMatmul ? rt::Engine::kTensor : rt::Engine::kVector;
  const int first = g.nodes[0];
  switch (g.kind) {
    case Group::Kind::kCopy: {
      ki.kind = KernelImpl::Kind::kCopy;
      const int src = N(first).inputs[0];
      ki.copy_in = vals_[src].view;
      ki.copy_out = vals_[first].view;  // contiguous, src's element order
      ki.copy_out.sizes = vals_[src].view.sizes;
      ki.copy_out.strides = ContiguousStrides(ki.copy_out.sizes);
      ki.reads = {ki.copy_in};
      ki.writes = {ki.copy_out};
      break;
    }
    case Group::Kind::kLibrary: {
      const Node& n = N(first);
      ki.kind = KernelImpl::Kind::kLibrary;
      ki.lib_op = n.op;
      ki.lib_dims = n.dims;
      for (int v : n.inputs) ki.lib_ins.push_back(vals_[v].view);
      ki.lib_out = vals_[g.nodes.back()].view;  // a joined relu writes the result
      ki.lib_relu = g.nodes.size() > 1;
      ki.lib_causal = n.causal;
      ki.lib_conv = n.conv;
      ki.lib_pool = n.pool;
      ki.lib_scalar = n.scalar;
      ki.lib_alpha = n.alpha;
      ki.lib_eps = n.eps;
      ki.lib_has_scalar = n.has_scalar;
      ki.lib_scalar_first = n.scalar_first;
      ki.reads = ki.lib_ins;
      ki.writes = {ki.lib_out};
      break;
    }
    case Group::Kind::kMatmul: {
      ki.kind = KernelImpl::Kind::kMatmul;
      const Node& mm = N(first);
      const size_t a0 = mm.op == Op::kAddmm ? 1 : 0;
      ki.gemm.a = vals_[mm.inputs[a0]].view;
      ki.gemm.b = vals_[mm.inputs[a0 + 1]].view;
      ki.reads = {ki.gemm.a, ki.gemm.b};
      if (mm.op == Op::kAddmm) {
        ki.gemm.bias = vals_[mm.inputs[0]].view;
        ki.gemm.alpha = mm.alpha;
        ki.gemm.beta = mm.beta;
        ki.reads.push_back(ki.gemm.bias);
      }
      ki.gemm.out = vals_[first].view;
      if (!vals_[first].materialized) ki.gemm.out.buffer = -1;
      ki.has_epilogue = g.nodes.size() > 1;
      if (ki.has_epilogue) {
        LowerRows(g, ki);
      } else {
        ki.writes = {ki.gemm.out};
      }
      break;
    }
    case Group::Kind::kRows: LowerRows(g, ki); break;
    case Group::Kind::kEager: break;
  }
  (void)gi;
  for (const View& v : ki.reads) sum.info.bytes_read += RealBytes(v);
  for (const View& v : ki.writes) sum.info.bytes_written += RealBytes(v);
  return ki;
}

Parts Compiler::Run() {
  const size_t nn = nodes_.size();
  vals_.assign(nn, Value());
  group_of_.assign(nn, -1);
  for (size_t id = 0; id < nn; ++id) {
    for (int v : nodes_[id].inputs) vals_[v].users.push_back(static_cast<int>(id));
  }
  // 1. Liveness from the outputs (eager nodes always run).
  for (int o : g_.outputs()) vals_[o].live = true;
  for (size_t id = 0; id < nn; ++id) {
    if (nodes_[id].op == Op::kEager || nodes_[id].op == Op::kInput) vals_[id].live = true;
  }
  for (int id = static_cast<int>(nn) - 1; id >= 0; --id) {
    if (!vals_[id].live) continue;
    for (int v : nodes_[id].inputs) vals_[v].live = true;
  }
  // 2-3. Layouts, views and groups, in graph order.
  std::set<int> pending;  // values waiting for their consumer (Note [Deferred leaves])
  for (size_t i = 0; i < nn; ++i) {
    const int id = static_cast<int>(i);
    const Node& n = nodes_[i];
    Value& v = vals_[i];
    if (!v.live) continue;
    v.root = id;
    v.view.dtype = n.meta.dtype;
    v.view.sizes = n.meta.sizes;
    const bool dense = !n.meta.strides.empty() && IsDense(n.meta.sizes, n.meta.strides);
    v.view.strides = dense ? n.meta.strides : ContiguousStrides(n.meta.sizes);
    const bool fusable = n.op != Op::kView && n.op != Op::kEager && n.op != Op::kInput &&
                         n.op != Op::kConstant && !IsMatmulOp(n.op) && Fusable(n);
    if (!fusable || !opt_.fuse) {  // pending inputs are read from memory: give them kernels
      for (int in : n.inputs) {
        if (pending.erase(in)) NewGroup(in);
      }
    }
    switch (n.op) {
      case Op::kInput:
        v.view.strides = n.meta.strides.empty() ? ContiguousStrides(n.meta.sizes) : n.meta.strides;
        v.root_offset = n.meta.storage_offset;
        continue;
      case Op::kConstant: continue;
      case Op::kView: ResolveView(id); continue;
      case Op::kEager: {
        Group g;
        g.kind = Group::Kind::kEager;
        AddSingleNodeGroup(std::move(g), id);
        continue;
      }
      default: break;
    }
    if (JoinsConv(id)) continue;
    if (IsMatmulOp(n.op)) {
      bool ok = IsFloating(n.meta.dtype);
      for (int in : n.inputs) ok = ok && N(in).meta.dtype == n.meta.dtype && !IsConst(in);
      if (ok) {
        NewGroup(id);
        continue;
      }
    } else if (fusable) {
      bool joined = false;
      if (opt_.fuse) {
        auto candidates = [&] {
          std::vector<int> cands;
          for (int in : n.inputs) {
            if (!IsConst(in) && !vals_[in].is_view && IsComputed(in) && group_of_[in] >= 0) {
              cands.push_back(group_of_[in]);
            }
          }
          std::sort(cands.rbegin(), cands.rend());
          return cands;
        };
        // Note [Deferred leaves]: an elementwise node reading only memory (a
        // cast of an input, x * w) waits for its single consumer and joins the
        // consumer's group instead of becoming a kernel of its own.
        const bool leaf = candidates().empty() && !IsReductionOp(n.op) && !IsSoftmaxOp(n.op) &&
                          std::none_of(n.inputs.begin(), n.inputs.end(),
                                       [&](int in) { return pending.count(in) > 0; });
        int live_users = 0;
        for (int u : v.users) live_users += vals_[u].live;
        const bool is_output = std::find(g_.outputs().begin(), g_.outputs().end(), id) !=
                               g_.outputs().end();
        if (leaf && live_users == 1 && !is_output) {
          pending.insert(id);
          continue;
        }
        for (int in : n.inputs) {
          if (!pending.erase(in)) continue;
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
      }
      if (!joined) NewGroup(id);
      continue;
    }
    Group g;
    // One core kernel (Note [Library kernels]), or else an eager trn op (Note [Eager nodes]).
    g.kind = RunsAsLibrary(id) ? Group::Kind::kLibrary : Group::Kind::kEager;
    AddSingleNodeGroup(std::move(g), id);
  }
  for (int id : pending) NewGroup(id);
  // Constants something must read from memory get a fill kernel.
  for (size_t i = 0; i < nn; ++i) {
    const int id = static_cast<int>(i);
    if (!vals_[i].live || nodes_[i].op != Op::kConstant) continue;
    bool needs_memory = std::find(g_.outputs().begin(), g_.outputs().end(), id) !=
                        g_.outputs().end();
    for (int u : vals_[i].users) {
      if (!vals_[u].live) continue;
      const Op op = nodes_[u].op;
      needs_memory = needs_memory || op == Op::kEager || op == Op::kView ||
                     IsMatmulOp(op) || group_of_[u] < 0 ||
                     groups_[group_of_[u]].kind == Group::Kind::kEager ||
                     groups_[group_of_[u]].kind == Group::Kind::kLibrary;
    }
    if (!needs_memory) continue;
    Group g;
    g.S = nodes_[i].meta.sizes;
    g.nodes = {id};
    g.row[id] = false;
    groups_.push_back(g);
    group_of_[id] = static_cast<int>(groups_.size()) - 1;
  }
  // 4. Materialization, then final dependencies for ordering.
  Materialize();
  for (size_t i = 0; i < nn; ++i) {
    if (nodes_[i].op == Op::kConstant && group_of_[i] >= 0) vals_[i].materialized = true;
  }
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    Group& g = groups_[gi];
    g.deps.clear();
    for (int id : g.nodes) {
      for (int v : N(id).inputs) {
        const int p = Producer(v);
        if (p >= 0 && p != static_cast<int>(gi)) g.deps.insert(p);
      }
    }
  }
  Parts prog;
  prog.graph_hash = g_.Hash();
  AssignBuffers(prog);
  // 5. Lowering.
  prog.impl = std::make_unique<Program::Impl>();
  std::vector<Step> step_of(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    const Group& g = groups_[gi];
    Step st;
    if (g.kind == Group::Kind::kEager) {
      const int id = g.nodes[0];
      EagerStep e;
      e.node = id;
      e.target = N(id).target;
      for (int v : N(id).inputs) e.inputs.push_back(vals_[v].view);
      e.output = vals_[id].view;
      e.reason = EagerReason(N(id));
      st.kind = Step::Kind::kEager;
      st.index = static_cast<int>(prog.eager.size());
      prog.eager.push_back(std::move(e));
    } else {
      KernelSummary sum;
      prog.impl->kernels.push_back(Lower(g, static_cast<int>(gi), sum));
      st.kind = Step::Kind::kKernel;
      st.index = static_cast<int>(prog.kernels.size());
      prog.kernels.push_back(std::move(sum));
    }
    step_of[gi] = st;
  }
  // 6. Steps in dependency order, graph order among independent ones.
  std::vector<int> waiting(groups_.size(), 0);
  std::vector<std::vector<int>> consumers(groups_.size());
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    for (int d : groups_[gi].deps) {
      waiting[gi]++;
      consumers[d].push_back(static_cast<int>(gi));
    }
  }
  std::set<int> ready;
  for (size_t gi = 0; gi < groups_.size(); ++gi) {
    if (waiting[gi] == 0) ready.insert(static_cast<int>(gi));
  }
  while (!ready.empty()) {
    const int gi = *ready.begin();
    ready.erase(ready.begin());
    prog.steps.push_back(step_of[gi]);
    for (int c : consumers[gi]) {
      if (--waiting[c] == 0) ready.insert(c);
    }
  }
  TRN_ASSERT(prog.steps.size() == groups_.size(), "kernel dependencies form a cycle");
  return prog;
}

// Note [Temp arena]
// Temp buffers share one allocation per run, placed by lifetime: a buffer
// whose last reader has run lends its bytes to one written later. Besides
// one allocation instead of dozens, this keeps a run's working set as small
// as eager's (whose allocator reuses a freed block at once): a kernel then
// writes cache-hot memory instead of fresh lines, which measured 10-35 %
// slower kernels on Llama. Steps run in order on one stream, so a step's
// buffers are the only ones it can touch while it runs.
constexpr int64_t kArenaAlign = 64;  // a cache line; any dtype's alignment

// First and last step index that touches each buffer (-1: never).
std::vector<std::pair<int, int>> BufferLifetimes(const Parts& p) {
  std::vector<std::pair<int, int>> life(p.buffers.size(), {-1, -1});
  auto touch = [&](int buffer, int step) {
    if (buffer < 0) return;
    auto& l = life[static_cast<size_t>(buffer)];
    if (l.first < 0) l.first = step;
    l.second = step;
  };
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const int at = static_cast<int>(s);
    const Step& st = p.steps[s];
    if (st.kind == Step::Kind::kEager) {
      const EagerStep& e = p.eager[st.index];
      for (const View& v : e.inputs) touch(v.buffer, at);
      touch(e.output.buffer, at);
      continue;
    }
    const KernelImpl& k = p.impl->kernels[st.index];
    for (const View* v : {&k.gemm.out, &k.gemm.a, &k.gemm.b, &k.gemm.bias, &k.copy_in,
                          &k.copy_out, &k.lib_out}) {
      touch(v->buffer, at);
    }
    for (const auto* vs : {&k.reads, &k.writes, &k.lib_ins}) {
      for (const View& v : *vs) touch(v.buffer, at);
    }
    for (const Operand& o : k.prog.operands) touch(o.buffer, at);
  }
  return life;
}

// Places the temp buffers in the arena (largest first, lowest free offset
// among those alive at the same time) and returns the arena's size.
int64_t PlanTempArena(Parts& p) {
  const std::vector<std::pair<int, int>> life = BufferLifetimes(p);
  std::vector<int> temps;
  for (size_t b = 0; b < p.buffers.size(); ++b) {
    if (p.buffers[b].kind == Buffer::Kind::kTemp) temps.push_back(static_cast<int>(b));
  }
  auto bytes = [&](int b) {
    const Buffer& buf = p.buffers[b];
    const int64_t n = std::max<int64_t>(buf.numel, 1) * static_cast<int64_t>(ItemSize(buf.dtype));
    return (n + kArenaAlign - 1) / kArenaAlign * kArenaAlign;
  };
  std::stable_sort(temps.begin(), temps.end(), [&](int a, int b) { return bytes(a) > bytes(b); });
  std::vector<int> placed;
  int64_t total = 0;
  for (int b : temps) {
    // Untouched buffers (none expected) stay alive for the whole run.
    const int first = life[b].first < 0 ? 0 : life[b].first;
    const int last = life[b].first < 0 ? static_cast<int>(p.steps.size()) : life[b].second;
    std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) bytes
    for (int o : placed) {
      const int of = life[o].first < 0 ? 0 : life[o].first;
      const int ol = life[o].first < 0 ? static_cast<int>(p.steps.size()) : life[o].second;
      if (of <= last && first <= ol) {
        busy.emplace_back(p.buffers[o].arena_offset, p.buffers[o].arena_offset + bytes(o));
      }
    }
    std::sort(busy.begin(), busy.end());
    int64_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (at + bytes(b) <= begin) break;
      at = std::max(at, end);
    }
    p.buffers[b].arena_offset = at;
    total = std::max(total, at + bytes(b));
    placed.push_back(b);
  }
  return total;
}

}  // namespace

Program Compile(const Graph& graph, const CompileOptions& options) {
  Parts parts = Compiler(graph, options).Run();
  Program p;
  p.arena_bytes_ = PlanTempArena(parts);
  p.buffers_ = std::move(parts.buffers);
  p.input_views_ = std::move(parts.input_views);
  p.output_views_ = std::move(parts.output_views);
  p.steps_ = std::move(parts.steps);
  p.kernels_ = std::move(parts.kernels);
  p.eager_ = std::move(parts.eager);
  p.graph_hash_ = parts.graph_hash;
  p.impl_ = std::move(parts.impl);
  return p;
}

}  // namespace trn::compiler
