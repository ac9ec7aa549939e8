#include "core/analysis/reports/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "core/analysis/analyses/units.h"

namespace trn::analysis {

std::string Ratio(double b, double a) {
  if (a <= 0) return "-";
  return fmt::format("{:.2f}x", b / a);
}

std::string FormatCompare(const std::vector<RunView>& runs, size_t top_ops) {
  std::string o;
  auto line = [&](const std::string& l) {
    o += l;
    o += '\n';
  };
  std::vector<std::string> names;
  for (const RunView& r : runs) names.push_back(r.model->name);
  line(fmt::format("trnscope compare: {} (ratios to {})", fmt::join(names, " | "), names[0]));
  std::string head = fmt::format("{:<28}", "");
  for (size_t i = 0; i < runs.size(); ++i)
    head += i == 0 ? fmt::format(" {:>14}", names[i].substr(0, 14))
                   : fmt::format(" {:>14} {:>7}", names[i].substr(0, 14), "ratio");
  line(head);
  auto row = [&](const char* label, auto get, auto fmt_value) {
    std::string l = fmt::format("{:<28}", label);
    const double base = static_cast<double>(get(runs[0]));
    for (size_t i = 0; i < runs.size(); ++i) {
      const auto v = get(runs[i]);
      l += fmt::format(" {:>14}", fmt_value(v));
      if (i > 0) l += fmt::format(" {:>7}", Ratio(static_cast<double>(v), base));
    }
    line(l);
  };
  auto ns = [](int64_t v) { return FormatNs(v); };
  auto count = [](uint64_t v) { return fmt::format("{}", v); };
  row("span", [](const RunView& r) { return r.summary->totals.span_ns; }, ns);
  row("CPU (top-level ops)", [](const RunView& r) { return r.summary->totals.cpu_ops_ns; }, ns);
  row("device time", [](const RunView& r) { return r.summary->totals.device_ns; }, ns);
  row("kernel launches", [](const RunView& r) { return r.summary->totals.kernels; }, count);
  row("copies", [](const RunView& r) { return r.summary->totals.copies; }, count);
  row("ops", [](const RunView& r) { return r.summary->totals.ops; }, count);
  row("bytes moved", [](const RunView& r) { return r.summary->totals.bytes; },
      [](uint64_t v) { return FormatBytes(v); });
  row("achieved GB/s", [](const RunView& r) {
        const auto& t = r.summary->totals;
        return t.device_ns > 0 ? static_cast<double>(t.bytes) / t.device_ns : 0.0;
      },
      [](double v) { return fmt::format("{:.2f}", v); });

  // Per op: device self (CPU total) per run, ratios of device time to run 0.
  std::map<std::string, std::vector<const OpStat*>> ops;
  for (size_t i = 0; i < runs.size(); ++i)
    for (const OpStat& op : runs[i].summary->ops) {
      if (op.kind != SliceKind::kOp) continue;
      auto& v = ops[op.name];
      v.resize(runs.size(), nullptr);
      v[i] = &op;
    }
  std::vector<std::pair<std::string, std::vector<const OpStat*>>> sorted(ops.begin(), ops.end());
  auto key = [](const std::vector<const OpStat*>& v) {
    int64_t dev = 0, cpu = 0;
    for (const OpStat* s : v)
      if (s) dev = std::max(dev, s->device_self_ns), cpu = std::max(cpu, s->cpu_total_ns);
    return std::make_pair(dev, cpu);
  };
  std::stable_sort(sorted.begin(), sorted.end(),
                   [&](const auto& a, const auto& b) { return key(a.second) > key(b.second); });
  const size_t n = top_ops == 0 ? sorted.size() : std::min(top_ops, sorted.size());
  line("");
  line(fmt::format("Ops: device self time / CPU total per run ({} of {})", n, sorted.size()));
  std::string h2 = fmt::format("{:<28}", "Name");
  for (size_t i = 0; i < runs.size(); ++i)
    h2 += fmt::format(" {:>25}", names[i].substr(0, 25)) + (i > 0 ? fmt::format(" {:>7}", "ratio") : "");
  line(h2);
  for (size_t k = 0; k < n; ++k) {
    const auto& [name, v] = sorted[k];
    std::string l = fmt::format("{:<28}", name.size() > 28 ? name.substr(0, 25) + "..." : name);
    const double base = v[0] ? static_cast<double>(v[0]->device_self_ns) : 0;
    for (size_t i = 0; i < runs.size(); ++i) {
      const OpStat* s = v[i];
      l += s ? fmt::format(" {:>12} / {:>10}", FormatNs(s->device_self_ns), FormatNs(s->cpu_total_ns))
             : fmt::format(" {:>25}", "-");
      if (i > 0) l += fmt::format(" {:>7}", s ? Ratio(static_cast<double>(s->device_self_ns), base) : "-");
    }
    line(l);
  }
  return o;
}

}  // namespace trn::analysis
