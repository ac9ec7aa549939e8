// Recommendations computed from one run, each quantified from the trace
// (see docs/analyzer.md "Insights" for the rules and thresholds). Pure
// functions of a read-only model and its Summary; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

struct Insight {
  std::string kind;       // fusion, launch_overhead, host_bound, fallback, recompile,
                          // float64, unsynchronized, dropped_events
  std::string severity;   // high, medium, low
  std::string title;
  std::string detail;
  int64_t saving_ns = 0;  // projected, 0 if not quantifiable
  std::vector<std::string> ops;
};

// A run of eager ops whose intermediates go through device memory.
struct FusionChain {
  std::vector<std::string> ops;  // op names in order
  uint64_t occurrences = 0;
  int64_t device_ns = 0;         // summed over occurrences
  uint64_t bytes = 0;            // moved by the chain's kernels
  uint64_t fused_bytes = 0;      // a fused kernel's traffic: first reads + last writes
};

std::vector<FusionChain> FindFusionChains(const TraceModel& m);

// Suggested static-shape buckets (powers of two) covering observed sizes.
std::vector<int64_t> SuggestBuckets(const std::vector<int64_t>& sizes);

// Sorted by severity, then saving, then kind.
std::vector<Insight> ComputeInsights(const TraceModel& m, const Summary& s);

}  // namespace trn::analysis
