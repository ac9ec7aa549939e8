// The in-memory model of one Chrome trace (torch.profiler / Kineto, or
// trnscope's combined export): slices on lanes (CPU ops, runtime calls, device
// kernels and copies), resolved flows, counters, top-level metadata and the
// optional meta.json. Built once by LoadTrace (trace_reader.cc: the tokenizer,
// event_parser.h, then the passes of passes.h), then read-only: any number of
// threads may read it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/analysis/reader/json_tokenizer.h"  // TokenizeOptions

namespace trn::analysis {

inline constexpr uint32_t kNone = ~uint32_t{0};

// Interned strings; id 0 is "". Views stay valid while the table lives.
class StringTable {
 public:
  StringTable();
  uint32_t Intern(std::string_view s);
  std::string_view Get(uint32_t id) const { return views_[id]; }
  size_t size() const { return views_.size(); }

 private:
  std::vector<std::unique_ptr<char[]>> blocks_;
  size_t block_left_ = 0;
  char* block_pos_ = nullptr;
  std::vector<std::string_view> views_;
  std::unordered_map<std::string_view, uint32_t> ids_;
};

enum class SliceKind : uint8_t { kOp, kRuntime, kKernel, kCopy };
enum class LaneKind : uint8_t { kCpu, kDevice };

const char* SliceKindName(SliceKind k);

// How a kernel or copy found its op (Note [Linking] in linking.cc).
enum class LinkVia : uint8_t { kNone, kExternalId, kCorrelation, kFlow };
// "external_id", "correlation", "flow"; "" for kNone.
const char* LinkViaName(LinkVia v);

// What a runtime call does, where a rule needs it (Note [Runtime call kinds]
// in event_parser.cc): a launch (kernel or async copy) or a synchronize.
enum class RuntimeCall : uint8_t { kOther, kLaunch, kSync };

struct Lane {
  std::string name;       // "thread 1234", "trn:0 stream 0", "device 0 stream 7"
  std::string pid, tid;   // as written in the trace (numbers or strings)
  LaneKind kind = LaneKind::kCpu;
  uint32_t first = 0, last = 0;  // slices of this lane: [first, last) after sorting
};

// One complete event. Device facts (flops, bytes) are 0 when unknown.
struct Slice {
  int64_t start_ns = 0;
  int64_t dur_ns = 0;
  int64_t self_ns = 0;           // dur minus direct children (CPU lanes)
  uint64_t correlation = 0;      // args "correlation"
  uint64_t external_id = 0;      // args "External id"
  uint64_t flops = 0, bytes_read = 0, bytes_written = 0;
  int64_t device_self_ns = 0;    // ops: kernels/copies linked to this op
  int64_t device_total_ns = 0;   // ops: ... to this op or its descendants
  uint32_t name = 0;             // string id
  uint32_t lane = 0;
  uint32_t parent = kNone;       // CPU lanes: enclosing op/runtime slice
  uint32_t op = kNone;           // kernels/copies: the launching op (see Note [Linking])
  uint32_t input_dims = 0;       // string id of the raw "Input Dims" JSON, 0 if none
  uint32_t input_types = 0;      // string id of the raw "Input type" JSON
  SliceKind kind = SliceKind::kOp;
  LinkVia link = LinkVia::kNone;          // how `op` was found
  RuntimeCall call = RuntimeCall::kOther;  // runtime slices only
  uint16_t depth = 0;
  bool merged = false;           // folded into its same-named parent (as key_averages does)

  int64_t end_ns() const { return start_ns + dur_ns; }
  bool on_device() const { return kind == SliceKind::kKernel || kind == SliceKind::kCopy; }
};

// A flow arrow resolved to the slices it connects.
struct FlowLink {
  uint64_t id = 0;
  uint32_t cat = 0;              // string id ("ac2g", "op_launch", ...)
  uint32_t from = kNone, to = kNone;  // slice indexes (kNone if unbound)
  int64_t from_ts = 0, to_ts = 0;
  uint32_t from_lane = kNone, to_lane = kNone;
};

struct CounterSeries {
  std::string name;              // "trn:0 memory" or "name.key" for multi-valued events
  std::string pid;
  std::vector<std::pair<int64_t, double>> points;  // (ts ns, value), in time order
};

// Facts from meta.json (or the trace's "trnscope" object); see docs/analyzer.md.
struct CompileRecord {
  std::string graph;                        // graph / frame name
  std::vector<std::vector<int64_t>> shapes; // input shapes of this compile
  int64_t duration_ns = 0;
  std::string reason;
};
struct MetaInfo {
  bool present = false;
  std::string source;                       // path of meta.json, or "trace:trnscope"
  std::string raw;                          // the JSON text, verbatim
  std::vector<std::pair<std::string, uint64_t>> fallback_ops;       // {op: calls}
  std::vector<std::pair<std::string, uint64_t>> float64_downcasts;  // {op: calls}
  std::vector<CompileRecord> compiles;
  uint64_t dropped_events = 0;
  double peak_gflops = 0, peak_gbps = 0;
  // Time-correlation guard (meta.json "time_correlation", docs/profiling.md).
  bool device_requested = false;            // device activities were requested
  bool guard_synchronized = false;          // the guard had to wait for queued work at stop
  int64_t commands_in_flight = -1;          // queued commands at stop, -1 unknown
  std::string guard_warning;                // the profiler's own warning, if any
};

struct ParseReport {
  uint64_t bytes = 0;
  uint64_t events = 0;       // events accepted
  uint64_t skipped = 0;
  bool truncated = false;
  bool recovered = false;
  std::vector<std::string> warnings;
  uint64_t ignored = 0;      // valid events of kinds the analyzer does not use
};

struct TraceModel {
  std::string path;
  std::string name;          // run name (folder or file stem unless given)
  StringTable strings;
  std::vector<Lane> lanes;
  std::vector<Slice> slices;          // sorted by lane, then start, longer first
  std::vector<FlowLink> flows;
  std::vector<CounterSeries> counters;
  std::vector<std::pair<std::string, std::string>> top_level;  // key -> raw JSON (small ones)
  MetaInfo meta;
  ParseReport parse;
  uint64_t dropped_events = 0;        // trnscope_capture / meta.json
  uint64_t runtime_launches = 0;      // runtime calls with call == RuntimeCall::kLaunch
  uint64_t unlinked_device = 0;       // kernels/copies with no op
  int64_t t0_ns = 0, t1_ns = 0;       // first start, last end over all slices

  std::string_view Name(const Slice& s) const { return strings.Get(s.name); }
  std::string_view Str(uint32_t id) const { return strings.Get(id); }
};

struct LoadOptions {
  std::string name;                   // run name; default from the path
  std::string meta_path;              // default: meta.json / <stem>.meta.json beside the trace
  bool load_meta = true;
  TokenizeOptions tokenize;
};

struct LoadResult {
  bool ok = false;
  std::string error;
  std::unique_ptr<TraceModel> model;
};

LoadResult LoadTrace(const std::string& path, const LoadOptions& options = {});
// In-memory document (tests, fuzzing); no meta.json.
LoadResult LoadTraceFromBuffer(std::string_view json, const LoadOptions& options = {});

// Parses meta.json text into *meta (tolerant; unknown keys ignored). False
// with *error set if it is not a JSON object.
bool ParseMeta(std::string_view json, MetaInfo* meta, std::string* error);

// Default run name: parent folder for ".../<run>/trace.json", else the file stem.
std::string RunNameFromPath(const std::string& path);

}  // namespace trn::analysis
