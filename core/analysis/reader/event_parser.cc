#include "core/analysis/reader/event_parser.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/analysis/reader/json_values.h"

namespace trn::analysis {

static_assert(simdjson::SIMDJSON_PADDING <= kSpanPadding, "tokenizer spans must satisfy simdjson");

namespace {

// Accepted times (Note [Time range]): ts in [-2^60, 2^62] ns (epoch ns reach
// 2^62 in 2116) and dur <= 2^50 ns (13 days). Any difference of two slice
// ends then fits int64 (the summary subtracts and scales them freely), and
// sums of durations overflow only past 2^13 maximal events. Events outside
// are skipped as malformed, with their offset.
constexpr int64_t kMinTsNs = -(int64_t{1} << 60);
constexpr int64_t kMaxTsNs = int64_t{1} << 62;
constexpr int64_t kMaxDurNs = int64_t{1} << 50;

enum class Cat : uint8_t { kOp, kRuntime, kKernel, kCopy, kIgnore };

Cat Classify(std::string_view cat, bool has_cat) {
  if (!has_cat || cat.empty()) return Cat::kOp;  // hand-written traces
  for (std::string_view c : {"cpu_op", "user_annotation", "operator"})
    if (Lower(cat, c)) return Cat::kOp;
  if (Lower(cat, "kernel")) return Cat::kKernel;
  for (std::string_view c : {"gpu_memcpy", "gpu_memset", "memcpy", "memset"})
    if (Lower(cat, c)) return Cat::kCopy;
  for (std::string_view c : {"cuda_runtime", "cuda_driver", "trn_runtime", "privateuse1_runtime",
                             "privateuse1_driver", "runtime", "xpu_runtime", "mtia_runtime"})
    if (Lower(cat, c)) return Cat::kRuntime;
  return Cat::kIgnore;
}

// Note [Runtime call kinds]
// Two rules need to know what a runtime call does: launches recorded with no
// device event mean the profile lost device time (insight "unsynchronized"),
// and time the host spends in a synchronize is waiting, not host-bound
// (Summary). trnscope's own trace.json says which calls launch: a launch or
// async copy carries args "launch id". Third-party traces (Kineto's CUDA/HIP
// runtime calls, torch.profiler's trn plugin) have only the API name, so the
// name decides there: "...Launch..." (cudaLaunchKernel, hipLaunchKernel,
// cudaGraphLaunch, trnLaunchKernel) and "...Memcpy..." (cudaMemcpyAsync)
// launch; "...Synchronize" (cudaDeviceSynchronize, trnStreamSynchronize)
// waits. Case is ignored on the first letter ("launch", "memcpy").
RuntimeCall ClassifyRuntimeCall(std::string_view name, bool has_launch_id) {
  if (has_launch_id) return RuntimeCall::kLaunch;
  if (name.find("aunch") != std::string_view::npos || name.find("emcpy") != std::string_view::npos)
    return RuntimeCall::kLaunch;
  if (name.find("ynchronize") != std::string_view::npos) return RuntimeCall::kSync;
  return RuntimeCall::kOther;
}

}  // namespace

bool TraceParser::OnEvent(std::string_view json, uint64_t offset) {
  reject_reason_ = "malformed event";
  if (Parse(json)) return true;
  // A trailing comma inside the event ({"a":1,}): drop it and retry.
  if (!RemoveTrailingCommas(json, &scratch_)) return false;
  scratch_.append(kSpanPadding, '\0');
  return Parse(std::string_view(scratch_.data(), scratch_.size() - kSpanPadding));
}

bool TraceParser::Parse(std::string_view json) {
  obj_end_ = json.data() + json.size();
  od::document doc;
  if (parser_.iterate(json.data(), json.size(), json.size() + kSpanPadding).get(doc))
    return false;
  od::object obj;
  if (doc.get_object().get(obj)) return false;
  return ParseEvent(obj);
}

bool TraceParser::RemoveTrailingCommas(std::string_view json, std::string* out) {
  out->clear();
  bool in_str = false, esc = false, changed = false;
  for (size_t i = 0; i < json.size(); ++i) {
    const char c = json[i];
    if (in_str) {
      if (esc) esc = false;
      else if (c == '\\') esc = true;
      else if (c == '"') in_str = false;
    } else if (c == '"') {
      in_str = true;
    } else if (c == ',') {
      size_t j = i + 1;
      while (j < json.size() && (json[j] == ' ' || json[j] == '\n' || json[j] == '\r' || json[j] == '\t')) ++j;
      if (j < json.size() && (json[j] == '}' || json[j] == ']')) {
        changed = true;
        continue;
      }
    }
    out->push_back(c);
  }
  return changed;
}

void TraceParser::OnTopLevel(std::string_view key, std::string_view json) {
  if (key == "trnscope_capture") {
    simdjson::dom::element e;
    simdjson::padded_string p(json);
    if (!dom_.parse(p).get(e)) {
      uint64_t d = 0;
      if (!e["dropped_total"].get_uint64().get(d)) m_->dropped_events += d;
    }
  }
  if (json.size() <= (size_t{1} << 20)) m_->top_level.emplace_back(key, std::string(json));
}

uint32_t TraceParser::LaneFor(const std::string& pid, const std::string& tid) {
  if (last_lane_ != kNone && pid == last_pid_ && tid == last_tid_) return last_lane_;
  std::string key = pid;
  key.push_back('\0');
  key += tid;
  auto [it, inserted] = lane_ids_.emplace(std::move(key), static_cast<uint32_t>(m_->lanes.size()));
  if (inserted) {
    Lane l;
    l.pid = pid;
    l.tid = tid;
    m_->lanes.push_back(std::move(l));
    open_.emplace_back();
  }
  last_pid_ = pid;
  last_tid_ = tid;
  last_lane_ = it->second;
  return it->second;
}

// The fields of one event that the analyses read. Views point into
// simdjson's string buffer and stay valid until the next event.
struct TraceParser::Fields {
  std::string_view ph, cat, name, bp, arg_name, arg_labels;
  bool has_cat = false, has_ts = false, has_dur = false, has_id = false, has_launch_id = false;
  int64_t ts = 0, dur = 0;
  uint64_t id = 0;
  uint64_t bytes = 0;  // args "bytes" (copies that give no read/written split)
  Slice s;             // the slice's args: ids, flops, bytes, shapes
};

bool TraceParser::ParseEvent(od::object& obj) {
  Fields f;
  pid_.clear();
  tid_.clear();
  counter_args_.clear();
  if (!ReadFields(obj, &f)) return false;
  // Every field was read without error: the event is well-formed.
  if (f.ph.empty()) return false;
  if (f.has_dur && f.dur < 0) {  // no real event ends before it starts
    reject_reason_ = "negative dur";
    return false;
  }
  if ((f.has_ts && (f.ts < kMinTsNs || f.ts > kMaxTsNs)) || (f.has_dur && f.dur > kMaxDurNs)) {
    reject_reason_ = f.has_dur && f.dur > kMaxDurNs ? "dur out of range (over 2^50 ns)"
                                                    : "ts out of range (|ts| over 2^60 / 2^62 ns)";
    return false;
  }
  switch (f.ph[0]) {
    case 'X':
    case 'B':
    case 'E': return AddSlice(f);
    case 'M': AddMetadata(f); return true;
    case 's':
    case 'f':
    case 't': return AddFlow(f);
    case 'C': return AddCounter(f);
    default:
      ++m_->parse.ignored;
      return true;
  }
}

bool TraceParser::ReadFields(od::object& obj, Fields* f) {
  for (auto field : obj) {
    // Raw keys: none of the keys we read has escapes, so no unescaping copy.
    od::raw_json_string raw_key;
    if (field.key().get(raw_key)) return false;
    const std::string_view key = RawKey(raw_key, obj_end_);
    od::value v;
    if (field.value().get(v)) return false;
    if (Is(key, "ph")) {
      if (v.get_string().get(f->ph)) return false;
    } else if (Is(key, "cat")) {
      if (v.get_string().get(f->cat)) return false;
      f->has_cat = true;
    } else if (Is(key, "name")) {
      if (v.get_string().get(f->name)) return false;
    } else if (Is(key, "pid")) {
      if (!GetId(v, &pid_)) return false;
    } else if (Is(key, "tid")) {
      if (!GetId(v, &tid_)) return false;
    } else if (Is(key, "ts")) {
      if (!GetNs(v, &f->ts)) return false;
      f->has_ts = true;
    } else if (Is(key, "dur")) {
      if (!GetNs(v, &f->dur)) return false;
      f->has_dur = true;
    } else if (Is(key, "id")) {
      if (!GetU64(v, &f->id)) return false;
      f->has_id = true;
    } else if (Is(key, "bp")) {
      if (v.get_string().get(f->bp)) return false;
    } else if (Is(key, "args")) {
      od::object args;
      if (v.get_object().get(args)) continue;  // args that is not an object: ignore
      if (!ReadArgs(args, f)) return false;
    }
  }
  return true;
}

bool TraceParser::ReadArgs(od::object& args, Fields* f) {
  Slice& s = f->s;
  for (auto a : args) {
    od::raw_json_string raw_k;
    if (a.key().get(raw_k)) return false;
    const std::string_view k = RawKey(raw_k, obj_end_);
    od::value av;
    if (a.value().get(av)) return false;
    uint64_t u = 0;
    if (Is(k, "External id")) {
      if (GetU64(av, &u)) s.external_id = u;
    } else if (Is(k, "correlation")) {
      if (GetU64(av, &u)) s.correlation = u;
    } else if (Is(k, "flops")) {
      if (GetU64(av, &u)) s.flops = u;
    } else if (Is(k, "bytes read")) {
      if (GetU64(av, &u)) s.bytes_read = u;
    } else if (Is(k, "bytes written")) {
      if (GetU64(av, &u)) s.bytes_written = u;
    } else if (Is(k, "bytes")) {
      if (GetU64(av, &u)) f->bytes = u;
    } else if (Is(k, "launch id")) {
      f->has_launch_id = true;
    } else if (Is(k, "Input Dims")) {
      std::string_view raw;
      if (!simdjson::to_json_string(av).get(raw)) s.input_dims = m_->strings.Intern(raw);
    } else if (Is(k, "Input type")) {
      std::string_view raw;
      if (!simdjson::to_json_string(av).get(raw)) s.input_types = m_->strings.Intern(raw);
    } else if (Is(k, "name")) {
      od::json_type t;
      if (!av.type().get(t) && t == od::json_type::string && av.get_string().get(f->arg_name))
        f->arg_name = {};
    } else if (Is(k, "labels")) {
      od::json_type t;
      if (!av.type().get(t) && t == od::json_type::string && av.get_string().get(f->arg_labels))
        f->arg_labels = {};
    } else if (f->ph == "C" || f->ph.empty()) {
      double d = 0;
      od::json_type t;
      if (!av.type().get(t) && t == od::json_type::number && !av.get_double().get(d))
        counter_args_.emplace_back(std::string(k), d);
    }
  }
  return true;
}

// X (complete), B (begin) and E (end) events.
bool TraceParser::AddSlice(const Fields& f) {
  if (!f.has_ts) return false;
  const uint32_t lane = LaneFor(pid_, tid_);
  if (f.ph[0] == 'E') {
    auto& stack = open_[lane];
    if (stack.empty()) return true;  // an unmatched E: harmless
    Slice b = stack.back();
    stack.pop_back();
    if (f.ts < b.start_ns) {
      reject_reason_ = "negative dur (an E event before its B)";
      return false;
    }
    b.dur_ns = f.ts - b.start_ns;
    m_->slices.push_back(b);
    return true;
  }
  const Cat c = Classify(f.cat, f.has_cat);
  if (c == Cat::kIgnore) {
    ++m_->parse.ignored;
    return true;
  }
  Slice s = f.s;
  s.kind = c == Cat::kOp        ? SliceKind::kOp
           : c == Cat::kRuntime ? SliceKind::kRuntime
           : c == Cat::kKernel  ? SliceKind::kKernel
                                : SliceKind::kCopy;
  if (s.kind == SliceKind::kCopy && s.bytes_read == 0 && s.bytes_written == 0) s.bytes_read = f.bytes;
  if (s.kind == SliceKind::kRuntime) s.call = ClassifyRuntimeCall(f.name, f.has_launch_id);
  s.start_ns = f.ts;
  s.dur_ns = f.dur;  // >= 0: negative durations were rejected
  s.lane = lane;
  s.name = m_->strings.Intern(f.name);
  if (f.ph[0] == 'B') {
    open_[lane].push_back(s);
  } else {
    m_->slices.push_back(s);
  }
  return true;
}

void TraceParser::AddMetadata(const Fields& f) {
  if (f.name == "thread_name") {
    labels_.thread_names[pid_ + '\0' + tid_] = std::string(f.arg_name);
  } else if (f.name == "process_labels") {
    labels_.process_labels[pid_] = std::string(f.arg_labels);
  }
}

// s (start), f (finish) and t (step) flow events; steps are not used.
bool TraceParser::AddFlow(const Fields& f) {
  if (!f.has_ts || !f.has_id) return false;
  if (f.ph[0] == 't') return true;
  const uint32_t lane = LaneFor(pid_, tid_);
  const bool start = f.ph[0] == 's';
  raw_flows_.push_back({m_->strings.Intern(f.cat), f.id, f.ts, lane, start, start || f.bp == "e"});
  return true;
}

// One series per numeric arg ("name", or "name.key" when there are several).
bool TraceParser::AddCounter(const Fields& f) {
  if (!f.has_ts) return false;
  for (const auto& [k, v] : counter_args_) {
    std::string series =
        counter_args_.size() == 1 ? std::string(f.name) : fmt::format("{}.{}", f.name, k);
    std::string key = pid_ + '\0' + series;
    auto [it, inserted] = counter_ids_.emplace(key, m_->counters.size());
    if (inserted) {
      CounterSeries cs;
      cs.name = std::move(series);
      cs.pid = pid_;
      m_->counters.push_back(std::move(cs));
    }
    m_->counters[it->second].points.emplace_back(f.ts, v);
  }
  return true;
}

void TraceParser::Finish() {
  TraceModel& m = *m_;
  NameLanes(m, labels_);
  SortSlices(m);
  NestCpuLanes(m);
  const std::vector<uint32_t> owner = MergeRepeatedOps(m);
  ResolveFlows(m, &raw_flows_);
  LinkDeviceWork(m, owner);
  // Time range.
  bool first = true;
  for (const Slice& s : m.slices) {
    if (first || s.start_ns < m.t0_ns) m.t0_ns = s.start_ns;
    if (first || s.end_ns() > m.t1_ns) m.t1_ns = s.end_ns();
    first = false;
  }
  for (auto& c : m.counters)
    std::stable_sort(c.points.begin(), c.points.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
}

}  // namespace trn::analysis
