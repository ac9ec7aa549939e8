// What the Kineto plugin (profiler.cc) hands to the exporter: the device
// records of the last profiling session and what the time-correlation guard
// did when it stopped. See Note [trn Kineto plugin] in profiler.cc.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/export/chrome_trace.h"
#include "core/trace/trace.h"

namespace torch::autograd::profiler {
struct ProfilerResult;
}  // namespace torch::autograd::profiler

namespace trn::bridge {

// One torch.profiler session that captured device activity.
struct DeviceSession {
  uint64_t id = 0;                                    // 1, 2, ... per process; 0: no session yet
  std::shared_ptr<const trace::Collected> collected;  // null if nothing was captured
  bool from_profile_config = false;                   // a ProfileConfig reached the plugin
  bool started = false;                               // false: another tracer session was open
  bool synchronized_at_stop = false;                  // the guard waited for in-flight work at stop
  uint64_t commands_in_flight = 0;                    // commands still queued at stop
  uint64_t device_records = 0;                        // kernels and copies captured
  uint64_t unlinked = 0;                              // records whose framework op was not found
};

// The most recent session. Any thread.
DeviceSession LastDeviceSession();

// Reads ProfileConfig's custom profiler config (a one-line JSON object with
// "backend": "trnscope"). Returns false if `text` is someone else's; throws
// std::invalid_argument naming the field if it is ours but malformed.
bool ParseProfileConfig(const std::string& text, trace::Config* config);

// The framework ops (aten ops, record_function ranges) of a finished
// torch.profiler result, for the combined trace.
std::vector<exporter::HostOp> HostOpsOf(const torch::autograd::profiler::ProfilerResult& result);

}  // namespace trn::bridge
