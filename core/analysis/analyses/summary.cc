#include "core/analysis/analyses/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>


namespace trn::analysis {

namespace {

// Length of the union of [start, end) intervals (sorted in place).
int64_t UnionLength(std::vector<std::pair<int64_t, int64_t>>& iv,
                    std::vector<std::pair<int64_t, int64_t>>* merged = nullptr) {
  std::sort(iv.begin(), iv.end());
  int64_t total = 0;
  int64_t cs = 0, ce = 0;
  bool open = false;
  for (const auto& [s, e] : iv) {
    if (open && s <= ce) {
      ce = std::max(ce, e);
      continue;
    }
    if (open) {
      total += ce - cs;
      if (merged) merged->emplace_back(cs, ce);
    }
    cs = s, ce = e, open = true;
  }
  if (open) {
    total += ce - cs;
    if (merged) merged->emplace_back(cs, ce);
  }
  return total;
}

}  // namespace

Summary Summarize(const TraceModel& m) {
  Summary out;
  Totals& t = out.totals;
  t.span_ns = m.t1_ns - m.t0_ns;
  t.dropped_events = m.dropped_events;
  // Op table keyed by (name, kind); kernels keyed by (op name, kernel name).
  std::unordered_map<uint64_t, size_t> op_index;  // name id * 2 + runtime
  std::map<std::pair<size_t, uint32_t>, KernelStat> op_kernels;
  std::unordered_map<uint32_t, KernelStat> kernels;
  std::unordered_map<uint32_t, std::unordered_map<uint32_t, uint64_t>> kernel_ops;
  std::vector<std::pair<int64_t, int64_t>> host_top, device_all;  // host_top: sync waits
  std::vector<std::vector<std::pair<int64_t, int64_t>>> per_lane(m.lanes.size());
  for (const Slice& s : m.slices) {
    if (s.on_device()) {
      const bool copy = s.kind == SliceKind::kCopy;
      (copy ? t.copies : t.kernels) += 1;
      t.device_ns += s.dur_ns;
      t.bytes += s.bytes_read + s.bytes_written;
      t.flops += s.flops;
      per_lane[s.lane].emplace_back(s.start_ns, s.end_ns());
      device_all.emplace_back(s.start_ns, s.end_ns());
      KernelStat& k = kernels[s.name];
      k.calls++;
      k.device_ns += s.dur_ns;
      k.flops += s.flops;
      k.bytes += s.bytes_read + s.bytes_written;
      k.copy = copy;
      if (s.op != kNone) kernel_ops[s.name][m.slices[s.op].name]++;
      continue;
    }
    if (s.merged) continue;
    const uint64_t key = uint64_t{s.name} * 2 + (s.kind == SliceKind::kRuntime);
    auto [it, inserted] = op_index.emplace(key, out.ops.size());
    if (inserted) {
      OpStat o;
      o.name = std::string(m.Name(s));
      o.kind = s.kind;
      out.ops.push_back(std::move(o));
    }
    OpStat& o = out.ops[it->second];
    o.calls++;
    o.cpu_total_ns += s.dur_ns;
    o.cpu_self_ns += s.self_ns;
    o.device_total_ns += s.device_total_ns;
    o.device_self_ns += s.device_self_ns;
    if (s.kind == SliceKind::kOp) t.ops++;
    else t.runtime_calls++;
    if (s.parent == kNone) {
      // Time the host spends waiting for the device is not host-bound.
      if (s.call == RuntimeCall::kSync)
        host_top.emplace_back(s.start_ns, s.end_ns());
      if (s.kind == SliceKind::kOp) t.cpu_ops_ns += s.dur_ns;
    }
  }
  // Kernels per op (after all ops are indexed).
  for (const Slice& s : m.slices) {
    if (!s.on_device() || s.op == kNone) continue;
    const Slice& op = m.slices[s.op];
    const size_t oi = op_index.at(uint64_t{op.name} * 2 + (op.kind == SliceKind::kRuntime));
    KernelStat& k = op_kernels[{oi, s.name}];
    if (k.calls == 0) {
      k.name = std::string(m.Name(s));
      k.op = out.ops[oi].name;
      k.copy = s.kind == SliceKind::kCopy;
    }
    k.calls++;
    k.device_ns += s.dur_ns;
    k.flops += s.flops;
    k.bytes += s.bytes_read + s.bytes_written;
  }
  for (auto& [key, k] : op_kernels) out.ops[key.first].kernels.push_back(std::move(k));
  auto by_device = [](const KernelStat& a, const KernelStat& b) {
    if (a.device_ns != b.device_ns) return a.device_ns > b.device_ns;
    return a.name < b.name;
  };
  for (OpStat& o : out.ops) std::sort(o.kernels.begin(), o.kernels.end(), by_device);
  std::sort(out.ops.begin(), out.ops.end(), [](const OpStat& a, const OpStat& b) {
    if (a.device_self_ns != b.device_self_ns) return a.device_self_ns > b.device_self_ns;
    if (a.cpu_total_ns != b.cpu_total_ns) return a.cpu_total_ns > b.cpu_total_ns;
    if (a.name != b.name) return a.name < b.name;
    return a.kind < b.kind;
  });
  for (auto& [name, k] : kernels) {
    k.name = std::string(m.Str(name));
    uint64_t best = 0;
    for (const auto& [op, n] : kernel_ops[name]) {
      const std::string_view on = m.Str(op);
      if (n > best || (n == best && on < k.op)) best = n, k.op = std::string(on);
    }
    out.kernels.push_back(std::move(k));
  }
  std::sort(out.kernels.begin(), out.kernels.end(), by_device);
  // Lanes.
  for (size_t i = 0; i < m.lanes.size(); ++i) {
    if (m.lanes[i].kind != LaneKind::kDevice) continue;
    LaneBusy b;
    b.lane = m.lanes[i].name;
    b.events = per_lane[i].size();
    b.busy_ns = UnionLength(per_lane[i]);
    b.idle_ns = std::max<int64_t>(0, t.span_ns - b.busy_ns);
    out.lanes.push_back(std::move(b));
  }
  // Host-bound stretches: holes in the device union, minus the time the
  // host spent waiting for the device (synchronize calls).
  if (!device_all.empty()) {
    std::vector<std::pair<int64_t, int64_t>> dev, host;
    out.device_busy_ns = UnionLength(device_all, &dev);
    out.device_window_ns = dev.back().second - dev.front().first;
    UnionLength(host_top, &host);
    // Top-level host slices in start order, for naming a gap's op.
    std::vector<const Slice*> tops;
    for (const Slice& s : m.slices)
      if (!s.on_device() && s.parent == kNone && s.kind == SliceKind::kOp) tops.push_back(&s);
    std::sort(tops.begin(), tops.end(),
              [](const Slice* a, const Slice* b) { return a->start_ns < b->start_ns; });
    size_t h = 0;
    // Without host events (a modelled device trace, a kernels-only export)
    // nothing says the host was dispatching: no host-bound stretches.
    const bool has_host = std::any_of(m.slices.begin(), m.slices.end(),
                                      [](const Slice& s) { return !s.on_device(); });
    for (size_t i = 1; i < dev.size() && has_host; ++i) {
      const int64_t gs = dev[i - 1].second, ge = dev[i].first;
      if (ge - gs < Summary::kMinGapNs) continue;
      while (h < host.size() && host[h].second <= gs) ++h;
      int64_t overlap = 0;
      for (size_t k = h; k < host.size() && host[k].first < ge; ++k) {
        const int64_t a = std::max(gs, host[k].first), b = std::min(ge, host[k].second);
        if (b > a) {
          overlap += b - a;

        }
      }
      const int64_t bound = (ge - gs) - overlap;  // idle, and the host not waiting
      if (bound < Summary::kMinGapNs) continue;
      const int64_t first_start = gs;
      out.host_bound_ns += bound;
      HostGap g;
      g.start_ns = gs;
      g.dur_ns = bound;
      // The top-level op running at the first host-bound instant.
      auto it = std::upper_bound(tops.begin(), tops.end(), first_start,
                                 [](int64_t ts, const Slice* s) { return ts < s->start_ns; });
      if (it != tops.begin() && (*(it - 1))->end_ns() > first_start) g.op = std::string(m.Name(**(it - 1)));
      out.gaps.push_back(std::move(g));
    }
    std::sort(out.gaps.begin(), out.gaps.end(), [](const HostGap& a, const HostGap& b) {
      return a.dur_ns != b.dur_ns ? a.dur_ns > b.dur_ns : a.start_ns < b.start_ns;
    });
    if (out.gaps.size() > Summary::kMaxGaps) out.gaps.resize(Summary::kMaxGaps);
  }
  return out;
}

}  // namespace trn::analysis
