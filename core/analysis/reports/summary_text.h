// The text of `trnscope summary`: totals, the op table, top kernels, device
// lanes, host-bound gaps, meta.json facts and the recommendations. Pure; any
// thread.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

// top_ops limits the op table (0: all).
std::string FormatSummary(const TraceModel& m, const Summary& s,
                          const std::vector<Insight>& insights, size_t top_ops = 25);

}  // namespace trn::analysis
