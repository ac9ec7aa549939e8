// Pass 5a, lower rows (called by Lower): a row group (or a matmul's
// epilogue) becomes a row program (Note [Row programs]), in stages:
//   SplitRows      the domain S split into outer dims walked as rows and the row;
//   BuildMicroOps  each member node as micro-ops over chunks and per-row scalars,
//                  with peepholes (x*y*z, sum of squares, exp(x - max));
//   AssignPhases   a phase per reduction level; values read in a later phase spill;
//   Emit           per phase, chunk instructions and per-row scalar work;
//   AllocateChunkRegisters  linear scan over each phase's virtual registers;
//   Finish         row pipelining, chunk length.
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>
#include <vector>

#include "core/common/assert.h"
#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {
namespace {

// Outputs at least this large are streamed past the cache (as rms_norm does).
constexpr uint64_t kStreamBytes = uint64_t{64} << 20;
// Elementwise rows shorter than this take the next dim in (Note [Elementwise walk order]).
constexpr int64_t kShortRow = 512;

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


// A finite power of two whose reciprocal is a normal float: x / s == x * (1 / s)
// bit for bit.
bool IsPowerOfTwo(double s) {
  if (!std::isfinite(s) || s == 0) return false;
  int e = 0;
  const double m = std::frexp(std::fabs(s), &e);
  return m == 0.5 && e > -120 && e < 120;
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

// How a memory value is read or written: over the whole domain S, or per
// row (S with the reduced dims kept as size 1, or dropped).
enum class ReadAs : uint8_t { kFull, kRowKeepdim, kRowDropped };

// Lowers one group; owns the micro-ops and registers while it runs.
class RowLowering {
 public:
  RowLowering(const KernelGraph& ir, const std::vector<Buffer>& buffers, const Group& g,
              KernelImpl& ki)
      : ir_(ir), buffers_(buffers), g_(g), ki_(ki), p_(ki.prog),
        is_mm_(g.kind == Group::Kind::kMatmul) {}

  void Run() {
    SplitRows();
    BuildMicroOps();
    AssignPhases();
    EmitScalars();
    for (int ph = 0; ph <= max_level_; ++ph) EmitPhase(ph);
    AllocateChunkRegisters();
    Finish();
  }

 private:
  void SplitRows();
  Operand MakeOperand(const View& v, const Sizes& as, bool rotate_half = false) const;

  void BuildMicroOps();
  int LowerNode(int id);  // returns the MV of the node's value
  int Add(MV m);
  int Imm(double v);
  int OperandFor(const View& view, int key_value, ReadAs as, bool write);
  int ArgOf(int v, const Sizes& O);  // the MV reading value v as sizes O
  bool OnlyUser(int x);
  int Op1(VOp op, int a, bool row);
  int Op2(VOp op, int a, int b, bool row);
  int Reduce(RedOp r, int a, float scale);

  int DirectStore(int x) const;  // a contiguous f32 output x is stored to, or -1
  void AssignPhases();
  int Level(int x) const { return x < 0 || mv_[x].reloadable ? 0 : mv_[x].level; }
  void EmitScalars();
  void EmitPhase(int ph);
  Arg Use(int x, int ph);  // x as an argument in phase ph (reloaded if made earlier)
  int NewSreg(float init) {
    p_.scalar_init.push_back(init);
    return num_sregs_++;
  }
  void AllocateChunkRegisters();
  void Finish();

  const KernelGraph& ir_;
  const std::vector<Buffer>& buffers_;
  const Group& g_;
  KernelImpl& ki_;
  RowProgram& p_;
  const bool is_mm_;
  // Row-program split of S.
  struct Split {
    int nouter = 0;
    std::vector<int> outer_dims;  // dims of S walked as rows
    std::vector<int> inner_dims;  // dims of S forming the row
    int64_t inner = 1;
  } split_;
  Sizes row_keep_, row_drop_;
  float inv_r_ = 1;  // 1 / R: a mean's scale
  // Micro-ops.
  std::vector<MV> mv_;
  std::map<int, int> value_mv_;                   // in-group node -> MV
  std::map<std::pair<int, ReadAs>, int> loads_;   // (value, read as) -> MV
  std::map<std::pair<int, ReadAs>, int> op_of_;   // (value, read as) -> operand
  std::map<int, int> node_uses_;                  // in-group readers per member node
  // Phases and registers.
  int max_level_ = 0;
  std::vector<int> spill_;   // per MV: spill slot, or -1
  std::vector<int> reload_;  // per MV: the output it is computed into and re-read from, or -1
  std::vector<int> sreg_;   // per MV: scalar register, or -1
  int num_sregs_ = 0, num_accs_ = 0, num_v_ = 0;
  std::map<std::pair<int, int>, int> vreg_;  // (MV, phase) -> virtual chunk register
};

void RowLowering::SplitRows() {
  const int n = static_cast<int>(g_.S.size());
  split_ = Split();
  if (g_.k > 0 || is_mm_) {
    const int k = is_mm_ ? (n > 0 ? 1 : 0) : g_.k;
    for (int d = 0; d < n - k; ++d) {
      if (g_.S[d] != 1 || is_mm_) split_.outer_dims.push_back(d);
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
        if (vd >= 0 && v.sizes[vd] != 1 && v.sizes[vd] == g_.S[i]) st[i] = v.strides[vd];
      }
      strides.push_back(st);
    };
    // Written operands first: they decide the walk order.
    for (int id : g_.nodes) {
      if (ir_.vals[id].materialized) collect(ir_.vals[id].view, g_.S);
    }
    for (int id : g_.nodes) {
      for (int v : ir_.N(id).inputs) {
        if (ir_.IsConst(v) || ir_.InGroup(v, ir_.group_of[id]) >= 0) continue;
        collect(ir_.vals[v].view, g_.S);
      }
    }
    // Note [Elementwise walk order]: dims are walked in the memory order of
    // the operands (outermost = largest stride of the first operand that
    // tells them apart), as TensorIterator does, so a permuted output (a
    // transposed head layout) is written sequentially and more dims merge.
    std::vector<int> order;
    for (int d = 0; d < n; ++d) {
      if (g_.S[d] != 1) order.push_back(d);
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
    // A rotate_half swaps halves of the last dim within each row (Note [Rotate half]).
    const bool rotates = std::any_of(g_.nodes.begin(), g_.nodes.end(), [&](int id) {
      return ir_.N(id).op == Op::kRotateHalf;
    });
    const auto last = std::find(order.begin(), order.end(), n - 1);
    if (rotates && last != order.end()) std::rotate(last, last + 1, order.end());
    std::vector<std::vector<int>> merged;  // groups of dims of S, outermost first
    for (int d : order) {
      bool merge = !merged.empty();
      if (merge) {
        const int prev = merged.back().back();
        for (const Sizes& st : strides) merge = merge && st[prev] == st[d] * g_.S[d];
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
      for (int d : merged.back()) inner *= g_.S[d];
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
  for (int d : split_.inner_dims) split_.inner *= g_.S[d];
  p_.nouter = split_.nouter;
  p_.rows = 1;
  for (int i = 0; i < split_.nouter; ++i) {
    p_.outer_sizes[i] = g_.S[split_.outer_dims[i]];
    p_.rows *= p_.outer_sizes[i];
  }
  p_.inner = split_.inner;
}

// Operand for a view read (or written) as a value of sizes `as` (broadcast
// right-aligned to S, or to the outer dims of S for non-keepdim row values).
Operand RowLowering::MakeOperand(const View& v, const Sizes& as, bool rotate_half) const {
  const int n = static_cast<int>(g_.S.size());
  Sizes st(n, 0);
  const int vn = static_cast<int>(v.sizes.size());
  const int an = static_cast<int>(as.size());
  // `as` is S, keepdim row sizes (n dims) or non-keepdim row sizes (n-k dims,
  // aligned to the front of S).
  for (int i = 0; i < an; ++i) {
    const int vd = vn - an + i;
    if (vd < 0) continue;
    const int sd = i;  // as-dim i is S-dim i (an == n or an == n - k)
    if (v.sizes[vd] != 1 && v.sizes[vd] == g_.S[sd]) st[sd] = v.strides[vd];
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
    if (g_.S[d] == 1) continue;
    if (!levels.empty() && st[d] == levels.back().second * levels.back().first) {
      levels.back().first *= g_.S[d];
    } else {
      levels.emplace_back(g_.S[d], st[d]);
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
        off += (rem % g_.S[d]) * st[d];
        rem /= g_.S[d];
      }
      o.gather[i] = off;
    }
  }
  if (rotate_half) {
    // Row element i is element i % 2h of the last dim (Note [Rotate half]).
    TRN_ASSERT(!split_.inner_dims.empty() && split_.inner_dims.back() == n - 1,
               "rotate_half: the last dim must be the row's innermost");
    o.rotate_half = g_.S[n - 1] / 2;
  }
  return o;
}

int RowLowering::Add(MV m) {
  for (int x : {m.a, m.b, m.c}) {
    if (x >= 0) mv_[x].users++;
  }
  mv_.push_back(m);
  return static_cast<int>(mv_.size()) - 1;
}

int RowLowering::Imm(double v) {
  MV m;
  m.k = MV::K::kImm;
  m.row = true;
  m.imm = static_cast<float>(v);
  return Add(m);
}

int RowLowering::OperandFor(const View& view, int key_value, ReadAs as, bool write) {
  const auto key = std::make_pair(write ? -1 - key_value : key_value, as);
  auto it = op_of_.find(key);
  if (it != op_of_.end()) return it->second;
  const Sizes& sizes = as == ReadAs::kFull         ? g_.S
                       : as == ReadAs::kRowKeepdim ? row_keep_
                                                   : row_drop_;
  p_.operands.push_back(MakeOperand(view, sizes));
  op_of_[key] = static_cast<int>(p_.operands.size()) - 1;
  return op_of_[key];
}

int RowLowering::ArgOf(int v, const Sizes& O) {
  if (ir_.IsConst(v)) return Imm(ir_.N(v).scalar);
  const int in = ir_.InGroup(v, ir_.group_of[g_.nodes[0]]);
  if (in >= 0 && value_mv_.count(in)) return value_mv_[in];
  const ReadAs as = SameUpToLeadingOnes(O, g_.S) ? ReadAs::kFull
                    : O == row_keep_             ? ReadAs::kRowKeepdim
                                                 : ReadAs::kRowDropped;
  const auto key = std::make_pair(v, as);
  auto it = loads_.find(key);
  if (it != loads_.end()) return it->second;
  const int o = OperandFor(ir_.vals[v].view, v, as, false);
  ki_.reads.push_back(ir_.vals[v].view);
  MV m;
  const Operand& op = p_.operands[o];
  const bool row_scalar = as != ReadAs::kFull || (g_.k > 0 && op.gather.empty() &&
                                                  op.seg_len == 0 && op.inner_stride == 0);
  m.k = row_scalar ? MV::K::kScalarLoad : MV::K::kLoad;
  m.row = row_scalar;
  m.reloadable = !row_scalar;
  m.operand = o;
  const int id = Add(m);
  loads_[key] = id;
  return id;
}

// Readers of x beyond those already emitted: none may exist for a peephole.
bool RowLowering::OnlyUser(int x) {
  if (!mv_[x].stores.empty() || mv_[x].users != 0) return false;
  return mv_[x].node < 0 || node_uses_[mv_[x].node] == 1;
}

int RowLowering::Op1(VOp op, int a, bool row) {
  MV m;
  m.op = op;
  m.a = a;
  m.row = row;
  return Add(m);
}

int RowLowering::Op2(VOp op, int a, int b, bool row) {
  // (x * y) * z with x * y used nowhere else: one pass (rms_norm's tail).
  if (op == VOp::kMul && !row && mv_[a].k == MV::K::kOp && mv_[a].op == VOp::kMul &&
      !mv_[a].row && OnlyUser(a) && mv_[a].a != mv_[a].b) {
    MV m;
    m.op = VOp::kMulMul;
    m.a = mv_[a].a;
    m.b = mv_[a].b;
    m.c = b;
    mv_[a].dead = true;
    mv_[mv_[a].a].users--;
    mv_[mv_[a].b].users--;
    return Add(m);
  }
  MV m;
  m.op = op;
  m.a = a;
  m.b = b;
  m.row = row;
  return Add(m);
}

int RowLowering::Reduce(RedOp r, int a, float scale) {
  MV m;
  m.k = MV::K::kReduce;
  m.red = r;
  m.a = a;
  m.scale = scale;
  m.row = true;
  // rms_norm's pow(x, 2) + sum: one sum-of-squares pass.
  if (r == RedOp::kSum && mv_[a].k == MV::K::kOp && mv_[a].op == VOp::kSquare && OnlyUser(a)) {
    m.red = RedOp::kSumSq;
    m.a = mv_[a].a;
    mv_[a].dead = true;
    mv_[mv_[a].a].users--;
  }
  return Add(m);
}

void RowLowering::BuildMicroOps() {
  row_keep_ = ir_.RowSizes(g_, true);
  row_drop_ = ir_.RowSizes(g_, false);
  for (int id : g_.nodes) {
    for (int v : ir_.N(id).inputs) {
      const int in = ir_.InGroup(v, ir_.group_of[id]);
      if (in >= 0) node_uses_[in]++;
    }
  }
  inv_r_ = 1.0f / static_cast<float>(std::max<int64_t>(split_.inner, 1));
  if (is_mm_) {  // the GEMM result: the kernel's scratch block
    const int mm = g_.nodes[0];
    MV m;
    m.k = MV::K::kScratch;
    m.reloadable = true;
    Operand o;
    o.buffer = -1;
    o.dtype = ir_.N(mm).meta.dtype;
    o.inner_stride = 1;
    p_.operands.push_back(o);
    m.operand = static_cast<int>(p_.operands.size()) - 1;
    value_mv_[mm] = Add(m);
  }
  for (int id : g_.nodes) {
    if (is_mm_ && id == g_.nodes[0]) continue;
    const int res = LowerNode(id);
    value_mv_[id] = res;
    if (mv_[res].node < 0) mv_[res].node = id;
    if (ir_.vals[id].materialized) {
      const bool row = g_.row.at(id);
      const ReadAs as = !row                                   ? ReadAs::kFull
                        : ir_.N(id).meta.sizes == row_keep_ ? ReadAs::kRowKeepdim
                                                               : ReadAs::kRowDropped;
      const int o = OperandFor(ir_.vals[id].view, id, as, true);
      mv_[res].stores.push_back(o);
      ki_.writes.push_back(ir_.vals[id].view);
    }
  }
  const int first = g_.nodes[0];
  if (is_mm_ && ir_.vals[first].materialized) {  // the GEMM result itself is read elsewhere
    // Stored over the row domain: after Note [Epilogue through a reshape] S
    // is [B, S, N] and the (contiguous) [M, N] result is that shape in memory.
    View v = ir_.vals[first].view;
    if (!SameUpToLeadingOnes(v.sizes, g_.S)) {
      v.sizes = g_.S;
      v.strides = ContiguousStrides(g_.S);
    }
    const int o = OperandFor(v, first, ReadAs::kFull, true);
    mv_[value_mv_[first]].stores.push_back(o);
    ki_.writes.push_back(ir_.vals[first].view);
  }
}

int RowLowering::LowerNode(int id) {
  const Node& nd = ir_.N(id);
  const bool row = g_.row.at(id);
  const Sizes& O = IsReductionOp(nd.op) || IsSoftmaxOp(nd.op) ? g_.S : nd.meta.sizes;
  int res = -1;
  if (IsBinaryOp(nd.op)) {
    int a = ArgOf(nd.inputs[0], O);
    int b = nd.has_scalar ? Imm(nd.scalar) : ArgOf(nd.inputs[1], O);
    if (nd.has_scalar && nd.scalar_first) std::swap(a, b);
    const bool scalar_exp = nd.op == Op::kPow && nd.has_scalar && !nd.scalar_first;
    if ((nd.op == Op::kAdd || nd.op == Op::kSub) && nd.alpha != 1.0) {
      b = Op2(VOp::kMul, b, Imm(nd.alpha), mv_[b].row);
    }
    static const VOp kMap[] = {VOp::kAdd, VOp::kSub, VOp::kMul, VOp::kDiv, VOp::kPow,
                               VOp::kMax, VOp::kMin, VOp::kEq,  VOp::kNe,  VOp::kLt,
                               VOp::kLe,  VOp::kGt,  VOp::kGe};
    const VOp op = kMap[static_cast<int>(nd.op) - static_cast<int>(Op::kAdd)];
    if (scalar_exp && nd.scalar == 2.0) {
      res = Op1(VOp::kSquare, a, row);
    } else if (scalar_exp && nd.scalar == 1.0) {
      res = Op1(VOp::kCopy, a, row);
    } else if (scalar_exp && nd.scalar == 0.5) {
      res = Op1(VOp::kSqrt, a, row);
    } else if (scalar_exp && nd.scalar == -0.5) {
      res = Op1(VOp::kRsqrt, a, row);
    } else if (scalar_exp && nd.scalar == -1.0) {
      res = Op1(VOp::kReciprocal, a, row);
    } else if (scalar_exp && nd.scalar == 3.0) {
      res = Op2(VOp::kMul, Op1(VOp::kSquare, a, row), a, row);
    } else if (op == VOp::kDiv && nd.has_scalar && !nd.scalar_first &&
               IsPowerOfTwo(nd.scalar)) {
      // x / 2^k == x * 2^-k exactly (scores / sqrt(head_dim)): a multiply.
      res = Op2(VOp::kMul, a, Imm(1.0 / nd.scalar), row);
    } else {
      res = Op2(op, a, b, row);
    }
  } else if (nd.op == Op::kWhere) {
    MV m;
    m.op = VOp::kWhere;
    m.a = ArgOf(nd.inputs[0], O);
    m.b = ArgOf(nd.inputs[1], O);
    m.c = ArgOf(nd.inputs[2], O);
    m.row = row;
    res = Add(m);
  } else if (nd.op == Op::kCast || nd.op == Op::kClone) {
    const int a = ArgOf(nd.inputs[0], O);
    const DType dt = nd.meta.dtype;
    if (nd.op == Op::kCast && dt != DType::kFloat32 && dt != DType::kFloat64) {
      MV m;
      m.op = VOp::kRound;
      m.round = dt;
      m.a = a;
      m.row = row;
      res = Add(m);
    } else {
      res = Op1(VOp::kCopy, a, row);
    }
  } else if (IsUnaryOp(nd.op)) {
    static const VOp kMap[] = {VOp::kNeg,  VOp::kAbs,     VOp::kRelu, VOp::kExp,
                               VOp::kLog,  VOp::kSqrt,    VOp::kRsqrt, VOp::kReciprocal,
                               VOp::kSigmoid, VOp::kTanh, VOp::kSilu, VOp::kGelu,
                               VOp::kGeluTanh, VOp::kSin, VOp::kCos, VOp::kLog1p,
                               VOp::kExpm1, VOp::kErf};
    static_assert(std::size(kMap) == static_cast<int>(Op::kCast) - static_cast<int>(Op::kNeg),
                  "one VOp per unary Op from kNeg up to kCast");
    res = Op1(kMap[static_cast<int>(nd.op) - static_cast<int>(Op::kNeg)],
              ArgOf(nd.inputs[0], O), row);
  } else if (nd.op == Op::kRotateHalf) {  // a load with halves swapped (Note [Rotate half])
    const View& x = ir_.vals[nd.inputs[0]].view;
    p_.operands.push_back(MakeOperand(x, g_.S, true));
    ki_.reads.push_back(x);
    MV m;
    m.k = MV::K::kLoad;
    m.reloadable = true;
    m.operand = static_cast<int>(p_.operands.size()) - 1;
    res = Add(m);
  } else if (IsReductionOp(nd.op)) {
    int x = ArgOf(nd.inputs[0], g_.S);
    if (mv_[x].row) x = Op1(VOp::kCopy, x, false);  // a broadcast input: make it a chunk
    switch (nd.op) {
      case Op::kSum: res = Reduce(RedOp::kSum, x, 1.0f); break;
      case Op::kMean: res = Reduce(RedOp::kSum, x, inv_r_); break;
      case Op::kAmax: res = Reduce(RedOp::kMax, x, 1.0f); break;
      default: res = Reduce(RedOp::kMin, x, 1.0f); break;
    }
  } else if (nd.op == Op::kConstant) {
    res = Op1(VOp::kCopy, Imm(nd.scalar), false);
  } else if (IsSoftmaxOp(nd.op)) {
    int x = ArgOf(nd.inputs[0], g_.S);
    if (mv_[x].row) x = Op1(VOp::kCopy, x, false);
    const int m = Reduce(RedOp::kMax, x, 1.0f);
    // softmax never reads x - max again: exp(x - max) in one pass.
    const int t = nd.op == Op::kSoftmax ? -1 : Op2(VOp::kSub, x, m, false);
    const int e = nd.op == Op::kSoftmax ? Op2(VOp::kExpSub, x, m, false)
                                        : Op1(VOp::kExp, t, false);
    const int s = Reduce(RedOp::kSum, e, 1.0f);
    if (nd.op == Op::kSoftmax) {
      // One reciprocal per row and a multiply, as the eager softmax kernel does.
      res = Op2(VOp::kMul, e, Op1(VOp::kReciprocal, s, true), false);
    } else {
      res = Op2(VOp::kSub, t, Op1(VOp::kLog, s, true), false);
    }
  } else {
    TRN_ASSERT(false, "LowerRows: node is not fusable");
  }
  return res;
}

// Note [Re-read outputs]: a value stored to an output and read again in a
// later phase (a residual sum that is both the block's output and the input
// of the norm after it) is computed straight into the output and re-read
// from there, row by row, instead of into a spill slot plus a store: one
// pass less over the row. The output is this kernel's own write, so no other
// operand aliases it (Note [Temp arena]).
int RowLowering::DirectStore(int x) const {
  for (int o : mv_[x].stores) {
    if (p_.operands[o].buffer >= 0 && p_.operands[o].direct()) return o;
  }
  return -1;
}

void RowLowering::AssignPhases() {
  for (size_t i = 0; i < mv_.size(); ++i) {
    MV& m = mv_[i];
    if (m.dead) continue;
    if (m.k == MV::K::kOp) {
      m.level = std::max({Level(m.a), Level(m.b), Level(m.c)});
    } else if (m.k == MV::K::kReduce) {
      m.level = Level(m.a) + 1;  // the scalar exists once the reducing phase is done
    }
    max_level_ = std::max(max_level_, m.level);
  }
  // Full values read in a later phase than they are made in are spilled,
  // unless they are stored to a contiguous f32 output (Note [Re-read outputs]).
  spill_.assign(mv_.size(), -1);
  reload_.assign(mv_.size(), -1);
  int num_spills = 0;
  for (size_t i = 0; i < mv_.size(); ++i) {
    const MV& m = mv_[i];
    if (m.dead || m.row) continue;
    const int use_level = m.k == MV::K::kReduce ? -1 : m.level;
    for (int x : {m.a, m.b, m.c}) {
      if (x < 0 || mv_[x].row || mv_[x].reloadable || mv_[x].dead) continue;
      // A reduction reads its input in the input's own phase.
      const int at = m.k == MV::K::kReduce ? mv_[x].level : use_level;
      if (at <= mv_[x].level || spill_[x] >= 0 || reload_[x] >= 0) continue;
      const int out = mv_[x].k == MV::K::kOp ? DirectStore(x) : -1;
      if (out >= 0) {
        reload_[x] = out;
      } else {
        spill_[x] = num_spills++;
      }
    }
  }
  for (size_t i = 0; i < mv_.size(); ++i) {  // last phase that reads each value
    const MV& m = mv_[i];
    if (m.dead) continue;
    const int at = m.k == MV::K::kReduce ? Level(m.a) : m.level;
    for (int x : {m.a, m.b, m.c}) {
      if (x >= 0) mv_[x].last_user_level = std::max(mv_[x].last_user_level, at);
    }
  }
  p_.num_spills = num_spills;
}

void RowLowering::EmitScalars() {
  p_.phases.assign(static_cast<size_t>(max_level_) + 1, Phase());
  sreg_.assign(mv_.size(), -1);
  // Immediates and per-row loads in phase 0, per-row math at its level (EmitPhase).
  for (size_t i = 0; i < mv_.size(); ++i) {
    MV& m = mv_[i];
    if (m.dead || !m.row) continue;
    if (m.k == MV::K::kImm) {
      sreg_[i] = NewSreg(m.imm);
    } else if (m.k == MV::K::kScalarLoad) {
      sreg_[i] = NewSreg(0);
      ScalarInstr si;
      si.kind = ScalarInstr::Kind::kLoad;
      si.dst = sreg_[i];
      si.a = m.operand;
      p_.phases[0].pre.push_back(si);
    }
  }
}

Arg RowLowering::Use(int x, int ph) {
  Arg a;
  if (x < 0) return a;
  if (mv_[x].row) {
    a.scalar = true;
    a.reg = sreg_[x];
    TRN_ASSERT(a.reg >= 0, "per-row value used before it is computed");
    return a;
  }
  auto key = std::make_pair(x, ph);
  auto it = vreg_.find(key);
  if (it != vreg_.end()) {
    a.reg = it->second;
    return a;
  }
  // Not made in this phase: reload it from memory or from its spill slot.
  Instr in;
  in.kind = Instr::Kind::kLoad;
  in.dst = num_v_++;
  if (mv_[x].reloadable) {
    in.operand = mv_[x].operand;
  } else if (reload_[x] >= 0) {
    in.operand = reload_[x];
  } else {
    TRN_ASSERT(spill_[x] >= 0, "value read in a later phase was not spilled");
    in.spill = spill_[x];
  }
  p_.phases[ph].body.push_back(in);
  vreg_[key] = in.dst;
  a.reg = in.dst;
  return a;
}

// Per phase, chunk registers are virtual ids, renumbered by
// AllocateChunkRegisters.
void RowLowering::EmitPhase(int ph) {
  Phase& phase = p_.phases[ph];
  for (size_t i = 0; i < mv_.size(); ++i) {
    MV& m = mv_[i];
    if (m.dead) continue;
    if (m.row && m.k == MV::K::kOp && m.level == ph) {
      ScalarInstr si;
      si.kind = ScalarInstr::Kind::kCompute;
      si.op = m.op;
      si.round = m.round;
      si.a = m.a >= 0 ? sreg_[m.a] : -1;
      si.b = m.b >= 0 ? sreg_[m.b] : -1;
      si.c = m.c >= 0 ? sreg_[m.c] : -1;
      sreg_[i] = NewSreg(0);
      si.dst = sreg_[i];
      phase.pre.push_back(si);
    }
    if (m.row && m.level == ph && (m.k == MV::K::kOp || m.k == MV::K::kScalarLoad ||
                                   m.k == MV::K::kReduce)) {
      for (int o : m.stores) {
        ScalarInstr st;
        st.kind = ScalarInstr::Kind::kStore;
        st.dst = o;
        st.a = sreg_[i];
        phase.pre.push_back(st);
      }
    }
    if (m.k == MV::K::kReduce && Level(m.a) == ph) {
      Instr in;
      in.kind = Instr::Kind::kReduce;
      in.red = m.red;
      in.dst = num_accs_++;
      in.a = Use(m.a, ph);
      phase.body.push_back(in);
      phase.reductions.push_back({in.dst, m.red});
      ScalarInstr fin;
      fin.kind = ScalarInstr::Kind::kFinish;
      sreg_[i] = NewSreg(0);
      fin.dst = sreg_[i];
      fin.a = in.dst;
      fin.scale = m.scale;
      phase.post.push_back(fin);
    }
    if (!m.row && m.k == MV::K::kOp && m.level == ph) {
      Instr in;
      in.kind = Instr::Kind::kCompute;
      in.op = m.op;
      in.round = m.round;
      in.a = Use(m.a, ph);
      in.b = Use(m.b, ph);
      in.c = Use(m.c, ph);
      in.dst = num_v_++;
      in.spill = spill_[i];
      // Computed straight into a contiguous f32 output when possible.
      const int direct = in.spill < 0 ? DirectStore(static_cast<int>(i)) : -1;
      if (direct >= 0) {
        in.out_operand = direct;
        const Buffer& b = buffers_[p_.operands[direct].buffer];
        in.stream = b.numel * 4 >= static_cast<int64_t>(kStreamBytes) && m.users == 0;
        p_.stream = p_.stream || in.stream;
      }
      phase.body.push_back(in);
      vreg_[{static_cast<int>(i), ph}] = in.dst;
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
      const Arg a = Use(static_cast<int>(i), ph);
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

void RowLowering::AllocateChunkRegisters() {
  // Linear-scan renumbering of chunk registers per phase (loads that alias
  // memory still take a slot: vp[] is indexed by register).
  int num_phys = 0;
  for (Phase& phase : p_.phases) {
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
  p_.num_vregs = num_phys;
}

void RowLowering::Finish() {
  p_.num_accs = num_accs_;
  p_.pipeline_instr = PipelineInstr(p_);
  p_.chunk = ChunkLength(p_);
  // A rotate_half load swaps halves within its chunk (Note [Rotate half]):
  // chunks hold whole 2h-blocks and stay 16-float aligned.
  for (const Operand& o : p_.operands) {
    if (o.rotate_half == 0) continue;
    const int64_t block = std::lcm<int64_t>(2 * o.rotate_half, 16);
    p_.chunk = std::max(block, p_.chunk / block * block);
  }
}

}  // namespace

void LowerRows(const KernelGraph& ir, const std::vector<Buffer>& buffers, const Group& g,
               KernelImpl& ki) {
  RowLowering(ir, buffers, g, ki).Run();
}

}  // namespace trn::compiler::internal
