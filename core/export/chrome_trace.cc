// Chrome Trace Event Format writer. See chrome_trace.h for what goes where.
//
// Note [Flow binding]
// Viewers bind a flow event to a slice on the (pid, tid) of the event: "s" to
// the topmost slice open at its ts, "f" with "bp":"e" to the enclosing slice.
// Perfetto processes events in ts order and keeps file order for equal ts, so
// every flow event is written right after the slice it belongs to, at that
// slice's start: an op's "s" sits at op.start just after the op (ops are
// written parents first), a launch's "f" and "s" and a kernel's "f" at their
// own start. Anything written later at the same ts (a child op, an alloc
// instant) cannot capture the flow. Ids are unique per category: a launch id
// is used only by the first record carrying it (records are in start order),
// every other flow takes an id from kSyntheticFlowBase up, which stays below
// 2^53 so chrome://tracing (JavaScript doubles) keeps ids distinct.
#include "core/export/chrome_trace.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

#include "core/common/error.h"
#include "core/common/names.h"
#include "core/export/json_sink.h"

namespace trn::exporter {
namespace {

using trace::Record;
using trace::RecordKind;

constexpr int64_t kDevicePidBase = 1'000'000;
constexpr uint64_t kSyntheticFlowBase = uint64_t{1} << 52;
constexpr uint32_t kNone = ~uint32_t{0};
// c10::DeviceType::PrivateUse1, what torch.profiler writes as "Device Type".
constexpr int kPrivateUse1DeviceType = 20;

std::string_view NameOf(const char* s) { return s != nullptr ? std::string_view(s) : ""; }

bool IsLaunch(RecordKind k) { return k == RecordKind::kLaunch || k == RecordKind::kMemcpy; }
bool IsMemory(RecordKind k) { return k == RecordKind::kAlloc || k == RecordKind::kFree; }
bool IsKnownKind(RecordKind k) {
  return static_cast<uint8_t>(k) <= static_cast<uint8_t>(RecordKind::kCopy);
}

// (rounded) a * 1000 / b: a rate in milli-units for Sink::Milli.
int64_t MilliRatio(uint64_t a, int64_t b) {
  const auto num = static_cast<unsigned __int128>(a) * 1000 + static_cast<uint64_t>(b) / 2;
  const auto q = num / static_cast<uint64_t>(b);
  return q > INT64_MAX ? INT64_MAX : static_cast<int64_t>(q);
}

// A flow that starts at a host op (written right after the op).
struct OpFlow {
  uint32_t op;  // index into the sorted host ops
  bool ac2g;    // op -> kernel directly; else op -> launch
  uint64_t id;
};

// What the pre-pass learned about one record.
struct Link {
  int32_t op = -1;           // sorted host op with the record's correlation id
  uint32_t partner = kNone;  // launch <-> device record with the same launch id
  uint64_t in_id = 0;        // flow ending here (op_launch for a launch, ac2g for a device record)
  uint64_t out_id = 0;       // launch only: ac2g flow starting here
};

// Writes one trace. Owns nothing but indexes into the input; one thread.
class Writer {
 public:
  Writer(const ExportInput& in, std::string_view metadata, Sink& out)
      : in_(in),
        metadata_(metadata),
        out_(out),
        records_(in.device != nullptr ? &in.device->records : &kEmpty) {}

  ExportStats Run() {
    SortOps();
    LinkRecords();
    CollectLanes();
    Header();
    Metadata();
    for (uint32_t pos = 0; pos < ops_.size(); ++pos) HostOpEvents(pos);
    for (size_t i = 0; i < records_->size(); ++i) RecordEvents(i);
    Footer();
    stats_.bytes = out_.bytes();
    return stats_;
  }

 private:
  // Ops in time order, parents (earlier start, later end) first: see
  // Note [Flow binding].
  void SortOps() {
    const auto& ops = in_.host_ops;
    ops_.resize(ops.size());
    for (uint32_t i = 0; i < ops.size(); ++i) ops_[i] = i;
    std::sort(ops_.begin(), ops_.end(), [&](uint32_t a, uint32_t b) {
      const HostOp &x = ops[a], &y = ops[b];
      if (x.start_ns != y.start_ns) return x.start_ns < y.start_ns;
      if (x.end_ns != y.end_ns) return x.end_ns > y.end_ns;
      return a < b;
    });
    for (uint32_t pos = 0; pos < ops_.size(); ++pos) {
      const uint64_t corr = ops[ops_[pos]].correlation_id;
      if (corr != 0) op_by_corr_.emplace_back(corr, pos);
    }
    std::sort(op_by_corr_.begin(), op_by_corr_.end());  // first op per id wins
  }

  int32_t FindOp(uint64_t corr) const {
    if (corr == 0) return -1;
    auto it = std::lower_bound(op_by_corr_.begin(), op_by_corr_.end(),
                               std::pair<uint64_t, uint32_t>(corr, 0));
    return it != op_by_corr_.end() && it->first == corr ? static_cast<int32_t>(it->second) : -1;
  }

  bool ValidDevice(const Record& r) const {
    return r.device >= 0 && r.device < trace::kMaxDevices &&
           (!trace::IsDeviceSide(r.kind) || (r.stream >= 0 && r.stream < trace::kMaxStreams));
  }

  // Pairs launches with device records by launch id and records with ops by
  // correlation id, and assigns every flow its id (Note [Flow binding]).
  void LinkRecords() {
    const auto& recs = *records_;
    links_.resize(recs.size());
    // (launch id, record) of the first launch / device record carrying each id.
    std::vector<std::pair<uint64_t, uint32_t>> launches, devices;
    for (uint32_t i = 0; i < recs.size(); ++i) {
      const Record& r = recs[i];
      if (r.launch_id == 0 || r.launch_id >= kSyntheticFlowBase) continue;
      if (IsLaunch(r.kind)) launches.emplace_back(r.launch_id, i);
      if (trace::IsDeviceSide(r.kind) && ValidDevice(r)) devices.emplace_back(r.launch_id, i);
    }
    auto first_per_id = [](std::vector<std::pair<uint64_t, uint32_t>>& v) {
      std::sort(v.begin(), v.end());
      v.erase(std::unique(v.begin(), v.end(),
                          [](const auto& a, const auto& b) { return a.first == b.first; }),
              v.end());
    };
    first_per_id(launches);
    first_per_id(devices);
    std::vector<uint8_t> owns_id(recs.size(), 0);  // first record with its launch id
    for (const auto& [id, i] : launches) owns_id[i] = 1;
    for (const auto& [id, i] : devices) owns_id[i] = 1;
    for (size_t a = 0, b = 0; a < launches.size() && b < devices.size();) {
      if (launches[a].first < devices[b].first) {
        ++a;
      } else if (devices[b].first < launches[a].first) {
        ++b;
      } else {
        links_[launches[a].second].partner = devices[b].second;
        links_[devices[b].second].partner = launches[a].second;
        ++a, ++b;
      }
    }
    uint64_t synthetic = kSyntheticFlowBase;
    auto flow_id = [&](uint32_t i) { return owns_id[i] ? recs[i].launch_id : synthetic++; };
    for (uint32_t i = 0; i < recs.size(); ++i) {
      const Record& r = recs[i];
      Link& l = links_[i];
      if (IsLaunch(r.kind)) {
        l.op = FindOp(r.correlation_id);
        if (l.op >= 0) {
          l.in_id = flow_id(i);
          op_flows_.push_back({static_cast<uint32_t>(l.op), false, l.in_id});
        }
        if (l.partner != kNone) l.out_id = r.launch_id;
      } else if (trace::IsDeviceSide(r.kind) && ValidDevice(r)) {
        l.op = FindOp(r.correlation_id);
        if (l.op < 0) ++stats_.unlinked;
        if (l.partner != kNone) {
          l.in_id = r.launch_id;
        } else if (l.op >= 0) {
          l.in_id = flow_id(i);
          op_flows_.push_back({static_cast<uint32_t>(l.op), true, l.in_id});
        }
      }
    }
    // Group flows by op, keeping record order within an op (counting sort).
    flows_begin_.assign(ops_.size() + 1, 0);
    for (const OpFlow& f : op_flows_) ++flows_begin_[f.op + 1];
    for (size_t k = 1; k < flows_begin_.size(); ++k) flows_begin_[k] += flows_begin_[k - 1];
    std::vector<OpFlow> grouped(op_flows_.size());
    std::vector<uint32_t> next(flows_begin_.begin(), flows_begin_.end() - 1);
    for (const OpFlow& f : op_flows_) grouped[next[f.op]++] = f;
    op_flows_ = std::move(grouped);
  }

  void CollectLanes() {
    for (const HostOp& op : in_.host_ops) cpu_tids_.push_back(op.tid);
    int64_t last_tid = 0;
    bool have_last = false;
    for (const Record& r : *records_) {
      if (!IsKnownKind(r.kind)) {
        ++invalid_;
        continue;
      }
      if (trace::IsDeviceSide(r.kind)) {
        if (!ValidDevice(r)) {
          ++invalid_;
          continue;
        }
        streams_[r.device] |= uint64_t{1} << r.stream;
        device_seen_ |= uint64_t{1} << r.device;
        continue;
      }
      if (IsMemory(r.kind)) {
        if (!ValidDevice(r)) {
          ++invalid_;
          continue;
        }
        device_seen_ |= uint64_t{1} << r.device;
      }
      if (!have_last || r.tid != last_tid) cpu_tids_.push_back(r.tid);
      last_tid = r.tid;
      have_last = true;
    }
    std::sort(cpu_tids_.begin(), cpu_tids_.end());
    cpu_tids_.erase(std::unique(cpu_tids_.begin(), cpu_tids_.end()), cpu_tids_.end());
    device_pid_base_ = kDevicePidBase;
    if (in_.pid >= kDevicePidBase && in_.pid < kDevicePidBase + trace::kMaxDevices)
      device_pid_base_ = 2 * kDevicePidBase;  // never share a pid with the host
  }

  int64_t DevicePid(int device) const { return device_pid_base_ + device; }

  // ---- JSON -------------------------------------------------------------------

  void Header() {
    out_.Raw("{\"schemaVersion\":1,\"displayTimeUnit\":\"ns\",\n\"trnscope\":");
    out_.Raw(metadata_);
    const trace::Collected* d = in_.device;
    out_.Raw(",\n\"trnscope_capture\":{\"dropped_total\":");
    out_.Uint(d != nullptr ? d->dropped_total : 0);
    out_.Raw(",\"dropped_per_device\":{");
    bool first = true;
    if (d != nullptr) {
      for (size_t dev = 0; dev < d->dropped_per_device.size(); ++dev) {
        if (d->dropped_per_device[dev] == 0) continue;
        out_.Raw(first ? "\"" : ",\"");
        out_.Uint(dev);
        out_.Raw("\":");
        out_.Uint(d->dropped_per_device[dev]);
        first = false;
      }
    }
    out_.Raw("},\"session_start_ns\":");
    out_.Int(d != nullptr ? d->start_ns : 0);
    out_.Raw(",\"session_stop_ns\":");
    out_.Int(d != nullptr ? d->stop_ns : 0);
    out_.Raw(",\"invalid_records\":");
    out_.Uint(invalid_);
    out_.Raw("},\n\"traceEvents\":[");
  }

  void Footer() { out_.Raw("\n]}\n"); }

  // Starts one element of traceEvents: `{"ph":"<ph>"`.
  void Begin(std::string_view ph) {
    out_.Raw(stats_.events == 0 ? "\n{\"ph\":\"" : ",\n{\"ph\":\"");
    out_.Raw(ph);
    out_.Char('"');
    ++stats_.events;
  }
  void PidTid(int64_t pid, int64_t tid) {
    out_.Raw(",\"pid\":");
    out_.Int(pid);
    out_.Raw(",\"tid\":");
    out_.Int(tid);
  }
  void Ts(int64_t ns) {
    out_.Raw(",\"ts\":");
    out_.Milli(ns);
  }
  void Dur(int64_t start, int64_t end) {
    out_.Raw(",\"dur\":");
    out_.Milli(end > start ? end - start : 0);
  }
  void Key(std::string_view key) {  // ,"key": (key is a literal, no escaping)
    out_.Raw(",\"");
    out_.Raw(key);
    out_.Raw("\":");
  }

  void MetaBegin(std::string_view name, int64_t pid, int64_t tid, std::string_view key) {
    Begin("M");
    out_.Raw(",\"name\":\"");
    out_.Raw(name);
    out_.Char('"');
    PidTid(pid, tid);
    out_.Raw(",\"args\":{\"");
    out_.Raw(key);
    out_.Raw("\":");
  }
  void MetaName(std::string_view what, int64_t pid, int64_t tid, std::string_view name) {
    MetaBegin(what, pid, tid, "name");
    out_.Str(name);
    out_.Raw("}}");
  }
  void MetaSort(std::string_view what, int64_t pid, int64_t tid, int64_t index) {
    MetaBegin(what, pid, tid, "sort_index");
    out_.Int(index);
    out_.Raw("}}");
  }

  void Metadata() {
    MetaName("process_name", in_.pid, 0, fmt::format("host (pid {})", in_.pid));
    MetaSort("process_sort_index", in_.pid, 0, 0);
    for (size_t k = 0; k < cpu_tids_.size(); ++k) {
      MetaName("thread_name", in_.pid, cpu_tids_[k], fmt::format("thread {}", cpu_tids_[k]));
      MetaSort("thread_sort_index", in_.pid, cpu_tids_[k], static_cast<int64_t>(k));
    }
    for (int d = 0; d < trace::kMaxDevices; ++d) {
      if (!((device_seen_ >> d) & 1)) continue;
      MetaName("process_name", DevicePid(d), 0, fmt::format("trn:{}", d));
      MetaSort("process_sort_index", DevicePid(d), 0, 1 + d);
      for (int s = 0; s < trace::kMaxStreams; ++s) {
        if (!((streams_[d] >> s) & 1)) continue;
        MetaName("thread_name", DevicePid(d), s, LaneName(d, s));
        MetaSort("thread_sort_index", DevicePid(d), s, s);
      }
    }
  }

  void Flow(bool start, std::string_view cat, uint64_t id, int64_t pid, int64_t tid,
            int64_t ts) {
    Begin(start ? "s" : "f");
    if (!start) out_.Raw(",\"bp\":\"e\"");
    out_.Raw(",\"id\":");
    out_.Uint(id);
    PidTid(pid, tid);
    Ts(ts);
    out_.Raw(",\"cat\":\"");
    out_.Raw(cat);
    out_.Raw("\",\"name\":\"");
    out_.Raw(cat);
    out_.Raw("\"}");
    if (start) ++stats_.flows;
  }

  void HostOpEvents(uint32_t pos) {
    const HostOp& op = in_.host_ops[ops_[pos]];
    Begin("X");
    out_.Raw(",\"cat\":\"cpu_op\",\"name\":");
    out_.Str(op.name);
    PidTid(in_.pid, op.tid);
    Ts(op.start_ns);
    Dur(op.start_ns, op.end_ns);
    out_.Raw(",\"args\":{\"correlation\":");
    out_.Uint(op.correlation_id);
    Key("External id");
    out_.Uint(op.correlation_id);
    if (op.sequence >= 0) {
      Key("Sequence number");
      out_.Int(op.sequence);
    }
    if (!op.input_shapes.empty()) {
      Key("Input Dims");
      out_.Raw(op.input_shapes);
    }
    if (!op.input_dtypes.empty()) {
      Key("Input type");
      out_.Raw(op.input_dtypes);
    }
    out_.Raw("}}");
    for (uint32_t k = flows_begin_[pos]; k < flows_begin_[pos + 1]; ++k) {
      const OpFlow& f = op_flows_[k];
      Flow(true, f.ac2g ? "ac2g" : "op_launch", f.id, in_.pid, op.tid, op.start_ns);
    }
  }

  void RecordEvents(size_t i) {
    const Record& r = (*records_)[i];
    if (!IsKnownKind(r.kind)) return;
    if (trace::IsDeviceSide(r.kind)) {
      if (ValidDevice(r)) DeviceEvent(r, links_[i]);
    } else if (IsMemory(r.kind)) {
      if (ValidDevice(r)) MemoryEvents(r);
    } else {
      RuntimeEvent(r, links_[i]);
    }
  }

  void DeviceEvent(const Record& r, const Link& l) {
    const int64_t pid = DevicePid(r.device);
    const int64_t dur = r.end > r.start ? r.end - r.start : 0;
    Begin("X");
    out_.Raw(",\"cat\":\"");
    out_.Raw(r.kind == RecordKind::kKernel ? rt::kKernelCategory : rt::kCopyCategory);
    out_.Raw("\",\"name\":");
    out_.Str(NameOf(r.name));
    PidTid(pid, r.stream);
    Ts(r.start);
    Dur(r.start, r.end);
    out_.Raw(",\"args\":{\"op\":");
    out_.Str(NameOf(r.op));
    Key("device");
    out_.Int(r.device);
    Key("core");
    out_.Int(r.device);
    Key("stream");
    out_.Int(r.stream);
    Key("correlation");
    out_.Uint(r.correlation_id);
    Key("External id");
    out_.Uint(r.correlation_id);
    Key("launch id");
    out_.Uint(r.launch_id);
    Key("engine");
    out_.Str(rt::EngineName(r.engine));
    Key("flops");
    out_.Uint(r.flops);
    Key("bytes read");
    out_.Uint(r.bytes_read);
    Key("bytes written");
    out_.Uint(r.bytes_written);
    if (dur > 0) {
      Key("achieved GFLOP/s");  // flop/ns == GFLOP/s
      out_.Milli(MilliRatio(r.flops, dur));
      Key("achieved GB/s");  // byte/ns == GB/s
      out_.Milli(MilliRatio(r.bytes_read + r.bytes_written, dur));
    }
    if (l.op >= 0) {
      const HostOp& op = in_.host_ops[ops_[l.op]];
      if (!op.input_shapes.empty()) {
        Key("Input Dims");
        out_.Raw(op.input_shapes);
      }
    }
    out_.Raw("}}");
    if (l.in_id != 0) Flow(false, "ac2g", l.in_id, pid, r.stream, r.start);
  }

  void RuntimeEvent(const Record& r, const Link& l) {
    Begin("X");
    out_.Raw(",\"cat\":\"");
    out_.Raw(rt::kRuntimeCategory);
    out_.Raw("\",\"name\":");
    out_.Str(NameOf(r.name));
    PidTid(in_.pid, r.tid);
    Ts(r.start);
    Dur(r.start, r.end);
    out_.Raw(",\"args\":{\"correlation\":");
    out_.Uint(r.correlation_id);
    Key("External id");
    out_.Uint(r.correlation_id);
    Key("device");
    out_.Int(r.device);
    Key("stream");
    out_.Int(r.stream);
    if (IsLaunch(r.kind)) {
      Key("launch id");
      out_.Uint(r.launch_id);
      if (l.partner != kNone) {  // the launch's own name is the runtime call's
        Key("kernel name");
        out_.Str(NameOf((*records_)[l.partner].name));
      }
      if (r.op != nullptr && *r.op != '\0') {
        Key("op");
        out_.Str(r.op);
      }
    }
    out_.Raw("}}");
    if (l.in_id != 0) Flow(false, "op_launch", l.in_id, in_.pid, r.tid, r.start);
    if (l.out_id != 0) Flow(true, "ac2g", l.out_id, in_.pid, r.tid, r.start);
  }

  void MemoryEvents(const Record& r) {
    const bool alloc = r.kind == RecordKind::kAlloc;
    Begin("C");
    out_.Raw(",\"name\":\"trn:");
    out_.Int(r.device);
    out_.Raw(" memory\"");
    PidTid(DevicePid(r.device), 0);
    Ts(r.start);
    out_.Raw(",\"args\":{\"allocated_bytes\":");
    out_.Int(r.in_use);
    out_.Raw("}}");
    // The allocation itself, as torch.profiler writes it (profile_memory=True).
    Begin("i");
    out_.Raw(",\"s\":\"t\",\"cat\":\"cpu_instant_event\",\"name\":\"[memory]\"");
    PidTid(in_.pid, r.tid);
    Ts(r.start);
    out_.Raw(",\"args\":{\"Device Type\":");
    out_.Int(kPrivateUse1DeviceType);
    Key("Device Id");
    out_.Int(r.device);
    Key("Bytes");
    out_.Int(alloc ? r.value : -r.value);
    Key("Total Allocated");
    out_.Int(r.in_use);
    Key("stream");
    out_.Int(r.stream);
    Key("correlation");
    out_.Uint(r.correlation_id);
    out_.Raw("}}");
  }

  static inline const std::vector<Record> kEmpty;

  const ExportInput& in_;
  std::string_view metadata_;  // a JSON object
  Sink& out_;
  const std::vector<Record>* records_;
  ExportStats stats_;
  std::vector<uint32_t> ops_;                               // host ops, sorted
  std::vector<std::pair<uint64_t, uint32_t>> op_by_corr_;   // (correlation, sorted pos)
  std::vector<Link> links_;                                 // per record
  std::vector<OpFlow> op_flows_;                            // grouped by op
  std::vector<uint32_t> flows_begin_;                       // op pos -> first flow
  std::vector<int64_t> cpu_tids_;
  uint64_t streams_[trace::kMaxDevices] = {};
  uint64_t device_seen_ = 0;
  uint64_t invalid_ = 0;
  int64_t device_pid_base_ = kDevicePidBase;
};

}  // namespace

ExportStats WriteChromeTrace(const ExportInput& input, const std::string& path) {
  // Checked before the file is touched; the object itself is written verbatim.
  std::string_view meta = input.metadata_json;
  const size_t first = meta.find_first_not_of(" \t\r\n");
  meta = first == std::string_view::npos
             ? std::string_view("{}")
             : meta.substr(first, meta.find_last_not_of(" \t\r\n") + 1 - first);
  if (meta.front() != '{' || meta.back() != '}')
    throw InvalidArgument(fmt::format(
        "WriteChromeTrace: metadata_json must be a JSON object, got '{}'", meta.substr(0, 80)));
  Sink out(path);
  ExportStats stats = Writer(input, meta, out).Run();
  out.Commit();
  return stats;
}

std::string LaneName(int device, int stream) {
  return fmt::format("trn:{} stream {}", device, stream);
}

}  // namespace trn::exporter
