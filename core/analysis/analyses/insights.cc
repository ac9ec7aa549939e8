// Every rule here states its threshold as a constant and quantifies its
// finding from the trace; docs/analyzer.md "Insights" describes them.
#include "core/analysis/analyses/insights.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "core/analysis/analyses/units.h"

namespace trn::analysis {
namespace {

// Chains break on a host gap longer than this between two launching ops.
constexpr int64_t kChainGapNs = 200'000;
constexpr size_t kMaxChainOps = 12;
// Above this many flop per byte a kernel is compute-bound: not a fusion candidate.
constexpr double kMaxChainIntensity = 4.0;
// Launch overhead: device time per call below this fraction of host time.
constexpr double kLaunchRatio = 0.5;

bool ComputeHeavy(std::string_view name) {
  for (std::string_view k : {"mm", "conv", "linear", "matmul", "attention", "copy", "_to", "::to",
                             "contiguous", "clone", "empty", "fill", "zero"})
    if (name.find(k) != std::string_view::npos) return true;
  return false;
}

// Advice names what fits the device the trace came from: trnscope's own
// traces (meta.json or trn lanes), CUDA or ROCm (their runtime calls).
enum class Platform { kTrn, kCuda, kRocm, kOther };

Platform DetectPlatform(const TraceModel& m) {
  if (m.meta.present) return Platform::kTrn;
  for (const Lane& l : m.lanes)
    if (l.name.rfind("trn:", 0) == 0) return Platform::kTrn;
  bool cuda = false;
  for (const Slice& sl : m.slices) {
    if (sl.kind != SliceKind::kRuntime) continue;
    const std::string_view n = m.Name(sl);
    if (n.rfind("hip", 0) == 0) return Platform::kRocm;
    cuda = cuda || n.rfind("cuda", 0) == 0 || n.rfind("cu", 0) == 0;
  }
  return cuda ? Platform::kCuda : Platform::kOther;
}

// How to get one fused kernel for an elementwise chain.
const char* FusionAdvice(Platform p) {
  switch (p) {
    case Platform::kTrn:
      return "Use the fused op (e.g. torch.nn.functional.rms_norm) or "
             "torch.compile(backend=\"trn\").";
    case Platform::kCuda:
    case Platform::kRocm:
      return "Use the fused op (e.g. torch.nn.functional.rms_norm) or torch.compile (inductor "
             "generates one Triton kernel for the chain).";
    case Platform::kOther: break;
  }
  return "Use the fused op (e.g. torch.nn.functional.rms_norm) or torch.compile.";
}

// How to cut per-launch host cost.
const char* LaunchAdvice(Platform p) {
  switch (p) {
    case Platform::kTrn:
      return "Batch the work, fuse the ops or compile the region (torch.compile(backend=\"trn\")) "
             "so one launch does more.";
    case Platform::kCuda:
      return "Batch the work, fuse the ops, or capture the region in a CUDA graph "
             "(torch.cuda.graphs, or torch.compile(mode=\"reduce-overhead\")) so the host "
             "launches it once.";
    case Platform::kRocm:
      return "Batch the work, fuse the ops, or capture the region in a HIP graph "
             "(torch.cuda.graphs on ROCm, or torch.compile(mode=\"reduce-overhead\")) so the "
             "host launches it once.";
    case Platform::kOther: break;
  }
  return "Batch the work, fuse the ops or compile the region so one launch does more.";
}

std::string Short(std::string_view op) {
  const size_t p = op.rfind("::");
  return std::string(p == std::string_view::npos ? op : op.substr(p + 2));
}

size_t DtypeBytes(std::string_view t) {
  if (t.find("double") != t.npos || t.find("long") != t.npos) return 8;
  if (t.find("Half") != t.npos || t.find("BFloat16") != t.npos || t.find("short") != t.npos) return 2;
  if (t.find("bool") != t.npos || t.find("char") != t.npos || t.find("Byte") != t.npos) return 1;
  return 4;
}

// Estimated (read, written) bytes from "Input Dims" / "Input type" when the
// trace has no byte counts (CUDA traces): inputs read once, an output as
// large as the largest input written once.
std::pair<uint64_t, uint64_t> EstimateBytes(const TraceModel& m, const Slice& op) {
  const std::string_view dims = m.Str(op.input_dims);
  const std::string_view types = m.Str(op.input_types);
  std::vector<std::string_view> type_list;
  for (size_t i = 0; i < types.size();) {
    const size_t q = types.find('"', i);
    if (q == types.npos) break;
    const size_t e = types.find('"', q + 1);
    if (e == types.npos) break;
    type_list.push_back(types.substr(q + 1, e - q - 1));
    i = e + 1;
  }
  uint64_t read = 0, largest = 0;
  size_t index = 0;
  int depth = 0;
  uint64_t numel = 1, cur = 0;
  bool have_num = false, any_dim = false;
  for (char c : dims) {
    if (c == '[') {
      ++depth;
      if (depth == 2) numel = 1, any_dim = false;
    } else if (c >= '0' && c <= '9') {
      cur = cur * 10 + static_cast<uint64_t>(c - '0');
      have_num = true;
    } else if (c == ',' || c == ']') {
      if (have_num && depth == 2) numel *= cur, any_dim = true;
      cur = 0;
      have_num = false;
      if (c == ']') {
        if (depth == 2 && any_dim) {
          const size_t sz = index < type_list.size() ? DtypeBytes(type_list[index]) : 4;
          read += numel * sz;
          largest = std::max(largest, numel * sz);
        }
        if (depth == 2) ++index;
        --depth;
      }
    }
  }
  return {read, largest};
}

struct OpBytes {
  uint64_t read = 0, written = 0, flops = 0;
  int64_t device_ns = 0;
};

std::string ChainLabel(const std::vector<std::string>& ops) {
  std::set<std::string> s;
  for (const auto& o : ops) s.insert(Short(o));
  auto has = [&](const char* n) { return s.count(n) > 0; };
  if (has("rsqrt") && (has("mean") || has("pow")) && has("mul")) return "RMSNorm-like chain";
  if (has("exp") && (has("sum") || has("div"))) return "softmax-like chain";
  if (has("sigmoid") && has("mul")) return "SiLU-like chain";
  return "elementwise chain";
}

}  // namespace

std::vector<int64_t> SuggestBuckets(const std::vector<int64_t>& sizes) {
  std::set<int64_t> b;
  for (int64_t s : sizes) {
    if (s <= 0) continue;
    int64_t p = 1;
    while (p < s) p <<= 1;
    b.insert(p);
  }
  return {b.begin(), b.end()};
}

std::vector<FusionChain> FindFusionChains(const TraceModel& m) {
  // Direct device traffic of each launching op.
  std::unordered_map<uint32_t, OpBytes> bytes;
  for (const Slice& k : m.slices) {
    if (!k.on_device() || k.op == kNone) continue;
    OpBytes& b = bytes[k.op];
    b.read += k.bytes_read;
    b.written += k.bytes_written;
    b.flops += k.flops;
    b.device_ns += k.dur_ns;
  }
  std::map<std::vector<std::string>, FusionChain> chains;
  std::vector<uint32_t> run;
  auto flush = [&]() {
    // Reduce a periodic run (the same ops each iteration) to its unit.
    size_t period = run.size();
    for (size_t p = 2; p * 2 <= run.size(); ++p) {
      bool ok = true;
      for (size_t i = p; i < run.size() && ok; ++i)
        ok = m.slices[run[i]].name == m.slices[run[i - p]].name;
      if (ok) {
        period = p;
        break;
      }
    }
    period = std::min(period, kMaxChainOps);
    for (size_t at = 0; at + 2 <= run.size(); at += period) {
      const size_t n = std::min(period, run.size() - at);
      if (n < 2) break;
      std::vector<std::string> names;
      uint64_t total = 0;
      int64_t dev = 0;
      for (size_t i = at; i < at + n; ++i) {
        names.emplace_back(m.Name(m.slices[run[i]]));
        const OpBytes& b = bytes[run[i]];
        total += b.read + b.written;
        dev += b.device_ns;
      }
      const uint64_t fused = bytes[run[at]].read + bytes[run[at + n - 1]].written;
      FusionChain& c = chains[names];
      c.ops = names;
      c.occurrences++;
      c.device_ns += dev;
      c.bytes += total;
      c.fused_bytes += std::min(fused, total);
    }
    run.clear();
  };
  for (const Lane& l : m.lanes) {
    if (l.kind != LaneKind::kCpu) continue;
    int64_t last_end = 0;
    uint32_t last_top = kNone;
    bool last_wrapped = false;
    for (uint32_t i = l.first; i < l.last; ++i) {
      const Slice& s = m.slices[i];
      if (s.kind == SliceKind::kRuntime) {
        if (s.call == RuntimeCall::kSync) flush();
        continue;
      }
      auto it = bytes.find(i);
      if (it == bytes.end()) continue;  // launches nothing itself
      OpBytes& b = it->second;
      if (b.read + b.written == 0) {
        const auto est = EstimateBytes(m, s);
        b.read = est.first;
        b.written = est.second;
      }
      uint32_t top = i;
      while (m.slices[top].parent != kNone) top = m.slices[top].parent;
      const double intensity =
          b.read + b.written > 0 ? static_cast<double>(b.flops) / (b.read + b.written) : 0;
      const bool breaks = ComputeHeavy(m.Name(s)) || intensity > kMaxChainIntensity ||
                          b.read + b.written == 0;
      // Ops under different wrappers (record_function, nn.Module) are separate chains.
      const bool wrapped = top != i;
      if (!run.empty() && (s.start_ns - last_end > kChainGapNs || breaks ||
                           ((wrapped || last_wrapped) && top != last_top)))
        flush();
      if (!breaks) run.push_back(i);
      last_end = s.end_ns();
      last_top = top;
      last_wrapped = wrapped;
    }
    flush();
  }
  std::vector<FusionChain> out;
  for (auto& [k, c] : chains)
    if (c.bytes > c.fused_bytes) out.push_back(std::move(c));
  std::sort(out.begin(), out.end(), [](const FusionChain& a, const FusionChain& b) {
    const uint64_t sa = a.bytes - a.fused_bytes, sb = b.bytes - b.fused_bytes;
    if (sa != sb) return sa > sb;
    return a.ops < b.ops;
  });
  return out;
}

std::vector<Insight> ComputeInsights(const TraceModel& m, const Summary& s) {
  std::vector<Insight> out;
  const Totals& t = s.totals;
  auto severity = [](double frac) { return frac >= 0.3 ? "high" : frac >= 0.1 ? "medium" : "low"; };
  const double device_ns = static_cast<double>(std::max<int64_t>(t.device_ns, 1));
  const Platform platform = DetectPlatform(m);

  // Fusion: the three chains that would save the most traffic.
  const auto chains = FindFusionChains(m);
  for (size_t i = 0; i < std::min<size_t>(3, chains.size()); ++i) {
    const FusionChain& c = chains[i];
    const uint64_t avoided = c.bytes - c.fused_bytes;
    const double frac = static_cast<double>(avoided) / static_cast<double>(c.bytes);
    Insight in;
    in.kind = "fusion";
    std::vector<std::string> shorts;
    for (const auto& o : c.ops) shorts.push_back(Short(o));
    in.title = fmt::format("Fuse {} ({})", fmt::join(shorts, "→"), ChainLabel(c.ops));
    in.saving_ns = static_cast<int64_t>(static_cast<double>(c.device_ns) * frac);
    in.severity = severity(in.saving_ns / device_ns);
    in.detail = fmt::format(
        "{} kernels per occurrence, {} occurrence(s), move {} through device memory in {}; one "
        "fused kernel reading the inputs once and writing the result once would move {} "
        "({} avoided, {:.0f}%). {}",
        c.ops.size(), c.occurrences, FormatBytes(c.bytes), FormatNs(c.device_ns),
        FormatBytes(c.fused_bytes), FormatBytes(avoided), 100 * frac, FusionAdvice(platform));
    std::set<std::string> seen;
    for (const auto& o : c.ops)
      if (seen.insert(o).second) in.ops.push_back(o);
    out.push_back(std::move(in));
  }

  // Launch overhead: ops whose host dispatch dwarfs their device time.
  {
    std::vector<const OpStat*> hits;
    int64_t waste = 0;
    for (const OpStat& o : s.ops) {
      if (o.kind != SliceKind::kOp || o.device_self_ns <= 0 || o.calls < 2) continue;
      if (o.device_self_ns >= kLaunchRatio * o.cpu_total_ns) continue;
      hits.push_back(&o);
      waste += o.cpu_total_ns - o.device_self_ns;
    }
    std::sort(hits.begin(), hits.end(), [](const OpStat* a, const OpStat* b) {
      const int64_t wa = a->cpu_total_ns - a->device_self_ns, wb = b->cpu_total_ns - b->device_self_ns;
      return wa != wb ? wa > wb : a->name < b->name;
    });
    if (!hits.empty() && waste > 0) {
      Insight in;
      in.kind = "launch_overhead";
      std::vector<std::string> parts;
      for (size_t i = 0; i < std::min<size_t>(5, hits.size()); ++i) {
        const OpStat& o = *hits[i];
        parts.push_back(fmt::format("{} ({} calls: host {} vs device {} per call)", o.name, o.calls,
                                    FormatNs(o.cpu_total_ns / static_cast<int64_t>(o.calls)),
                                    FormatNs(o.device_self_ns / static_cast<int64_t>(o.calls))));
        in.ops.push_back(o.name);
      }
      in.title = fmt::format("{} op(s) dominated by launch overhead", hits.size());
      in.detail = fmt::format(
          "Device time per call is under {:.0f}% of the host time to dispatch it: {}. {}",
          100 * kLaunchRatio, fmt::join(parts, "; "), LaunchAdvice(platform));
      in.saving_ns = waste;
      in.severity = severity(static_cast<double>(waste) / std::max<int64_t>(t.cpu_ops_ns, 1));
      // Divide, not multiply: a window between epoch and 0 timestamps is ~2^61 ns.
      if (s.device_window_ns > 0 && s.host_bound_ns < s.device_window_ns / 10) {
        // The host ran ahead of the device: dispatch cost is hidden for now.
        in.severity = "low";
        in.detail += " The device, not the host, bounded this run, so this matters once device "
                     "time shrinks.";
      }
      out.push_back(std::move(in));
    }
  }

  // Host-bound stretches.
  if (s.device_window_ns > 0 && s.host_bound_ns > 0) {
    const double frac = static_cast<double>(s.host_bound_ns) / s.device_window_ns;
    if (frac >= 0.1) {
      Insight in;
      in.kind = "host_bound";
      std::map<std::string, int64_t> by_op;
      for (const HostGap& g : s.gaps) by_op[g.op.empty() ? "(between ops)" : g.op] += g.dur_ns;
      std::vector<std::pair<int64_t, std::string>> ranked;
      for (auto& [op, ns] : by_op) ranked.emplace_back(-ns, op);
      std::sort(ranked.begin(), ranked.end());
      std::vector<std::string> names;
      for (const auto& [neg, op] : ranked) {
        names.push_back(fmt::format("{} {}", op, FormatNs(-neg)));
        if (op != "(between ops)") in.ops.push_back(op);
      }
      in.title = fmt::format("Device idle {:.0f}% of its active window while the host dispatches",
                             100 * frac);
      in.detail = fmt::format(
          "{} of {} between the first and last device event had no kernel running while the "
          "host was not waiting for the device (dispatching ops or running Python between "
          "them); longest stretches during: {}. Queue work ahead (avoid "
          "synchronizing reads like .item()/.cpu() in the loop), or cut per-op host cost: {}",
          FormatNs(s.host_bound_ns), FormatNs(s.device_window_ns), fmt::join(names, ", "),
          LaunchAdvice(platform));
      in.saving_ns = s.host_bound_ns;
      in.severity = frac >= 0.5 ? "high" : frac >= 0.2 ? "medium" : "low";
      out.push_back(std::move(in));
    }
  }

  // CPU fallbacks.
  if (!m.meta.fallback_ops.empty()) {
    Insight in;
    in.kind = "fallback";
    uint64_t calls = 0;
    int64_t host = 0;
    std::vector<std::string> parts;
    for (const auto& [op, n] : m.meta.fallback_ops) {
      calls += n;
      int64_t ns = 0;
      for (const OpStat& o : s.ops)
        if (o.name == op) ns += o.cpu_total_ns;
      host += ns;
      parts.push_back(ns > 0 ? fmt::format("{} x{} ({})", op, n, FormatNs(ns))
                             : fmt::format("{} x{}", op, n));
      in.ops.push_back(op);
    }
    in.title = fmt::format("{} op(s) ran on the CPU through the fallback ({} calls)",
                           m.meta.fallback_ops.size(), calls);
    in.detail = fmt::format(
        "Each call copies its inputs to the host, computes there and copies back, and waits for "
        "the device: {}. Implement the op for trn or rewrite with supported ops.",
        fmt::join(parts, ", "));
    in.saving_ns = host;
    in.severity = host > 0 ? severity(static_cast<double>(host) / std::max<int64_t>(t.cpu_ops_ns, 1))
                           : "medium";
    out.push_back(std::move(in));
  }

  // Recompiles.
  if (m.meta.compiles.size() > 1) {
    std::map<std::string, std::vector<const CompileRecord*>> by_graph;
    for (const CompileRecord& c : m.meta.compiles) by_graph[c.graph].push_back(&c);
    for (const auto& [graph, recs] : by_graph) {
      if (recs.size() < 2) continue;
      // Dims whose size differs between compiles: (input, dim) -> sizes.
      std::map<std::pair<size_t, size_t>, std::set<int64_t>> dims;
      for (const CompileRecord* r : recs)
        for (size_t i = 0; i < r->shapes.size(); ++i)
          for (size_t d = 0; d < r->shapes[i].size(); ++d) dims[{i, d}].insert(r->shapes[i][d]);
      std::vector<std::string> parts;
      size_t bucket_compiles = 1;
      for (const auto& [id, sizes] : dims) {
        if (sizes.size() < 2) continue;
        const auto buckets = SuggestBuckets({sizes.begin(), sizes.end()});
        bucket_compiles *= std::max<size_t>(1, buckets.size());
        parts.push_back(fmt::format("input {} dim {} took {} sizes [{}] -> pad to buckets [{}]",
                                    id.first, id.second, sizes.size(), fmt::join(sizes, ", "),
                                    fmt::join(buckets, ", ")));
      }
      int64_t total = 0;
      for (const CompileRecord* r : recs) total += r->duration_ns;
      const int64_t avg = total / static_cast<int64_t>(recs.size());
      Insight in;
      in.kind = "recompile";
      in.title = fmt::format("{} compiled {} times ({} recompiles)",
                             graph.empty() ? "graph" : graph, recs.size(), recs.size() - 1);
      in.detail = fmt::format(
          "Compiling took {} in total. {}. With static-shape buckets {} compile(s) would do; "
          "or pass dynamic=True.",
          FormatNs(total), parts.empty() ? std::string("Shapes were not recorded") : fmt::format("{}", fmt::join(parts, "; ")),
          parts.empty() ? 1 : bucket_compiles);
      const size_t saved = recs.size() > bucket_compiles ? recs.size() - bucket_compiles : 0;
      in.saving_ns = avg * static_cast<int64_t>(saved);
      in.severity = recs.size() >= 8 ? "high" : recs.size() >= 3 ? "medium" : "low";
      if (!graph.empty()) in.ops.push_back(graph);
      out.push_back(std::move(in));
    }
  }

  // float64 downcasts.
  if (!m.meta.float64_downcasts.empty()) {
    Insight in;
    in.kind = "float64";
    uint64_t calls = 0;
    std::vector<std::string> parts;
    for (const auto& [op, n] : m.meta.float64_downcasts) {
      calls += n;
      parts.push_back(fmt::format("{} x{}", op, n));
      in.ops.push_back(op);
    }
    in.title = fmt::format("float64 computed as float32 in {} call(s)", calls);
    in.detail = fmt::format(
        "The device has no float64: {} kept their float64 dtype but were computed in float32. "
        "Cast to float32 explicitly (x.float()) so the precision is what the code says.",
        fmt::join(parts, ", "));
    in.severity = "low";
    out.push_back(std::move(in));
  }

  // Missing device time: not synchronized / device events lost.
  {
    const uint64_t device_events = t.kernels + t.copies;
    std::string why;
    if (device_events == 0 && (m.runtime_launches > 0 || m.meta.device_requested)) {
      why = m.runtime_launches > 0
                ? fmt::format("{} kernel launches were recorded but no device event",
                              m.runtime_launches)
                : "device activities were requested but the trace has no device event";
    } else if (m.runtime_launches > device_events + device_events / 20 + 1) {
      why = fmt::format("{} launches were recorded but only {} device events",
                        m.runtime_launches, device_events);
    }
    if (!why.empty()) {
      Insight in;
      in.kind = "unsynchronized";
      in.severity = "high";
      in.title = "Device time is missing: synchronize before the profile ends";
      in.detail = fmt::format(
          "{}, so device columns are empty or short. Call torch.trn.synchronize() (or "
          "torch.cuda.synchronize()) before leaving the profiler context or exporting.",
          why);
      out.push_back(std::move(in));
    } else if (m.meta.guard_synchronized && m.meta.commands_in_flight > 0) {
      Insight in;
      in.kind = "unsynchronized";
      in.severity = "medium";
      in.title = "The device was not synchronized when the profile stopped";
      in.detail = fmt::format(
          "{} commands were still queued at stop; trnscope's guard waited for them, so device "
          "time is complete here, but other profilers would drop it. Call "
          "torch.trn.synchronize() before the profiler exits.",
          m.meta.commands_in_flight);
      out.push_back(std::move(in));
    }
  }

  if (m.dropped_events > 0) {
    Insight in;
    in.kind = "dropped_events";
    in.severity = "medium";
    in.title = fmt::format("{} trace events were dropped", m.dropped_events);
    in.detail = "The tracer's buffers filled up; totals undercount. Profile fewer iterations "
                "or raise the buffer size in ProfileConfig.";
    out.push_back(std::move(in));
  }

  // A projected saving is at most the run's span (estimates from summed host
  // times across threads could exceed it); reports show it as a share of the span.
  for (Insight& in : out) in.saving_ns = std::min(in.saving_ns, std::max<int64_t>(t.span_ns, 0));

  auto rank = [](const std::string& s) { return s == "high" ? 0 : s == "medium" ? 1 : 2; };
  std::stable_sort(out.begin(), out.end(), [&](const Insight& a, const Insight& b) {
    if (rank(a.severity) != rank(b.severity)) return rank(a.severity) < rank(b.severity);
    return a.saving_ns > b.saving_ns;
  });
  return out;
}

}  // namespace trn::analysis
