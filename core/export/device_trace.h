// Writes the modelled device profile of one executable as a Chrome trace
// (Perfetto / chrome://tracing; `trnscope summary` reads it like any trace):
// process "NeuronCore 0 — modelled (<target>)" with one lane per engine
// (tid 1..5: tensor, vector, scalar, gpsimd, sync; cat "kernel", one slice per
// instruction named by its opcode, coloured by its source op) and one per DMA
// engine (tid 100 + q, cat "gpu_memcpy", one slice per transfer), counters
// "SBUF bytes", "PSUM bytes" and "DMA GB/s", and flows (cat "dependency",
// named raw / war / waw) from each instruction to those that wait for it.
// Times are ns from the program's start written as µs. The top-level key
// "trnscope_device" says it is modelled, for which target, with which error
// bound, and carries the summary metrics. Never mixed with measured time.
#pragma once

#include <cstdint>
#include <string>

#include "core/isa/executable.h"
#include "core/model/simulator.h"

namespace trn::exporter {

struct DeviceTraceStats {
  uint64_t events = 0;
  uint64_t flows = 0;
  bool flows_truncated = false;  // more dependencies than max_flows
};

// Returns an error (the path and the reason) instead of writing a partial file.
Status WriteDeviceTrace(const isa::Executable& exe, const model::Timeline& t,
                        const std::string& path, DeviceTraceStats* stats,
                        uint64_t max_flows = 200'000);

}  // namespace trn::exporter
