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

// How a dma_copy moves: `partitions` rows starting at core partition `first`
// (the on-chip side's; an HBM -> HBM copy uses the destination's rows), each
// row_bytes long in runs_per_row contiguous runs. Rows go to the DMA engine
// serving their partition (dma_partitions_per_engine each).
inline constexpr int kDmaEngines = 16;
struct DmaRows {
  int first = 0;
  int partitions = 0;
  int64_t row_bytes = 0;
  int64_t runs_per_row = 0;
};
DmaRows PlanDma(const isa::Instruction& ins, const isa::Executable& exe);

}  // namespace trn::model
