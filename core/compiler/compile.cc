// Compile(): Graph -> Program, as a pipeline of passes over the KernelGraph
// IR (kernel_graph.h); docs/compile.md ("Pipeline") describes each.
#include <memory>

#include "core/compiler/kernel_graph.h"
#include "core/compiler/program.h"

namespace trn::compiler {

Program Compile(const Graph& graph, const CompileOptions& options) {
  using namespace internal;  // NOLINT: the passes
  KernelGraph ir = Prepare(graph, options);  // prepare.cc
  Fuse(ir);                                  // fuse.cc
  Materialize(ir);                           // buffers.cc
  Program p;
  p.graph_hash_ = graph.Hash();
  AssignBuffers(ir, &p.buffers_, &p.input_views_, &p.output_views_);  // buffers.cc
  p.impl_ = std::make_unique<Program::Impl>();
  const std::vector<Step> step_of_group =
      Lower(ir, p.buffers_, &p.kernels_, &p.impl_->kernels, &p.eager_);  // lower.cc, lower_rows.cc
  p.steps_ = Schedule(ir, step_of_group);                                // schedule.cc
  p.arena_bytes_ =
      PlanTempArena(p.steps_, p.eager_, p.impl_->kernels, &p.buffers_);  // memory_plan.cc
  return p;
}

}  // namespace trn::compiler
