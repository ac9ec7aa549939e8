// libFuzzer target for the trace reader and everything downstream of it.
// Build (clang only; not part of the default CMake build):
//   clang++-14 -std=c++20 -O1 -g -fsanitize=fuzzer,address -I. cli/fuzz_trace_reader.cc \
//     core/analysis/{json_tokenizer,trace_model,summary,insights,report_data}.cc \
//     -lsimdjson -lfmt -lz -o build-analysis/fuzz_trace_reader
//   build-analysis/fuzz_trace_reader -max_total_time=30 core/analysis/testdata
// The same inputs run as a plain regression test in analysis_test.cc
// (Reader.RandomAndMutatedInputsNeverCrash, Reader.MalformedInputsGiveClearResults).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/analysis/insights.h"
#include "core/analysis/report_data.h"
#include "core/analysis/summary.h"
#include "core/analysis/trace_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trn::analysis;
  LoadOptions opt;
  opt.tokenize.chunk_bytes = 4096;  // exercise refills and buffer growth
  opt.tokenize.max_value_bytes = 1 << 16;
  LoadResult r = LoadTraceFromBuffer(std::string_view(reinterpret_cast<const char*>(data), size), opt);
  if (!r.ok) return 0;
  const Summary s = Summarize(*r.model);
  const auto insights = ComputeInsights(*r.model, s);
  (void)FormatSummary(*r.model, s, insights, 0);
  (void)BuildReportJson({{r.model.get(), &s, &insights}}, "fuzz", 1000);
  return 0;
}
