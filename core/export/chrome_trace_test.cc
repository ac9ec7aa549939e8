// WriteChromeTrace, read back with a strict JSON reader written here (no
// dependency, and independent of the writer's own escaping) and checked
// against expectations computed by hand from a tiny input.
#include "core/export/chrome_trace.h"
#include "core/export/json_test_util.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <limits>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "core/common/error.h"

namespace trn::exporter {
namespace {

namespace fs = std::filesystem;
using trace::Record;
using trace::RecordKind;
using testing::Json;
using testing::JsonReader;
using testing::NsOf;
using testing::ReadFile;
using testing::TempPath;

TEST(JsonReaderTest, RejectsWhatIsNotJson) {
  for (std::string bad : {"[1,]", "{\"a\":1,}", "\"a\nb\"", "01", "[1] x", "\"\\x\"",
                          "{\"a\":1,\"a\":2}",
                          "\"\xff\"", "\"\xC0\xAF\"", "\"\\ud800\"", "1.", "-"}) {
    EXPECT_THROW(JsonReader(bad).ParseDocument(), std::runtime_error) << bad;
  }
  EXPECT_EQ(JsonReader("\"a\\u00e9\\ud83d\\ude00\"").ParseDocument().text,
            "a\xC3\xA9\xF0\x9F\x98\x80");
}


struct Parsed {
  std::string text;
  Json doc;
  const std::vector<Json>& events() const { return doc["traceEvents"].array; }

  std::vector<const Json*> Where(std::string_view ph, std::string_view name = {}) const {
    std::vector<const Json*> out;
    for (const Json& e : events())
      if (e["ph"].Str() == ph && (name.empty() || (e.Has("name") && e["name"].Str() == name)))
        out.push_back(&e);
    return out;
  }
  // pid of the process named `name` (process_name metadata), -1 if none.
  int64_t PidOf(std::string_view name) const {
    for (const Json* e : Where("M", "process_name"))
      if ((*e)["args"]["name"].Str() == name) return (*e)["pid"].Int();
    return -1;
  }
  // (pid, tid) -> thread_name.
  std::map<std::pair<int64_t, int64_t>, std::string> ThreadNames() const {
    std::map<std::pair<int64_t, int64_t>, std::string> out;
    for (const Json* e : Where("M", "thread_name"))
      out[{(*e)["pid"].Int(), (*e)["tid"].Int()}] = (*e)["args"]["name"].Str();
    return out;
  }
  const Json& Slice(std::string_view name) const {
    auto v = Where("X", name);
    EXPECT_EQ(v.size(), 1u) << name;
    static const Json kMissing;
    return v.empty() ? kMissing : *v[0];
  }
};

Parsed WriteAndParse(const ExportInput& in, const std::string& path, ExportStats* stats = nullptr) {
  ExportStats s = WriteChromeTrace(in, path);
  Parsed p;
  p.text = ReadFile(path);
  p.doc = JsonReader(p.text).ParseDocument();
  EXPECT_EQ(s.bytes, p.text.size());
  EXPECT_EQ(s.events, p.events().size());
  if (stats != nullptr) *stats = s;
  return p;
}

// Every flow start has exactly one end with the same (cat, id) and the other
// way round; each endpoint lies inside an "X" slice on its own (pid, tid) that
// starts at or before it: the slice a viewer binds it to. Returns the pairs.
std::map<std::pair<std::string, uint64_t>, std::pair<const Json*, const Json*>> CheckFlows(
    const Parsed& p) {
  std::map<std::pair<std::string, uint64_t>, std::pair<const Json*, const Json*>> flows;
  // (pid, tid) -> slices as (start, end), sorted by start.
  std::map<std::pair<int64_t, int64_t>, std::vector<std::pair<int64_t, int64_t>>> lanes;
  for (const Json* x : p.Where("X")) {
    const int64_t start = NsOf((*x)["ts"]);
    lanes[{(*x)["pid"].Int(), (*x)["tid"].Int()}].push_back({start, start + NsOf((*x)["dur"])});
  }
  for (auto& [lane, slices] : lanes) std::sort(slices.begin(), slices.end());
  for (const Json& e : p.events()) {
    const std::string& ph = e["ph"].Str();
    if (ph != "s" && ph != "f") continue;
    EXPECT_EQ(e["name"].Str(), e["cat"].Str());
    auto& slot = flows[{e["cat"].Str(), static_cast<uint64_t>(e["id"].Int())}];
    const Json*& end = ph == "s" ? slot.first : slot.second;
    EXPECT_EQ(end, nullptr) << "duplicate flow " << ph << " " << e["cat"].Str() << " "
                            << e["id"].text;
    end = &e;
    if (ph == "f") EXPECT_EQ(e["bp"].Str(), "e");
    const int64_t ts = NsOf(e["ts"]);
    const auto& slices = lanes[{e["pid"].Int(), e["tid"].Int()}];
    bool bound = false;
    auto it = std::upper_bound(slices.begin(), slices.end(),
                               std::make_pair(ts, std::numeric_limits<int64_t>::max()));
    while (!bound && it != slices.begin()) bound = (--it)->second >= ts;  // starts <= ts
    EXPECT_TRUE(bound) << "flow " << ph << " " << e["id"].text << " is outside every slice";
  }
  for (const auto& [key, ends] : flows) {
    EXPECT_NE(ends.first, nullptr) << "flow end without start: " << key.first << " " << key.second;
    EXPECT_NE(ends.second, nullptr) << "flow start without end: " << key.first << " " << key.second;
  }
  return flows;
}

// ---- The hand-made input ----------------------------------------------------------

constexpr int64_t kT0 = 1733140000123456789;  // ns since the epoch
constexpr int64_t kPid = 4242;
constexpr int64_t kMain = 100, kOther = 101;  // CPU thread ids

Record Rec(RecordKind kind, int64_t start, int64_t end, int device, int stream, uint64_t corr,
           uint64_t launch, const char* name, int64_t tid = kMain) {
  Record r;
  r.kind = kind;
  r.start = kT0 + start;
  r.end = kT0 + end;
  r.device = static_cast<int16_t>(device);
  r.stream = static_cast<int16_t>(stream);
  r.correlation_id = corr;
  r.launch_id = launch;
  r.name = name;
  r.tid = tid;
  return r;
}

Record Mem(RecordKind kind, int64_t at, int device, int64_t bytes, int64_t in_use) {
  Record r = Rec(kind, at, at, device, 0, 0, 0, kind == RecordKind::kAlloc ? "alloc" : "free");
  r.value = bytes;
  r.in_use = in_use;
  return r;
}

constexpr const char* kTrickyName = "my\"op\\x\ny";

struct Fixture {
  trace::Collected collected;
  ExportInput input;
  Fixture() {
    auto op = [](std::string name, int64_t start, int64_t end, int64_t tid, uint64_t corr) {
      HostOp o;
      o.name = std::move(name);
      o.start_ns = kT0 + start;
      o.end_ns = kT0 + end;
      o.tid = tid;
      o.correlation_id = corr;
      return o;
    };
    input.pid = kPid;
    input.metadata_json = R"({"study": "unit", "cores": [0, 1]})";
    input.host_ops.push_back(op("aten::copy_", 10'000, 20'000, kMain, 12));  // not in time order
    input.host_ops.push_back(op("aten::mul", 1'000, 9'000, kMain, 11));
    input.host_ops.back().input_shapes = "[[8, 4096], [8, 4096]]";
    input.host_ops.back().input_dtypes = R"(["float", "float"])";
    input.host_ops.back().sequence = 3;
    input.host_ops.push_back(op(kTrickyName, 21'000, 30'000, kOther, 13));

    auto& r = collected.records;
    r.push_back(Rec(RecordKind::kLaunch, 2'000, 2'500, 0, 0, 11, 1, "trnLaunchKernel"));
    r.back().op = "aten::mul";
    r.push_back(Mem(RecordKind::kAlloc, 2'600, 0, 4096, 4096));
    r.push_back(Rec(RecordKind::kKernel, 3'000, 7'000, 0, 0, 11, 1, "mul_f32", 7));
    r.back().op = "aten::mul";
    r.back().flops = 32768;
    r.back().bytes_read = 262144;
    r.back().bytes_written = 131072;
    r.back().engine = rt::Engine::kVector;
    // A launch whose kernel was not captured.
    r.push_back(Rec(RecordKind::kLaunch, 5'000, 5'400, 0, 0, 11, 5, "trnLaunchKernel"));
    r.push_back(Rec(RecordKind::kMemcpy, 11'000, 11'500, 1, 1, 12, 2, "trnMemcpyAsync"));
    r.push_back(Rec(RecordKind::kCopy, 12'000, 15'001, 1, 1, 12, 2, "Memcpy HtoD", 8));
    r.back().bytes_read = 1000;
    r.back().bytes_written = 1000;
    r.back().engine = rt::Engine::kDma;
    r.push_back(Mem(RecordKind::kAlloc, 16'000, 1, 1000, 1000));
    r.push_back(Rec(RecordKind::kKernel, 22'000, 25'000, 1, 0, 13, 3, "add_f32", 8));  // no launch
    r.push_back(Rec(RecordKind::kKernel, 26'000, 27'000, 0, 1, 99, 4, "orphan_k", 7));  // no op
    r.push_back(Rec(RecordKind::kSynchronize, 28'000, 31'000, 0, -1, 0, 0, "trnDeviceSynchronize"));
    r.push_back(Mem(RecordKind::kFree, 32'000, 0, 4096, 0));
    r.push_back(Mem(RecordKind::kFree, 33'000, 1, 1000, 0));
    collected.dropped_per_device.assign(trace::kMaxDevices, 0);
    collected.dropped_per_device[1] = 5;
    collected.dropped_total = 5;
    input.device = &collected;
  }
};

class ChromeTraceTest : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const std::string& p : paths_) std::remove(p.c_str());
  }
  std::string Path(const std::string& name) {
    paths_.push_back(TempPath(name));
    return paths_.back();
  }
  std::vector<std::string> paths_;
};

TEST_F(ChromeTraceTest, LanesAndProcesses) {
  Fixture f;
  Parsed p = WriteAndParse(f.input, Path("lanes.json"));
  const int64_t dev0 = p.PidOf("trn:0"), dev1 = p.PidOf("trn:1");
  EXPECT_EQ(p.PidOf("host (pid 4242)"), kPid);
  EXPECT_EQ(dev0, 1'000'000);
  EXPECT_EQ(dev1, 1'000'001);
  EXPECT_EQ(p.Where("M", "process_name").size(), 3u);
  const std::map<std::pair<int64_t, int64_t>, std::string> expected = {
      {{kPid, kMain}, "thread 100"},       {{kPid, kOther}, "thread 101"},
      {{dev0, 0}, "trn:0 stream 0"},       {{dev0, 1}, "trn:0 stream 1"},
      {{dev1, 0}, "trn:1 stream 0"},       {{dev1, 1}, "trn:1 stream 1"}};
  EXPECT_EQ(p.ThreadNames(), expected);
  EXPECT_EQ(LaneName(1, 3), "trn:1 stream 3");
  // Each slice is on the lane its record names.
  auto lane = [&](std::string_view name) {
    const Json& x = p.Slice(name);
    return std::make_pair(x["pid"].Int(), x["tid"].Int());
  };
  EXPECT_EQ(lane("mul_f32"), std::make_pair(dev0, int64_t{0}));
  EXPECT_EQ(lane("orphan_k"), std::make_pair(dev0, int64_t{1}));
  EXPECT_EQ(lane("add_f32"), std::make_pair(dev1, int64_t{0}));
  EXPECT_EQ(lane("Memcpy HtoD"), std::make_pair(dev1, int64_t{1}));
  EXPECT_EQ(lane("aten::mul"), std::make_pair(kPid, kMain));
  EXPECT_EQ(lane(kTrickyName), std::make_pair(kPid, kOther));
  EXPECT_EQ(lane("trnMemcpyAsync"), std::make_pair(kPid, kMain));
  EXPECT_EQ(p.Where("X").size(), 3u + 4u + 4u);  // ops, runtime, device
}

TEST_F(ChromeTraceTest, TimestampsAreAbsoluteMicrosecondsWithNsDigits) {
  Fixture f;
  Parsed p = WriteAndParse(f.input, Path("ts.json"));
  // kT0 + 1000 ns = 1733140000123457789 ns.
  EXPECT_EQ(p.Slice("aten::mul")["ts"].text, "1733140000123457.789");
  EXPECT_EQ(p.Slice("aten::mul")["dur"].text, "8.000");
  EXPECT_EQ(p.Slice("Memcpy HtoD")["ts"].text, "1733140000123468.789");
  EXPECT_EQ(p.Slice("Memcpy HtoD")["dur"].text, "3.001");
  EXPECT_EQ(p.Slice("trnDeviceSynchronize")["dur"].text, "3.000");
  for (const Json& e : p.events()) {
    if (e["ph"].Str() == "M") continue;
    EXPECT_GE(NsOf(e["ts"]), kT0);  // never relative
    EXPECT_LE(NsOf(e["ts"]), kT0 + 40'000);
  }
}

TEST_F(ChromeTraceTest, SliceCategoriesNamesAndArgs) {
  Fixture f;
  ExportStats stats;
  Parsed p = WriteAndParse(f.input, Path("args.json"), &stats);
  EXPECT_EQ(stats.unlinked, 1u);  // orphan_k: correlation 99 names no op
  EXPECT_EQ(stats.flows, 6u);

  const Json& op = p.Slice("aten::mul");
  EXPECT_EQ(op["cat"].Str(), "cpu_op");
  EXPECT_EQ(op["args"]["correlation"].Int(), 11);
  EXPECT_EQ(op["args"]["Sequence number"].Int(), 3);
  const Json& dims = op["args"]["Input Dims"];
  ASSERT_EQ(dims.array.size(), 2u);
  EXPECT_EQ(dims.array[1].array[1].Int(), 4096);
  EXPECT_EQ(op["args"]["Input type"].array[0].Str(), "float");
  EXPECT_FALSE(p.Slice("aten::copy_")["args"].Has("Input Dims"));  // not given

  const Json& k = p.Slice("mul_f32");
  EXPECT_EQ(k["cat"].Str(), "kernel");
  const Json& a = k["args"];
  EXPECT_EQ(a["op"].Str(), "aten::mul");
  EXPECT_EQ(a["core"].Int(), 0);
  EXPECT_EQ(a["stream"].Int(), 0);
  EXPECT_EQ(a["correlation"].Int(), 11);
  EXPECT_EQ(a["launch id"].Int(), 1);
  EXPECT_EQ(a["flops"].Int(), 32768);
  EXPECT_EQ(a["bytes read"].Int(), 262144);
  EXPECT_EQ(a["bytes written"].Int(), 131072);
  EXPECT_EQ(a["engine"].Str(), "vector");
  EXPECT_EQ(a["achieved GFLOP/s"].text, "8.192");  // 32768 flop / 4000 ns
  EXPECT_EQ(a["achieved GB/s"].text, "98.304");    // 393216 B / 4000 ns
  EXPECT_EQ(a["Input Dims"].array.size(), 2u);      // from the linked op

  const Json& c = p.Slice("Memcpy HtoD");
  EXPECT_EQ(c["cat"].Str(), "gpu_memcpy");
  EXPECT_EQ(c["args"]["engine"].Str(), "dma");
  EXPECT_EQ(c["args"]["core"].Int(), 1);
  EXPECT_EQ(c["args"]["achieved GB/s"].text, "0.666");  // 2000 B / 3001 ns
  EXPECT_FALSE(p.Slice("orphan_k")["args"].Has("Input Dims"));

  // Runtime API spans on the CPU lanes.
  auto launches = p.Where("X", "trnLaunchKernel");
  ASSERT_EQ(launches.size(), 2u);
  EXPECT_EQ((*launches[0])["cat"].Str(), "trn_runtime");
  EXPECT_EQ((*launches[0])["args"]["kernel name"].Str(), "mul_f32");  // from its kernel
  EXPECT_EQ((*launches[0])["args"]["launch id"].Int(), 1);
  EXPECT_EQ((*launches[0])["args"]["correlation"].Int(), 11);
  EXPECT_EQ((*launches[0])["args"]["device"].Int(), 0);
  EXPECT_EQ((*launches[0])["args"]["op"].Str(), "aten::mul");
  EXPECT_EQ((*launches[1])["args"]["launch id"].Int(), 5);
  EXPECT_FALSE((*launches[1])["args"].Has("kernel name")) << "its kernel was not captured";
  const Json& memcpy = p.Slice("trnMemcpyAsync");
  EXPECT_EQ(memcpy["args"]["stream"].Int(), 1);
  EXPECT_EQ(memcpy["args"]["kernel name"].Str(), "Memcpy HtoD");
  EXPECT_EQ(p.Slice("trnDeviceSynchronize")["args"]["stream"].Int(), -1);

  // Top-level metadata passes through; drop counts are reported.
  EXPECT_EQ(p.doc["displayTimeUnit"].Str(), "ns");
  EXPECT_EQ(p.doc["trnscope"]["study"].Str(), "unit");
  EXPECT_EQ(p.doc["trnscope"]["cores"].array.size(), 2u);
  EXPECT_EQ(p.doc["trnscope_capture"]["dropped_total"].Int(), 5);
  EXPECT_EQ(p.doc["trnscope_capture"]["dropped_per_device"]["1"].Int(), 5);
}

TEST_F(ChromeTraceTest, FlowsPairUpAndBindToTheirSlices) {
  Fixture f;
  Parsed p = WriteAndParse(f.input, Path("flows.json"));
  auto flows = CheckFlows(p);
  const int64_t dev0 = p.PidOf("trn:0"), dev1 = p.PidOf("trn:1");
  std::set<std::tuple<std::string, std::string, std::string>> arrows;  // cat, from, to
  auto slice_at = [&](const Json& e) -> std::string {
    for (const Json* x : p.Where("X"))
      if ((*x)["pid"].Int() == e["pid"].Int() && (*x)["tid"].Int() == e["tid"].Int() &&
          (*x)["ts"].text == e["ts"].text)
        return (*x)["name"].Str();
    return "?";
  };
  for (const auto& [key, ends] : flows) {
    if (ends.first == nullptr || ends.second == nullptr) continue;
    arrows.insert({key.first, slice_at(*ends.first), slice_at(*ends.second)});
  }
  const std::set<std::tuple<std::string, std::string, std::string>> expected = {
      {"op_launch", "aten::mul", "trnLaunchKernel"},  // launch 1
      {"op_launch", "aten::copy_", "trnMemcpyAsync"},
      {"ac2g", "trnLaunchKernel", "mul_f32"},
      {"ac2g", "trnMemcpyAsync", "Memcpy HtoD"},
      {"ac2g", kTrickyName, "add_f32"},  // no launch record: op -> kernel
  };
  EXPECT_EQ(arrows, expected);
  EXPECT_EQ(flows.size(), 6u);  // launch 5 also gets op_launch (same set entry as launch 1)
  // ac2g ids are the launch ids; flow starts at an op lie inside that op.
  ASSERT_TRUE(flows.count({"ac2g", 1}));
  EXPECT_EQ((*flows[{"ac2g", 1}].second)["pid"].Int(), dev0);
  ASSERT_TRUE(flows.count({"ac2g", 3}));
  const Json& s = *flows[{"ac2g", 3}].first;
  const Json& tricky = p.Slice(kTrickyName);
  EXPECT_EQ(s["tid"].Int(), kOther);
  EXPECT_GE(NsOf(s["ts"]), NsOf(tricky["ts"]));
  EXPECT_LE(NsOf(s["ts"]), NsOf(tricky["ts"]) + NsOf(tricky["dur"]));
  EXPECT_EQ((*flows[{"ac2g", 3}].second)["pid"].Int(), dev1);
  // Nothing points at or from the kernel whose op is missing.
  for (const auto& [cat, from, to] : arrows) EXPECT_NE(to, "orphan_k");
}

TEST_F(ChromeTraceTest, MemoryCounterPerDeviceAndInstants) {
  Fixture f;
  Parsed p = WriteAndParse(f.input, Path("mem.json"));
  auto values = [&](std::string_view name) {
    std::vector<std::pair<int64_t, int64_t>> out;  // (ts ns - kT0, bytes)
    for (const Json* c : p.Where("C", name))
      out.push_back({NsOf((*c)["ts"]) - kT0, (*c)["args"]["allocated_bytes"].Int()});
    return out;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(values("trn:0 memory"), (V{{2'600, 4096}, {32'000, 0}}));
  EXPECT_EQ(values("trn:1 memory"), (V{{16'000, 1000}, {33'000, 0}}));
  for (const Json* c : p.Where("C", "trn:1 memory")) EXPECT_EQ((*c)["pid"].Int(), p.PidOf("trn:1"));
  std::vector<int64_t> bytes;
  for (const Json* i : p.Where("i", "[memory]")) {
    EXPECT_EQ((*i)["s"].Str(), "t");
    EXPECT_EQ((*i)["pid"].Int(), kPid);
    EXPECT_EQ((*i)["tid"].Int(), kMain);
    bytes.push_back((*i)["args"]["Bytes"].Int());
  }
  EXPECT_EQ(bytes, (std::vector<int64_t>{4096, 1000, -4096, -1000}));
}

TEST_F(ChromeTraceTest, EscapesNamesAndRepairsInvalidUtf8) {
  Fixture f;
  f.input.host_ops[0].name = "ctl\x01 tab\t caf\xC3\xA9 bad\xFF end\x7F";
  Parsed p = WriteAndParse(f.input, Path("escape.json"));
  EXPECT_EQ(p.Slice(kTrickyName)["tid"].Int(), kOther);  // round trip of " \ and newline
  EXPECT_NE(p.text.find(R"("name":"my\"op\\x\ny")"), std::string::npos);
  // Control characters escaped, valid UTF-8 passed through as is, the invalid
  // byte replaced by U+FFFD.
  p.Slice("ctl\x01 tab\t caf\xC3\xA9 bad\xEF\xBF\xBD end\x7F");
  EXPECT_NE(p.text.find("ctl\\u0001 tab\\t caf\xC3\xA9 bad\xEF\xBF\xBD end\\u007f"),
            std::string::npos);
}

TEST_F(ChromeTraceTest, OutputIsDeterministic) {
  Fixture f;
  const std::string a = Path("det_a.json"), b = Path("det_b.json");
  ExportStats sa = WriteChromeTrace(f.input, a);
  ExportStats sb = WriteChromeTrace(f.input, b);
  EXPECT_EQ(ReadFile(a), ReadFile(b));
  EXPECT_EQ(sa.bytes, sb.bytes);
  EXPECT_EQ(sa.events, sb.events);
  EXPECT_FALSE(fs::exists(a + ".tmp"));
}

TEST_F(ChromeTraceTest, EmptyInputIsValidWithOnlyMetadata) {
  ExportInput in;
  in.pid = 7;
  Parsed p = WriteAndParse(in, Path("empty.json"));
  EXPECT_EQ(p.PidOf("host (pid 7)"), 7);
  for (const Json& e : p.events()) EXPECT_EQ(e["ph"].Str(), "M");
  EXPECT_EQ(p.doc["trnscope"].type, Json::kObject);

  trace::Collected none;  // a device session that captured nothing
  in.device = &none;
  in.metadata_json = "";
  Parsed q = WriteAndParse(in, Path("empty2.json"));
  for (const Json& e : q.events()) EXPECT_EQ(e["ph"].Str(), "M");
}

TEST_F(ChromeTraceTest, UnwritablePathThrowsNamingItAndLeavesNothing) {
  Fixture f;
  const std::string missing = "/nonexistent_trn_dir/trace.json";
  try {
    WriteChromeTrace(f.input, missing);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file or directory"), std::string::npos)
        << e.what();
  }
  // The final rename fails (the path is a directory): no temporary file stays.
  const std::string dir = Path("a_directory");
  fs::create_directory(dir);
  EXPECT_THROW(WriteChromeTrace(f.input, dir), Error);
  EXPECT_FALSE(fs::exists(dir + ".tmp"));
  fs::remove(dir);

  f.input.metadata_json = "[1, 2]";
  EXPECT_THROW(WriteChromeTrace(f.input, Path("bad_meta.json")), InvalidArgument);
}

TEST_F(ChromeTraceTest, DuplicateLaunchIdsNeverDuplicateFlows) {
  // Malformed input: two launches and two kernels share launch id 1, and a
  // kernel without a launch record has launch id 0. Every flow stays paired.
  Fixture f;
  auto& r = f.collected.records;
  r.push_back(Rec(RecordKind::kLaunch, 34'000, 34'100, 0, 0, 11, 1, "trnLaunchKernel"));
  r.push_back(Rec(RecordKind::kKernel, 35'000, 36'000, 0, 0, 11, 1, "dup_k", 7));
  r.push_back(Rec(RecordKind::kKernel, 37'000, 38'000, 0, 0, 13, 0, "zero_id_k", 7));
  f.input.host_ops[1].end_ns = kT0 + 40'000;  // aten::mul encloses the new launch
  Parsed p = WriteAndParse(f.input, Path("dup.json"));
  auto flows = CheckFlows(p);
  size_t ac2g = 0;
  for (const auto& [key, ends] : flows) ac2g += key.first == "ac2g";
  EXPECT_EQ(ac2g, 5u);  // launch 1, copy 2, add_f32, dup_k (op->kernel), zero_id_k
}

TEST_F(ChromeTraceTest, HostPidNeverCollidesWithDevicePids) {
  Fixture f;
  f.input.pid = 1'000'001;
  Parsed p = WriteAndParse(f.input, Path("pid.json"));
  EXPECT_EQ(p.PidOf("host (pid 1000001)"), 1'000'001);
  EXPECT_NE(p.PidOf("trn:1"), 1'000'001);
  EXPECT_NE(p.PidOf("trn:0"), -1);
  CheckFlows(p);
}

TEST_F(ChromeTraceTest, LargeTraceCrossesBufferBoundaries) {
  // More than the writer's 4 MiB buffer, plus one name larger than it.
  Fixture f;
  const std::string huge(5 << 20, 'n');
  f.input.host_ops[0].name = huge;
  std::vector<Record> many;
  for (int i = 0; i < 40'000; ++i) {
    many.push_back(Rec(RecordKind::kKernel, 50'000 + 10 * i, 50'005 + 10 * i, 0, 0, 11,
                       1000 + i, "a_reasonably_long_kernel_name_for_padding", 7));
  }
  f.collected.records.insert(f.collected.records.end(), many.begin(), many.end());
  ExportStats stats;
  Parsed p = WriteAndParse(f.input, Path("large.json"), &stats);
  EXPECT_GT(stats.bytes, size_t{10} << 20);
  EXPECT_EQ(p.Where("X", "a_reasonably_long_kernel_name_for_padding").size(), 40'000u);
  EXPECT_EQ(p.Slice(huge)["name"].Str().size(), huge.size());
  CheckFlows(p);
}

}  // namespace
}  // namespace trn::exporter
