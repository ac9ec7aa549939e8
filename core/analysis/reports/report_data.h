// Builds the explorer's data document (docs/report_schema.md, version 1) from
// analyzed runs, and embeds it into the HTML template. Pure; any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

// The timeline keeps at most this many events per run: the earliest by start
// time. "truncated" tells the explorer when the cap was hit.
inline constexpr size_t kTimelineCap = 100'000;
inline constexpr size_t kRooflineCap = 500;
inline constexpr std::string_view kDataPlaceholder = "/*TRNSCOPE_DATA*/null";

struct ReportRun {
  const TraceModel* model = nullptr;
  const Summary* summary = nullptr;
  const std::vector<Insight>* insights = nullptr;
};

// The whole document: {"format":"trnscope.report","version":1,...}.
std::string BuildReportJson(const std::vector<ReportRun>& runs, std::string_view generator,
                            size_t timeline_cap = kTimelineCap);

// A JSON string literal (quotes included) for s; invalid UTF-8 becomes U+FFFD.
std::string JsonString(std::string_view s);

// Replaces the placeholder in `html` with `json` made safe inside <script>.
// False if the template has no placeholder.
bool EmbedReport(std::string_view html, std::string_view json, std::string* out);

}  // namespace trn::analysis
