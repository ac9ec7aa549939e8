// The device trace of the one-tile matmul, read back with the strict JSON
// reader and checked against the simulator's timeline (lanes, slices, flows,
// counters, the modelled label).
#include "core/export/device_trace.h"

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include "core/export/json_test_util.h"
#include "core/isa/isa_test_util.h"
#include "core/model/report.h"

namespace trn::exporter {
namespace {

using testing::Json;
using testing::JsonReader;
using testing::NsOf;
using testing::ReadFile;
using testing::TempPath;

struct Written {
  isa::Executable exe = isa::testing::MatmulTile();
  model::Timeline t;
  Json doc;
  DeviceTraceStats stats;
};

Written Write(uint64_t max_flows = 200'000) {
  Written w;
  EXPECT_EQ(model::Simulate(w.exe, {}, &w.t).error, "");
  const std::string path = TempPath("device_trace.json");
  EXPECT_EQ(WriteDeviceTrace(w.exe, w.t, path, &w.stats, max_flows).error, "");
  w.doc = JsonReader(ReadFile(path)).ParseDocument();
  return w;
}

TEST(DeviceTrace, LanesSlicesAndTheModelledLabel) {
  const Written w = Write();
  const Json& events = *w.doc.Find("traceEvents");
  std::map<int64_t, std::string> lanes;
  std::string process;
  int kernels = 0, copies = 0;
  int64_t copy_bytes = 0;
  for (const Json& e : events.array) {
    const std::string ph = e.Find("ph")->text;
    if (ph == "M" && e.Find("name")->text == "thread_name") {
      lanes[std::stoll(e.Find("tid")->text)] = e.Find("args")->Find("name")->text;
    } else if (ph == "M" && e.Find("name")->text == "process_name") {
      process = e.Find("args")->Find("name")->text;
    } else if (ph == "X" && e.Find("cat")->text == "kernel") {
      ++kernels;
      const int64_t i = std::stoll(e.Find("args")->Find("instruction")->text);
      EXPECT_EQ(e.Find("name")->text, isa::OpcodeName(w.exe.instructions[i].opcode));
      EXPECT_EQ(NsOf(*e.Find("ts")), std::llround(w.t.start_ns[i]));
      EXPECT_EQ(lanes[std::stoll(e.Find("tid")->text)],
                isa::EngineName(w.exe.instructions[i].engine));
    } else if (ph == "X" && e.Find("cat")->text == "gpu_memcpy") {
      ++copies;
      copy_bytes += std::stoll(e.Find("args")->Find("bytes")->text);
      EXPECT_EQ(lanes[std::stoll(e.Find("tid")->text)].rfind("dma ", 0), 0u);
    }
  }
  EXPECT_EQ(process, "NeuronCore 0 \xe2\x80\x94 modelled (trn2, NC-v3)");
  EXPECT_EQ(lanes.size(), 5u + 16u);
  EXPECT_EQ(kernels, 3);  // load_stationary, multiply_moving, tensor_copy
  EXPECT_EQ(copies, static_cast<int>(w.t.transfers.size()));
  EXPECT_EQ(copy_bytes, w.t.dma_bytes);
  const Json& meta = *w.doc.Find("trnscope_device");
  EXPECT_EQ(meta.Find("modelled")->type, Json::kBool);
  EXPECT_TRUE(meta.Find("modelled")->boolean);
  EXPECT_EQ(meta.Find("target")->text, "trn2");
  EXPECT_EQ(meta.Find("error_bound_pct")->text, "10");
  EXPECT_EQ(meta.Find("bound")->text, "memory");
}

TEST(DeviceTrace, FlowsPairEveryDependency) {
  const Written w = Write();
  std::map<std::string, int> starts, finishes;
  for (const Json& e : w.doc.Find("traceEvents")->array) {
    const std::string ph = e.Find("ph")->text;
    if (ph != "s" && ph != "f") continue;
    EXPECT_EQ(e.Find("cat")->text, "dependency");
    (ph == "s" ? starts : finishes)[e.Find("id")->text]++;
    if (ph == "f") EXPECT_EQ(e.Find("bp")->text, "e");
  }
  EXPECT_EQ(starts.size(), w.t.dependencies.size());
  EXPECT_EQ(starts, finishes);
  EXPECT_EQ(w.stats.flows, 2 * w.t.dependencies.size());
  const Written cut = Write(2);
  EXPECT_TRUE(cut.stats.flows_truncated);
  EXPECT_EQ(cut.stats.flows, 4u);
  EXPECT_EQ(cut.doc.Find("trnscope_device")->Find("flows_truncated")->boolean, true);
}

TEST(DeviceTrace, CountersFollowTheOccupancy) {
  const Written w = Write();
  std::set<std::string> names;
  int64_t peak_psum = 0;
  for (const Json& e : w.doc.Find("traceEvents")->array) {
    if (e.Find("ph")->text != "C") continue;
    names.insert(e.Find("name")->text);
    if (e.Find("name")->text == "PSUM bytes") {
      peak_psum = std::max<int64_t>(peak_psum, std::stoll(e.Find("args")->Find("used")->text));
    }
  }
  EXPECT_EQ(names, (std::set<std::string>{"SBUF bytes", "PSUM bytes", "DMA GB/s"}));
  EXPECT_EQ(peak_psum, 128 * 2048);
}

TEST(DeviceTrace, AnUnwritablePathIsAnError) {
  Written w;
  ASSERT_EQ(model::Simulate(w.exe, {}, &w.t).error, "");
  DeviceTraceStats stats;
  const Status s = WriteDeviceTrace(w.exe, w.t, "/nonexistent/dir/t.json", &stats);
  EXPECT_NE(s.error.find("/nonexistent/dir/t.json"), std::string::npos) << s.error;
}

TEST(DeviceReport, SummaryAndRecommendations) {
  const Written w = Write();
  const std::string text = model::FormatDeviceProfile(w.exe, w.t);
  EXPECT_NE(text.find("modelled (trn2, NC-v3), error bound \xc2\xb1"
                      "10 %; not a measurement"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("memory-bound"), std::string::npos) << text;
  EXPECT_NE(text.find("tensor  "), std::string::npos);
  const std::vector<std::string> r = model::Recommendations(w.exe, w.t);
  ASSERT_GE(r.size(), 1u);
  ASSERT_LE(r.size(), 4u);
  // 3 DMAs moving 64-256 KiB each: no small-DMA advice; fp32 matmul: the fp32 advice.
  bool fp32 = false, small = false;
  for (const std::string& s : r) {
    fp32 |= s.find("are fp32") != std::string::npos;
    small |= s.find("target >= 32 KiB") != std::string::npos;
  }
  EXPECT_TRUE(fp32);
  EXPECT_FALSE(small);
}

}  // namespace
}  // namespace trn::exporter

#ifdef TRN_CLI_PATH
namespace trn::exporter {
namespace {

struct Ran {
  int code;
  std::string out;
};

Ran Cli(const std::string& args) {
  const std::string cmd = std::string(TRN_CLI_PATH) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(DeviceCli, InspectProfileAndSummarize) {
  const isa::Executable exe = isa::testing::MatmulTile();
  const std::string artifact = TempPath("cli.trnx"), trace = TempPath("cli_device.json");
  ASSERT_EQ(isa::Save(exe, artifact).error, "");

  const Ran inspect = Cli("inspect " + artifact + " --first 2");
  EXPECT_EQ(inspect.code, 0) << inspect.out;
  EXPECT_NE(inspect.out.find("executable matmul_tile: format version 1, target trn2"),
            std::string::npos)
      << inspect.out;
  EXPECT_NE(inspect.out.find("output   out"), std::string::npos);
  EXPECT_NE(inspect.out.find("psum   acc"), std::string::npos) << inspect.out;
  EXPECT_NE(inspect.out.find("multiply_moving dst=psum acc[128, 512] float32 src0=sbuf "
                             "b[128, 512] float32 src1=sbuf a[128, 128] float32 "
                             "(matmul.py:9 nisa.nc_matmul)"),
            std::string::npos)
      << inspect.out;

  const Ran profile = Cli("device-profile " + artifact + " -o " + trace);
  EXPECT_EQ(profile.code, 0) << profile.out;
  model::Timeline t;
  ASSERT_EQ(model::Simulate(exe, {}, &t).error, "");
  EXPECT_EQ(profile.out.rfind(model::FormatDeviceProfile(exe, t), 0), 0u) << profile.out;
  EXPECT_NE(profile.out.find("wrote " + trace), std::string::npos);

  const Ran trn1 = Cli("device-profile " + artifact + " --target trn1");
  EXPECT_NE(trn1.out.find("modelled (trn1, NC-v2)"), std::string::npos) << trn1.out;
  const Ran bad = Cli("device-profile " + artifact + " --target trn9");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.out.find("--target 'trn9' is not a target; expected trn1 or trn2"),
            std::string::npos);

  // The analyzer reads the device trace like any other: 3 instructions, 48
  // DMA transfers (3 dma_copy over 16 engines), and no host-bound claims.
  const Ran summary = Cli("summary " + trace);
  EXPECT_EQ(summary.code, 0) << summary.out;
  EXPECT_NE(summary.out.find("kernels 3 | copies 48 |"), std::string::npos) << summary.out;
  EXPECT_NE(summary.out.find("Host-bound: not applicable (no host events)"), std::string::npos)
      << summary.out;
  EXPECT_NE(summary.out.find("device-only trace: no host ops"), std::string::npos);
  EXPECT_EQ(summary.out.find("could not be linked"), std::string::npos);
  // Its counters reach the analyzer (an arg named "bytes" would be read as a
  // kernel's bytes, not a counter value).
  const std::string html = TempPath("cli_device.html"), json = TempPath("cli_device.report.json");
  const Ran report = Cli("report " + trace + " -o " + html + " --json " + json);
  EXPECT_EQ(report.code, 0) << report.out;
  const std::string data = ReadFile(json);
  for (const char* counter : {"\"SBUF bytes\"", "\"PSUM bytes\"", "\"DMA GB/s\""}) {
    EXPECT_NE(data.find(counter), std::string::npos) << counter;
  }
}

TEST(DeviceCli, BadArtifactsExitWithAReason) {
  const std::string junk = TempPath("junk.trnx");
  std::ofstream(junk) << "not an executable";
  Ran r = Cli("inspect " + junk);
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find(junk + ": not a trnscope executable"), std::string::npos) << r.out;
  r = Cli("device-profile /nonexistent.trnx");
  EXPECT_EQ(r.code, 2);
  EXPECT_NE(r.out.find("cannot open '/nonexistent.trnx'"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace trn::exporter
#endif  // TRN_CLI_PATH
