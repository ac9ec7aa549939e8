// LinkDeviceWork: which op launched each kernel or copy.
//
// Note [Linking]
// A kernel or copy is attributed to the op that launched it, trying in order:
//  1. args "External id" equal to a CPU op's "External id" (Kineto writes the
//     launching op's id on every GPU activity; our export writes the op's
//     correlation id in both places);
//  2. args "correlation" equal to a runtime call's "correlation" (Kineto's
//     cudaLaunchKernel <-> kernel pairing), then the op enclosing that call;
//  3. a flow arrow (any category but "fwdbwd") ending on the kernel, whose start
//     binds to an op or a runtime call inside one.
// Device time then counts as "self" for that op and "total" for it and every
// enclosing op, as key_averages() does.
#include <unordered_map>

#include "core/analysis/reader/passes.h"

namespace trn::analysis {

uint32_t OpAncestor(const TraceModel& m, uint32_t i) {
  while (i != kNone && m.slices[i].kind != SliceKind::kOp) i = m.slices[i].parent;
  return i;
}

void LinkDeviceWork(TraceModel& m, const std::vector<uint32_t>& owner) {
  std::unordered_map<uint64_t, uint32_t> op_by_external, runtime_by_corr;
  for (uint32_t i = 0; i < m.slices.size(); ++i) {
    const Slice& s = m.slices[i];
    if (s.kind == SliceKind::kOp && s.external_id != 0) op_by_external.emplace(s.external_id, i);
    if (s.kind == SliceKind::kRuntime && s.correlation != 0) runtime_by_corr.emplace(s.correlation, i);
    if (s.call == RuntimeCall::kLaunch) ++m.runtime_launches;
  }
  std::unordered_map<uint32_t, uint32_t> flow_source;  // device slice -> flow's source slice
  const uint32_t fwdbwd = m.strings.Intern("fwdbwd");
  for (const FlowLink& f : m.flows)
    if (f.cat != fwdbwd && f.from != kNone && f.to != kNone && m.slices[f.to].on_device())
      flow_source.emplace(f.to, f.from);
  for (uint32_t i = 0; i < m.slices.size(); ++i) {
    Slice& k = m.slices[i];
    if (!k.on_device()) continue;
    if (k.external_id != 0) {
      if (auto it = op_by_external.find(k.external_id); it != op_by_external.end()) {
        k.op = it->second;
        k.link = LinkVia::kExternalId;
      }
    }
    if (k.op == kNone && k.correlation != 0) {
      if (auto it = runtime_by_corr.find(k.correlation); it != runtime_by_corr.end()) {
        k.op = OpAncestor(m, it->second);
        if (k.op != kNone) k.link = LinkVia::kCorrelation;
      }
    }
    if (k.op == kNone) {
      if (auto it = flow_source.find(i); it != flow_source.end()) {
        k.op = OpAncestor(m, it->second);
        if (k.op != kNone) k.link = LinkVia::kFlow;
      }
    }
    if (k.op == kNone) {
      ++m.unlinked_device;
      continue;
    }
    k.op = owner[k.op];
    m.slices[k.op].device_self_ns += k.dur_ns;
    for (uint32_t p = k.op; p != kNone; p = m.slices[p].parent) m.slices[p].device_total_ns += k.dur_ns;
  }
}

}  // namespace trn::analysis
