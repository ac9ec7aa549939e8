// Tests for core/analysis: golden text (trace -> summary/compare -> expected
// file, diff-test style), facts checked against hand-written traces, SQL on
// the export, malformed inputs and the CLI's exit codes.
// Regenerate goldens: TRN_UPDATE_GOLDEN=1 build/trn_analysis_tests
#include <gtest/gtest.h>
#include <simdjson.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <zlib.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"
#include "core/analysis/reports/compare.h"
#include "core/analysis/reports/report_data.h"
#include "core/analysis/reports/sqlite_export.h"
#include "core/analysis/reports/summary_text.h"

namespace trn::analysis {
namespace {

const std::string kData = TRN_TESTDATA;

std::string Path(const std::string& f) { return kData + "/" + f; }

std::string Read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::unique_ptr<TraceModel> Load(const std::string& file, LoadOptions opt = {}) {
  LoadResult r = LoadTrace(Path(file), opt);
  EXPECT_TRUE(r.ok) << r.error;
  return std::move(r.model);
}

std::string SummaryText(const TraceModel& m) {
  const Summary s = Summarize(m);
  return FormatSummary(m, s, ComputeInsights(m, s), 0);
}

void ExpectGolden(const std::string& golden, const std::string& actual) {
  const std::string path = Path(golden);
  if (std::getenv("TRN_UPDATE_GOLDEN")) {
    std::ofstream(path, std::ios::binary) << actual;
    return;
  }
  const std::string expected = Read(path);
  ASSERT_FALSE(expected.empty()) << "missing golden " << path << " (TRN_UPDATE_GOLDEN=1 writes it)";
  EXPECT_EQ(expected, actual) << "golden " << golden << " differs";
}

const Slice* FindSlice(const TraceModel& m, std::string_view name, int nth = 0) {
  for (const Slice& s : m.slices)
    if (m.Name(s) == name && nth-- == 0) return &s;
  return nullptr;
}

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

TEST(Model, NestingSelfTimeAndIds) {
  auto m = Load("nested_ops.json");
  const Slice* step = FindSlice(*m, "step");
  const Slice* linear = FindSlice(*m, "aten::linear");
  ASSERT_TRUE(step && linear);
  EXPECT_EQ(step->self_ns, 100'000 - 50'000 - 20'000);  // children: linear, div_
  EXPECT_EQ(linear->self_ns, 50'000 - 5'000 - 30'000);
  EXPECT_EQ(m->slices[linear->parent].name, step->name);
  // aten::div_ inside aten::div_ counts once, with both self times.
  const Slice* outer = FindSlice(*m, "aten::div_", 0);
  const Slice* inner = FindSlice(*m, "aten::div_", 1);
  ASSERT_TRUE(outer && inner);
  EXPECT_FALSE(outer->merged);
  EXPECT_TRUE(inner->merged);
  EXPECT_EQ(outer->self_ns, 20'000);
  // B/E pair and string pid/tid/ts/dur.
  const Slice* region = FindSlice(*m, "custom_region");
  ASSERT_TRUE(region);
  EXPECT_EQ(region->dur_ns, 40'000);
  const Slice* add = FindSlice(*m, "aten::add");
  ASSERT_TRUE(add);
  EXPECT_EQ(add->start_ns, 50'500);
  EXPECT_EQ(add->dur_ns, 4'250);
  EXPECT_EQ(add->lane, region->lane);  // "1"/"11" strings == 1/11 numbers
  EXPECT_EQ(m->lanes[step->lane].name, "main");
}

TEST(Model, EpochMicrosecondsKeepNanosecondPrecision) {
  auto m = Load("overlapping_kernels.json");
  EXPECT_EQ(m->t0_ns, int64_t{1'700'000'000'000'000'000});
  EXPECT_EQ(m->t1_ns - m->t0_ns, 50'000);
}

TEST(Model, LinkingByExternalIdCorrelationAndFlow) {
  auto m = Load("missing_flows.json");
  const Slice* relu = FindSlice(*m, "relu_kernel");
  const Slice* sig = FindSlice(*m, "sigmoid_kernel");
  const Slice* orphan = FindSlice(*m, "orphan_kernel");
  ASSERT_TRUE(relu && sig && orphan);
  EXPECT_EQ(relu->link, LinkVia::kCorrelation);  // correlation -> cudaLaunchKernel -> aten::relu
  EXPECT_EQ(m->Name(m->slices[relu->op]), "aten::relu");
  EXPECT_EQ(sig->link, LinkVia::kFlow);  // string flow id "0x55"
  EXPECT_EQ(m->Name(m->slices[sig->op]), "aten::sigmoid");
  EXPECT_EQ(orphan->op, kNone);
  EXPECT_EQ(m->unlinked_device, 1u);

  auto c = Load("cuda_style.json");
  const Slice* pow = FindSlice(*c, "vectorized_elementwise_kernel<pow>");
  ASSERT_TRUE(pow);
  EXPECT_EQ(pow->link, LinkVia::kExternalId);
  EXPECT_EQ(c->Name(c->slices[pow->op]), "aten::pow");
  EXPECT_EQ(c->lanes[pow->lane].name, "GPU 0 stream 7");
  const Slice* copy = FindSlice(*c, "Memcpy DtoH (Device -> Pageable)");
  ASSERT_TRUE(copy);
  EXPECT_EQ(copy->bytes_read, 4096u);
}

TEST(Summary, OverlappingKernelsBusyIsTheUnion) {
  auto m = Load("overlapping_kernels.json");
  const Summary s = Summarize(*m);
  ASSERT_EQ(s.lanes.size(), 2u);
  EXPECT_EQ(s.lanes[0].busy_ns, 40'000);  // stream 0: one 40 us kernel
  EXPECT_EQ(s.lanes[1].busy_ns, 30'000);  // stream 1: [20,50) and [30,40) overlap
  EXPECT_EQ(s.totals.device_ns, 80'000);  // durations still sum
  EXPECT_EQ(s.device_busy_ns, 45'000);    // [5,50)
  EXPECT_EQ(s.totals.dropped_events, 7u);
  // Device time: mm self 40 us; mul self 40 us from two kernels.
  auto op = [&](std::string_view name) -> const OpStat* {
    for (const OpStat& o : s.ops)
      if (o.name == name) return &o;
    return nullptr;
  };
  const OpStat* mm = op("aten::mm");
  const OpStat* mul = op("aten::mul");
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mm->device_self_ns, 40'000);
  EXPECT_EQ(mul->device_self_ns, 40'000);
  ASSERT_EQ(mul->kernels.size(), 1u);
  EXPECT_EQ(mul->kernels[0].calls, 2u);
}

TEST(Insights, MetaDrivenRules) {
  auto m = Load("overlapping_kernels.json");
  const Summary s = Summarize(*m);
  const auto in = ComputeInsights(*m, s);
  std::map<std::string, const Insight*> by_kind;
  for (const Insight& i : in) by_kind[i.kind] = &i;
  ASSERT_TRUE(by_kind.count("fallback"));
  ASSERT_TRUE(by_kind.count("float64"));
  ASSERT_TRUE(by_kind.count("recompile"));
  ASSERT_TRUE(by_kind.count("dropped_events"));
  const Insight& rc = *by_kind["recompile"];
  EXPECT_NE(rc.detail.find("[4, 32, 128, 256]"), std::string::npos) << rc.detail;
  // 4 compiles of 2 ms; 4 buckets -> nothing saved; the detail says so.
  EXPECT_EQ(rc.saving_ns, 0);
  EXPECT_EQ(SuggestBuckets({3, 17, 100, 130, 128}), (std::vector<int64_t>{4, 32, 128, 256}));
}

TEST(Insights, RmsNormChainIsFusible) {
  auto m = Load("trn_rmsnorm.json");
  const auto chains = FindFusionChains(*m);
  ASSERT_FALSE(chains.empty());
  const FusionChain& c = chains[0];
  EXPECT_EQ(c.ops, (std::vector<std::string>{"aten::pow", "aten::mean", "aten::add",
                                             "aten::rsqrt", "aten::mul", "aten::mul"}));
  EXPECT_EQ(c.occurrences, 2u);
  // Independent reference: sum the kernels' bytes from the trace itself.
  uint64_t bytes = 0;
  for (const Slice& k : m->slices)
    if (k.on_device()) bytes += k.bytes_read + k.bytes_written;
  EXPECT_EQ(c.bytes, bytes);
  EXPECT_LT(c.fused_bytes, c.bytes / 2);
}

TEST(Insights, UnsynchronizedTraceIsFlagged) {
  auto m = Load("unsynchronized.json");
  const auto in = ComputeInsights(*m, Summarize(*m));
  ASSERT_FALSE(in.empty());
  EXPECT_EQ(in[0].kind, "unsynchronized");
  EXPECT_NE(in[0].detail.find("2 kernel launches"), std::string::npos);
}

TEST(Reader, ChunkBoundariesAndGzipGiveTheSameModel) {
  const std::string plain = SummaryText(*Load("kineto_cpu.json"));
  LoadOptions small;
  small.tokenize.chunk_bytes = 4096;
  EXPECT_EQ(SummaryText(*Load("kineto_cpu.json", small)), plain);
  const std::string gz = ::testing::TempDir() + "/kineto_cpu.json.gz";
  const std::string data = Read(Path("kineto_cpu.json"));
  gzFile f = gzopen(gz.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, data.data(), static_cast<unsigned>(data.size()));
  gzclose(f);
  LoadOptions named;
  named.name = "kineto_cpu";
  LoadResult r = LoadTrace(gz, named);
  ASSERT_TRUE(r.ok) << r.error;
  std::string text = SummaryText(*r.model);
  EXPECT_EQ(text.substr(text.find('\n', text.find('\n') + 1)),
            plain.substr(plain.find('\n', plain.find('\n') + 1)));
}

struct BadCase {
  const char* file;
  bool ok;
  const char* message;  // part of the error or first warning
};

TEST(Reader, MalformedInputsGiveClearResults) {
  const BadCase cases[] = {
      {"malformed_empty.json", false, "the file is empty"},
      {"malformed_random.bin", false, "expected '{' or '[' at byte 0"},
      {"malformed_wrong_top.json", false, "expected '{' or '[' at byte 0, found '\"'"},
      {"malformed_events_not_array.json", false, "traceEvents at byte 15 is not an array"},
      {"does_not_exist.json", false, "No such file or directory"},
      {"malformed_truncated.json", true, "cut off by the end of the file"},
      {"malformed_bad_events.json", true, "skipped event at byte 71: not a JSON object"},
  };
  for (const BadCase& c : cases) {
    LoadResult r = LoadTrace(Path(c.file));
    EXPECT_EQ(r.ok, c.ok) << c.file;
    const std::string text = r.ok ? (r.model->parse.warnings.empty() ? "" : r.model->parse.warnings[0]) : r.error;
    EXPECT_NE(text.find(c.message), std::string::npos) << c.file << ": " << text;
  }
  LoadResult dir = LoadTrace(kData);
  EXPECT_FALSE(dir.ok);
  EXPECT_NE(dir.error.find("is a directory"), std::string::npos);
}

TEST(Reader, HugeStringIsSkippedNotBuffered) {
  std::string big = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":0,\"dur\":1},"
                    "{\"ph\":\"X\",\"name\":\"";
  big.append(size_t{100} << 20, 'x');
  big += "\",\"ts\":1},{\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":2,\"dur\":1}]}";
  LoadResult r = LoadTraceFromBuffer(big);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.model->parse.events, 2u);
  EXPECT_EQ(r.model->parse.skipped, 1u);
  // The same string as the whole document is not a trace.
  LoadResult top = LoadTraceFromBuffer("\"" + std::string(size_t{100} << 20, 'y') + "\"");
  EXPECT_FALSE(top.ok);
}

TEST(Reader, RandomAndMutatedInputsNeverCrash) {
  const std::string seed = Read(Path("overlapping_kernels.json"));
  std::mt19937 rng(1234);
  for (int i = 0; i < 3000; ++i) {
    std::string s = seed;
    const int edits = 1 + static_cast<int>(rng() % 8);
    for (int e = 0; e < edits; ++e) {
      const size_t at = rng() % s.size();
      switch (rng() % 4) {
        case 0: s[at] = static_cast<char>(rng()); break;
        case 1: s.erase(at, rng() % 16); break;
        case 2: s.insert(at, 1, "{}[],\":\\"[rng() % 8]); break;
        case 3: s.resize(at); break;
      }
      if (s.empty()) s = "{";
    }
    LoadResult r = LoadTraceFromBuffer(s);
    if (r.ok) {
      const Summary sum = Summarize(*r.model);
      (void)ComputeInsights(*r.model, sum);
      (void)BuildReportJson({{r.model.get(), &sum, nullptr}}, "t");
    }
  }
}

// Found by the fuzzer (cli/fuzz_trace_reader.cc): simdjson reads the padding
// after a malformed event, which used to be the next bytes of the chunk, so a
// '}' after `{"ph":"c","":` made the event parse when it was in the same
// chunk and fail when the chunk ended there.
TEST(Reader, MalformedEventDoesNotDependOnChunkBoundaries) {
  const std::string cases[] = {
      "[{\"ph\":\"c\",\"\":\n}}",
      "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":1,\"dur\":1,\"x\":}"
      "]}, {\"ph\":\"X\",\"name\":\"b\",\"pid\":1,\"tid\":1,\"ts\":3,\"dur\":1}]}",
  };
  for (const std::string& doc : cases) {
    LoadOptions big;
    big.tokenize.chunk_bytes = size_t{1} << 20;
    LoadResult want = LoadTraceFromBuffer(doc, big);
    ASSERT_TRUE(want.ok) << want.error;
    // A malformed event is skipped, never accepted.
    EXPECT_GE(want.model->parse.skipped, 1u) << doc;
    for (size_t chunk = 16; chunk <= doc.size() + 1; ++chunk) {
      LoadOptions opt;
      opt.tokenize.chunk_bytes = chunk;
      LoadResult r = LoadTraceFromBuffer(doc, opt);
      ASSERT_TRUE(r.ok) << r.error;
      EXPECT_EQ(r.model->parse.events, want.model->parse.events) << "chunk " << chunk << ": " << doc;
      EXPECT_EQ(r.model->parse.skipped, want.model->parse.skipped) << "chunk " << chunk;
      EXPECT_EQ(r.model->parse.warnings, want.model->parse.warnings) << "chunk " << chunk;
    }
  }
  // Every test trace reads the same with tiny chunks.
  for (const char* file : {"kineto_cpu.json", "trn_rmsnorm.json", "malformed_bad_events.json",
                           "malformed_trailing_commas.json", "malformed_truncated.json"}) {
    LoadOptions tiny;
    tiny.tokenize.chunk_bytes = 16;
    EXPECT_EQ(SummaryText(*Load(file, tiny)), SummaryText(*Load(file))) << file;
  }
}

// Found by the fuzzer: a device window from ts 0 to an epoch timestamp is
// ~2^61 ns, and `host_bound_ns * 10` overflowed, so a host-bound run was
// reported as device-bound ("low" launch overhead).
TEST(Insights, HostBoundCheckDoesNotOverflowOnEpochWindows) {
  const std::string doc = R"({"traceEvents":[
    {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":0,"dur":10,"args":{"External id":1}},
    {"ph":"X","cat":"kernel","name":"add_k","pid":0,"tid":7,"ts":1,"dur":1,"args":{"External id":1}},
    {"ph":"X","cat":"cpu_op","name":"aten::add","pid":1,"tid":1,"ts":1796218120613000,"dur":10,"args":{"External id":2}},
    {"ph":"X","cat":"kernel","name":"add_k","pid":0,"tid":7,"ts":1796218120613001,"dur":1,"args":{"External id":2}}]})";
  LoadResult r = LoadTraceFromBuffer(doc);
  ASSERT_TRUE(r.ok) << r.error;
  const Summary s = Summarize(*r.model);
  ASSERT_GT(s.device_window_ns, int64_t{1} << 60);
  EXPECT_GT(s.host_bound_ns, s.device_window_ns / 2);  // idle between the two kernels
  const auto insights = ComputeInsights(*r.model, s);
  const Insight* lo = nullptr;
  for (const Insight& in : insights)
    if (in.kind == "launch_overhead") lo = &in;
  ASSERT_NE(lo, nullptr);
  EXPECT_EQ(lo->detail.find("The device, not the host, bounded this run"), std::string::npos)
      << lo->detail;
}

// Times outside [-2^60, 2^62] ns or durations over 2^50 ns (Note [Time
// range]) are skipped with a reason, so differences of slice ends fit int64.
TEST(Reader, OutOfRangeTimesAreSkippedWithAReason) {
  const std::string doc = R"({"traceEvents":[
    {"ph":"X","name":"ok","pid":1,"tid":1,"ts":1,"dur":1},
    {"ph":"X","name":"far","pid":1,"tid":1,"ts":9000000000000000,"dur":1},
    {"ph":"X","name":"long","pid":1,"tid":1,"ts":2,"dur":2000000000000},
    {"ph":"X","name":"neg","pid":1,"tid":1,"ts":-2000000000000000,"dur":1}]})";
  LoadResult r = LoadTraceFromBuffer(doc);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.model->parse.events, 1u);
  EXPECT_EQ(r.model->parse.skipped, 3u);
  ASSERT_EQ(r.model->parse.warnings.size(), 3u);
  EXPECT_NE(r.model->parse.warnings[0].find("ts out of range"), std::string::npos)
      << r.model->parse.warnings[0];
  EXPECT_NE(r.model->parse.warnings[1].find("dur out of range"), std::string::npos)
      << r.model->parse.warnings[1];
  EXPECT_NE(r.model->parse.warnings[2].find("ts out of range"), std::string::npos);
}

std::vector<std::vector<std::string>> Query(const std::string& db, const std::string& sql) {
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

int RunCli(const std::string& args) {
  const int st = std::system((std::string(TRN_CLI_PATH) + " " + args + " >/dev/null 2>&1").c_str());
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Cli, ExitCodes) {
  EXPECT_EQ(RunCli("--version"), 0);
  EXPECT_EQ(RunCli("--help"), 0);
  EXPECT_EQ(RunCli(""), 1);
  EXPECT_EQ(RunCli("summary"), 1);
  EXPECT_EQ(RunCli("frobnicate x"), 1);
  EXPECT_EQ(RunCli("summary " + Path("nested_ops.json")), 0);
  EXPECT_EQ(RunCli("summary " + Path("malformed_truncated.json")), 3);
  for (const char* f : {"malformed_empty.json", "malformed_random.bin", "malformed_wrong_top.json",
                        "does_not_exist.json"})
    EXPECT_EQ(RunCli(std::string("summary ") + Path(f)), 2) << f;
  EXPECT_EQ(RunCli("compare " + Path("trn_rmsnorm.json") + " " + Path("cuda_style.json")), 0);
  const std::string tmp = ::testing::TempDir();
  EXPECT_EQ(RunCli("export " + Path("cuda_style.json") + " --sqlite " + tmp + "/c.db"), 0);
  EXPECT_EQ(Query(tmp + "/c.db", "SELECT COUNT(*) FROM kernels"),
            (std::vector<std::vector<std::string>>{{"4"}}));
  EXPECT_EQ(RunCli("export " + Path("cuda_style.json") + " --sqlite /nonexistent/dir/c.db"), 4);
  // report with a stub template (the explorer ships its own).
  std::ofstream(tmp + "/tpl.html") << "<html><script>const DATA=/*TRNSCOPE_DATA*/null;</script></html>";
  EXPECT_EQ(RunCli("report " + Path("trn_rmsnorm.json") + " " + Path("cuda_style.json") +
                   " --names naive,cuda --template " + tmp + "/tpl.html -o " + tmp + "/r.html"),
            0);
  const std::string html = Read(tmp + "/r.html");
  EXPECT_NE(html.find("\"format\":\"trnscope.report\""), std::string::npos);
  EXPECT_NE(html.find("\"name\":\"cuda\""), std::string::npos);
  EXPECT_EQ(html.find("/*TRNSCOPE_DATA*/"), std::string::npos);
}

// The explorer is compiled in: the binary copied alone into an empty folder
// writes a whole report, and names no template path in the source tree.
TEST(Cli, BinaryAloneWritesAReport) {
  const std::string dir = ::testing::TempDir() + "/trnscope_alone";
  ASSERT_EQ(std::system(("rm -rf " + dir + " && mkdir -p " + dir + " && cp " +
                         std::string(TRN_CLI_PATH) + " " + dir + "/trnscope")
                            .c_str()),
            0);
  const std::string binary = Read(dir + "/trnscope");
  ASSERT_FALSE(binary.empty());
  EXPECT_EQ(binary.find("explorer/explorer.html"), std::string::npos);
  const std::string trace = Path("trn_rmsnorm.json");
  const int st = std::system(("cd " + dir + " && ./trnscope report " + trace +
                              " -o report.html >/dev/null 2>&1")
                                 .c_str());
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 0);
  const std::string html = Read(dir + "/report.html");
  ASSERT_FALSE(html.empty()) << "no report.html in " << dir;
  // The explorer's own page, with this trace's data in place of the placeholder.
  const std::string tpl = Read(kData + "/../reports/explorer/explorer.html");
  ASSERT_FALSE(tpl.empty());
  const std::string head = tpl.substr(0, tpl.find(kDataPlaceholder));
  EXPECT_EQ(html.compare(0, head.size(), head), 0);
  EXPECT_EQ(html.find(kDataPlaceholder), std::string::npos);
  EXPECT_NE(html.find("\"format\":\"trnscope.report\""), std::string::npos);
  EXPECT_NE(html.find("\"name\":\"pow_f32\""), std::string::npos);  // a kernel of the trace
}

TEST(Reader, NegativeDurationIsSkippedWithAReason) {
  const std::string doc =
      "{\"traceEvents\":["
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"a\",\"pid\":1,\"tid\":1,\"ts\":10,\"dur\":-5},"
      "{\"ph\":\"B\",\"cat\":\"cpu_op\",\"name\":\"b\",\"pid\":1,\"tid\":2,\"ts\":20},"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":15},"
      "{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"c\",\"pid\":1,\"tid\":1,\"ts\":30,\"dur\":4}]}";
  LoadResult r = LoadTraceFromBuffer(doc);
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.model->parse.skipped, 2u);
  ASSERT_EQ(r.model->slices.size(), 1u);
  EXPECT_EQ(r.model->Name(r.model->slices[0]), "c");
  ASSERT_FALSE(r.model->parse.warnings.empty());
  EXPECT_NE(r.model->parse.warnings[0].find("negative dur"), std::string::npos)
      << r.model->parse.warnings[0];
}

// CUDA or ROCm traces get advice for their device, and a projected saving is
// never more than the run's span.
TEST(Insights, AdviceFitsTheTracesDevice) {
  for (const char* file : {"cuda_style.json", "missing_flows.json"}) {
    auto m = Load(file);
    ASSERT_TRUE(m);
    const Summary s = Summarize(*m);
    const auto insights = ComputeInsights(*m, s);
    ASSERT_FALSE(insights.empty()) << file;
    for (const Insight& in : insights) {
      EXPECT_EQ(in.detail.find("backend=\"trn\""), std::string::npos) << file << ": " << in.detail;
      EXPECT_LE(in.saving_ns, s.totals.span_ns) << file << ": " << in.title;
    }
  }
  auto trn = Load("trn_rmsnorm.json");
  ASSERT_TRUE(trn);
  const Summary s = Summarize(*trn);
  bool names_trn = false;
  for (const Insight& in : ComputeInsights(*trn, s))
    names_trn = names_trn || in.detail.find("backend=\"trn\"") != std::string::npos;
  EXPECT_TRUE(names_trn);
}

}  // namespace
}  // namespace trn::analysis
