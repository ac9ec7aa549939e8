// Passes 3 and 4, materialize and assign buffers: a value gets memory only when
// something outside its kernel reads it or it is a graph output; each
// materialized root value gets one buffer, which its views share.
#include <map>
#include <vector>

#include "core/compiler/kernel_graph.h"

namespace trn::compiler::internal {
namespace {

void MarkMaterialized(KernelGraph& ir) {
  for (size_t id = 0; id < ir.nodes.size(); ++id) {
    if (!ir.vals[id].live) continue;
    const Node& n = ir.nodes[id];
    const int gi = ir.group_of[id];
    // A view reads nothing: its readers decide (a view of a GEMM result that
    // only its epilogue reads, Note [Epilogue through a reshape], needs no memory).
    if (ir.vals[id].is_view) continue;
    for (int v : n.inputs) {
      const int r = ir.vals[v].root;
      if (r < 0 || !ir.IsComputed(r)) continue;
      // Read from memory unless it is an in-group value of a fused group.
      const bool fused = ir.InGroup(v, gi) >= 0 &&
                         (ir.groups[gi].kind == Group::Kind::kRows ||
                          ir.groups[gi].kind == Group::Kind::kMatmul ||
                          ir.groups[gi].kind == Group::Kind::kLibrary) &&
                         ir.groups[gi].nodes.size() > 1;
      if (!fused) ir.vals[r].materialized = true;
    }
    if (n.op == Op::kEager || ir.vals[id].clone_view ||
        (gi >= 0 && ir.groups[gi].kind == Group::Kind::kLibrary &&
         ir.groups[gi].nodes.back() == static_cast<int>(id))) {
      ir.vals[id].materialized = true;
    }
    if (IsMatmulOp(n.op) && ir.groups[gi].nodes.size() == 1) ir.vals[id].materialized = true;
  }
  for (int o : ir.graph->outputs()) {
    const int r = ir.vals[o].root;
    if (r >= 0 && ir.IsComputed(r)) ir.vals[r].materialized = true;
  }
}

}  // namespace

void Materialize(KernelGraph& ir) {
  MarkMaterialized(ir);
  // Constants with a fill kernel, then the groups' final dependencies for ordering.
  for (size_t i = 0; i < ir.nodes.size(); ++i) {
    if (ir.nodes[i].op == Op::kConstant && ir.group_of[i] >= 0) ir.vals[i].materialized = true;
  }
  for (size_t gi = 0; gi < ir.groups.size(); ++gi) {
    Group& g = ir.groups[gi];
    g.deps.clear();
    for (int id : g.nodes) {
      for (int v : ir.N(id).inputs) {
        const int p = ir.Producer(v);
        if (p >= 0 && p != static_cast<int>(gi)) g.deps.insert(p);
      }
    }
  }
}

void AssignBuffers(KernelGraph& ir, std::vector<Buffer>* buffers, std::vector<View>* input_views,
                   std::vector<View>* output_views) {
  std::vector<Buffer>& bufs = *buffers;
  for (size_t i = 0; i < ir.graph->inputs().size(); ++i) {
    const int id = ir.graph->inputs()[i];
    Buffer b;
    b.kind = Buffer::Kind::kInput;
    b.index = static_cast<int>(i);
    b.dtype = ir.N(id).meta.dtype;
    b.numel = Extent(ir.vals[id].view.sizes, ir.vals[id].view.strides);
    ir.vals[id].view.buffer = static_cast<int>(bufs.size());
    bufs.push_back(b);
  }
  std::map<int, int> output_of;  // root value -> first graph output index
  for (size_t i = 0; i < ir.graph->outputs().size(); ++i) {
    output_of.emplace(ir.vals[ir.graph->outputs()[i]].root, static_cast<int>(i));
  }
  for (size_t id = 0; id < ir.nodes.size(); ++id) {
    Value& v = ir.vals[id];
    if (!v.live || v.is_view || !ir.IsComputed(static_cast<int>(id)) || !v.materialized) continue;
    Buffer b;
    auto it = output_of.find(static_cast<int>(id));
    b.kind = it != output_of.end() ? Buffer::Kind::kOutput : Buffer::Kind::kTemp;
    b.index = it != output_of.end() ? it->second : 0;
    b.dtype = v.view.dtype;
    b.numel = Extent(v.view.sizes, v.view.strides);
    v.view.buffer = static_cast<int>(bufs.size());
    bufs.push_back(b);
  }
  for (size_t id = 0; id < ir.nodes.size(); ++id) {  // views follow their roots
    Value& v = ir.vals[id];
    if (v.live && v.is_view && v.root >= 0) v.view.buffer = ir.vals[v.root].view.buffer;
  }
  for (int i : ir.graph->inputs()) input_views->push_back(ir.vals[i].view);
  for (int o : ir.graph->outputs()) output_views->push_back(ir.vals[o].view);
}

}  // namespace trn::compiler::internal
