// TraceParser: the parser half of the reader. The tokenizer hands it one event
// at a time; it reads only the fields the analysis uses with simdjson
// On-Demand and appends plain records (names interned). Finish() then sorts,
// nests, links and resolves flows.
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
#include "core/analysis/trace_model.h"

#include <fmt/format.h>
#include <simdjson.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>

#include <sys/stat.h>

namespace trn::analysis {

static_assert(simdjson::SIMDJSON_PADDING <= kSpanPadding, "tokenizer spans must satisfy simdjson");

StringTable::StringTable() {
  views_.emplace_back();
  ids_.emplace(std::string_view(), 0);
}

uint32_t StringTable::Intern(std::string_view s) {
  auto it = ids_.find(s);
  if (it != ids_.end()) return it->second;
  if (s.size() > block_left_) {
    const size_t n = std::max<size_t>(s.size(), 64 << 10);
    blocks_.emplace_back(new char[n]);
    block_pos_ = blocks_.back().get();
    block_left_ = n;
  }
  std::memcpy(block_pos_, s.data(), s.size());
  std::string_view stored(block_pos_, s.size());
  block_pos_ += s.size();
  block_left_ -= s.size();
  const auto id = static_cast<uint32_t>(views_.size());
  views_.push_back(stored);
  ids_.emplace(stored, id);
  return id;
}

const char* SliceKindName(SliceKind k) {
  switch (k) {
    case SliceKind::kOp: return "op";
    case SliceKind::kRuntime: return "runtime";
    case SliceKind::kKernel: return "kernel";
    case SliceKind::kCopy: return "copy";
  }
  return "?";
}

std::string RunNameFromPath(const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  const size_t slash = p.rfind('/');
  std::string file = slash == std::string::npos ? p : p.substr(slash + 1);
  std::string dir = slash == std::string::npos ? "" : p.substr(0, slash);
  for (const char* ext : {".gz", ".json"}) {
    const size_t n = std::strlen(ext);
    if (file.size() > n && file.compare(file.size() - n, n, ext) == 0) file.resize(file.size() - n);
  }
  if ((file == "trace" || file.rfind("trace.", 0) == 0) && !dir.empty()) {
    const size_t s2 = dir.rfind('/');
    std::string parent = s2 == std::string::npos ? dir : dir.substr(s2 + 1);
    if (!parent.empty() && parent != ".") return parent;
  }
  return file;
}

namespace {

namespace od = simdjson::ondemand;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// "123.4567" microseconds -> 123457 ns without going through a double (epoch
// timestamps in µs have 19 significant digits in ns).
bool MicrosToNs(std::string_view s, int64_t* ns) {
  s = Trim(s);
  if (s.empty()) return false;
  bool neg = false;
  size_t i = 0;
  if (s[0] == '-') neg = true, ++i;
  __int128 v = 0;
  size_t digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
    v = v * 10 + (s[i] - '0');
    if (v > (__int128{1} << 100)) return false;
  }
  int frac = 0;
  int round = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
      if (frac < 3) {
        v = v * 10 + (s[i] - '0');
        ++frac;
      } else if (frac == 3) {
        round = s[i] >= '5';
        frac = 4;
      }
    }
  }
  if (digits == 0) return false;
  if (i < s.size()) {  // exponent or junk: take the slow, approximate road
    char* end = nullptr;
    const std::string tmp(s);
    const double d = std::strtod(tmp.c_str(), &end);
    if (end == nullptr || *end != '\0' || !std::isfinite(d) || std::fabs(d) > 9e15) return false;
    *ns = static_cast<int64_t>(std::llround(d * 1000.0));
    return true;
  }
  for (int k = std::min(frac, 3); k < 3; ++k) v *= 10;
  v += round;
  if (v > INT64_MAX) return false;
  *ns = neg ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
  return true;
}

bool ParseU64Text(std::string_view s, uint64_t* out) {
  s = Trim(s);
  if (s.empty()) return false;
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    if (v > (UINT64_MAX - 9) / 10) return false;
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = v;
  return true;
}

// A number or numeric string as uint64 (negative/fractional values clamp).
bool GetU64(od::value v, uint64_t* out) {
  od::json_type t;
  if (v.type().get(t)) return false;
  if (t == od::json_type::number) {
    std::string_view raw = v.raw_json_token();
    if (ParseU64Text(raw, out)) return true;
    double d = 0;
    if (v.get_double().get(d)) return false;
    *out = d > 0 && d < 1.8e19 ? static_cast<uint64_t>(d) : 0;
    return true;
  }
  if (t == od::json_type::string) {
    std::string_view s;
    if (v.get_string().get(s)) return false;
    if (ParseU64Text(s, out)) return true;
    *out = std::hash<std::string_view>()(s) | (uint64_t{1} << 63);  // a string id
    return true;
  }
  return false;
}

bool GetNs(od::value v, int64_t* ns) {
  od::json_type t;
  if (v.type().get(t)) return false;
  std::string_view s;
  if (t == od::json_type::number) {
    s = v.raw_json_token();
  } else if (t == od::json_type::string) {
    if (v.get_string().get(s)) return false;
  } else {
    return false;
  }
  return MicrosToNs(s, ns);
}

// pid/tid: numbers or strings, kept as text ("5385", "Spans").
bool GetId(od::value v, std::string* out) {
  od::json_type t;
  if (v.type().get(t)) return false;
  std::string_view s;
  if (t == od::json_type::number) {
    s = Trim(v.raw_json_token());
    const size_t dot = s.find('.');
    if (dot != std::string_view::npos && s.find_first_not_of('0', dot + 1) == std::string_view::npos)
      s = s.substr(0, dot);  // 7.0 -> 7
  } else if (t == od::json_type::string) {
    if (v.get_string().get(s)) return false;
  } else if (t == od::json_type::null) {
    s = "";
  } else {
    return false;
  }
  out->assign(s);
  return true;
}

// The raw bytes of a key up to its closing quote (a key with escapes keeps
// them, so it simply matches none of ours).
std::string_view RawKey(od::raw_json_string k, const char* end) {
  const char* p = reinterpret_cast<const char*>(k.raw());
  const char* q = p;
  while (q < end && *q != '"') q += *q == '\\' ? 2 : 1;
  return std::string_view(p, static_cast<size_t>(std::min(q, end) - p));
}

// s == lit, with the length known at compile time so the compare is inlined
// (ParseEvent tests every key of every event against these).
template <size_t N>
inline bool Is(std::string_view s, const char (&lit)[N]) {
  return s.size() == N - 1 && std::memcmp(s.data(), lit, N - 1) == 0;
}

bool Lower(std::string_view s, std::string_view lower_ascii) {
  if (s.size() != lower_ascii.size()) return false;
  for (size_t i = 0; i < s.size(); ++i)
    if ((s[i] >= 'A' && s[i] <= 'Z' ? s[i] + ('a' - 'A') : s[i]) != lower_ascii[i]) return false;
  return true;
}

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

struct RawFlow {
  uint32_t cat;
  uint64_t id;
  int64_t ts;
  uint32_t lane;
  bool start;
  bool enclosing;  // "bp":"e" (or a start: always the enclosing slice)
};

// Builds a TraceModel from tokenizer callbacks. One thread.
class TraceParser final : public TokenSink {
 public:
  explicit TraceParser(TraceModel* m) : m_(m) {}

  bool OnEvent(std::string_view json, uint64_t offset) override {
    reject_reason_ = "malformed event";
    if (Parse(json)) return true;
    // A trailing comma inside the event ({"a":1,}): drop it and retry.
    if (!RemoveTrailingCommas(json, &scratch_)) return false;
    scratch_.append(kSpanPadding, '\0');
    return Parse(std::string_view(scratch_.data(), scratch_.size() - kSpanPadding));
  }

  bool Parse(std::string_view json) {
    obj_end_ = json.data() + json.size();
    od::document doc;
    if (parser_.iterate(json.data(), json.size(), json.size() + kSpanPadding).get(doc))
      return false;
    od::object obj;
    if (doc.get_object().get(obj)) return false;
    return ParseEvent(obj);
  }

  // Copies json without commas that precede '}' or ']'; false if there are none.
  static bool RemoveTrailingCommas(std::string_view json, std::string* out) {
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

  void OnTopLevel(std::string_view key, std::string_view json) override {
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

  std::string_view RejectReason() const override { return reject_reason_; }

  void Finish();
  std::vector<std::pair<uint64_t, std::string>> event_errors;

 private:
  bool ParseEvent(od::object& obj);
  uint32_t LaneFor(const std::string& pid, const std::string& tid);

  TraceModel* m_;
  od::parser parser_;
  simdjson::dom::parser dom_;
  std::string scratch_;
  const char* obj_end_ = nullptr;  // end of the event being parsed
  const char* reject_reason_ = "malformed event";  // why OnEvent last returned false
  std::string pid_, tid_, last_pid_, last_tid_;
  uint32_t last_lane_ = kNone;
  std::unordered_map<std::string, uint32_t> lane_ids_;
  std::vector<RawFlow> raw_flows_;
  std::vector<std::vector<Slice>> open_;  // per lane: "B" events
  // Metadata names.
  std::unordered_map<std::string, std::string> thread_names_, process_names_, process_labels_;
  std::unordered_map<std::string, size_t> counter_ids_;
  std::vector<std::pair<std::string, double>> counter_args_;
};

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

bool TraceParser::ParseEvent(od::object& obj) {
  std::string_view ph, cat, name, bp, arg_name, arg_labels;
  bool has_cat = false, has_ts = false, has_dur = false, has_id = false;
  int64_t ts = 0, dur = 0;
  uint64_t id = 0;
  Slice s;
  uint64_t bytes = 0;
  bool has_pid = false;
  pid_.clear();
  tid_.clear();
  counter_args_.clear();
  for (auto field : obj) {
    // Raw keys: none of the keys we read has escapes, so no unescaping copy.
    od::raw_json_string raw_key;
    if (field.key().get(raw_key)) return false;
    const std::string_view key = RawKey(raw_key, obj_end_);
    od::value v;
    if (field.value().get(v)) return false;
    if (Is(key, "ph")) {
      if (v.get_string().get(ph)) return false;
    } else if (Is(key, "cat")) {
      if (v.get_string().get(cat)) return false;
      has_cat = true;
    } else if (Is(key, "name")) {
      if (v.get_string().get(name)) return false;
    } else if (Is(key, "pid")) {
      if (!GetId(v, &pid_)) return false;
      has_pid = true;
    } else if (Is(key, "tid")) {
      if (!GetId(v, &tid_)) return false;
    } else if (Is(key, "ts")) {
      if (!GetNs(v, &ts)) return false;
      has_ts = true;
    } else if (Is(key, "dur")) {
      if (!GetNs(v, &dur)) return false;
      has_dur = true;
    } else if (Is(key, "id")) {
      if (!GetU64(v, &id)) return false;
      has_id = true;
    } else if (Is(key, "bp")) {
      if (v.get_string().get(bp)) return false;
    } else if (Is(key, "args")) {
      od::object args;
      if (v.get_object().get(args)) continue;  // args that is not an object: ignore
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
          if (GetU64(av, &u)) bytes = u;
        } else if (Is(k, "Input Dims")) {
          std::string_view raw;
          if (!simdjson::to_json_string(av).get(raw)) s.input_dims = m_->strings.Intern(raw);
        } else if (Is(k, "Input type")) {
          std::string_view raw;
          if (!simdjson::to_json_string(av).get(raw)) s.input_types = m_->strings.Intern(raw);
        } else if (Is(k, "name")) {
          od::json_type t;
          if (!av.type().get(t) && t == od::json_type::string) if (av.get_string().get(arg_name)) arg_name = {};
        } else if (Is(k, "labels")) {
          od::json_type t;
          if (!av.type().get(t) && t == od::json_type::string) if (av.get_string().get(arg_labels)) arg_labels = {};
        } else if (ph == "C" || ph.empty()) {
          double d = 0;
          od::json_type t;
          if (!av.type().get(t) && t == od::json_type::number && !av.get_double().get(d))
            counter_args_.emplace_back(std::string(k), d);
        }
      }
    }
  }
  // Every field was read without error: the event is well-formed.
  if (ph.empty()) return false;
  if (has_dur && dur < 0) {  // no real event ends before it starts
    reject_reason_ = "negative dur";
    return false;
  }
  if ((has_ts && (ts < kMinTsNs || ts > kMaxTsNs)) || (has_dur && dur > kMaxDurNs)) {
    reject_reason_ = has_dur && dur > kMaxDurNs ? "dur out of range (over 2^50 ns)"
                                                : "ts out of range (|ts| over 2^60 / 2^62 ns)";
    return false;
  }
  // views into simdjson's string buffer stay valid until the next iterate().
  switch (ph[0]) {
    case 'X':
    case 'B':
    case 'E': {
      if (!has_ts) return false;
      const uint32_t lane = LaneFor(pid_, tid_);
      if (ph[0] == 'E') {
        auto& stack = open_[lane];
        if (stack.empty()) return true;  // an unmatched E: harmless
        Slice b = stack.back();
        stack.pop_back();
        if (ts < b.start_ns) {
          reject_reason_ = "negative dur (an E event before its B)";
          return false;
        }
        b.dur_ns = ts - b.start_ns;
        m_->slices.push_back(b);
        return true;
      }
      const Cat c = Classify(cat, has_cat);
      if (c == Cat::kIgnore) {
        ++m_->parse.ignored;
        return true;
      }
      s.kind = c == Cat::kOp        ? SliceKind::kOp
               : c == Cat::kRuntime ? SliceKind::kRuntime
               : c == Cat::kKernel  ? SliceKind::kKernel
                                    : SliceKind::kCopy;
      if (s.kind == SliceKind::kCopy && s.bytes_read == 0 && s.bytes_written == 0) s.bytes_read = bytes;
      s.start_ns = ts;
      s.dur_ns = dur;  // >= 0: negative durations were rejected above
      s.lane = lane;
      s.name = m_->strings.Intern(name);
      if (ph[0] == 'B') {
        open_[lane].push_back(s);
      } else {
        (void)has_dur;
        m_->slices.push_back(s);
      }
      return true;
    }
    case 'M': {
      const std::string key = pid_ + '\0' + tid_;
      if (name == "thread_name") {
        thread_names_[key] = std::string(arg_name);
      } else if (name == "process_name") {
        process_names_[pid_] = std::string(arg_name);
      } else if (name == "process_labels") {
        process_labels_[pid_] = std::string(arg_labels);
      }
      return true;
    }
    case 's':
    case 'f':
    case 't': {
      if (!has_ts || !has_id) return false;
      if (ph[0] == 't') return true;
      const uint32_t lane = LaneFor(pid_, tid_);
      raw_flows_.push_back({m_->strings.Intern(cat), id, ts, lane, ph[0] == 's',
                            ph[0] == 's' || bp == "e"});
      return true;
    }
    case 'C': {
      if (!has_ts) return false;
      for (const auto& [k, v] : counter_args_) {
        std::string series = counter_args_.size() == 1 ? std::string(name)
                                                        : fmt::format("{}.{}", name, k);
        std::string key = pid_ + '\0' + series;
        auto [it, inserted] = counter_ids_.emplace(key, m_->counters.size());
        if (inserted) {
          CounterSeries cs;
          cs.name = std::move(series);
          cs.pid = pid_;
          m_->counters.push_back(std::move(cs));
        }
        m_->counters[it->second].points.emplace_back(ts, v);
      }
      return true;
    }
    default:
      (void)has_pid;
      ++m_->parse.ignored;
      return true;
  }
}

// Innermost slice on `lane` that contains ts (or starts exactly at it).
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

// First slice on `lane` that starts at or after ts.
uint32_t Next(const TraceModel& m, uint32_t lane, int64_t ts) {
  const Lane& l = m.lanes[lane];
  const auto* b = m.slices.data() + l.first;
  const auto* e = m.slices.data() + l.last;
  auto it = std::lower_bound(b, e, ts, [](const Slice& s, int64_t t) { return s.start_ns < t; });
  return it == e ? kNone : static_cast<uint32_t>(it - m.slices.data());
}

uint32_t OpAncestor(const TraceModel& m, uint32_t i) {
  while (i != kNone && m.slices[i].kind != SliceKind::kOp) i = m.slices[i].parent;
  return i;
}

void TraceParser::Finish() {
  TraceModel& m = *m_;
  // Lane kinds and names.
  std::vector<uint8_t> device(m.lanes.size(), 0);
  for (const Slice& s : m.slices)
    if (s.on_device()) device[s.lane] = 1;
  for (size_t i = 0; i < m.lanes.size(); ++i) {
    Lane& l = m.lanes[i];
    l.kind = device[i] ? LaneKind::kDevice : LaneKind::kCpu;
    auto tn = thread_names_.find(l.pid + '\0' + l.tid);
    std::string thread = tn != thread_names_.end() ? std::string(Trim(tn->second)) : "";
    if (l.kind == LaneKind::kCpu) {
      l.name = !thread.empty() ? thread : fmt::format("thread {}", l.tid);
    } else if (thread.find(':') != std::string::npos) {
      l.name = thread;  // "trn:0 stream 0"
    } else {
      std::string proc;
      if (auto pl = process_labels_.find(l.pid); pl != process_labels_.end()) proc = pl->second;
      if (proc.empty()) proc = fmt::format("device {}", l.pid);
      l.name = fmt::format("{} {}", proc, !thread.empty() ? thread : fmt::format("stream {}", l.tid));
    }
  }
  // Sort: by lane, then start, longer first (parents before children).
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
  // Nesting and self time on CPU lanes.
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
  // An op whose only child has its own name (aten::div_ -> aten::div_) counts
  // once, as in torch.profiler's key_averages (_remove_dup_nodes).
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
  // Flows: pair starts and ends by (category, id), bind each to a slice.
  std::sort(raw_flows_.begin(), raw_flows_.end(), [](const RawFlow& a, const RawFlow& b) {
    if (a.cat != b.cat) return a.cat < b.cat;
    if (a.id != b.id) return a.id < b.id;
    if (a.start != b.start) return a.start > b.start;
    return a.ts < b.ts;
  });
  std::unordered_map<uint32_t, uint32_t> flow_source;  // device slice -> source slice
  const uint32_t fwdbwd = m.strings.Intern("fwdbwd");
  for (size_t i = 0; i < raw_flows_.size();) {
    size_t j = i;
    while (j < raw_flows_.size() && raw_flows_[j].cat == raw_flows_[i].cat &&
           raw_flows_[j].id == raw_flows_[i].id)
      ++j;
    const RawFlow* s = raw_flows_[i].start ? &raw_flows_[i] : nullptr;
    const RawFlow* f = raw_flows_[j - 1].start ? nullptr : &raw_flows_[j - 1];
    FlowLink fl;
    fl.id = raw_flows_[i].id;
    fl.cat = raw_flows_[i].cat;
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
    if (fl.cat != fwdbwd && fl.from != kNone && fl.to != kNone && m.slices[fl.to].on_device())
      flow_source.emplace(fl.to, fl.from);
    m.flows.push_back(fl);
    i = j;
  }
  raw_flows_.clear();
  raw_flows_.shrink_to_fit();
  // Linking; see Note [Linking].
  std::unordered_map<uint64_t, uint32_t> op_by_external, runtime_by_corr;
  for (uint32_t i = 0; i < m.slices.size(); ++i) {
    const Slice& s = m.slices[i];
    if (s.kind == SliceKind::kOp && s.external_id != 0) op_by_external.emplace(s.external_id, i);
    if (s.kind == SliceKind::kRuntime && s.correlation != 0) runtime_by_corr.emplace(s.correlation, i);
    if (s.kind == SliceKind::kRuntime) {
      const std::string_view n = m.Name(s);
      if (n.find("aunch") != std::string_view::npos || n.find("emcpy") != std::string_view::npos)
        ++m.runtime_launches;
    }
  }
  for (uint32_t i = 0; i < m.slices.size(); ++i) {
    Slice& k = m.slices[i];
    if (!k.on_device()) continue;
    if (k.external_id != 0) {
      if (auto it = op_by_external.find(k.external_id); it != op_by_external.end()) {
        k.op = it->second;
        k.link = 1;
      }
    }
    if (k.op == kNone && k.correlation != 0) {
      if (auto it = runtime_by_corr.find(k.correlation); it != runtime_by_corr.end()) {
        k.op = OpAncestor(m, it->second);
        if (k.op != kNone) k.link = 2;
      }
    }
    if (k.op == kNone) {
      if (auto it = flow_source.find(i); it != flow_source.end()) {
        k.op = OpAncestor(m, it->second);
        if (k.op != kNone) k.link = 3;
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

// ---- meta.json ----------------------------------------------------------------

namespace dom = simdjson::dom;
using Elem = simdjson::simdjson_result<dom::element>;  // carries "not found"

Elem Find(dom::object o, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    Elem e = o.at_key(k);
    if (!e.error()) return e;
  }
  return Elem(simdjson::NO_SUCH_FIELD);
}

void OpCounts(Elem e, std::vector<std::pair<std::string, uint64_t>>* out) {
  dom::object o;
  if (e.get_object().get(o)) {
    dom::array a;  // also accept a list of names
    if (!e.get_array().get(a)) {
      for (dom::element x : a) {
        std::string_view s;
        if (!x.get_string().get(s)) out->emplace_back(std::string(s), 1);
      }
    }
    return;
  }
  for (auto [k, v] : o) {
    uint64_t n = 1;
    int64_t i = 0;
    double d = 0;
    if (!v.get_uint64().get(n)) {
    } else if (!v.get_int64().get(i)) {
      n = i > 0 ? static_cast<uint64_t>(i) : 0;
    } else if (!v.get_double().get(d)) {
      n = d > 0 ? static_cast<uint64_t>(d) : 0;
    } else {
      n = 1;
    }
    out->emplace_back(std::string(k), n);
  }
  std::sort(out->begin(), out->end(), [](const auto& a, const auto& b) {
    return a.second != b.second ? a.second > b.second : a.first < b.first;
  });
}

double Number(Elem e, double dflt = 0) {
  double d;
  if (!e.get_double().get(d)) return d;
  int64_t i;
  if (!e.get_int64().get(i)) return static_cast<double>(i);
  uint64_t u;
  if (!e.get_uint64().get(u)) return static_cast<double>(u);
  return dflt;
}

std::vector<int64_t> Shape(Elem e) {
  std::vector<int64_t> out;
  dom::array a;
  if (e.get_array().get(a)) return out;
  for (dom::element x : a) out.push_back(static_cast<int64_t>(Number(Elem(dom::element(x)), -1)));
  return out;
}

}  // namespace

bool ParseMeta(std::string_view json, MetaInfo* meta, std::string* error) {
  dom::parser parser;
  simdjson::padded_string p(json);
  dom::element root;
  if (auto err = parser.parse(p).get(root)) {
    *error = fmt::format("invalid JSON ({})", simdjson::error_message(err));
    return false;
  }
  dom::object o;
  if (root.get_object().get(o)) {
    *error = "expected a JSON object";
    return false;
  }
  meta->present = true;
  meta->raw.assign(json);
  OpCounts(Find(o, {"fallback_ops", "fallbacks", "cpu_fallbacks"}), &meta->fallback_ops);
  OpCounts(Find(o, {"float64_downcasts", "float64", "downcasts"}), &meta->float64_downcasts);
  Elem d = Find(o, {"dropped_events", "dropped", "dropped_total"});
  dom::object dobj;
  if (!d.get_object().get(dobj)) {
    meta->dropped_events =
        static_cast<uint64_t>(Number(Find(dobj, {"total", "dropped_total", "events"})));
  } else {
    meta->dropped_events = static_cast<uint64_t>(Number(d));
  }
  dom::object po;
  if (!Find(o, {"host_peaks", "peaks"}).get_object().get(po)) {
    meta->peak_gflops = Number(Find(po, {"peak_gflops", "gflops", "gemm_gflop_s"}));
    meta->peak_gbps = Number(Find(po, {"peak_gbps", "gbps", "copy_bandwidth_gb_s", "bandwidth_gbps"}));
  }
  dom::array compiles;
  if (!Find(o, {"compile_records", "compiles", "compile", "recompiles"}).get_array().get(compiles)) {
    for (dom::element c : compiles) {
      CompileRecord r;
      dom::object co;
      if (!c.get_object().get(co)) {
        std::string_view s;
        if (!Find(co, {"graph", "graph_hash", "name", "frame", "key"}).get_string().get(s)) r.graph = s;
        if (!Find(co, {"reason", "recompile_reason"}).get_string().get(s)) r.reason = s;
        double ns = Number(Find(co, {"duration_ns", "compile_ns", "time_ns"}), -1);
        if (ns < 0) ns = Number(Find(co, {"duration_ms", "compile_ms"}), -1) * 1e6;
        if (ns < 0) ns = Number(Find(co, {"duration_s", "seconds", "compile_s"}), 0) * 1e9;
        r.duration_ns = static_cast<int64_t>(std::max(0.0, ns));
        dom::array shapes;
        if (!Find(co, {"shapes", "input_shapes", "inputs"}).get_array().get(shapes))
          for (dom::element sh : shapes) r.shapes.push_back(Shape(Elem(dom::element(sh))));
        // trnscope's records: "signature": [{"shape": [...], "stride": ..., "dtype": ...}].
        if (!Find(co, {"signature"}).get_array().get(shapes))
          for (dom::element sig : shapes) {
            dom::object so;
            if (!sig.get_object().get(so)) r.shapes.push_back(Shape(Find(so, {"shape"})));
          }
      }
      meta->compiles.push_back(std::move(r));
    }
  }
  dom::object go;
  if (!Find(o, {"time_correlation", "sync_guard", "sync"}).get_object().get(go)) {
    bool b;
    if (!Find(go, {"device_requested", "device_activities"}).get_bool().get(b))
      meta->device_requested = b;
    if (!Find(go, {"synchronized_at_stop"}).get_bool().get(b)) meta->guard_synchronized = b;
    const double pending = Number(Find(go, {"commands_in_flight"}), -1);
    if (pending >= 0) meta->commands_in_flight = static_cast<int64_t>(pending);
    std::string_view w;
    if (!Find(go, {"warning"}).get_string().get(w)) meta->guard_warning = w;
  }
  return true;
}

namespace {

bool IsGzipPath(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

LoadResult Load(const std::string& path, std::string_view buffer, bool from_buffer,
                const LoadOptions& options) {
  LoadResult r;
  auto m = std::make_unique<TraceModel>();
  m->path = path;
  m->name = !options.name.empty() ? options.name : RunNameFromPath(path);
  TraceParser parser(m.get());
  TokenizeResult t;
  if (from_buffer) {
    m->slices.reserve(buffer.size() / 400);
    t = TokenizeBuffer(buffer, parser, options.tokenize);
  } else {
    // Typical traces hold one slice per ~250-400 bytes: reserving avoids
    // regrowing (copies and a 2x peak) on big files.
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && !IsGzipPath(path)) m->slices.reserve(st.st_size / 320);
    t = TokenizeFile(path, parser, options.tokenize);
  }
  if (!t.ok) {
    r.error = t.error;
    return r;
  }
  parser.Finish();
  m->parse.bytes = t.stats.bytes;
  m->parse.events = t.stats.events;
  m->parse.skipped = t.stats.skipped;
  m->parse.truncated = t.stats.truncated;
  m->parse.recovered = t.stats.recovered;
  m->parse.warnings = std::move(t.stats.warnings);
  if (t.stats.warnings_dropped > 0)
    m->parse.warnings.push_back(fmt::format("... and {} more warnings", t.stats.warnings_dropped));
  // meta.json beside the trace, else the trace's own "trnscope" object.
  if (options.load_meta && !from_buffer) {
    std::vector<std::string> candidates;
    if (!options.meta_path.empty()) {
      candidates.push_back(options.meta_path);
    } else {
      const size_t slash = path.rfind('/');
      const std::string dir = slash == std::string::npos ? "" : path.substr(0, slash + 1);
      std::string stem = slash == std::string::npos ? path : path.substr(slash + 1);
      for (const char* ext : {".gz", ".json"}) {
        const size_t n = std::strlen(ext);
        if (stem.size() > n && stem.compare(stem.size() - n, n, ext) == 0) stem.resize(stem.size() - n);
      }
      candidates.push_back(dir + stem + ".meta.json");
      candidates.push_back(dir + "meta.json");
    }
    for (const std::string& c : candidates) {
      std::ifstream in(c, std::ios::binary);
      if (!in) continue;
      std::stringstream ss;
      ss << in.rdbuf();
      std::string err;
      m->meta.source = c;
      if (!ParseMeta(ss.str(), &m->meta, &err))
        m->parse.warnings.push_back(fmt::format("ignored {}: {}", c, err));
      break;
    }
  }
  if (!m->meta.present) {
    for (const auto& [k, v] : m->top_level) {
      if (k != "trnscope") continue;
      std::string err;
      MetaInfo meta;
      if (ParseMeta(v, &meta, &err)) {
        meta.source = "trace:trnscope";
        m->meta = std::move(meta);
      }
    }
  }
  if (m->meta.dropped_events > m->dropped_events) m->dropped_events = m->meta.dropped_events;
  r.ok = true;
  r.model = std::move(m);
  return r;
}

}  // namespace

LoadResult LoadTrace(const std::string& path, const LoadOptions& options) {
  return Load(path, {}, false, options);
}

LoadResult LoadTraceFromBuffer(std::string_view json, const LoadOptions& options) {
  return Load("<memory>", json, true, options);
}

}  // namespace trn::analysis
