// Side-by-side comparison of runs (`trnscope compare A B [C...]`): totals and
// per-op device/CPU time with ratios to the first run. Pure; any thread.
#pragma once

#include <string>
#include <vector>

#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

struct RunView {
  const TraceModel* model = nullptr;
  const Summary* summary = nullptr;
};

// "0.25x" style ratio of b to a ("-" when a is 0).
std::string Ratio(double b, double a);

// The text of `trnscope compare`; top_ops limits the op table (0: all).
std::string FormatCompare(const std::vector<RunView>& runs, size_t top_ops = 30);

}  // namespace trn::analysis
