// Tests for the reports: golden text (trace -> summary/compare -> expected
// file, diff-test style; TRN_UPDATE_GOLDEN=1 rewrites them), SQL on the
// export and the report document's schema.
#include <gtest/gtest.h>
#include <simdjson.h>

#include "core/analysis/reports/compare.h"
#include "core/analysis/reports/report_data.h"
#include "core/analysis/reports/sqlite_export.h"

#include "core/analysis/test_util.h"

namespace trn::analysis {
namespace {

using namespace trn::analysis::testutil;

class GoldenSummary : public ::testing::TestWithParam<const char*> {};

TEST_P(GoldenSummary, MatchesExpectedText) {
  const std::string name = GetParam();
  auto m = Load(name + ".json");
  ASSERT_TRUE(m);
  ExpectGolden(name + ".summary.txt", SummaryText(*m));
}

INSTANTIATE_TEST_SUITE_P(Traces, GoldenSummary,
                         ::testing::Values("nested_ops", "overlapping_kernels", "missing_flows",
                                           "cuda_style", "kineto_cpu", "trn_rmsnorm",
                                           "unsynchronized", "malformed_trailing_commas",
                                           "malformed_truncated", "malformed_bad_events"));

TEST(Golden, Compare) {
  auto a = Load("trn_rmsnorm.json");
  auto b = Load("overlapping_kernels.json");
  auto c = Load("cuda_style.json");
  const Summary sa = Summarize(*a), sb = Summarize(*b), sc = Summarize(*c);
  ExpectGolden("compare.txt", FormatCompare({{a.get(), &sa}, {b.get(), &sb}, {c.get(), &sc}}, 0));
}

TEST(Sqlite, ExportAnswersQueries) {
  auto m = Load("overlapping_kernels.json");
  const Summary s = Summarize(*m);
  const std::string db = ::testing::TempDir() + "/overlap.db";
  std::string error;
  ASSERT_TRUE(ExportSqlite(*m, s, db, &error)) << error;
  using Rows = std::vector<std::vector<std::string>>;
  EXPECT_EQ(Query(db, "SELECT name, op_name, link, dur_ns FROM kernels ORDER BY start_ns"),
            (Rows{{"matmul_f32", "aten::mm", "external_id", "40000"},
                  {"mul_f32", "aten::mul", "external_id", "30000"},
                  {"mul_f32", "aten::mul", "external_id", "10000"}}));
  EXPECT_EQ(Query(db, "SELECT o.name, SUM(k.dur_ns) FROM kernels k JOIN ops o ON k.op_id = o.id "
                      "GROUP BY o.name ORDER BY o.name"),
            (Rows{{"aten::mm", "40000"}, {"aten::mul", "40000"}}));
  EXPECT_EQ(Query(db, "SELECT cat, COUNT(*) FROM flows GROUP BY cat ORDER BY cat"),
            (Rows{{"ac2g", "1"}, {"op_launch", "1"}}));
  EXPECT_EQ(Query(db, "SELECT f.cat, a.name, b.name FROM flows f JOIN ops a ON f.from_id = a.id "
                      "JOIN ops b ON f.to_id = b.id"),
            (Rows{{"op_launch", "aten::mm", "trnLaunchKernel"}}));
  EXPECT_EQ(Query(db, "SELECT name, ts_ns - 1700000000000000000, value FROM counters ORDER BY ts_ns"),
            (Rows{{"trn:0 memory", "0", "1024.0"}, {"trn:0 memory", "50000", "0.0"}}));
  EXPECT_EQ(Query(db, "SELECT value FROM metadata WHERE key = 'dropped_events'"), (Rows{{"7"}}));
  EXPECT_EQ(Query(db, "SELECT name, kind FROM lanes ORDER BY id"),
            (Rows{{"thread 5", "cpu"}, {"trn:0 stream 0", "device"}, {"trn:0 stream 1", "device"}}));
}

TEST(Report, JsonFollowsTheSchema) {
  auto m = Load("overlapping_kernels.json");
  const Summary s = Summarize(*m);
  const auto in = ComputeInsights(*m, s);
  const std::string json = BuildReportJson({{m.get(), &s, &in}}, "trnscope test", 3);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.parse(json).get(doc), simdjson::SUCCESS) << json;
  EXPECT_EQ(std::string_view(doc["format"]), "trnscope.report");
  EXPECT_EQ(int64_t(doc["version"]), 1);
  auto run = doc["runs"].at(0);
  EXPECT_EQ(int64_t(run["totals"]["kernels"]), 3);
  EXPECT_EQ(int64_t(run["timeline"]["events"].get_array().size()), 3);  // capped
  EXPECT_TRUE(bool(run["timeline"]["truncated"]));
  EXPECT_EQ(double(run["roofline"]["peak_gbps"]), 14.0);
  EXPECT_GT(run["insights"].get_array().size(), 3u);
  const std::string full = BuildReportJson({{m.get(), &s, &in}}, "trnscope test");
  ASSERT_EQ(p.parse(full).get(doc), simdjson::SUCCESS);
  auto tl = doc["runs"].at(0)["timeline"];
  EXPECT_EQ(tl["events"].get_array().size(), m->slices.size());
  EXPECT_GE(tl["flows"].get_array().size(), 3u);  // op->launch, launch->kernel, op->kernel by id
  std::string page;
  ASSERT_TRUE(EmbedReport("<script>const D=/*TRNSCOPE_DATA*/null;</script>",
                          R"({"s":"</script>"})", &page));
  EXPECT_EQ(page, R"(<script>const D={"s":"<\/script>"};</script>)");
}

}  // namespace
}  // namespace trn::analysis
