#include "core/analysis/reports/summary_text.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/analysis/analyses/units.h"

namespace trn::analysis {
namespace {

std::string Clip(std::string_view s, size_t n) {
  if (s.size() <= n) return std::string(s);
  return std::string(s.substr(0, n - 3)) + "...";
}

}  // namespace

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
  // A trace without host ops (a modelled device trace, a kernels-only export) has
  // nothing to link kernels to: say so once instead of counting every kernel as unlinked.
  const bool host_ops = t.ops > 0 || t.runtime_calls > 0;
  if (!host_ops && t.kernels + t.copies > 0)
    line("device-only trace: no host ops or runtime calls to link kernels and copies to");
  else if (m.unlinked_device > 0)
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
    if (!host_ops) {
      line(fmt::format("Host-bound: not applicable (no host events); device window {}, "
                       "device busy {}", FormatNs(s.device_window_ns), FormatNs(s.device_busy_ns)));
    } else {
      line(fmt::format("Host-bound: device window {}, device busy {}, idle while the host "
                       "dispatches {} ({:.1f}% of the window)",
                       FormatNs(s.device_window_ns), FormatNs(s.device_busy_ns),
                       FormatNs(s.host_bound_ns),
                       s.device_window_ns > 0 ? 100.0 * s.host_bound_ns / s.device_window_ns : 0.0));
    }
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
