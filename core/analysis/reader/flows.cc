// ResolveFlows: pairs flow starts and ends by (category, id) and binds each
// end to a slice ("bp":"e" and starts: the enclosing slice; else the next).
#include <algorithm>

#include "core/analysis/reader/passes.h"

namespace trn::analysis {

uint32_t Enclosing(const TraceModel& m, uint32_t lane, int64_t ts) {
  const Lane& l = m.lanes[lane];
  const auto* b = m.slices.data() + l.first;
  const auto* e = m.slices.data() + l.last;
  // Last slice with start <= ts; ties (same start) sort longer first, so the
  // last is the innermost.
  auto it = std::upper_bound(b, e, ts, [](int64_t t, const Slice& s) { return t < s.start_ns; });
  if (it == b) return kNone;
  uint32_t i = static_cast<uint32_t>(it - 1 - m.slices.data());
  while (i != kNone) {
    const Slice& s = m.slices[i];
    if (s.start_ns <= ts && ts <= s.end_ns()) return i;
    i = s.parent;
  }
  // Device lanes have no parents: scan back a little for an overlapping kernel.
  for (auto* p = it - 1; p >= b && it - p < 64; --p)
    if (p->start_ns <= ts && ts <= p->end_ns()) return static_cast<uint32_t>(p - m.slices.data());
  return kNone;
}

uint32_t Next(const TraceModel& m, uint32_t lane, int64_t ts) {
  const Lane& l = m.lanes[lane];
  const auto* b = m.slices.data() + l.first;
  const auto* e = m.slices.data() + l.last;
  auto it = std::lower_bound(b, e, ts, [](const Slice& s, int64_t t) { return s.start_ns < t; });
  return it == e ? kNone : static_cast<uint32_t>(it - m.slices.data());
}

void ResolveFlows(TraceModel& m, std::vector<RawFlow>* raw) {
  std::vector<RawFlow>& rf = *raw;
  std::sort(rf.begin(), rf.end(), [](const RawFlow& a, const RawFlow& b) {
    if (a.cat != b.cat) return a.cat < b.cat;
    if (a.id != b.id) return a.id < b.id;
    if (a.start != b.start) return a.start > b.start;
    return a.ts < b.ts;
  });
  for (size_t i = 0; i < rf.size();) {
    size_t j = i;
    while (j < rf.size() && rf[j].cat == rf[i].cat && rf[j].id == rf[i].id) ++j;
    const RawFlow* s = rf[i].start ? &rf[i] : nullptr;
    const RawFlow* f = rf[j - 1].start ? nullptr : &rf[j - 1];
    FlowLink fl;
    fl.id = rf[i].id;
    fl.cat = rf[i].cat;
    if (s != nullptr) {
      fl.from_ts = s->ts;
      fl.from_lane = s->lane;
      fl.from = Enclosing(m, s->lane, s->ts);
    }
    if (f != nullptr) {
      fl.to_ts = f->ts;
      fl.to_lane = f->lane;
      fl.to = f->enclosing ? Enclosing(m, f->lane, f->ts) : Next(m, f->lane, f->ts);
      if (fl.to == kNone) fl.to = Next(m, f->lane, f->ts);
    }
    m.flows.push_back(fl);
    i = j;
  }
  rf.clear();
  rf.shrink_to_fit();
}

}  // namespace trn::analysis
