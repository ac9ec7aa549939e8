// Writes one combined Chrome-trace JSON (loads in Perfetto and chrome://tracing):
// framework ops on CPU-thread lanes, runtime spans on the dispatching threads,
// one lane per core/stream for device kernels and copies, a memory counter
// track per core, and flow arrows op -> launch -> kernel. Torch-free: the torch
// bridge converts the profiler's CPU events into HostOps. Not thread-safe;
// call from one thread.
//
// Layout (what readers of the file may rely on): "ts"/"dur" are absolute µs
// since the Unix epoch with 3 decimals, as Kineto writes them. The CPU process
// is pid = ExportInput::pid ("host (pid N)"), one lane per OS thread ("thread
// <tid>"): ops (cat "cpu_op"), runtime spans (cat "trn_runtime") and "[memory]"
// instants. Records keep the names the runtime gave them (core/common/names.h:
// trnLaunchKernel, "Memcpy HtoD", ...); the writer renames nothing. Each device seen
// in kernel/copy/memory records is process "trn:<d>" (pid 1'000'000 + d, or
// 2'000'000 + d if that would be the host pid) with lane tid = stream id named
// LaneName() (cat "kernel" / "gpu_memcpy") and counter "trn:<d> memory".
// Flows: cat "op_launch" (op -> launch) and "ac2g" (launch -> kernel, id =
// launch id; op -> kernel when there is no launch record). Top-level keys:
// "trnscope" (metadata_json) and "trnscope_capture" (drop counts).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace trn::exporter {

// One framework (CPU) event, e.g. an aten op from torch.profiler.
struct HostOp {
  std::string name;            // "aten::mul"
  int64_t start_ns = 0;        // ns since the Unix epoch
  int64_t end_ns = 0;
  int64_t tid = 0;             // OS thread id (matches trace::Record::tid)
  uint64_t correlation_id = 0; // what trace::Record::correlation_id refers to
  std::string input_shapes;    // pre-rendered JSON value, e.g. "[[8, 4096], []]" (may be empty)
  std::string input_dtypes;    // pre-rendered JSON value (may be empty)
  int64_t sequence = -1;       // autograd sequence number, -1 if none
};

struct ExportInput {
  std::vector<HostOp> host_ops;
  const trace::Collected* device = nullptr;  // may be null: a CPU-only trace
  int64_t pid = 0;                            // process id for the CPU lanes
  std::string metadata_json = "{}";           // an object, written as "trnscope" metadata
};

struct ExportStats {
  uint64_t events = 0;     // JSON events written (flows included)
  uint64_t flows = 0;      // flow arrows (start/end pairs)
  uint64_t bytes = 0;      // bytes written
  uint64_t unlinked = 0;   // device records whose op is not among host_ops
};

// Writes `path`; throws trn::Error naming the path if it cannot be written and
// trn::InvalidArgument for metadata_json that is not a JSON object (Note
// [Errors in core]). Output is deterministic for a given input (golden tests).
ExportStats WriteChromeTrace(const ExportInput& input, const std::string& path);

// Lane naming used in every export: "trn:<device> stream <stream>".
std::string LaneName(int device, int stream);

}  // namespace trn::exporter
