// The IR's queries and the layout helpers every pass uses.
#include "core/compiler/kernel_graph.h"

#include <algorithm>
#include <numeric>

namespace trn::compiler::internal {

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

bool IsNonOverlapping(const Sizes& sizes, const Sizes& strides) {
  std::vector<int> perm;
  for (int d = 0; d < static_cast<int>(sizes.size()); ++d) {
    if (sizes[d] != 1) perm.push_back(d);
  }
  std::sort(perm.begin(), perm.end(), [&](int a, int b) { return strides[a] < strides[b]; });
  int64_t span = 1;  // elements the dims inside the current one reach
  for (int d : perm) {
    if (strides[d] < span) return false;
    span += (sizes[d] - 1) * strides[d];
  }
  return true;
}

int64_t Extent(const Sizes& sizes, const Sizes& strides) {
  int64_t e = 1;
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 0) return 0;
    e += (sizes[d] - 1) * strides[d];
  }
  return e;
}

bool KernelGraph::IsOutput(int v) const {
  return std::find(graph->outputs().begin(), graph->outputs().end(), v) != graph->outputs().end();
}

bool KernelGraph::IsComputed(int v) const {
  const Op op = N(v).op;
  if (op == Op::kConstant) return group_of[v] >= 0;
  return op != Op::kInput && !(op == Op::kView && !vals[v].clone_view);
}

int KernelGraph::Producer(int v) const {
  const int r = vals[v].root;
  return r >= 0 && IsComputed(r) ? group_of[r] : -1;
}

bool KernelGraph::DependsOn(int from, int target) const {
  if (from < 0) return false;
  std::vector<char> seen(groups.size(), 0);
  std::vector<int> stack = {from};
  while (!stack.empty()) {
    const int g = stack.back();
    stack.pop_back();
    if (g == target) return true;
    if (seen[g]) continue;
    seen[g] = 1;
    for (int d : groups[g].deps) stack.push_back(d);
  }
  return false;
}

// Note [Epilogue through a reshape]: a linear layer on [B, S, K] is a GEMM on
// the [B*S, K] view, its [B*S, N] result viewed back as [B, S, N] for the
// activation or residual that follows. The view moves no row, so the GEMM's
// epilogue can take those consumers (its row domain becomes [B, S, N]; rows
// are walked in the same order) instead of a second kernel re-reading the
// result from memory: GPT-2's and BERT's gelu, T5's relu after their first
// MLP GEMM, the residual add after the second. (A view adding only leading
// 1s, of any computed value, is rewired earlier: Note [Pass-through reshapes].)
int KernelGraph::GemmRowsOf(int v) const {
  const Value& x = vals[v];
  if (!x.live || !x.is_view || x.root < 0 || !IsMatmulOp(N(x.root).op)) return -1;
  const View& r = vals[x.root].view;
  const View& w = x.view;
  const bool rows = !w.sizes.empty() && !r.sizes.empty() && w.sizes.back() == r.sizes.back() &&
                    w.dtype == r.dtype && w.offset == r.offset &&
                    Numel(w.sizes) == Numel(r.sizes) && IsContiguous(w.sizes, w.strides) &&
                    IsContiguous(r.sizes, r.strides);
  return rows ? x.root : -1;
}

int KernelGraph::InGroup(int v, int gi) const {
  if (gi < 0 || IsConst(v)) return -1;
  if (!vals[v].is_view) return IsComputed(v) && group_of[v] == gi ? v : -1;
  const int r = GemmRowsOf(v);
  return r >= 0 && group_of[r] == gi && groups[gi].kind == Group::Kind::kMatmul ? r : -1;
}

Sizes KernelGraph::RowSizes(const Group& g, bool keepdim) const {
  const int n = static_cast<int>(g.S.size());
  Sizes s(g.S.begin(), g.S.begin() + (n - g.k));
  if (keepdim) s.resize(n, 1);
  return s;
}
}  // namespace trn::compiler::internal
