// The compiler's IR between the Graph and the Program (docs/compile.md,
// "Pipeline"): the graph's nodes, each value's layout, liveness and memory,
// and the kernel groups fusion forms. Built and read by the passes of
// Compile(), one compilation at a time, on one thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/compiler/graph.h"
#include "core/compiler/program_internal.h"

namespace trn::compiler::internal {

using Sizes = std::vector<int64_t>;

inline bool IsSoftmaxOp(Op op) { return op == Op::kSoftmax || op == Op::kLogSoftmax; }
inline bool IsMatmulOp(Op op) { return op == Op::kMm || op == Op::kBmm || op == Op::kAddmm; }
inline bool IsLibraryOp(Op op) { return op >= Op::kCat && op < Op::kEager; }
inline bool IsComparisonOp(Op op) { return op >= Op::kEq && op <= Op::kGe; }

int64_t Numel(const Sizes& s);
Sizes ContiguousStrides(const Sizes& sizes);
// Equal once leading size-1 dims are dropped: the same elements in the same
// order under right-aligned broadcasting ([1, 128, 512] and [128, 512]).
bool SameUpToLeadingOnes(const Sizes& a, const Sizes& b);
bool IsContiguous(const Sizes& sizes, const Sizes& strides);
// Non-overlapping and without holes: a permutation of contiguous strides.
bool IsDense(const Sizes& sizes, const Sizes& strides);
// No two elements at one address; holes allowed (a select of a larger tensor).
bool IsNonOverlapping(const Sizes& sizes, const Sizes& strides);
// Elements from the view's first element to one past its last.
int64_t Extent(const Sizes& sizes, const Sizes& strides);

// What the passes know about one graph value.
struct Value {
  bool live = false;
  bool is_view = false;
  bool clone_view = false;  // a view backed by its own contiguous copy
  int root = -1;            // the value whose buffer holds it
  int64_t root_offset = 0;  // the root's FakeTensor storage offset (its views count from it)
  View view;                // layout (buffer filled once assigned)
  bool materialized = false;
  std::vector<int> users;
};

// A kernel (or eager step) being formed: its member nodes and row domain
// (Note [Fusion groups]).
struct Group {
  enum class Kind : uint8_t { kRows, kMatmul, kCopy, kLibrary, kEager };
  Kind kind = Kind::kRows;
  std::vector<int> nodes;  // members in graph order
  Sizes S;
  int k = 0;
  std::map<int, bool> row;  // in-group value -> per-row (true) or full (false)
  std::set<int> deps;       // groups whose memory this one reads
};

// The IR itself: owns copies of the graph's nodes and the passes' results.
struct KernelGraph {
  const Graph* graph = nullptr;
  CompileOptions options;
  std::vector<Node> nodes;  // the graph's, with pass-through reshapes rewired
  std::vector<Value> vals;  // per node
  std::vector<int> group_of;  // per node: its group, or -1
  std::vector<Group> groups;

  const Node& N(int id) const { return nodes[id]; }
  bool IsConst(int v) const { return N(v).op == Op::kConstant; }
  bool IsOutput(int v) const;
  // Made by a kernel or eager step (constants only once they got a fill kernel).
  bool IsComputed(int v) const;
  // The group producing the memory `v` is read from (-1: graph input / constant).
  int Producer(int v) const;
  // Whether group `from` reads, transitively, memory group `target` makes.
  bool DependsOn(int from, int target) const;
  // Sizes of g's per-row values (S with the k reduced dims dropped or kept as 1).
  Sizes RowSizes(const Group& g, bool keepdim) const;
  // The GEMM result that view `v` reshapes without moving a row (a linear's
  // [M, N] output viewed as [B, S, N]), or -1 (Note [Epilogue through a reshape]).
  int GemmRowsOf(int v) const;
  // `v` as a value of group gi's row program: v itself when gi computes it,
  // the GEMM result for a GemmRowsOf view of gi's GEMM; else -1 (read from memory).
  int InGroup(int v, int gi) const;
};

// ---- the passes, in pipeline order (Compile() in compile.cc) ----
// prepare.cc: the IR of a graph: pass-through reshapes rewired, users, liveness.
KernelGraph Prepare(const Graph& graph, const CompileOptions& options);
// fuse.cc: views resolved, values grouped into kernels.
void Fuse(KernelGraph& ir);
// buffers.cc: which values need memory, the groups' final dependencies, and
// one buffer per materialized root; fills the Program's buffers and views.
void Materialize(KernelGraph& ir);
void AssignBuffers(KernelGraph& ir, std::vector<Buffer>* buffers, std::vector<View>* input_views,
                   std::vector<View>* output_views);
// lower.cc: each group lowered to a kernel (or an eager step); returns the
// step of each group.
std::vector<Step> Lower(const KernelGraph& ir, const std::vector<Buffer>& buffers,
                        std::vector<KernelSummary>* kernels, std::vector<KernelImpl>* impls,
                        std::vector<EagerStep>* eager);
// lower_rows.cc: a row or matmul-epilogue group's row program (Note [Row programs]).
void LowerRows(const KernelGraph& ir, const std::vector<Buffer>& buffers, const Group& g,
               KernelImpl& ki);
// schedule.cc: the steps in dependency order, graph order among independent ones.
std::vector<Step> Schedule(const KernelGraph& ir, const std::vector<Step>& step_of_group);
// memory_plan.cc: temp buffers placed in one arena (Note [Temp arena]);
// returns the arena's size.
int64_t PlanTempArena(const std::vector<Step>& steps, const std::vector<EagerStep>& eager,
                      const std::vector<KernelImpl>& kernels, std::vector<Buffer>* buffers);

}  // namespace trn::compiler::internal
