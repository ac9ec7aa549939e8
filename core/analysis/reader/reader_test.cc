// Tests for the reader: the model's facts against hand-written traces
// (nesting, ids, links, runtime call kinds), malformed and mutated inputs,
// chunk boundaries and gzip.
#include <gtest/gtest.h>
#include <zlib.h>

#include <random>

#include "core/analysis/reports/report_data.h"  // mutated inputs run the whole pipeline

#include "core/analysis/test_util.h"

namespace trn::analysis {
namespace {

using namespace trn::analysis::testutil;

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

// meta.json numbers past the integer types' range (the fuzzer's 1e308): counts
// saturate, sizes become unknown, nothing is cast out of range (UBSan).
TEST(Meta, HugeNumbersSaturateOrBecomeUnknown) {
  MetaInfo meta;
  std::string error;
  ASSERT_TRUE(ParseMeta(R"({"dropped_events": 1e308, "fallback_ops": {"aten::x": 1e308, "aten::y": -3.5},
    "compiles": [{"duration_ns": 1e308, "shapes": [[2, 1e308, -1e308, 3.0]]},
                 {"duration_s": -1e308}],
    "time_correlation": {"commands_in_flight": 1e300}})",
                        &meta, &error))
      << error;
  EXPECT_EQ(meta.dropped_events, UINT64_MAX);
  ASSERT_EQ(meta.fallback_ops.size(), 2u);
  EXPECT_EQ(meta.fallback_ops[0].second, UINT64_MAX);
  EXPECT_EQ(meta.fallback_ops[1].second, 0u);
  ASSERT_EQ(meta.compiles.size(), 2u);
  EXPECT_EQ(meta.compiles[0].duration_ns, INT64_MAX);
  EXPECT_EQ(meta.compiles[1].duration_ns, 0);
  ASSERT_EQ(meta.compiles[0].shapes.size(), 1u);
  EXPECT_EQ(meta.compiles[0].shapes[0], (std::vector<int64_t>{2, -1, -1, 3}));
  EXPECT_EQ(meta.commands_in_flight, INT64_MAX);
}

// Note [Runtime call kinds]: trnscope's "launch id" marks a launch whatever
// the call's name; other traces are read by API name; ops never count.
TEST(Model, RuntimeCallKinds) {
  const std::string doc = R"({"traceEvents":[
    {"ph":"X","cat":"trn_runtime","name":"trnRuntime","pid":1,"tid":1,"ts":1,"dur":1,"args":{"launch id":7}},
    {"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":3,"dur":1},
    {"ph":"X","cat":"cuda_runtime","name":"hipMemcpyAsync","pid":1,"tid":1,"ts":5,"dur":1},
    {"ph":"X","cat":"cuda_runtime","name":"cudaStreamSynchronize","pid":1,"tid":1,"ts":7,"dur":1},
    {"ph":"X","cat":"cuda_runtime","name":"cudaMalloc","pid":1,"tid":1,"ts":9,"dur":1},
    {"ph":"X","cat":"cpu_op","name":"aten::launch_memcpy","pid":1,"tid":1,"ts":11,"dur":1}]})";
  LoadResult r = LoadTraceFromBuffer(doc);
  ASSERT_TRUE(r.ok) << r.error;
  const TraceModel& m = *r.model;
  const std::pair<const char*, RuntimeCall> expected[] = {
      {"trnRuntime", RuntimeCall::kLaunch},         {"cudaLaunchKernel", RuntimeCall::kLaunch},
      {"hipMemcpyAsync", RuntimeCall::kLaunch},     {"cudaStreamSynchronize", RuntimeCall::kSync},
      {"cudaMalloc", RuntimeCall::kOther},          {"aten::launch_memcpy", RuntimeCall::kOther}};
  for (const auto& [name, call] : expected) {
    const Slice* s = FindSlice(m, name);
    ASSERT_NE(s, nullptr) << name;
    EXPECT_EQ(s->call, call) << name;
  }
  EXPECT_EQ(m.runtime_launches, 3u);
}

}  // namespace
}  // namespace trn::analysis
