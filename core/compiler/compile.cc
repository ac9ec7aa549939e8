// Compile(): Graph -> Program, as a pipeline of passes over the KernelGraph
// IR (kernel_graph.h); docs/compile.md ("Pipeline") describes each.
#include <memory>

#include "core/compiler/kernel_graph.h"
#include "core/compiler/program.h"

namespace trn::compiler {

Program Compile(const Graph& graph, const CompileOptions& options) {
  namespace pass = internal;
  pass::KernelGraph ir = pass::Prepare(graph, options);  // prepare.cc
  pass::Fuse(ir);                                        // fuse.cc
  pass::Materialize(ir);                                 // buffers.cc
  Program p;
  p.graph_hash_ = graph.Hash();
  pass::AssignBuffers(ir, &p.buffers_, &p.input_views_, &p.output_views_);  // buffers.cc
  p.impl_ = std::make_unique<Program::Impl>();
  const std::vector<Step> step_of_group =  // lower.cc, lower_rows.cc
      pass::Lower(ir, p.buffers_, &p.kernels_, &p.impl_->kernels, &p.eager_);
  p.steps_ = pass::Schedule(ir, step_of_group);  // schedule.cc
  p.arena_bytes_ =                               // memory_plan.cc
      pass::PlanTempArena(p.steps_, p.eager_, p.impl_->kernels, &p.buffers_);
  return p;
}

}  // namespace trn::compiler
