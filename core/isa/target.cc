#include "core/isa/target.h"

#include <cctype>
#include <string>

#include "core/common/assert.h"

namespace trn::isa {
namespace {

// The timing constants both versions share (reference/neuroncore.md):
//  min_ii: "MIN_II ~ 64 cycles";
//  dependent latency: back-to-back dependent 1-element Scalar instructions run
//    189 ns = 264 cycles apart on NC-v2, and each costs MIN_II: 264 - 64 = 200;
//  cross-engine: "add ~100 cycles of static overhead to dependent instructions";
//  DMA: "~1.3 us semaphore-to-start latency", "each engine serves 8 partitions";
//    the per-run overhead (20 ns) is fitted to the basic matmul tutorial
//    (39.89 ms, DMA-bound on rows of 512 B and 2 KiB): 4 KiB runs then reach
//    90 % of an engine's bandwidth, 512 B runs 52 %, and the 32 KiB [4, 4096]
//    transfer models at 1,505 ns against 1,416 measured (+6 %);
//  throttling: "starts at ~50 % and ramps to full speed over ~3 us".
constexpr TimingSpec kTiming = {
    /*min_ii_cycles=*/64,
    /*dependent_latency_cycles=*/200,
    /*cross_engine_latency_cycles=*/100,
    /*dma_trigger_latency_ns=*/1300.0,
    /*dma_partitions_per_engine=*/8,
    /*dma_chunk_overhead_ns=*/20.0,
    /*tensor_throttle_ramp_ns=*/3000.0,
};

// ../shared/reference/neuroncore.md, rows cited in target.h.
constexpr TargetSpec kTrn1 = {
    Target::kTrn1,
    "trn1",
    "NC-v2",
    /*partitions=*/128,
    /*sbuf_partition_bytes=*/192 << 10,
    /*psum_partition_bytes=*/16 << 10,
    /*psum_banks=*/8,
    /*matmul_stationary_free_max=*/128,
    /*matmul_moving_free_max=*/512,
    /*sbuf_free_max=*/64 << 10,
    /*psum_free_max=*/4 << 10,
    /*bn_stats_free_max=*/512,
    /*dma_queues=*/16,
    /*semaphores=*/256,  // an assumption: no published count; programs use a few
    /*tensor_ghz=*/2.8,
    /*vector_ghz=*/1.12,
    /*scalar_ghz=*/1.4,
    /*gpsimd_ghz=*/1.4,
    /*dma_engine_bytes_per_ns=*/17.0,
    /*hbm_peak_gb_s=*/820.0 / 2,  // Trn1: 820 GB/s per chip of 2 cores
    /*tensor_peak_flops=*/128.0 * 128 * 2 * 2.8e9,
    /*timing=*/kTiming,
};

constexpr TargetSpec kTrn2 = {
    Target::kTrn2,
    "trn2",
    "NC-v3",
    /*partitions=*/128,
    /*sbuf_partition_bytes=*/224 << 10,
    /*psum_partition_bytes=*/16 << 10,
    /*psum_banks=*/8,
    /*matmul_stationary_free_max=*/128,
    /*matmul_moving_free_max=*/512,
    /*sbuf_free_max=*/64 << 10,
    /*psum_free_max=*/4 << 10,
    /*bn_stats_free_max=*/512,
    /*dma_queues=*/16,
    /*semaphores=*/256,
    /*tensor_ghz=*/2.4,
    /*vector_ghz=*/0.96,
    /*scalar_ghz=*/1.2,
    /*gpsimd_ghz=*/1.2,
    /*dma_engine_bytes_per_ns=*/23.0,
    /*hbm_peak_gb_s=*/716.0,  // the calibration section: MBU's peak, one HBM stack
    /*tensor_peak_flops=*/128.0 * 128 * 2 * 2.4e9,
    /*timing=*/kTiming,
};

}  // namespace

const TargetSpec& Spec(Target t) {
  switch (t) {
    case Target::kTrn1:
      return kTrn1;
    case Target::kTrn2:
      return kTrn2;
  }
  TRN_ASSERT(false, "unknown Target");
  return kTrn2;
}

bool ParseTarget(std::string_view name, Target* out) {
  std::string lower(name);
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower == "trn1" || lower == "nc-v2") {
    *out = Target::kTrn1;
  } else if (lower == "trn2" || lower == "nc-v3") {
    *out = Target::kTrn2;
  } else {
    return false;
  }
  return true;
}

}  // namespace trn::isa
