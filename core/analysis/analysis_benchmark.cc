// `trnscope summary`'s engine on a generated torch.profiler-style trace:
// MB/s and peak RSS (reported as a multiple of the file size; targets >= 150
// MB/s and <= 1.5x). Size: TRN_BENCH_TRACE_MB (default 200; the 1 GB run is
// TRN_BENCH_TRACE_MB=1024 build/trn_core_bench --benchmark_filter=Analysis).
// Peers (PyTorch key_averages, HolisticTraceAnalysis) run in
// bench/bench_analyzer.py on the same kind of file.
#include <benchmark/benchmark.h>
#include <fmt/format.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/analysis/analyses/insights.h"
#include "core/analysis/analyses/summary.h"
#include "core/analysis/reader/trace_model.h"

namespace trn::analysis {

// Writes a Kineto-like trace (cpu_op -> cudaLaunchKernel -> kernel + ac2g
// flow per op, nested ops, pretty-printed like export_chrome_trace) of about
// `mb` megabytes to `path`.
void WriteSyntheticTrace(const std::string& path, size_t mb) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  std::fputs("{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [],\n  \"traceEvents\": [\n", f);
  const char* ops[] = {"aten::pow", "aten::mean", "aten::add", "aten::rsqrt", "aten::mul", "aten::mul"};
  const char* kernels[] = {"pow_f32", "mean_f32", "add_f32", "rsqrt_f32", "mul_f32", "mul_f32"};
  uint64_t written = 0, id = 1;
  double ts = 1700000000000000.0;
  std::string buf;
  while (written < mb << 20) {
    buf.clear();
    for (int i = 0; i < 6; ++i, ++id, ts += 20) {
      buf += fmt::format(
          "  {{\n    \"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"{}\", \"pid\": 4242, \"tid\": 4242,\n"
          "    \"ts\": {:.3f}, \"dur\": 12.500,\n    \"args\": {{\n      \"External id\": {}, "
          "\"Sequence number\": {}, \"Fwd thread id\": 0, \"Record function id\": 0, "
          "\"Concrete Inputs\": [\"\", \"2\"], \"Input type\": [\"float\", \"Scalar\"], "
          "\"Input Strides\": [[4096, 1], []], \"Input Dims\": [[4096, 4096], []], \"Ev Idx\": {}\n    }}\n  }},\n",
          ops[i], ts, id, id, id);
      buf += fmt::format(
          "  {{\n    \"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 4242, "
          "\"tid\": 4242,\n    \"ts\": {:.3f}, \"dur\": 4.000,\n    \"args\": {{\n      \"External id\": {}, "
          "\"cbid\": 211, \"correlation\": {}\n    }}\n  }},\n",
          ts + 2, id, id);
      buf += fmt::format(
          "  {{\n    \"ph\": \"f\", \"id\": {}, \"pid\": 0, \"tid\": 7, \"ts\": {:.3f}, \"cat\": \"ac2g\", "
          "\"name\": \"ac2g\", \"bp\": \"e\"\n  }},\n",
          id, ts + 8);
      buf += fmt::format(
          "  {{\n    \"ph\": \"s\", \"id\": {}, \"pid\": 4242, \"tid\": 4242, \"ts\": {:.3f}, \"cat\": \"ac2g\", "
          "\"name\": \"ac2g\"\n  }},\n",
          id, ts + 2);
      buf += fmt::format(
          "  {{\n    \"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{}\", \"pid\": 0, \"tid\": 7,\n"
          "    \"ts\": {:.3f}, \"dur\": 9.000,\n    \"args\": {{\n      \"External id\": {}, \"queued\": 0, "
          "\"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {}, \"registers per thread\": 32, "
          "\"shared memory\": 0, \"blocks per SM\": 0.5, \"warps per SM\": 4.0, \"grid\": [65536, 1, 1], "
          "\"block\": [128, 1, 1], \"est. achieved occupancy %\": 100\n    }}\n  }},\n",
          kernels[i], ts + 8, id, id);
    }
    std::fwrite(buf.data(), 1, buf.size(), f);
    written += buf.size();
  }
  std::fputs("  {\"ph\": \"i\", \"s\": \"g\", \"name\": \"end\", \"pid\": \"\", \"tid\": \"\", \"ts\": 0}\n  ],\n"
             "  \"traceName\": \"synthetic\"\n}\n", f);
  std::fclose(f);
}

namespace {

const std::string& TracePath(size_t* bytes) {
  static std::string path;
  static size_t size = 0;
  if (path.empty()) {
    const char* env = std::getenv("TRN_BENCH_TRACE_MB");
    const size_t mb = env ? std::strtoull(env, nullptr, 10) : 200;
    path = fmt::format("/tmp/trnscope_bench_{}_{}mb.json", getpid(), mb);
    WriteSyntheticTrace(path, mb);
    FILE* f = std::fopen(path.c_str(), "rb");
    std::fseek(f, 0, SEEK_END);
    size = static_cast<size_t>(std::ftell(f));
    std::fclose(f);
    std::atexit([] { std::remove(path.c_str()); });
  }
  *bytes = size;
  return path;
}

void BM_AnalysisSummary(benchmark::State& state) {
  size_t bytes = 0;
  const std::string& path = TracePath(&bytes);
  uint64_t events = 0;
  for (auto _ : state) {
    LoadResult r = LoadTrace(path);
    if (!r.ok) {
      state.SkipWithError(r.error.c_str());
      return;
    }
    const Summary s = Summarize(*r.model);
    const auto in = ComputeInsights(*r.model, s);
    events = r.model->parse.events;
    benchmark::DoNotOptimize(in.size());
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double rss = static_cast<double>(ru.ru_maxrss) * 1024;
  state.SetBytesProcessed(static_cast<int64_t>(bytes) * state.iterations());
  state.counters["file_MB"] = bytes / 1e6;
  state.counters["events"] = static_cast<double>(events);
  state.counters["peak_rss_MB"] = rss / 1e6;
  state.counters["rss_per_file_byte"] = rss / static_cast<double>(bytes);
}
BENCHMARK(BM_AnalysisSummary)->Unit(benchmark::kMillisecond)->Iterations(2);

}  // namespace
}  // namespace trn::analysis
