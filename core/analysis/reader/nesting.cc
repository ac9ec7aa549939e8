// Sorting, nesting and self time: the passes that give CPU slices their
// parents, as torch.profiler's event tree does.
#include <algorithm>

#include "core/analysis/reader/passes.h"

namespace trn::analysis {

void SortSlices(TraceModel& m) {
  // By lane, then start, longer first (parents before children).
  std::sort(m.slices.begin(), m.slices.end(), [](const Slice& a, const Slice& b) {
    if (a.lane != b.lane) return a.lane < b.lane;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.dur_ns != b.dur_ns) return a.dur_ns > b.dur_ns;
    return a.kind < b.kind;
  });
  for (auto& l : m.lanes) l.first = l.last = 0;
  for (uint32_t i = 0; i < m.slices.size();) {
    const uint32_t lane = m.slices[i].lane;
    uint32_t j = i;
    while (j < m.slices.size() && m.slices[j].lane == lane) ++j;
    m.lanes[lane].first = i;
    m.lanes[lane].last = j;
    i = j;
  }
}

void NestCpuLanes(TraceModel& m) {
  std::vector<uint32_t> stack;
  for (const Lane& l : m.lanes) {
    if (l.kind != LaneKind::kCpu) continue;
    stack.clear();
    for (uint32_t i = l.first; i < l.last; ++i) {
      Slice& s = m.slices[i];
      while (!stack.empty() && m.slices[stack.back()].end_ns() <= s.start_ns) stack.pop_back();
      if (!stack.empty()) {
        s.parent = stack.back();
        Slice& p = m.slices[s.parent];
        s.depth = static_cast<uint16_t>(std::min<int>(p.depth + 1, UINT16_MAX));
        // A child that overruns its parent (clock rounding) is clipped.
        p.self_ns -= std::min(s.end_ns(), p.end_ns()) - s.start_ns;
      }
      s.self_ns += s.dur_ns;
      stack.push_back(i);
    }
  }
  for (Slice& s : m.slices) s.self_ns = std::max<int64_t>(0, s.self_ns);
}

// An op whose only child has its own name (aten::div_ -> aten::div_) counts
// once, as in torch.profiler's key_averages (_remove_dup_nodes).
std::vector<uint32_t> MergeRepeatedOps(TraceModel& m) {
  std::vector<uint32_t> children(m.slices.size(), 0), owner(m.slices.size());
  for (const Slice& s : m.slices)
    if (s.parent != kNone) ++children[s.parent];
  for (uint32_t i = 0; i < m.slices.size(); ++i) {
    Slice& s = m.slices[i];
    owner[i] = i;
    if (s.parent == kNone || s.kind != SliceKind::kOp || children[s.parent] != 1) continue;
    const uint32_t p = owner[s.parent];
    if (m.slices[p].name != s.name || m.slices[s.parent].kind != SliceKind::kOp) continue;
    s.merged = true;
    owner[i] = p;
    m.slices[p].self_ns += s.self_ns;
    s.self_ns = 0;
  }
  return owner;
}

}  // namespace trn::analysis
