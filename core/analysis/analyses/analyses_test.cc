// Tests for the analyses: busy/idle unions and the insights' rules, checked
// against hand-written traces.
#include <gtest/gtest.h>

#include "core/analysis/test_util.h"

namespace trn::analysis {
namespace {

using namespace trn::analysis::testutil;

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
