#include "core/analysis/reports/report_data.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace trn::analysis {

std::string JsonString(std::string_view s) {
  std::string o;
  o.reserve(s.size() + 2);
  o += '"';
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = p[i];
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
      ++i;
    } else if (c < 0x20) {
      o += fmt::format("\\u{:04x}", c);
      ++i;
    } else if (c < 0x80) {
      o += static_cast<char>(c);
      ++i;
    } else {
      size_t len = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c <= 0xDF ? 2 : 0;
      bool ok = len > 0 && i + len <= s.size();
      for (size_t k = 1; ok && k < len; ++k) ok = (p[i + k] & 0xC0) == 0x80;
      if (ok) {
        o.append(s.substr(i, len));
        i += len;
      } else {
        o += "\xEF\xBF\xBD";
        ++i;
      }
    }
  }
  o += '"';
  return o;
}

namespace {

std::string Num(double v) {
  if (!std::isfinite(v)) return "0";
  return fmt::format("{}", std::round(v * 1000) / 1000);
}

void Run(std::string& o, const ReportRun& r, size_t cap) {
  const TraceModel& m = *r.model;
  const Summary& s = *r.summary;
  const Totals& t = s.totals;
  o += "{\"name\":" + JsonString(m.name) + ",\"path\":" + JsonString(m.path);
  o += fmt::format(",\"t0_ns\":{}", m.t0_ns);
  o += ",\"meta\":" + (m.meta.present ? m.meta.raw : std::string("null"));
  o += fmt::format(",\"parse\":{{\"events\":{},\"skipped\":{},\"recovered\":{},\"warnings\":[",
                   m.parse.events, m.parse.skipped, m.parse.recovered ? "true" : "false");
  for (size_t i = 0; i < m.parse.warnings.size(); ++i)
    o += (i ? "," : "") + JsonString(m.parse.warnings[i]);
  o += "]}";
  o += fmt::format(
      ",\"totals\":{{\"span_ns\":{},\"cpu_ops_ns\":{},\"device_ns\":{},\"kernels\":{},"
      "\"copies\":{},\"ops\":{},\"bytes\":{},\"flops\":{},\"dropped_events\":{}}}",
      t.span_ns, t.cpu_ops_ns, t.device_ns, t.kernels, t.copies, t.ops, t.bytes, t.flops,
      t.dropped_events);
  o += ",\"lanes_busy\":[";
  for (size_t i = 0; i < s.lanes.size(); ++i)
    o += fmt::format("{}{{\"lane\":{},\"busy_ns\":{},\"idle_ns\":{}}}", i ? "," : "",
                     JsonString(s.lanes[i].lane), s.lanes[i].busy_ns, s.lanes[i].idle_ns);
  o += "],\"ops\":[";
  for (size_t i = 0; i < s.ops.size(); ++i) {
    const OpStat& op = s.ops[i];
    o += fmt::format(
        "{}{{\"name\":{},\"calls\":{},\"cpu_total_ns\":{},\"cpu_self_ns\":{},"
        "\"device_total_ns\":{},\"device_self_ns\":{},\"kernels\":[",
        i ? "," : "", JsonString(op.name), op.calls, op.cpu_total_ns, op.cpu_self_ns,
        op.device_total_ns, op.device_self_ns);
    for (size_t k = 0; k < op.kernels.size(); ++k) {
      const KernelStat& ks = op.kernels[k];
      o += fmt::format("{}{{\"name\":{},\"calls\":{},\"device_ns\":{},\"flops\":{},\"bytes\":{}}}",
                       k ? "," : "", JsonString(ks.name), ks.calls, ks.device_ns, ks.flops,
                       ks.bytes);
    }
    o += "]}";
  }
  o += "]";

  // Timeline: lanes (cpu, runtime split off each CPU thread, device, counter).
  std::vector<uint32_t> order;
  order.reserve(m.slices.size());
  for (uint32_t i = 0; i < m.slices.size(); ++i) order.push_back(i);
  const bool truncated = order.size() > cap;
  if (truncated) {
    std::nth_element(order.begin(), order.begin() + static_cast<long>(cap), order.end(),
                     [&](uint32_t a, uint32_t b) {
                       const Slice &x = m.slices[a], &y = m.slices[b];
                       return x.start_ns != y.start_ns ? x.start_ns < y.start_ns : a < b;
                     });
    order.resize(cap);
  }
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    const Slice &x = m.slices[a], &y = m.slices[b];
    if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
    return x.dur_ns != y.dur_ns ? x.dur_ns > y.dur_ns : a < b;
  });
  std::vector<int32_t> cpu_lane(m.lanes.size(), -1), rt_lane(m.lanes.size(), -1);
  std::vector<std::pair<std::string, const char*>> lanes;
  std::vector<uint8_t> has_rt(m.lanes.size(), 0), has_other(m.lanes.size(), 0);
  for (uint32_t i : order) (m.slices[i].kind == SliceKind::kRuntime ? has_rt : has_other)[m.slices[i].lane] = 1;
  for (size_t l = 0; l < m.lanes.size(); ++l) {
    const Lane& lane = m.lanes[l];
    if (lane.kind == LaneKind::kCpu) {
      if (has_other[l] || !has_rt[l]) {
        cpu_lane[l] = static_cast<int32_t>(lanes.size());
        lanes.emplace_back(lane.name, "cpu");
      }
      if (has_rt[l]) {
        rt_lane[l] = static_cast<int32_t>(lanes.size());
        lanes.emplace_back(lane.name + " runtime", "runtime");
      }
    }
  }
  for (size_t l = 0; l < m.lanes.size(); ++l)
    if (m.lanes[l].kind == LaneKind::kDevice) {
      cpu_lane[l] = static_cast<int32_t>(lanes.size());
      lanes.emplace_back(m.lanes[l].name, "device");
    }
  for (const CounterSeries& c : m.counters) lanes.emplace_back(c.name, "counter");
  o += ",\"timeline\":{\"lanes\":[";
  for (size_t i = 0; i < lanes.size(); ++i)
    o += fmt::format("{}{{\"name\":{},\"kind\":\"{}\"}}", i ? "," : "", JsonString(lanes[i].first),
                     lanes[i].second);
  std::unordered_map<uint32_t, uint32_t> name_index;
  std::vector<uint32_t> names;
  std::unordered_map<uint32_t, uint32_t> event_of;  // slice -> event index
  std::string events;
  events.reserve(order.size() * 40);
  for (size_t e = 0; e < order.size(); ++e) {
    const Slice& sl = m.slices[order[e]];
    auto [it, inserted] = name_index.emplace(sl.name, names.size());
    if (inserted) names.push_back(sl.name);
    const int lane = sl.kind == SliceKind::kRuntime ? rt_lane[sl.lane] : cpu_lane[sl.lane];
    const int kind = sl.kind == SliceKind::kOp ? 0 : sl.kind == SliceKind::kRuntime ? 1
                     : sl.kind == SliceKind::kKernel ? 2 : 3;
    events += fmt::format("{}[{},{},{},{},{},{}]", e ? "," : "", lane, sl.start_ns - m.t0_ns,
                          sl.dur_ns, it->second, kind,
                          sl.external_id != 0 ? sl.external_id : sl.correlation);
    event_of.emplace(order[e], static_cast<uint32_t>(e));
  }
  o += "],\"names\":[";
  for (size_t i = 0; i < names.size(); ++i) o += (i ? "," : "") + JsonString(m.Str(names[i]));
  o += "],\"events\":[" + events + "],\"flows\":[";
  // Flow arrows from the trace, then op -> kernel for links found by id.
  std::vector<std::pair<uint32_t, uint32_t>> flows;
  std::vector<uint8_t> has_in(m.slices.size(), 0);
  for (const FlowLink& f : m.flows) {
    if (f.from == kNone || f.to == kNone) continue;
    has_in[f.to] = 1;
    auto a = event_of.find(f.from), b = event_of.find(f.to);
    if (a != event_of.end() && b != event_of.end()) flows.emplace_back(a->second, b->second);
  }
  for (uint32_t i : order) {
    const Slice& k = m.slices[i];
    if (!k.on_device() || k.op == kNone || has_in[i]) continue;
    auto a = event_of.find(k.op);
    if (a != event_of.end()) flows.emplace_back(a->second, event_of.at(i));
  }
  std::sort(flows.begin(), flows.end());
  for (size_t i = 0; i < flows.size(); ++i)
    o += fmt::format("{}[{},{}]", i ? "," : "", flows[i].first, flows[i].second);
  o += "],\"counters\":[";
  for (size_t i = 0; i < m.counters.size(); ++i) {
    const CounterSeries& c = m.counters[i];
    o += fmt::format("{}{{\"name\":{},\"points\":[", i ? "," : "", JsonString(c.name));
    const size_t n = std::min(c.points.size(), cap);
    for (size_t p = 0; p < n; ++p)
      o += fmt::format("{}[{},{}]", p ? "," : "", c.points[p].first - m.t0_ns, Num(c.points[p].second));
    o += "]}";
  }
  o += fmt::format("],\"truncated\":{}}}", truncated ? "true" : "false");

  o += ",\"insights\":[";
  if (r.insights != nullptr) {
    for (size_t i = 0; i < r.insights->size(); ++i) {
      const Insight& in = (*r.insights)[i];
      o += fmt::format("{}{{\"kind\":{},\"severity\":{},\"title\":{},\"detail\":{},\"saving_ns\":{},\"ops\":[",
                       i ? "," : "", JsonString(in.kind), JsonString(in.severity),
                       JsonString(in.title), JsonString(in.detail), in.saving_ns);
      for (size_t k = 0; k < in.ops.size(); ++k) o += (k ? "," : "") + JsonString(in.ops[k]);
      o += "]}";
    }
  }
  o += "]";
  o += fmt::format(",\"roofline\":{{\"peak_gflops\":{},\"peak_gbps\":{},\"points\":[",
                   Num(m.meta.peak_gflops), Num(m.meta.peak_gbps));
  size_t points = 0;
  for (const OpStat& op : s.ops) {
    for (const KernelStat& k : op.kernels) {
      if (k.copy || k.bytes == 0 || k.device_ns <= 0 || points >= kRooflineCap) continue;
      const double ns = static_cast<double>(k.device_ns);
      o += fmt::format(
          "{}{{\"kernel\":{},\"op\":{},\"intensity\":{},\"gflops\":{},\"gbps\":{},\"dur_ns\":{}}}",
          points ? "," : "", JsonString(k.name), JsonString(op.name),
          Num(static_cast<double>(k.flops) / static_cast<double>(k.bytes)), Num(k.flops / ns),
          Num(k.bytes / ns), k.device_ns);
      ++points;
    }
  }
  o += "]}}";
}

}  // namespace

std::string BuildReportJson(const std::vector<ReportRun>& runs, std::string_view generator,
                            size_t timeline_cap) {
  std::string o = "{\"format\":\"trnscope.report\",\"version\":1,\"generator\":" +
                  JsonString(generator) + ",\"runs\":[";
  for (size_t i = 0; i < runs.size(); ++i) {
    if (i) o += ",";
    Run(o, runs[i], timeline_cap);
  }
  o += "]}";
  return o;
}

bool EmbedReport(std::string_view html, std::string_view json, std::string* out) {
  const size_t at = html.find(kDataPlaceholder);
  if (at == std::string_view::npos) return false;
  out->clear();
  out->reserve(html.size() + json.size() + json.size() / 64);
  out->append(html.substr(0, at));
  // "</" could end the <script> element; "<\/" is the same JSON string.
  for (size_t i = 0; i < json.size(); ++i) {
    if (json[i] == '<' && i + 1 < json.size() && json[i + 1] == '/') {
      out->append("<\\/");
      ++i;
    } else {
      out->push_back(json[i]);
    }
  }
  out->append(html.substr(at + kDataPlaceholder.size()));
  return true;
}

}  // namespace trn::analysis
