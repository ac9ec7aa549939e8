// Graph construction with validation (bad input from the frontend gets a
// trn::InvalidArgument naming the node), the structural hash and op names.
#include "core/compiler/graph.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>

#include "core/common/error.h"
#include "core/kernels/kernels.h"

namespace trn::compiler {

const char* OpName(Op op) {
  switch (op) {
    case Op::kInput: return "input";
    case Op::kConstant: return "full";
    case Op::kAdd: return "add";
    case Op::kSub: return "sub";
    case Op::kMul: return "mul";
    case Op::kDiv: return "div";
    case Op::kPow: return "pow";
    case Op::kMaximum: return "maximum";
    case Op::kMinimum: return "minimum";
    case Op::kEq: return "eq";
    case Op::kNe: return "ne";
    case Op::kLt: return "lt";
    case Op::kLe: return "le";
    case Op::kGt: return "gt";
    case Op::kGe: return "ge";
    case Op::kWhere: return "where";
    case Op::kNeg: return "neg";
    case Op::kAbs: return "abs";
    case Op::kRelu: return "relu";
    case Op::kExp: return "exp";
    case Op::kLog: return "log";
    case Op::kSqrt: return "sqrt";
    case Op::kRsqrt: return "rsqrt";
    case Op::kReciprocal: return "reciprocal";
    case Op::kSigmoid: return "sigmoid";
    case Op::kTanh: return "tanh";
    case Op::kSilu: return "silu";
    case Op::kGelu: return "gelu";
    case Op::kGeluTanh: return "gelu";
    case Op::kSin: return "sin";
    case Op::kCos: return "cos";
    case Op::kLog1p: return "log1p";
    case Op::kExpm1: return "expm1";
    case Op::kErf: return "erf";
    case Op::kCast: return "_to_copy";
    case Op::kRotateHalf: return "rotate_half";
    case Op::kSum: return "sum";
    case Op::kMean: return "mean";
    case Op::kAmax: return "amax";
    case Op::kAmin: return "amin";
    case Op::kSoftmax: return "_softmax";
    case Op::kLogSoftmax: return "_log_softmax";
    case Op::kView: return "view";
    case Op::kClone: return "clone";
    case Op::kMm: return "mm";
    case Op::kBmm: return "bmm";
    case Op::kAddmm: return "addmm";
    case Op::kCat: return "cat";
    case Op::kLogicalAnd: return "logical_and";
    case Op::kLogicalOr: return "logical_or";
    case Op::kLogicalNot: return "logical_not";
    case Op::kEmbedding: return "embedding";
    case Op::kSdpa: return "scaled_dot_product_attention";
    case Op::kConv: return "convolution";
    case Op::kConvTranspose: return "conv_transpose";
    case Op::kMath: return "math";
    case Op::kComplex: return "complex";
    case Op::kFft: return "fft";
    case Op::kLayerNorm: return "layer_norm";
    case Op::kGroupNorm: return "group_norm";
    case Op::kBatchNorm: return "batch_norm";
    case Op::kMaxPool2d: return "max_pool2d";
    case Op::kAvgPool2d: return "avg_pool2d";
    case Op::kAdaptiveAvgPool2d: return "adaptive_avg_pool2d";
    case Op::kIm2Col: return "im2col";
    case Op::kCol2Im: return "col2im";
    case Op::kIndexPut: return "index_put";
    case Op::kArange: return "arange";
    case Op::kGather: return "gather";
    case Op::kScatter: return "scatter";
    case Op::kIndexSelect: return "index_select";
    case Op::kIndex: return "index";
    case Op::kCumsum: return "cumsum";
    case Op::kTopk: return "topk";
    case Op::kSort: return "sort";
    case Op::kHistc: return "histc";
    case Op::kFlip: return "flip";
    case Op::kLogcumsumexp: return "logcumsumexp";
    case Op::kCummax: return "cummax";
    case Op::kCummin: return "cummin";
    case Op::kSolveTriangular: return "linalg_solve_triangular";
    case Op::kArgmax: return "argmax";
    case Op::kArgmin: return "argmin";
    case Op::kPad: return "constant_pad_nd";
    case Op::kSliceScatter: return "slice_scatter";
    case Op::kDivTrunc: return "div_trunc";
    case Op::kDivFloor: return "div_floor";
    case Op::kRemainder: return "remainder";
    case Op::kFmod: return "fmod";
    case Op::kFloor: return "floor";
    case Op::kCeil: return "ceil";
    case Op::kTrunc: return "trunc";
    case Op::kRound: return "round";
    case Op::kSign: return "sign";
    case Op::kEager: return "eager";
  }
  return "?";
}

static_assert(std::size(kLibraryMathNames) == static_cast<size_t>(kernels::UnaryOp::kSinc) -
                                                  static_cast<size_t>(kernels::UnaryOp::kTan) + 1,
              "kLibraryMathNames has one name per UnaryOp from kTan to kSinc");

bool IsLibraryMath(int64_t unary_op) {
  using kernels::UnaryOp;
  return unary_op >= static_cast<int64_t>(UnaryOp::kTan) &&
         unary_op <= static_cast<int64_t>(UnaryOp::kSinc);
}

void FailNode(size_t index, const Node& node, const std::string& problem) {
  throw trn::InvalidArgument(fmt::format("trn compiler: node {} ({}{}{}): {}", index,
                                          OpName(node.op), node.target.empty() ? "" : " ",
                                          node.target, problem));
}

namespace {

std::string Shape(const std::vector<int64_t>& s) {
  return fmt::format("[{}]", fmt::join(s, ", "));
}

void CheckMeta(size_t index, const Node& node) {
  const Meta& m = node.meta;
  if (m.sizes.size() > static_cast<size_t>(kMaxDims)) {
    FailNode(index, node, fmt::format("output has {} dims, at most {} supported", m.sizes.size(),
                                  kMaxDims));
  }
  for (int64_t s : m.sizes) {
    if (s < 0) FailNode(index, node, fmt::format("negative size in {}", Shape(m.sizes)));
  }
  if (!m.strides.empty() && m.strides.size() != m.sizes.size()) {
    FailNode(index, node, fmt::format("strides {} do not match sizes {}", Shape(m.strides),
                                  Shape(m.sizes)));
  }
  for (int64_t s : m.strides) {
    if (s < 0) FailNode(index, node, fmt::format("negative stride in {}", Shape(m.strides)));
  }
  if (m.storage_offset < 0) FailNode(index, node, "negative storage offset");
}

bool Contiguous(const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] != 1 && strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

// `in` broadcasts (right-aligned, numpy rules) to `out`.
bool Broadcasts(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  if (in.size() > out.size()) return false;
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t a = in[in.size() - 1 - i], b = out[out.size() - 1 - i];
    if (a != b && a != 1) return false;
  }
  return true;
}

// Checks one node against the graph before it: input ids, arity, and the
// shapes its op requires (reductions get their dims normalised). Throws
// trn::InvalidArgument naming the node.
class NodeCheck {
 public:
  NodeCheck(const std::vector<Node>& nodes, Node& node)
      : nodes_(nodes), node_(node), index_(nodes.size()), n_in_(node.inputs.size()),
        out_(node.meta.sizes), out_nd_(static_cast<int>(node.meta.sizes.size())) {}
  void Run();

 private:
  [[noreturn]] void Fail(const std::string& problem) const {
    FailNode(index_, node_, problem);
  }
  void Arity(size_t want) const {
    if (n_in_ != want) Fail(fmt::format("expects {} tensor input(s), got {}", want, n_in_));
  }
  const std::vector<int64_t>& InSizes(size_t i) const { return nodes_[node_.inputs[i]].meta.sizes; }
  void Matmul();
  void Cat();
  void Sdpa();
  void Conv();  // and kConvTranspose
  void Complex();
  void Fft();
  void BatchNorm();
  void IndexPut();
  void Pool2d();
  void Im2Col();  // and kCol2Im
  void XWeightBias();
  void LayerNorm();
  void GroupNorm();
  void Embedding();
  void Gather();
  void Scatter();
  void IndexSelect();
  void Index();
  bool IndexResult(const std::vector<int64_t>& dims, std::vector<int64_t>* result);
  void Cumsum();
  void SolveTriangular();
  void TopkSort();
  void Argmax();
  void Pad();
  void SliceScatter();
  void Reduction();
  void Shapes();  // broadcasting of elementwise inputs, cast sizes

  const std::vector<Node>& nodes_;
  Node& node_;
  const size_t index_;
  const size_t n_in_;
  const std::vector<int64_t>& out_;
  const int out_nd_;
};

void NodeCheck::Run() {
  CheckMeta(index_, node_);
  for (size_t i = 0; i < n_in_; ++i) {
    const int id = node_.inputs[i];
    if (id < 0 || static_cast<size_t>(id) >= index_) {
      Fail(fmt::format("input {} refers to value {}, but only values 0..{} exist", i, id,
                       static_cast<int64_t>(index_) - 1));
    }
  }
  switch (node_.op) {
    case Op::kInput: Fail("graph inputs are added with AddInput");
    case Op::kConstant: Arity(0); break;
    case Op::kWhere: Arity(3); break;
    case Op::kView:
    case Op::kClone:
      Arity(1);
      if (node_.op == Op::kClone && InSizes(0) != out_) {
        Fail(fmt::format("clone of {} cannot have sizes {}", Shape(InSizes(0)), Shape(out_)));
      }
      break;
    case Op::kMm:
    case Op::kBmm:
    case Op::kAddmm: Matmul(); break;
    case Op::kEager:
      if (node_.target.empty()) Fail("eager node needs its aten target");
      break;
    case Op::kCat: Cat(); break;
    case Op::kRotateHalf:
      Fail("rotate_half is made by the compiler from a cat (Note [Rotate half]), not by a graph");
    case Op::kLogicalAnd:
    case Op::kLogicalOr:
    case Op::kDivTrunc:
    case Op::kDivFloor:
    case Op::kRemainder:
    case Op::kFmod:  // library binary ops: the integer divisions may take a scalar
      Arity(node_.has_scalar ? 1 : 2);
      for (size_t i = 0; i < n_in_; ++i) {
        if (!Broadcasts(InSizes(i), out_)) {
          Fail(fmt::format("input {} of sizes {} does not broadcast to {}", i,
                           Shape(InSizes(i)), Shape(out_)));
        }
      }
      break;
    case Op::kLogicalNot:
    case Op::kFloor:
    case Op::kCeil:
    case Op::kTrunc:
    case Op::kRound:
    case Op::kSign:
      Arity(1);
      if (InSizes(0) != out_) Fail("output sizes must equal the input's");
      break;
    case Op::kSdpa: Sdpa(); break;
    case Op::kConv: Conv(); break;
    case Op::kConvTranspose: Conv(); break;
    case Op::kComplex: Complex(); break;
    case Op::kFft: Fft(); break;
    case Op::kMath:
      Arity(1);
      if (node_.dims.size() != 1 || !IsLibraryMath(node_.dims[0])) {
        Fail(fmt::format("math takes one function code of kernels::UnaryOp (tan .. sinc), got {}",
                         Shape(node_.dims)));
      }
      if (InSizes(0) != out_) Fail("output sizes must equal the input's");
      break;
    case Op::kBatchNorm: BatchNorm(); break;
    case Op::kIndexPut: IndexPut(); break;
    case Op::kArange:
      Arity(0);
      if (out_nd_ != 1) Fail(fmt::format("arange gives 1-D, not {}", Shape(out_)));
      break;
    case Op::kMaxPool2d:
    case Op::kAvgPool2d: Pool2d(); break;
    case Op::kIm2Col:
    case Op::kCol2Im: Im2Col(); break;
    case Op::kAdaptiveAvgPool2d: {
      Arity(1);
      const auto& x = InSizes(0);
      if (x.size() != 4 || out_.size() != 4 || out_[0] != x[0] || out_[1] != x[1] ||
          x[2] == 0 || x[3] == 0) {
        Fail(fmt::format("adaptive_avg_pool2d of {} cannot give {}", Shape(x), Shape(out_)));
      }
      break;
    }
    case Op::kLayerNorm: LayerNorm(); break;
    case Op::kGroupNorm: GroupNorm(); break;
    case Op::kEmbedding: Embedding(); break;
    case Op::kGather: Gather(); break;
    case Op::kScatter: Scatter(); break;
    case Op::kIndexSelect: IndexSelect(); break;
    case Op::kIndex: Index(); break;
    case Op::kCumsum:
    case Op::kLogcumsumexp:
    case Op::kCummax:
    case Op::kCummin: Cumsum(); break;
    case Op::kTopk:
    case Op::kSort: TopkSort(); break;
    case Op::kFlip:
      Arity(1);
      if (InSizes(0) != out_) Fail("output sizes must equal the input's");
      for (int64_t d : node_.dims) {
        if (d < 0 || d >= static_cast<int64_t>(out_.size())) {
          Fail(fmt::format("flip dim {} out of range for {}", d, Shape(out_)));
        }
      }
      break;
    case Op::kSolveTriangular: SolveTriangular(); break;
    case Op::kHistc:
      Arity(1);
      if (node_.dims.size() != 1 || out_ != std::vector<int64_t>{node_.dims[0]}) {
        Fail(fmt::format("histc of {} bins cannot give {}", node_.dims.empty() ? 0 : node_.dims[0],
                         Shape(out_)));
      }
      break;
    case Op::kArgmax:
    case Op::kArgmin: Argmax(); break;
    case Op::kPad: Pad(); break;
    case Op::kSliceScatter: SliceScatter(); break;
    default:
      if (IsBinaryOp(node_.op)) {
        Arity(node_.has_scalar ? 1 : 2);
      } else if (IsUnaryOp(node_.op)) {
        Arity(1);
      } else if (IsReductionOp(node_.op) || node_.op == Op::kSoftmax ||
                 node_.op == Op::kLogSoftmax) {
        Reduction();
      }
      break;
  }
  Shapes();
}

void NodeCheck::Matmul() {
  const size_t first = node_.op == Op::kAddmm ? 1 : 0;
  Arity(first + 2);
  const size_t nd = node_.op == Op::kBmm ? 3 : 2;
  const auto& a = InSizes(first);
  const auto& b = InSizes(first + 1);
  if (a.size() != nd || b.size() != nd || out_.size() != nd) {
    Fail(fmt::format("expects {}-D operands, got {} @ {} -> {}", nd, Shape(a),
                     Shape(b), Shape(out_)));
  }
  const bool ok = a[nd - 1] == b[nd - 2] && out_[nd - 2] == a[nd - 2] &&
                  out_[nd - 1] == b[nd - 1] && (nd == 2 || (a[0] == b[0] && out_[0] == a[0]));
  if (!ok) {
    Fail(fmt::format("shapes do not multiply: {} @ {} -> {}", Shape(a),
                     Shape(b), Shape(out_)));
  }
  if (first == 1 && !Broadcasts(InSizes(0), out_)) {
    Fail(fmt::format("bias {} does not broadcast to {}", Shape(InSizes(0)),
                     Shape(out_)));
  }
}

void NodeCheck::Cat() {
  if (n_in_ == 0) Fail("cat needs at least one input");
  if (node_.dims.size() != 1 || node_.dims[0] < 0 || node_.dims[0] >= out_nd_) {
    Fail(fmt::format("expects one dim in [0, {}), got {} dims", out_nd_,
                     node_.dims.size()));
  }
  const int64_t d = node_.dims[0];
  int64_t total = 0;
  for (size_t i = 0; i < n_in_; ++i) {
    const auto& s = InSizes(i);
    bool ok = s.size() == out_.size();
    for (size_t k = 0; ok && k < s.size(); ++k) ok = static_cast<int64_t>(k) == d || s[k] == out_[k];
    if (!ok) {
      Fail(fmt::format("input {} of sizes {} does not cat into {} on dim {}", i,
                       Shape(s), Shape(out_), d));
    }
    total += s[d];
  }
  if (total != out_[d]) {
    Fail(fmt::format("inputs sum to {} along dim {}, output has {}", total, d,
                     out_[d]));
  }
}

void NodeCheck::Sdpa() {
  if (n_in_ != 3 && n_in_ != 4) {
    Fail(fmt::format("expects q, k, v and an optional mask, got {} inputs", n_in_));
  }
  const auto& q = InSizes(0);
  const auto& k = InSizes(1);
  const auto& v = InSizes(2);
  const bool ok = q.size() == 4 && k.size() == 4 && v.size() == 4 && k[0] == q[0] &&
                  v[0] == q[0] && k[1] == v[1] && k[1] > 0 && q[1] % k[1] == 0 &&
                  k[3] == q[3] && v[2] == k[2] && out_.size() == 4 && out_[0] == q[0] &&
                  out_[1] == q[1] && out_[2] == q[2] && out_[3] == v[3];
  if (!ok) {
    Fail(fmt::format("attention shapes q {} k {} v {} -> {} do not agree",
                     Shape(q), Shape(k), Shape(v), Shape(out_)));
  }
  if (n_in_ == 4 && !Broadcasts(InSizes(3), {q[0], q[1], q[2], k[2]})) {
    Fail(fmt::format("mask {} does not broadcast to [{}, {}, {}, {}]",
                     Shape(InSizes(3)), q[0], q[1], q[2], k[2]));
  }
}

// Convolutions of rank 3, 4 and 5 (1-D, 2-D, 3-D; transposed: 1-D, 2-D): their
// stride, padding and dilation are the last rank - 2 of the (T, H, W) entries,
// the others 1 / 0 / 1 (a 1-D conv then runs as 2-D with H = 1).
void NodeCheck::Conv() {
  if (n_in_ != 2 && n_in_ != 3) {
    Fail(fmt::format("expects input, weight and an optional bias, got {}", n_in_));
  }
  const bool transposed = node_.op == Op::kConvTranspose;
  const auto& x = InSizes(0);
  const auto& w = InSizes(1);  // [Cout, Cin/groups, ...]; transposed [Cin, Cout/groups, ...]
  const auto& c = node_.conv;
  const size_t rank = x.size();
  const int64_t cout = transposed ? w[1] * c.groups : w[0];
  bool ok = rank >= 3 && rank <= (transposed ? 4u : 5u) && w.size() == rank &&
            out_.size() == rank && c.groups > 0 && w[0] % c.groups == 0 &&
            x[1] == (transposed ? w[0] : w[1] * c.groups) && out_[0] == x[0] &&
            out_[1] == cout && (n_in_ == 2 || InSizes(2) == std::vector<int64_t>{cout});
  // The param index of the first spatial dim: the entries before it are unused.
  const int first = Node::kConvDims - static_cast<int>(rank) + 2;
  for (int d = 0; ok && d < first; ++d) {
    ok = c.stride[d] == 1 && c.padding[d] == 0 && c.padding_end[d] == 0 && c.dilation[d] == 1;
  }
  for (int d = first; ok && d < Node::kConvDims; ++d) {
    const size_t at = 2 + static_cast<size_t>(d - first);
    const int64_t span = c.dilation[d] * (w[at] - 1) + 1;
    ok = c.stride[d] > 0 && c.dilation[d] > 0 && c.padding[d] >= 0 && c.padding_end[d] >= 0;
    if (transposed) {  // out's sizes add output_padding, below max(stride, dilation)
      const int64_t base = (x[at] - 1) * c.stride[d] - 2 * c.padding[d] + span;
      ok = ok && c.padding[d] == c.padding_end[d] && out_[at] >= std::max<int64_t>(base, 1) &&
           out_[at] < base + std::max(c.stride[d], c.dilation[d]);
      continue;
    }
    const int64_t padded = x[at] + c.padding[d] + c.padding_end[d];
    ok = ok && padded >= span && out_[at] == (padded - span) / c.stride[d] + 1;
    if (ok && rank == 5 && c.padding[d] != c.padding_end[d]) {
      Fail(fmt::format("3-D convolution pads each side of a dim alike, got {} before and {} "
                       "after dim {}", c.padding[d], c.padding_end[d], at));
    }
  }
  if (!ok) {
    Fail(fmt::format("{}convolution of {} by weight {} (groups {}) cannot give {}",
                     transposed ? "transposed " : "", Shape(x), Shape(w), c.groups, Shape(out_)));
  }
}

// Note [Complex values]: a complex operand is pairs (a trailing dim of 2), a
// real one float32 values; both broadcast to out's complex sizes.
void NodeCheck::Complex() {
  const int64_t code = node_.dims.empty() ? -1 : node_.dims[0];
  const int64_t real = node_.dims.size() > 1 ? node_.dims[1] : 0;
  const bool binary = code >= 0 && code <= static_cast<int64_t>(ComplexCode::kDiv);
  const bool polar = code == static_cast<int64_t>(ComplexCode::kPolar);
  const bool from_real = code == static_cast<int64_t>(ComplexCode::kFromReal);
  const bool unary = code >= static_cast<int64_t>(ComplexCode::kConj) &&
                     code <= static_cast<int64_t>(ComplexCode::kSqrt) && !from_real;
  const bool real_out = code == static_cast<int64_t>(ComplexCode::kAbs) ||
                        code == static_cast<int64_t>(ComplexCode::kAngle);
  if (node_.dims.size() != 2 || !(binary || polar || from_real || unary)) {
    Fail(fmt::format("complex takes dims (code 0..{}, real-input bits), got {}",
                     static_cast<int64_t>(ComplexCode::kSqrt), Shape(node_.dims)));
  }
  Arity(binary || polar ? 2 : 1);
  // The real-input bits each kind requires or allows.
  const int64_t want = polar ? 3 : from_real ? 1 : unary ? 0 : real;
  bool ok = real == want && !(binary && real == 3) && !out_.empty() &&
            (real_out || out_.back() == 2);
  const std::vector<int64_t> zs(out_.begin(), out_.end() - (real_out || out_.empty() ? 0 : 1));
  for (size_t i = 0; ok && i < n_in_; ++i) {
    std::vector<int64_t> s = InSizes(i);
    if (!((real >> i) & 1)) {
      ok = !s.empty() && s.back() == 2;
      if (ok) s.pop_back();
    }
    ok = ok && Broadcasts(s, zs);
  }
  if (!ok) {
    std::vector<std::string> ins;
    for (size_t i = 0; i < n_in_; ++i) ins.push_back(Shape(InSizes(i)));
    Fail(fmt::format("complex op {} (real-input bits {}) of {} cannot give {}", code, real,
                     fmt::join(ins, ", "), Shape(out_)));
  }
}

void NodeCheck::Fft() {
  Arity(1);
  const int64_t kind = node_.dims.size() == 3 ? node_.dims[0] : -1;
  std::vector<int64_t> in = InSizes(0), out = out_;
  bool ok = kind >= 0 && kind <= 2;
  if (ok && kind != 1) {  // c2c, c2r read pairs
    ok = !in.empty() && in.back() == 2;
    if (ok) in.pop_back();
  }
  if (ok && kind != 2) {  // c2c, r2c write pairs
    ok = !out.empty() && out.back() == 2;
    if (ok) out.pop_back();
  }
  const int64_t d = ok ? node_.dims[1] : -1;
  ok = ok && d >= 0 && d < static_cast<int64_t>(in.size()) && in.size() == out.size() &&
       in[d] > 0 && out[d] > 0 && (kind != 0 || in[d] == out[d]) && (kind != 1 || out[d] <= in[d]);
  for (size_t k = 0; ok && k < in.size(); ++k) ok = static_cast<int64_t>(k) == d || in[k] == out[k];
  if (!ok) {
    Fail(fmt::format("fft pass {} of {} cannot give {}", Shape(node_.dims), Shape(InSizes(0)),
                     Shape(out_)));
  }
}

void NodeCheck::BatchNorm() {
  if (n_in_ != 3 && n_in_ != 5) {
    Fail(fmt::format("expects input, mean, var and optionally weight and bias, "
                     "got {} inputs", n_in_));
  }
  const auto& x = InSizes(0);
  bool ok = x.size() >= 2 && out_ == x;
  for (size_t i = 1; ok && i < n_in_; ++i) ok = InSizes(i) == std::vector<int64_t>{x[1]};
  if (!ok) {
    Fail(fmt::format("batch_norm of {} needs [C] statistics and gives {}",
                     Shape(x), Shape(out_)));
  }
}

void NodeCheck::IndexPut() {
  if (n_in_ < 3) Fail(fmt::format("expects self, index tensor(s) and values, got {} inputs", n_in_));
  const auto& d = node_.dims;
  const bool acc_ok = !d.empty() && (d.back() == 0 || d.back() == 1);
  const std::vector<int64_t> dims(d.begin(), d.end() - (d.empty() ? 0 : 1));
  std::vector<int64_t> slice;  // what values broadcast to
  const bool ok = acc_ok && n_in_ == dims.size() + 2 && out_ == InSizes(0) &&
                  IndexResult(dims, &slice) && slice.size() <= static_cast<size_t>(kMaxDims) &&
                  Broadcasts(InSizes(n_in_ - 1), slice);
  if (!ok) {
    Fail(fmt::format("index_put into {} on dims [{}] by {} indices of values {} (accumulate "
                     "{}) cannot give {}", Shape(InSizes(0)), fmt::join(dims, ", "),
                     n_in_ - 2, Shape(InSizes(n_in_ - 1)),
                     d.empty() ? -1 : d.back(), Shape(out_)));
  }
}

void NodeCheck::Pool2d() {
  Arity(1);
  const auto& x = InSizes(0);
  const auto& p = node_.pool;
  const bool avg = node_.op == Op::kAvgPool2d;
  bool ok = x.size() == 4 && out_.size() == 4 && out_[0] == x[0] && out_[1] == x[1] &&
            (!avg || (p.dilation[0] == 1 && p.dilation[1] == 1 && p.divisor_override >= 0));
  for (int d = 0; ok && d < 2; ++d) {
    // ceil_mode may add one window, which must start inside the padded input.
    const int64_t span = p.dilation[d] * (p.kernel[d] - 1) + 1;
    ok = p.kernel[d] > 0 && p.stride[d] > 0 && p.dilation[d] > 0 && p.padding[d] >= 0 &&
         p.padding[d] <= p.kernel[d] / 2 && out_[2 + d] > 0 &&
         (out_[2 + d] - 1) * p.stride[d] - p.padding[d] < x[2 + d] &&
         out_[2 + d] <= (x[2 + d] + 2 * p.padding[d] - span) / p.stride[d] + 2;
  }
  if (!ok) {
    Fail(fmt::format("{} of {} (kernel {}x{}, stride {}x{}) cannot give {}", OpName(node_.op),
                     Shape(x), p.kernel[0], p.kernel[1], p.stride[0],
                     p.stride[1], Shape(out_)));
  }
}

void NodeCheck::Im2Col() {
  Arity(1);
  const bool fold = node_.op == Op::kCol2Im;
  const auto& image = fold ? out_ : InSizes(0);  // [N, C, H, W]
  const auto& cols = fold ? InSizes(0) : out_;   // [N, C*KH*KW, OH*OW]
  const auto& p = node_.pool;
  bool ok = image.size() == 4 && cols.size() == 3 && image[0] == cols[0];
  int64_t blocks = 1;
  for (int d = 0; ok && d < 2; ++d) {
    const int64_t span = p.dilation[d] * (p.kernel[d] - 1) + 1;
    ok = p.kernel[d] > 0 && p.stride[d] > 0 && p.dilation[d] > 0 && p.padding[d] >= 0 &&
         image[2 + d] + 2 * p.padding[d] >= span;
    if (ok) blocks *= (image[2 + d] + 2 * p.padding[d] - span) / p.stride[d] + 1;
  }
  ok = ok && cols[1] == image[1] * p.kernel[0] * p.kernel[1] && cols[2] == blocks;
  if (!ok) {
    Fail(fmt::format("{} of {} (kernel {}x{}, stride {}x{}, padding {}x{}, dilation {}x{}) "
                     "cannot give {}", OpName(node_.op), Shape(InSizes(0)), p.kernel[0],
                     p.kernel[1], p.stride[0], p.stride[1], p.padding[0], p.padding[1],
                     p.dilation[0], p.dilation[1], Shape(out_)));
  }
}

void NodeCheck::XWeightBias() {  // the norms' inputs
  if (n_in_ < 1 || n_in_ > 3) Fail(fmt::format("expects x[, weight[, bias]], got {} inputs", n_in_));
}

void NodeCheck::LayerNorm() {
  XWeightBias();
  const auto& x = InSizes(0);
  const int64_t k = node_.dims.size() == 1 ? node_.dims[0] : -1;
  const std::vector<int64_t> tail(x.end() - std::min<int64_t>(std::max<int64_t>(k, 0), x.size()), x.end());
  if (k < 1 || k > static_cast<int64_t>(x.size()) || out_ != x ||
      (n_in_ > 1 && InSizes(1) != tail) || (n_in_ > 2 && InSizes(2) != tail)) {
    Fail(fmt::format("layer_norm of {} over the last {} dims with weight {} "
                     "and bias {} cannot give {}", Shape(x), k,
                     n_in_ > 1 ? Shape(InSizes(1)) : "none", n_in_ > 2 ? Shape(InSizes(2)) : "none",
                     Shape(out_)));
  }
}

void NodeCheck::GroupNorm() {
  XWeightBias();
  const auto& x = InSizes(0);
  const int64_t g = node_.dims.size() == 1 ? node_.dims[0] : -1;
  const int64_t c = x.size() >= 2 ? x[1] : -1;
  const std::vector<int64_t> param = {c};
  if (x.size() < 2 || g < 1 || c % g != 0 || out_ != x || (n_in_ > 1 && InSizes(1) != param) ||
      (n_in_ > 2 && InSizes(2) != param)) {
    Fail(fmt::format("group_norm of {} in {} groups with weight {} and bias {} cannot give {}",
                     Shape(x), g, n_in_ > 1 ? Shape(InSizes(1)) : "none",
                     n_in_ > 2 ? Shape(InSizes(2)) : "none", Shape(out_)));
  }
}

void NodeCheck::Embedding() {
  Arity(2);
  const auto& t = InSizes(0);
  std::vector<int64_t> want = InSizes(1);
  want.insert(want.end(), t.begin() + (t.empty() ? 0 : 1), t.end());
  const Meta& ix = nodes_[node_.inputs[1]].meta;
  if (t.empty() || out_ != want) {
    Fail(fmt::format("embedding of {} by {} cannot give {}", Shape(t),
                     Shape(InSizes(1)), Shape(out_)));
  }
  if (!ix.strides.empty() && !Contiguous(ix.sizes, ix.strides)) {
    Fail("the index must be contiguous");
  }
}

void NodeCheck::Gather() {
  Arity(2);
  const auto& self = InSizes(0);
  const auto& index = InSizes(1);
  const int64_t d = node_.dims.size() == 1 ? node_.dims[0] : -1;
  bool ok = d >= 0 && d < static_cast<int64_t>(self.size()) &&
            index.size() == self.size() && out_ == index;
  for (size_t k = 0; ok && k < self.size(); ++k) {
    ok = static_cast<int64_t>(k) == d || index[k] <= self[k];
  }
  if (!ok) {
    Fail(fmt::format("gather of {} on dim {} by index {} cannot give {}", Shape(self), d,
                     Shape(index), Shape(out_)));
  }
}

void NodeCheck::Scatter() {
  if (n_in_ != 2 && n_in_ != 3) Fail(fmt::format("takes self, index and src or a scalar, got {} inputs", n_in_));
  const auto& self = InSizes(0);
  const auto& index = InSizes(1);
  const int64_t d = node_.dims.size() == 2 ? node_.dims[0] : -1;
  bool ok = d >= 0 && d < static_cast<int64_t>(self.size()) && index.size() == self.size() &&
            out_ == self && (node_.dims[1] == 0 || node_.dims[1] == 1) &&
            (n_in_ == 2 || InSizes(2).size() == index.size());
  for (size_t k = 0; ok && k < index.size(); ++k) {
    ok = (static_cast<int64_t>(k) == d || index[k] <= self[k]) &&
         (n_in_ == 2 || index[k] <= InSizes(2)[k]);
  }
  if (!ok) {
    Fail(fmt::format("scatter into {} on dims {} by index {}{} cannot give {}", Shape(self),
                     Shape(node_.dims), Shape(index),
                     n_in_ == 3 ? " of src " + Shape(InSizes(2)) : std::string(), Shape(out_)));
  }
}

void NodeCheck::IndexSelect() {
  Arity(2);
  const auto& self = InSizes(0);
  const auto& index = InSizes(1);
  const int64_t d = node_.dims.size() == 1 ? node_.dims[0] : -1;
  std::vector<int64_t> want = self;
  const bool ok = d >= 0 && d < static_cast<int64_t>(self.size()) && index.size() == 1;
  if (ok) want[d] = index[0];
  if (!ok || out_ != want) {
    Fail(fmt::format("index_select of {} on dim {} by index {} cannot give {}", Shape(self), d,
                     Shape(index), Shape(out_)));
  }
}

// The shape self[i0, i1, ...] has for indices inputs 1..k on `dims` (torch's
// advanced-indexing order: kIndex in graph.h); false where dims or the
// indices' broadcast are not valid.
bool NodeCheck::IndexResult(const std::vector<int64_t>& dims, std::vector<int64_t>* result) {
  const auto& self = InSizes(0);
  const size_t k = dims.size();
  bool ok = k >= 1 && n_in_ >= k + 1 && k <= self.size();
  for (size_t j = 0; ok && j < k; ++j) {
    ok = dims[j] >= 0 && dims[j] < static_cast<int64_t>(self.size()) &&
         (j == 0 || dims[j] > dims[j - 1]);
  }
  std::vector<int64_t> b;  // the indices' broadcast shape
  for (size_t j = 1; ok && j <= k; ++j) {
    const auto& s = InSizes(j);
    std::vector<int64_t> r(std::max(b.size(), s.size()), 1);
    for (size_t i = 0; ok && i < r.size(); ++i) {
      const int64_t x = i + b.size() >= r.size() ? b[i + b.size() - r.size()] : 1;
      const int64_t y = i + s.size() >= r.size() ? s[i + s.size() - r.size()] : 1;
      ok = x == y || x == 1 || y == 1;
      r[i] = x == 1 ? y : x;
    }
    b = std::move(r);
  }
  if (!ok) return false;
  const bool adjacent = dims.back() - dims.front() + 1 == static_cast<int64_t>(k);
  const int64_t at = adjacent ? dims.front() : 0;
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < static_cast<int64_t>(self.size()); ++d) {
    if (std::find(dims.begin(), dims.end(), d) == dims.end()) rest.push_back(self[d]);
  }
  result->assign(rest.begin(), rest.begin() + at);
  result->insert(result->end(), b.begin(), b.end());
  result->insert(result->end(), rest.begin() + at, rest.end());
  return true;
}

void NodeCheck::Index() {
  const auto& dims = node_.dims;
  std::vector<int64_t> want;
  if (n_in_ != dims.size() + 1 || !IndexResult(dims, &want) || want != out_) {
    Fail(fmt::format("index of {} on dims [{}] by {} indices cannot give {}", Shape(InSizes(0)),
                     fmt::join(dims, ", "), n_in_ - 1, Shape(out_)));
  }
}

void NodeCheck::Cumsum() {
  Arity(1);
  const auto& x = InSizes(0);
  const int64_t d = node_.dims.size() == 1 ? node_.dims[0] : -1;
  if (d < 0 || d >= static_cast<int64_t>(x.size()) || out_ != x) {
    Fail(fmt::format("{} of {} on dim {} cannot give {}", OpName(node_.op), Shape(x), d,
                     Shape(out_)));
  }
}

void NodeCheck::SolveTriangular() {
  Arity(2);
  const auto& a = InSizes(0);
  const auto& b = InSizes(1);
  const size_t r = out_.size();
  bool ok = node_.dims.size() == 2 && a.size() >= 2 && b.size() >= 2 && r >= 2 &&
            a[a.size() - 1] == a[a.size() - 2] && b[b.size() - 2] == a[a.size() - 1] &&
            out_[r - 2] == b[b.size() - 2] && out_[r - 1] == b[b.size() - 1];
  if (ok) {  // batch dims broadcast to out's
    const std::vector<int64_t> batch(out_.begin(), out_.end() - 2);
    ok = Broadcasts({a.begin(), a.end() - 2}, batch) && Broadcasts({b.begin(), b.end() - 2}, batch);
  }
  if (!ok) {
    Fail(fmt::format("linalg_solve_triangular of {} and {} cannot give {}", Shape(a), Shape(b),
                     Shape(out_)));
  }
}

void NodeCheck::TopkSort() {
  Arity(1);
  const auto& x = InSizes(0);
  const bool topk = node_.op == Op::kTopk;
  const int64_t d = node_.dims.size() == (topk ? 3u : 2u) ? node_.dims[0] : -1;
  bool ok = d >= 0 && d < static_cast<int64_t>(x.size());
  if (ok) {
    std::vector<int64_t> want = x;
    if (topk) want[d] = node_.dims[1];
    ok = (!topk || (node_.dims[1] >= 0 && node_.dims[1] <= x[d])) && out_ == want;
  }
  if (!ok) {
    Fail(fmt::format("{} of {} with attrs {} cannot give {}", OpName(node_.op), Shape(x),
                     Shape(node_.dims), Shape(out_)));
  }
}

void NodeCheck::Argmax() {
  Arity(1);
  const auto& x = InSizes(0);
  const int64_t d = node_.dims.size() == 1 ? node_.dims[0] : -1;
  bool ok = d >= 0 && d < static_cast<int64_t>(x.size()) && x[d] > 0;
  if (ok) {
    std::vector<int64_t> keep = x, drop = x;
    keep[d] = 1;
    drop.erase(drop.begin() + d);
    ok = out_ == keep || out_ == drop;
  }
  if (!ok) {
    Fail(fmt::format("{} of {} on dim {} cannot give {}", OpName(node_.op), Shape(x), d,
                     Shape(out_)));
  }
}

void NodeCheck::Pad() {
  Arity(1);
  const auto& x = InSizes(0);
  const auto& p = node_.dims;
  bool ok = p.size() % 2 == 0 && p.size() / 2 <= x.size() && out_.size() == x.size();
  for (size_t d = 0; ok && d < x.size(); ++d) {
    const size_t from_end = x.size() - 1 - d;
    const int64_t before = 2 * from_end < p.size() ? p[2 * from_end] : 0;
    const int64_t after = 2 * from_end < p.size() ? p[2 * from_end + 1] : 0;
    ok = out_[d] >= 0 && out_[d] == x[d] + before + after;  // negative pads crop
  }
  if (!ok) {
    Fail(fmt::format("constant_pad_nd of {} by [{}] cannot give {}", Shape(x), fmt::join(p, ", "),
                     Shape(out_)));
  }
}

void NodeCheck::SliceScatter() {
  Arity(2);
  const auto& x = InSizes(0);
  const auto& src = InSizes(1);
  const auto& a = node_.dims;
  bool ok = a.size() == 4 && out_ == x && src.size() == x.size() && a[0] >= 0 &&
            a[0] < static_cast<int64_t>(x.size());
  if (ok) {
    const size_t d = static_cast<size_t>(a[0]);
    const int64_t start = a[1], end = a[2], step = a[3];
    ok = 0 <= start && start <= end && end <= x[d] && step > 0;
    for (size_t i = 0; ok && i < x.size(); ++i) {
      ok = src[i] == (i == d ? (end - start + step - 1) / step : x[i]);
    }
  }
  if (!ok) {
    Fail(fmt::format("slice_scatter of {} into {} with (dim, start, end, step) = [{}]",
                     Shape(src), Shape(x), fmt::join(a, ", ")));
  }
}

void NodeCheck::Reduction() {
  Arity(1);
  const int nd = static_cast<int>(InSizes(0).size());
  const bool softmax = node_.op == Op::kSoftmax || node_.op == Op::kLogSoftmax;
  if (softmax && node_.dims.size() != 1) {
    Fail(fmt::format("expects exactly one dim, got {}", node_.dims.size()));
  }
  uint32_t seen = 0;
  for (int64_t& d : node_.dims) {
    if (d < -std::max(nd, 1) || d >= std::max(nd, 1)) {
      Fail(fmt::format("dim {} out of range for a {}-D input {}", d, nd,
                       Shape(InSizes(0))));
    }
    if (d < 0) d += std::max(nd, 1);
    if (seen & (1u << d)) Fail(fmt::format("dim {} repeated", d));
    seen |= 1u << d;
  }
  if (softmax) {
    if (out_ != InSizes(0)) Fail("output sizes must equal the input's");
  } else {
    const int kept = nd - static_cast<int>(node_.dims.size());
    std::vector<int64_t> keep, drop;
    for (int d = 0; d < nd; ++d) {
      const bool red = node_.dims.empty() || (seen & (1u << d));
      keep.push_back(red ? 1 : InSizes(0)[d]);
      if (!red) drop.push_back(InSizes(0)[d]);
    }
    if (out_ != keep && out_ != drop) {
      Fail(fmt::format("output {} is not {} reduced over its dims (kept {} dims)",
                       Shape(out_), Shape(InSizes(0)), kept));
    }
  }
}

void NodeCheck::Shapes() {
  if ((IsBinaryOp(node_.op) || IsUnaryOp(node_.op) || node_.op == Op::kWhere) &&
      node_.op != Op::kCast) {
    for (size_t i = 0; i < n_in_; ++i) {
      if (!Broadcasts(InSizes(i), out_)) {
        Fail(fmt::format("input {} of sizes {} does not broadcast to {}", i,
                         Shape(InSizes(i)), Shape(out_)));
      }
    }
  }
  if (node_.op == Op::kCast && InSizes(0) != out_) {
    Fail(fmt::format("cast of {} cannot have sizes {}", Shape(InSizes(0)),
                     Shape(out_)));
  }
}

}  // namespace

int Graph::AddInput(const Meta& meta) {
  Node node;
  node.op = Op::kInput;
  node.meta = meta;
  CheckMeta(nodes_.size(), node);
  nodes_.push_back(std::move(node));
  inputs_.push_back(static_cast<int>(nodes_.size()) - 1);
  return inputs_.back();
}

int Graph::AddNode(Node node) {
  NodeCheck(nodes_, node).Run();
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

void Graph::SetOutputs(std::vector<int> outputs) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (outputs[i] < 0 || static_cast<size_t>(outputs[i]) >= nodes_.size()) {
      throw trn::InvalidArgument(fmt::format(
          "trn compiler: graph output {} refers to value {}, but only values 0..{} exist", i,
          outputs[i], static_cast<int64_t>(nodes_.size()) - 1));
    }
  }
  outputs_ = std::move(outputs);
}

namespace {
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void Mix(uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    h *= 0x100000001b3ull;
  }
  void MixDouble(double d) { Mix(std::bit_cast<uint64_t>(d)); }
  void MixString(const std::string& s) {
    Mix(s.size());
    for (char c : s) Mix(static_cast<uint8_t>(c));
  }
};
}  // namespace

uint64_t Graph::Hash() const {
  Hasher h;
  h.Mix(nodes_.size());
  for (const Node& n : nodes_) {
    h.Mix(static_cast<uint64_t>(n.op));
    h.Mix(static_cast<uint64_t>(n.meta.dtype));
    h.Mix(n.meta.sizes.size());  // rank is structural, extents are not
    h.MixString(n.target);
    h.Mix(n.inputs.size());
    for (int i : n.inputs) h.Mix(static_cast<uint64_t>(i));
    h.Mix(n.dims.size());
    for (int64_t d : n.dims) h.Mix(static_cast<uint64_t>(d));
    h.MixDouble(n.scalar);
    h.Mix((n.has_scalar ? 1 : 0) | (n.scalar_first ? 2 : 0));
    h.MixDouble(n.alpha);
    h.MixDouble(n.beta);
    h.MixDouble(n.eps);
    h.Mix(n.causal);
    h.Mix(n.pure);
    for (int d = 0; d < Node::kConvDims; ++d) {
      h.Mix(static_cast<uint64_t>(n.conv.stride[d]));
      h.Mix(static_cast<uint64_t>(n.conv.padding[d]));
      h.Mix(static_cast<uint64_t>(n.conv.padding_end[d]));
      h.Mix(static_cast<uint64_t>(n.conv.dilation[d]));
    }
    h.Mix(static_cast<uint64_t>(n.conv.groups));
    for (int d = 0; d < 2; ++d) {
      for (int64_t a : {n.pool.kernel[d], n.pool.stride[d], n.pool.padding[d], n.pool.dilation[d]}) {
        h.Mix(static_cast<uint64_t>(a));
      }
    }
    h.Mix(n.pool.count_include_pad);
    h.Mix(static_cast<uint64_t>(n.pool.divisor_override));
  }
  h.Mix(outputs_.size());
  for (int o : outputs_) h.Mix(static_cast<uint64_t>(o));
  return h.h;
}

}  // namespace trn::compiler
