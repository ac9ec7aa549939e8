// Sizes and clocks of each modelled core version: the one parameter file of the
// device model (core/model reads its timing constants from here too). Every
// number cites its row of ../shared/reference/neuroncore.md.
#pragma once

#include <cstdint>
#include <string_view>

#include "core/common/tensor_ref.h"
#include "core/isa/isa.h"

namespace trn::isa {

// Timing constants of the model (core/model), target.cc cites their sources.
struct TimingSpec {
  int min_ii_cycles;                // MIN_II, ~64 cycles
  int dependent_latency_cycles;     // a RAW dependency on the same engine
  int cross_engine_latency_cycles;  // a semaphore between two compute engines
  double dma_trigger_latency_ns;    // from the semaphore to the transfer's start
  int dma_partitions_per_engine;    // each DMA engine serves 8 partitions
  double dma_chunk_overhead_ns;     // per contiguous run (descriptor element)
  double tensor_throttle_ramp_ns;   // dI/dt throttling: 50 % -> 100 % over this busy time
};

struct TargetSpec {
  Target target;
  const char* name;  // "trn1" / "trn2"
  const char* core;  // "NC-v2" / "NC-v3"
  // Memories ("Per core" and "Tile and memory constraints").
  int partitions;                // 128
  int64_t sbuf_partition_bytes;  // 192 KiB (NC-v2), 224 KiB (NC-v3)
  int64_t psum_partition_bytes;  // 16 KiB
  int psum_banks;                // 8 banks of 2 KiB (512 fp32) per partition
  // Instruction limits ("Tile and memory constraints").
  int matmul_stationary_free_max;  // M <= 128 (nl.tile_size.gemm_stationary_fmax)
  int matmul_moving_free_max;      // N <= 512 (nl.tile_size.gemm_moving_fmax)
  int64_t sbuf_free_max;           // Vector/Scalar free size from SBUF <= 64 K elements
  int64_t psum_free_max;           // ... from PSUM <= 4 K
  int bn_stats_free_max;           // bn_stats <= 512
  int dma_queues;                  // 16 DMA engines per core
  int semaphores;                  // semaphores a program may use
  // Clocks in GHz ("Per-instruction costs": engine clocks).
  double tensor_ghz, vector_ghz, scalar_ghz, gpsimd_ghz;
  // Memory system ("Per core" / "Per chip" / "dma_copy").
  double dma_engine_bytes_per_ns;  // 17 (NC-v2), 23 (NC-v3)
  double hbm_peak_gb_s;            // MBU's peak: one HBM stack, ~716 GB/s (calibration section)
  double tensor_peak_flops;        // raw PE-array peak: 128 * 128 * 2 * tensor clock
  TimingSpec timing;
  int64_t psum_bank_bytes() const { return psum_partition_bytes / psum_banks; }
};

const TargetSpec& Spec(Target t);
// "trn1" / "trn2" (also "nc-v2" / "nc-v3"), case-insensitive; false if unknown.
bool ParseTarget(std::string_view name, Target* out);

}  // namespace trn::isa
