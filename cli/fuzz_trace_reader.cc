// libFuzzer target for the trace reader and everything downstream of it
// (summary, insights, compare, report JSON) and for meta.json parsing.
// Built and run by `make fuzz-smoke` (scripts/fuzz_smoke.sh: clang++ with
// -fsanitize=fuzzer,address,undefined, seeds from core/analysis/testdata,
// dictionary cli/fuzz_trace_reader.dict). Not part of the g++ build.
// Reproduce a finding: build/fuzz/fuzz_trace_reader build/fuzz/crash-<sha>.
//
// Oracle beyond "no crash": the reader's result must not depend on where
// chunk boundaries fall, so every input is read twice, with tiny chunks
// (many refills and buffer growth) and with one big chunk, and the two
// results must agree. The inputs found here also run as plain regression
// tests in analysis_test.cc (Reader.*).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"
#include "core/analysis/reports/compare.h"
#include "core/analysis/reports/report_data.h"
#include "core/analysis/reports/summary_text.h"

namespace {

using namespace trn::analysis;

LoadResult Load(std::string_view data, size_t chunk, size_t max_value) {
  LoadOptions opt;
  opt.tokenize.chunk_bytes = chunk;
  opt.tokenize.max_value_bytes = max_value;
  return LoadTraceFromBuffer(data, opt);
}

[[noreturn]] void Mismatch(const char* what) {
  std::fprintf(stderr, "fuzz_trace_reader: chunk size changed the result: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  MetaInfo meta;
  std::string meta_error;
  (void)ParseMeta(text, &meta, &meta_error);

  constexpr size_t kMaxValue = 1 << 16;  // small, so "oversized event" paths run too
  LoadResult small = Load(text, 1, kMaxValue);  // clamped to the tokenizer's minimum
  LoadResult big = Load(text, size_t{1} << 20, kMaxValue);
  if (small.ok != big.ok) Mismatch("ok");
  if (!small.ok) {
    if (small.error != big.error) Mismatch("error text");
    return 0;
  }
  const TraceModel& a = *small.model;
  const TraceModel& b = *big.model;
  if (a.parse.events != b.parse.events) Mismatch("events");
  if (a.parse.skipped != b.parse.skipped) Mismatch("skipped");
  if (a.parse.truncated != b.parse.truncated) Mismatch("truncated");
  if (a.parse.warnings != b.parse.warnings) Mismatch("warnings");
  if (a.slices.size() != b.slices.size()) Mismatch("slices");

  const Summary s = Summarize(a);
  const auto insights = ComputeInsights(a, s);
  (void)FormatSummary(a, s, insights, 0);
  const Summary sb = Summarize(b);
  (void)FormatCompare({{&a, &s}, {&b, &sb}}, 0);
  (void)BuildReportJson({{&a, &s, &insights}}, "fuzz", 1000);
  return 0;
}
