// A timing model of one NeuronCore running an isa::Executable: modelled, never
// measured (docs/device_model.md). Engines run their streams in order and in
// parallel; dependencies come from the tiles each instruction reads and writes
// (read-after-write, write-after-read, write-after-write) and cost a
// semaphore's latency across engines; compute instructions cost the published
// per-instruction formulas (cost.h); a DMA spreads its partitions over the
// core's 16 DMA engines. Deterministic: the same executable gives the same
// timeline. Note [Simulator] in simulator.cc has the rules.
#pragma once

#include <cstdint>
#include <vector>

#include "core/common/tensor_ref.h"
#include "core/isa/executable.h"

namespace trn::model {

// The error bound printed next to every modelled number (docs/device_model.md,
// the calibration table: the modelled-vs-published errors stay within it).
inline constexpr int kErrorBoundPct = 10;

struct SimOptions {
  bool tensor_throttle = false;     // Trn2's dI/dt limit on the Tensor engine
  bool record_dependencies = true;  // fill Timeline::dependencies (the trace's flows)
  bool record_transfers = true;     // fill Timeline::transfers (the trace's DMA lanes)
};

enum class DepKind : uint8_t { kRaw, kWar, kWaw };
const char* DepKindName(DepKind k);  // "raw" ("flow"), "war" ("anti"), "waw" ("output")

struct Dependency {
  uint32_t from;  // instruction indices, from < to
  uint32_t to;
  DepKind kind;
};

// One DMA engine's share of a dma_copy.
struct DmaTransfer {
  uint32_t instruction;
  uint8_t dma_engine;  // 0..15
  int64_t bytes;
  int64_t runs;  // contiguous runs (descriptor elements)
  double start_ns, end_ns;
};

// SBUF/PSUM bytes held by live allocations from time t_ns on (a step function).
struct OccupancyPoint {
  double t_ns;
  int64_t sbuf_bytes;
  int64_t psum_bytes;
};

struct Timeline {
  std::vector<double> start_ns, end_ns;  // per instruction
  std::vector<DmaTransfer> transfers;
  std::vector<Dependency> dependencies;
  std::vector<OccupancyPoint> occupancy;
  double total_ns = 0;
  // Per isa::Engine: time with an instruction in flight (semaphore waits
  // excluded; DMA: the union of its instructions) and hardware instruction
  // counts (an fp32 matmul issues two passes: 2).
  double engine_active_ns[isa::kNumEngines] = {};
  int64_t instruction_counts[isa::kNumEngines] = {};
  // Work, for the utilisation metrics.
  double tensor_flops = 0;     // every Tensor-engine FLOP (transposes included), raw
  double useful_flops = 0;     // matmul FLOPs only
  double transpose_flops = 0;  // Tensor-engine transposes (identity matmuls)
  int64_t hbm_bytes = 0;       // bytes DMAs read from or wrote to HBM
  int64_t dma_bytes = 0;       // all bytes DMAs moved
  int64_t dma_count = 0;       // dma_copy instructions
};

// Validates `exe` (isa::Validate's checks, instruction by instruction as it
// goes) and simulates it on its target; on error *out is an empty Timeline.
Status Simulate(const isa::Executable& exe, const SimOptions& options, Timeline* out);

// Neuron's summary metrics (reference/neuroncore.md, "How Neuron's tools define
// the metrics"): HFU and MFU against the raw PE-array peak, MBU against the HBM
// peak, arithmetic intensity against the ridge point.
struct Metrics {
  double hfu = 0, mfu = 0, mbu = 0;
  double arithmetic_intensity = 0;  // FLOPs per HBM byte
  double ridge_point = 0;           // peak FLOPs / peak HBM bandwidth
  bool memory_bound = false;
  double average_dma_bytes = 0;
};
Metrics ComputeMetrics(const isa::Executable& exe, const Timeline& t);

}  // namespace trn::model
