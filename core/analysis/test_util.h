// Helpers shared by the analysis tests (reader/, analyses/, reports/ and the
// CLI's end-to-end tests): the testdata folder, loading, goldens, SQL.
// Regenerate goldens: TRN_UPDATE_GOLDEN=1 build/trn_analysis_tests
#pragma once

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"
#include "core/analysis/reports/summary_text.h"

namespace trn::analysis::testutil {

inline const std::string kData = TRN_TESTDATA;

inline std::string Path(const std::string& f) { return kData + "/" + f; }

inline std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::unique_ptr<TraceModel> Load(const std::string& file, LoadOptions opt = {}) {
  LoadResult r = LoadTrace(Path(file), opt);
  EXPECT_TRUE(r.ok) << r.error;
  return std::move(r.model);
}

inline std::string SummaryText(const TraceModel& m) {
  const Summary s = Summarize(m);
  return FormatSummary(m, s, ComputeInsights(m, s), 0);
}

inline void ExpectGolden(const std::string& golden, const std::string& actual) {
  const std::string path = Path(golden);
  if (std::getenv("TRN_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  const std::string expected = Read(path);
  ASSERT_FALSE(expected.empty()) << "missing golden " << path << " (TRN_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(expected, actual) << "golden " << golden << " differs";
}

inline const Slice* FindSlice(const TraceModel& m, std::string_view name, int nth = 0) {
  for (const Slice& s : m.slices)
    if (m.Name(s) == name && nth-- == 0) return &s;
  return nullptr;
}

inline std::vector<std::vector<std::string>> Query(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  std::vector<std::vector<std::string>> rows;
  EXPECT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(h, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sqlite3_errmsg(h);
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      row.emplace_back(t ? reinterpret_cast<const char*>(t) : "NULL");
    }
    rows.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(h);
  return rows;
}

}  // namespace trn::analysis::testutil
