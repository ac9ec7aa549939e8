// The published "estimated instruction cost" of each compute instruction
// (reference/neuroncore.md, "Per-instruction costs", NKI ISA docs SDK 2.26), in
// cycles of the executing engine, and the DMA plan of a dma_copy.
#pragma once

#include <cstdint>

#include "core/isa/executable.h"
#include "core/isa/target.h"

namespace trn::model {

struct Cost {
  double cycles = 0;
  int hw_instructions = 1;  // an fp32 matmul issues two fp32_mode passes
  double flops = 0;         // Tensor engine only
};
Cost ComputeCost(const isa::Instruction& ins, const isa::TargetSpec& spec);

double EngineGhz(isa::Engine e, const isa::TargetSpec& spec);

// How a dma_copy moves: rows grouped by the DMA engine that serves their
// partition, each row split into contiguous runs.
inline constexpr int kDmaEngines = 16;
struct DmaPlan {
  int64_t bytes_per_engine[kDmaEngines] = {};
  int64_t runs_per_engine[kDmaEngines] = {};
  int64_t total_bytes = 0;
  int64_t total_runs = 0;
};
DmaPlan PlanDma(const isa::Instruction& ins, const isa::Executable& exe,
                const isa::TargetSpec& spec);

}  // namespace trn::model
