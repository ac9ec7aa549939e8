// Pass 1, prepare: the KernelGraph of a graph: pass-through reshapes
// rewired (Note [Pass-through reshapes]), rotary embeddings' rotate_half
// recognised (Note [Rotate half]), attention reading past q/k/v clones (Note
// [Clones before attention]), each value's users, and liveness
// (dead-code elimination; eager nodes always run).
#include <vector>

#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {
namespace {

// Note [Pass-through reshapes]
// mm -> _unsafe_view [1, M, N] -> add(residual) is the residual add of every
// Linear. The view only adds leading size-1 dims to a contiguous result, so
// under right-aligned broadcasting an elementwise consumer reads the same
// element from the view and from its source: the consumer is rewired to read
// the source itself, and can then join the source's group (a matmul
// epilogue). Only pure re-indexings qualify: contiguous view at offset 0 of a
// contiguous computed value, same dtype, sizes equal up to leading ones.
void RewirePassThroughReshapes(std::vector<Node>& nodes) {
  auto contiguous_meta = [](const Meta& m) {
    return m.strides.empty() || IsContiguous(m.sizes, m.strides);
  };
  auto elementwise = [](Op op) {
    return IsBinaryOp(op) || IsUnaryOp(op) || op == Op::kWhere || op == Op::kClone;
  };
  std::vector<int> source(nodes.size(), -1);
  for (size_t id = 0; id < nodes.size(); ++id) {
    const Node& n = nodes[id];
    if (n.op != Op::kView || n.inputs.size() != 1) continue;
    int src = n.inputs[0];
    if (source[src] >= 0) src = source[src];  // a chain of such views
    const Node& s = nodes[src];
    const bool computed = s.op != Op::kInput && s.op != Op::kView && s.op != Op::kConstant &&
                          s.op != Op::kEager;
    if (!computed || n.meta.dtype != s.meta.dtype || n.meta.storage_offset != 0 ||
        !contiguous_meta(n.meta) || !contiguous_meta(s.meta) ||
        !SameUpToLeadingOnes(n.meta.sizes, s.meta.sizes)) {
      continue;
    }
    source[id] = src;
  }
  for (Node& n : nodes) {
    if (!elementwise(n.op)) continue;
    for (int& in : n.inputs) {
      if (source[in] < 0) continue;
      // The consumer's output must cover the source's rank for broadcasting to agree.
      if (n.meta.sizes.size() >= nodes[source[in]].meta.sizes.size()) in = source[in];
    }
  }
}

// Note [Rotate half]
// Rotary position embeddings (Llama, Qwen2, Mixtral, GPT-NeoX) compute
// q * cos + rotate_half(q) * sin with rotate_half(x) = cat([-x2, x1], -1),
// x1 = x[..., :h], x2 = x[..., h:]. As aten ops that is a neg and a cat, two
// library kernels and a round trip through memory each, between the two
// multiplies. The cat becomes one kRotateHalf node reading x itself: a load
// of x whose chunks then swap the halves of each 2h-block, negating the new
// first half (Operand::rotate_half, LoadChunk in interpreter.cc; the last dim
// is the row's innermost and chunks hold whole blocks), so the whole embedding
// is one row kernel. Only exact re-indexings qualify: x1 and x2 are the two
// halves of x's last dim at x's own strides.
void RewriteRotateHalf(std::vector<Node>& nodes) {
  for (Node& n : nodes) {
    if (n.op != Op::kCat || n.inputs.size() != 2 || n.meta.sizes.empty() ||
        n.dims.size() != 1 || n.dims[0] != static_cast<int64_t>(n.meta.sizes.size()) - 1) {
      continue;
    }
    const Node& neg = nodes[n.inputs[0]];
    if (neg.op != Op::kNeg || neg.inputs.size() != 1) continue;
    const Node& hi = nodes[neg.inputs[0]];
    const Node& lo = nodes[n.inputs[1]];
    if (hi.op != Op::kView || lo.op != Op::kView || hi.inputs[0] != lo.inputs[0]) continue;
    const int src = lo.inputs[0];
    const Meta& x = nodes[src].meta;
    if (nodes[src].op == Op::kConstant || x.sizes != n.meta.sizes || x.sizes.back() % 2 != 0) {
      continue;
    }
    const int64_t h = x.sizes.back() / 2;
    const std::vector<int64_t> xs = x.strides.empty() ? ContiguousStrides(x.sizes) : x.strides;
    std::vector<int64_t> half = x.sizes;
    half.back() = h;
    auto is_half = [&](const Meta& m, int64_t offset) {
      return m.dtype == x.dtype && m.sizes == half && m.strides == xs &&
             m.storage_offset == offset;
    };
    if (h == 0 || neg.meta.dtype != x.dtype || n.meta.dtype != x.dtype ||
        !is_half(lo.meta, x.storage_offset) || !is_half(hi.meta, x.storage_offset + h * xs.back())) {
      continue;
    }
    n.op = Op::kRotateHalf;
    n.inputs = {src};
    n.dims.clear();
  }
}

// Note [Clones before attention]
// Attention code that predates sdpa (Whisper's, BART's) makes q, k and v
// contiguous after splitting the heads: view + transpose + clone, one copy
// kernel each per layer. The attention kernel reads any strides, so it reads
// the clone's source instead; the clone dies unless something else reads it
// (a KV cache's cat). Not for sources in graph inputs' memory: a copy_ back
// into a mutated input may follow the clone.
void ReadClonesSourceInAttention(std::vector<Node>& nodes) {
  auto in_input = [&](int v) {
    while (nodes[v].op == Op::kView) v = nodes[v].inputs[0];
    return nodes[v].op == Op::kInput || nodes[v].op == Op::kConstant;
  };
  for (Node& n : nodes) {
    if (n.op != Op::kSdpa) continue;
    for (size_t i = 0; i < 3 && i < n.inputs.size(); ++i) {
      const Node& c = nodes[n.inputs[i]];
      if (c.op != Op::kClone || c.inputs.size() != 1) continue;
      const int src = c.inputs[0];
      if (nodes[src].meta.dtype == c.meta.dtype && !in_input(src)) n.inputs[i] = src;
    }
  }
}

}  // namespace

KernelGraph Prepare(const Graph& graph, const CompileOptions& options) {
  KernelGraph ir;
  ir.graph = &graph;
  ir.options = options;
  ir.nodes = graph.nodes();
  if (options.fuse) {
    RewirePassThroughReshapes(ir.nodes);
    RewriteRotateHalf(ir.nodes);
    ReadClonesSourceInAttention(ir.nodes);
  }
  const size_t nn = ir.nodes.size();
  ir.vals.assign(nn, Value());
  ir.group_of.assign(nn, -1);
  for (size_t id = 0; id < nn; ++id) {
    for (int v : ir.nodes[id].inputs) ir.vals[v].users.push_back(static_cast<int>(id));
  }
  // Liveness from the outputs. Eager nodes always run unless pure (an RNG op
  // unused still advances the generator, as in eager mode).
  for (int o : graph.outputs()) ir.vals[o].live = true;
  for (size_t id = 0; id < nn; ++id) {
    const Op op = ir.nodes[id].op;
    if ((op == Op::kEager && !ir.nodes[id].pure) || op == Op::kInput) ir.vals[id].live = true;
  }
  for (int id = static_cast<int>(nn) - 1; id >= 0; --id) {
    if (!ir.vals[id].live) continue;
    for (int v : ir.nodes[id].inputs) ir.vals[v].live = true;
  }
  return ir;
}

}  // namespace trn::compiler::internal
