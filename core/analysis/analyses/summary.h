// Per-run aggregates computed from a TraceModel: a key_averages()-like op
// table with device time, top kernels, per-lane busy/idle and host-bound
// stretches (rendered as text by reports/summary_text.h). Pure functions of a
// read-only model; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

struct KernelStat {
  std::string name;
  std::string op;        // launching op ("" if unlinked); most frequent one
  uint64_t calls = 0;
  int64_t device_ns = 0;
  uint64_t flops = 0, bytes = 0;
  bool copy = false;
};

struct OpStat {
  std::string name;
  SliceKind kind = SliceKind::kOp;   // kOp or kRuntime
  uint64_t calls = 0;
  int64_t cpu_total_ns = 0, cpu_self_ns = 0;
  int64_t device_total_ns = 0, device_self_ns = 0;
  std::vector<KernelStat> kernels;   // launched directly by this op, by device time
};

struct LaneBusy {
  std::string lane;
  uint64_t events = 0;
  int64_t busy_ns = 0;   // union of its kernels/copies
  int64_t idle_ns = 0;   // the run's span minus busy
};

// A stretch where no device lane is busy but the host is inside an op.
struct HostGap {
  int64_t start_ns = 0;  // absolute
  int64_t dur_ns = 0;    // host-bound part of the gap
  std::string op;        // top-level op running at the gap's start
};

struct Totals {
  int64_t span_ns = 0;     // first event start .. last event end
  int64_t cpu_ops_ns = 0;  // sum of top-level CPU op durations
  int64_t device_ns = 0;   // sum of kernel + copy durations
  uint64_t kernels = 0, copies = 0, ops = 0, runtime_calls = 0;
  uint64_t bytes = 0, flops = 0;
  uint64_t dropped_events = 0;
};

struct Summary {
  Totals totals;
  std::vector<OpStat> ops;           // by device self, then CPU total, then name
  std::vector<KernelStat> kernels;   // by device time
  std::vector<LaneBusy> lanes;       // device lanes, in lane order
  int64_t device_window_ns = 0;      // first device start .. last device end
  int64_t device_busy_ns = 0;        // union over all device lanes
  int64_t host_bound_ns = 0;         // device idle while a host op runs
  std::vector<HostGap> gaps;         // longest first, at most kMaxGaps
  static constexpr size_t kMaxGaps = 10;
  static constexpr int64_t kMinGapNs = 1000;  // shorter idle gaps are ignored
};

Summary Summarize(const TraceModel& m);

}  // namespace trn::analysis
