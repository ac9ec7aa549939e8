#include "core/analysis/summary.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <unordered_map>

#include "core/analysis/insights.h"

namespace trn::analysis {

std::string FormatNs(int64_t ns) {
  const double a = static_cast<double>(ns < 0 ? -ns : ns);
  if (a >= 1e9) return fmt::format("{:.3f} s", ns / 1e9);
  if (a >= 1e6) return fmt::format("{:.3f} ms", ns / 1e6);
  if (a >= 1e3) return fmt::format("{:.3f} us", ns / 1e3);
  return fmt::format("{} ns", ns);
}

std::string FormatBytes(uint64_t b) {
  const double v = static_cast<double>(b);
  if (b >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", v / (1 << 30));
  if (b >= (uint64_t{1} << 20)) return fmt::format("{:.2f} MiB", v / (1 << 20));
  if (b >= (uint64_t{1} << 10)) return fmt::format("{:.2f} KiB", v / (1 << 10));
  return fmt::format("{} B", b);
}

std::string FormatCount(double v) {
  if (v >= 1e12) return fmt::format("{:.2f} T", v / 1e12);
  if (v >= 1e9) return fmt::format("{:.2f} G", v / 1e9);
  if (v >= 1e6) return fmt::format("{:.2f} M", v / 1e6);
  if (v >= 1e3) return fmt::format("{:.2f} K", v / 1e3);
  return fmt::format("{:.0f}", v);
}

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

std::string Clip(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n - 3)) + "...";
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
      if (s.kind == SliceKind::kRuntime && m.Name(s).find("ynchronize") != std::string_view::npos)
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

std::string FormatSummary(const TraceModel& m, const Summary& s,
                          const std::vector<Insight>& insights, size_t top_ops) {
  std::string o;
  auto line = [&](std::string l) {
    o += l;
    o += '\n';
  };
  const Totals& t = s.totals;
  line(fmt::format("trnscope summary: {}", m.name));
  line(fmt::format("parsed {} events ({}), skipped {}{}{}", m.parse.events,
                   FormatBytes(m.parse.bytes), m.parse.skipped,
                   m.parse.truncated ? ", file truncated (recovered)" : "",
                   m.parse.ignored ? fmt::format(", {} not analyzed", m.parse.ignored) : ""));
  line(fmt::format("span {} | ops {} | runtime calls {} | kernels {} | copies {} | dropped events {}",
                   FormatNs(t.span_ns), t.ops, t.runtime_calls, t.kernels, t.copies,
                   t.dropped_events));
  line(fmt::format("CPU (top-level ops) {} | device {} | bytes {} | flops {}",
                   FormatNs(t.cpu_ops_ns), FormatNs(t.device_ns), FormatBytes(t.bytes),
                   FormatCount(static_cast<double>(t.flops))));
  if (m.meta.present)
    line(fmt::format("meta: {}", m.meta.source.substr(m.meta.source.rfind('/') + 1)));
  if (m.unlinked_device > 0)
    line(fmt::format("{} kernels/copies could not be linked to an op", m.unlinked_device));

  const size_t n = top_ops == 0 ? s.ops.size() : std::min(top_ops, s.ops.size());
  line("");
  line(fmt::format("Ops by device self time ({} of {}; runtime calls marked *)", n, s.ops.size()));
  line(fmt::format("{:<40} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}", "Name", "Calls",
                   "CPU total", "CPU self", "Device total", "Device self", "CPU avg",
                   "Device avg"));
  for (size_t i = 0; i < n; ++i) {
    const OpStat& op = s.ops[i];
    const int64_t c = static_cast<int64_t>(op.calls);
    line(fmt::format("{:<40} {:>7} {:>12} {:>12} {:>12} {:>12} {:>12} {:>12}",
                     Clip(op.kind == SliceKind::kRuntime ? "*" + op.name : op.name, 40), op.calls,
                     FormatNs(op.cpu_total_ns), FormatNs(op.cpu_self_ns),
                     FormatNs(op.device_total_ns), FormatNs(op.device_self_ns),
                     FormatNs(op.cpu_total_ns / c), FormatNs(op.device_total_ns / c)));
  }

  if (!s.kernels.empty()) {
    line("");
    line("Top kernels and copies by device time");
    line(fmt::format("{:<32} {:<24} {:>7} {:>12} {:>12} {:>10} {:>10}", "Kernel", "Op", "Calls",
                     "Device", "Avg", "GB/s", "GFLOP/s"));
    for (size_t i = 0; i < std::min<size_t>(15, s.kernels.size()); ++i) {
      const KernelStat& k = s.kernels[i];
      const double ns = static_cast<double>(std::max<int64_t>(k.device_ns, 1));
      line(fmt::format("{:<32} {:<24} {:>7} {:>12} {:>12} {:>10.2f} {:>10.2f}",
                       Clip((k.copy ? "[copy] " : "") + k.name, 32), Clip(k.op, 24), k.calls,
                       FormatNs(k.device_ns),
                       FormatNs(k.device_ns / static_cast<int64_t>(k.calls)), k.bytes / ns,
                       k.flops / ns));
    }
  }

  if (!s.lanes.empty()) {
    line("");
    line("Device lanes (busy = union of kernels and copies; idle = span - busy)");
    line(fmt::format("{:<32} {:>9} {:>12} {:>12} {:>7}", "Lane", "Events", "Busy", "Idle", "Busy%"));
    for (const LaneBusy& b : s.lanes)
      line(fmt::format("{:<32} {:>9} {:>12} {:>12} {:>6.1f}%", Clip(b.lane, 32), b.events,
                       FormatNs(b.busy_ns), FormatNs(b.idle_ns),
                       t.span_ns > 0 ? 100.0 * b.busy_ns / t.span_ns : 0.0));
    line("");
    line(fmt::format("Host-bound: device window {}, device busy {}, idle while the host "
                     "dispatches {} ({:.1f}% of the window)",
                     FormatNs(s.device_window_ns), FormatNs(s.device_busy_ns),
                     FormatNs(s.host_bound_ns),
                     s.device_window_ns > 0 ? 100.0 * s.host_bound_ns / s.device_window_ns : 0.0));
    for (const HostGap& g : s.gaps)
      line(fmt::format("  at +{:<14} {:>12} during {}", FormatNs(g.start_ns - m.t0_ns),
                       FormatNs(g.dur_ns), g.op.empty() ? "(host code between ops)" : g.op));
  }

  auto counts = [&](std::string_view title,
                    const std::vector<std::pair<std::string, uint64_t>>& v) {
    if (v.empty()) return;
    line("");
    line(std::string(title));
    for (const auto& [op, c] : v) line(fmt::format("  {:<40} {:>9}", op, c));
  };
  counts("CPU fallbacks (meta.json: op, calls)", m.meta.fallback_ops);
  counts("float64 computed as float32 (meta.json: op, calls)", m.meta.float64_downcasts);
  if (!m.meta.compiles.empty()) {
    line("");
    line(fmt::format("Compiles (meta.json): {}", m.meta.compiles.size()));
    for (const CompileRecord& c : m.meta.compiles) {
      std::string shapes;
      for (const auto& sh : c.shapes) {
        shapes += shapes.empty() ? "" : " ";
        shapes += fmt::format("[{}]", fmt::join(sh, ","));
      }
      line(fmt::format("  {:<24} {:>12} {} {}", Clip(c.graph.empty() ? "(graph)" : c.graph, 24),
                       FormatNs(c.duration_ns), shapes, c.reason));
    }
  }

  line("");
  line(insights.empty() ? "Recommendations: none" : "Recommendations");
  for (const Insight& in : insights) {
    line(fmt::format("  [{}] {}", in.severity, in.title));
    line(fmt::format("      {}", in.detail));
    if (in.saving_ns > 0) {
      line(fmt::format("      projected saving: {} ({:.1f}% of the run's span)",
                       FormatNs(in.saving_ns),
                       100.0 * static_cast<double>(in.saving_ns) /
                           static_cast<double>(std::max<int64_t>(s.totals.span_ns, 1))));
    }
  }
  if (!m.parse.warnings.empty()) {
    line("");
    line("Parse warnings");
    for (const std::string& w : m.parse.warnings) line("  " + w);
  }
  return o;
}

}  // namespace trn::analysis
