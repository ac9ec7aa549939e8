// Writes one analyzed trace into an SQLite database (tables ops, kernels,
// flows, counters, lanes, metadata; documented in docs/analyzer.md). One
// thread per call.
#pragma once

#include <string>

#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

// Creates (replacing) `db_path`. False with *error set on any SQLite error.
bool ExportSqlite(const TraceModel& m, const Summary& s, const std::string& db_path,
                  std::string* error);

}  // namespace trn::analysis
