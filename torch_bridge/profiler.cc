// The trn Kineto plugin: turns tracer records into Kineto activities so that
// torch.profiler shows device time per op, and keeps the last session's
// records for trnscope's combined-trace exporter.
//
// Note [trn Kineto plugin]
// - Kineto calls configure() for every trace, CPU-only ones included (PyTorch
//   asks for PRIVATEUSE1_RUNTIME with ProfilerActivity.CPU alone): the plugin
//   opts out unless CONCURRENT_KERNEL or GPU_MEMCPY is requested.
// - Correlation: PyTorch pushes each op's correlation id on the dispatching
//   thread (collection.cpp begin_op -> kineto::pushCorrelationId), and Kineto
//   forwards it to every live session; the session forwards it to the tracer,
//   whose launch records capture it at enqueue. At processTrace the id finds
//   the op's CPU activity through getLinkedActivity. Verified on torch 2.13 by
//   tests/test_profiler.py (every kernel links back to its op).
// - Device records become CONCURRENT_KERNEL / GPU_MEMCPY activities with
//   device = trn index and resource = stream; `linked` = the op, which is what
//   gives key_averages() its device columns. Runtime spans become
//   PRIVATEUSE1_RUNTIME activities on the host thread. PyTorch attaches every
//   device event whose linked id equals a *frontend* (unlinked) CPU event's
//   own id to that event, so a runtime activity must either be linked or
//   carry id 0, or it steals its op's device time.
// - A launch and its kernel share a flow (id = launch id, kLinkAsyncCpuGpu);
//   flow ids must be unique per trace (PyTorch asserts on duplicate starts),
//   and a flow is only emitted when both ends were captured.
// - Activities live in a CpuTraceBuffer that getTraceBuffer() hands to Kineto,
//   which keeps it alive as long as the trace it returned to PyTorch.
// - Time-correlation guard: stop() runs on a host thread, so if commands are
//   still queued it waits for them (Runtime::WaitIdleAll, which leaves kernel
//   failures for the user's next synchronizing call) and records that it did.
#include "torch_bridge/profiler.h"

#include <c10/util/Exception.h>
#include <libkineto.h>
#include <output_base.h>
#include <sys/types.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "core/runtime/runtime.h"

namespace trn::bridge {
namespace {

using libkineto::ActivityType;

std::mutex g_last_mu;
DeviceSession g_last;            // guarded by g_last_mu
uint64_t g_next_session_id = 1;  // guarded by g_last_mu

// ---- Custom config ------------------------------------------------------------------
// The value of `"key": <unsigned integer>` in a flat JSON object; false if absent.
bool FindUnsigned(std::string_view text, std::string_view key, uint64_t* value) {
  const std::string quoted = "\"" + std::string(key) + "\"";
  const size_t at = text.find(quoted);
  if (at == std::string_view::npos) return false;
  size_t i = text.find(':', at + quoted.size());
  if (i == std::string_view::npos) {
    throw std::invalid_argument("trnscope profiler config: no value for \"" + std::string(key) +
                                "\"");
  }
  ++i;
  while (i < text.size() && text[i] == ' ') ++i;
  const std::string digits(text.substr(i, text.find_first_of(",} ", i) - i));
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(digits.c_str(), &end, 10);
  if (digits.empty() || digits[0] == '-' || *end != '\0' || errno != 0) {
    throw std::invalid_argument("trnscope profiler config: \"" + std::string(key) +
                                "\" must be an unsigned integer, got '" + digits + "'");
  }
  *value = v;
  return true;
}

// ---- Session ------------------------------------------------------------------------------
// One torch.profiler trace with device capture. Kineto calls start/stop/
// processTrace from the profiling thread and push/popCorrelationId from every
// thread that dispatches ops (those only touch the tracer's thread-local stack).
class TrnSession final : public libkineto::IActivityProfilerSession {
 public:
  TrnSession(const trace::Config& config, bool from_profile_config)
      : config_(config), buffer_(std::make_unique<libkineto::CpuTraceBuffer>()) {
    info_.from_profile_config = from_profile_config;
    buffer_->span = libkineto::TraceSpan(0, 0, "trnscope");
    buffer_->gpuOpCount = -1;
  }

  ~TrnSession() override {
    if (info_.started && !collected_) {  // profiling abandoned before processTrace
      trace::Stop();
      trace::Collect();
    }
  }

  void start() override {
    info_.started = trace::Start(config_);
    if (!info_.started) {
      errors_.push_back("trnscope: another tracer session is open; device capture is off");
    }
    status_ = libkineto::TraceStatus::RECORDING;
  }

  void stop() override {
    if (info_.started) {
      // Time-correlation guard: see Note [trn Kineto plugin].
      try {
        rt::Runtime& runtime = rt::Runtime::Get();
        info_.commands_in_flight = runtime.PendingCommandsAll();
        if (info_.commands_in_flight > 0) {
          runtime.WaitIdleAll();
          info_.synchronized_at_stop = true;
        }
      } catch (const std::exception& e) {
        errors_.push_back(std::string("trnscope: could not wait for the device: ") + e.what());
      }
      trace::Stop();
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }

  std::vector<std::string> errors() override { return errors_; }

  void processTrace(libkineto::ActivityLogger& logger) override { Process(logger, nullptr); }

  void processTrace(libkineto::ActivityLogger& logger,
                    libkineto::getLinkedActivityCallback get_linked, int64_t start_time,
                    int64_t end_time) override {
    Process(logger, get_linked);
  }

  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    // Kineto takes one DeviceInfo per session; with several cores its default
    // labels (one per device id) are better than naming only one of them.
    if (devices_.size() != 1) return nullptr;
    const int d = *devices_.begin();
    return std::make_unique<libkineto::DeviceInfo>(
        libkineto::DeviceInfo{d, d + 0x1000000, "trn", "trn:" + std::to_string(d)});
  }

  std::vector<libkineto::ResourceInfo> getResourceInfos() override {
    std::vector<libkineto::ResourceInfo> out;
    for (const auto& [device, stream] : lanes_) {
      out.push_back(
          libkineto::ResourceInfo{stream, stream, device, exporter::LaneName(device, stream)});
    }
    return out;
  }

  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override {
    return std::move(buffer_);
  }

  void pushCorrelationId(uint64_t id) override { trace::PushCorrelation(id); }
  void popCorrelationId() override { trace::PopCorrelation(); }

 private:
  void Process(libkineto::ActivityLogger& logger,
               const libkineto::getLinkedActivityCallback& get_linked) {
    if (collected_ || !info_.started || buffer_ == nullptr) return;
    collected_ = true;
    auto collected = std::make_shared<trace::Collected>(trace::Collect());

    // Flows only where both the launch and its execution were captured.
    std::unordered_set<uint64_t> launched, executed;
    for (const trace::Record& r : collected->records) {
      if (r.launch_id == 0) continue;
      if (trace::IsDeviceSide(r.kind)) {
        executed.insert(r.launch_id);
      } else if (r.kind == trace::RecordKind::kLaunch || r.kind == trace::RecordKind::kMemcpy) {
        launched.insert(r.launch_id);
      }
    }

    const int32_t pid = static_cast<int32_t>(getpid());
    for (const trace::Record& r : collected->records) {
      const bool device = trace::IsDeviceSide(r.kind);
      if (!device && (r.kind == trace::RecordKind::kAlloc || r.kind == trace::RecordKind::kFree)) {
        continue;  // memory goes to trnscope's own trace (a counter track), not to Kineto
      }
      const libkineto::ITraceActivity* linked = nullptr;
      if (r.correlation_id != 0 && get_linked) {
        linked = get_linked(static_cast<int32_t>(r.correlation_id));
      }
      const bool has_flow =
          r.launch_id != 0 && launched.count(r.launch_id) != 0 && executed.count(r.launch_id) != 0;
      ActivityType type = ActivityType::PRIVATEUSE1_RUNTIME;
      if (device) {
        type = r.kind == trace::RecordKind::kKernel ? ActivityType::CONCURRENT_KERNEL
                                                    : ActivityType::GPU_MEMCPY;
      }
      // The record's name, as trace.json writes it: Note [One name per thing].
      buffer_->emplace_activity(buffer_->span, type, r.name);
      libkineto::GenericTraceActivity& a = *buffer_->activities.back();
      a.startTime = r.start;
      a.endTime = r.end;
      a.linked = linked;
      if (device) {
        ++info_.device_records;
        if (linked == nullptr) ++info_.unlinked;
        a.id = static_cast<int32_t>(r.launch_id);
        a.device = r.device;
        a.resource = r.stream;
        a.threadId = r.stream;
        devices_.insert(r.device);
        lanes_.insert({r.device, r.stream});
        a.addMetadataQuoted("op", r.op);
        a.addMetadata("core", r.device);
        a.addMetadata("stream", r.stream);
        a.addMetadataQuoted("engine", rt::EngineName(r.engine));
        a.addMetadata("flops", r.flops);
        a.addMetadata("bytes", r.bytes_read + r.bytes_written);
      } else {
        // Unlinked runtime spans take id 0: see Note [trn Kineto plugin].
        a.id = linked != nullptr ? static_cast<int32_t>(r.launch_id) : 0;
        a.device = pid;
        a.resource = static_cast<int32_t>(r.tid);
        a.threadId = static_cast<int32_t>(r.tid);
        if (r.device >= 0) a.addMetadata("core", r.device);
        if (r.stream >= 0) a.addMetadata("stream", r.stream);
      }
      if (has_flow) {
        a.flow.id = static_cast<uint32_t>(r.launch_id);
        a.flow.type = libkineto::kLinkAsyncCpuGpu;
        a.flow.start = device ? 0 : 1;
      }
      logger.handleActivity(a);
    }
    buffer_->span.startTime = collected->start_ns;
    buffer_->span.endTime = collected->stop_ns;

    std::lock_guard<std::mutex> lock(g_last_mu);
    info_.id = g_next_session_id++;
    info_.collected = std::move(collected);
    g_last = info_;
  }

  trace::Config config_;
  std::unique_ptr<libkineto::CpuTraceBuffer> buffer_;
  DeviceSession info_;
  bool collected_ = false;
  std::vector<std::string> errors_;
  std::set<int> devices_;
  std::set<std::pair<int, int>> lanes_;
};

// The plugin Kineto instantiates once per process. Kineto calls configure()
// from the thread that starts profiling.
class TrnActivityProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }

  const std::set<ActivityType>& availableActivities() const override { return activities_; }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      const std::set<ActivityType>& types, const libkineto::Config& config) override {
    if (!types.count(ActivityType::CONCURRENT_KERNEL) && !types.count(ActivityType::GPU_MEMCPY)) {
      return nullptr;  // CPU-only profile: no device capture
    }
    trace::Config trace_config;
    bool from_profile_config = false;
    try {
      from_profile_config = ParseProfileConfig(config.getCustomConfig(), &trace_config);
    } catch (const std::invalid_argument& e) {
      TORCH_WARN("trnscope: ignoring a malformed profiler config (", e.what(),
                 "); capturing with the defaults");
      trace_config = trace::Config();
    }
    // An activity filter may leave out runtime spans or one kind of device work.
    if (!types.count(ActivityType::PRIVATEUSE1_RUNTIME)) trace_config.modes &= ~trace::kModeRuntime;
    return std::make_unique<TrnSession>(trace_config, from_profile_config);
  }

  std::unique_ptr<libkineto::IActivityProfilerSession> configure(
      int64_t /*ts_ms*/, int64_t /*duration_ms*/, const std::set<ActivityType>& types,
      const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  const std::string name_ = "trnscope";
  const std::set<ActivityType> activities_ = {
      ActivityType::CONCURRENT_KERNEL, ActivityType::GPU_MEMCPY, ActivityType::PRIVATEUSE1_RUNTIME};
};

REGISTER_PRIVATEUSE1_PROFILER(TrnActivityProfiler);

// ---- Host ops -----------------------------------------------------------------------------
void AppendJsonString(std::string& out, std::string_view s) {
  out += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += ' ';
    } else {
      out += c;
    }
  }
  out += '"';
}

}  // namespace

DeviceSession LastDeviceSession() {
  std::lock_guard<std::mutex> lock(g_last_mu);
  return g_last;
}

bool ParseProfileConfig(const std::string& text, trace::Config* config) {
  std::string compact;
  for (char c : text) {
    if (c != ' ') compact += c;
  }
  if (compact.find("\"backend\":\"trnscope\"") == std::string::npos) return false;
  trace::Config c;
  FindUnsigned(text, "device_mask", &c.device_mask);
  FindUnsigned(text, "stream_mask", &c.stream_mask);
  uint64_t modes = c.modes;
  FindUnsigned(text, "modes", &modes);
  if (modes == 0 || modes > (trace::kModeDevice | trace::kModeRuntime | trace::kModeMemory)) {
    throw std::invalid_argument(
        "trnscope profiler config: \"modes\" must be a nonzero mask of 1|2|4, got " +
        std::to_string(modes));
  }
  c.modes = static_cast<uint32_t>(modes);
  FindUnsigned(text, "max_events_per_core", &c.max_events_per_core);
  if (c.max_events_per_core == 0) {
    throw std::invalid_argument(
        "trnscope profiler config: \"max_events_per_core\" must be positive");
  }
  *config = c;
  return true;
}

std::vector<exporter::HostOp> HostOpsOf(const torch::autograd::profiler::ProfilerResult& result) {
  const auto& events = result.events();
  std::vector<exporter::HostOp> ops;
  ops.reserve(events.size());
  for (const auto& e : events) {
    const auto type = static_cast<ActivityType>(e.activityType());
    if (type != ActivityType::CPU_OP && type != ActivityType::USER_ANNOTATION &&
        type != ActivityType::PYTHON_FUNCTION) {
      continue;  // our own runtime/device activities come from the tracer records
    }
    if (e.deviceType() != c10::DeviceType::CPU) continue;
    exporter::HostOp op;
    op.name = e.name();
    op.start_ns = static_cast<int64_t>(e.startNs());
    op.end_ns = static_cast<int64_t>(e.endNs());
    op.tid = e.deviceResourceId();  // the OS thread id Kineto writes as "tid"
    op.correlation_id = e.correlationId();
    op.sequence = e.sequenceNr();
    if (e.hasShapes() && !e.shapes().empty()) {
      std::string& s = op.input_shapes;
      s += '[';
      bool first = true;
      for (const auto& shape : e.shapes()) {
        if (!first) s += ", ";
        first = false;
        s += '[';
        for (size_t i = 0; i < shape.size(); ++i) {
          if (i) s += ", ";
          s += std::to_string(shape[i]);
        }
        s += ']';
      }
      s += ']';
    }
    if (e.hasTypes() && !e.dtypes().empty()) {
      std::string& s = op.input_dtypes;
      s += '[';
      bool first = true;
      for (const auto& dtype : e.dtypes()) {
        if (!first) s += ", ";
        first = false;
        AppendJsonString(s, dtype);
      }
      s += ']';
    }
    ops.push_back(std::move(op));
  }
  return ops;
}

}  // namespace trn::bridge
